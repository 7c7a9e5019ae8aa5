"""``file_contents``: does any file under a folder contain a string? (docs/configuration.md)

The scored repository may be hostile: the folder and every file are resolved and must stay
inside the repository (symlinks out of it are not followed), a directory reached twice
(symlink loop) is walked once, and files are streamed in chunks so a huge file costs no
memory. A file is opened without following a symlink and without blocking, then must be a
regular file: a FIFO or a link swapped in after the walk is counted unreadable, never waited
on nor followed out.
"""

from __future__ import annotations

import codecs
import os
import stat
from collections.abc import Iterator
from collections.abc import Sequence
from dataclasses import dataclass
from dataclasses import field
from pathlib import Path
from typing import Any
from typing import BinaryIO
from typing import Final
from typing import final

from pytest_scoring.db.discovery import SKIPPED_DIRS  # the folders database discovery skips
from pytest_scoring.errors import ConfigError
from pytest_scoring.fs.paths import resolve_inside
from pytest_scoring.scorers.base import ScoringContext
from pytest_scoring.scorers.metrics import Metric
from pytest_scoring.scorers.metrics import accuracy
from pytest_scoring.scorers.metrics import stderr
from pytest_scoring.scorers.score import INCORRECT
from pytest_scoring.scorers.score import Score
from pytest_scoring.scorers.score import bool_value
from pytest_scoring.scorers.score import cap_list
from pytest_scoring.scorers.score import error_score
from pytest_scoring.scorers.score import make_score

#: Bytes read at a time; a match may straddle two chunks.
CHUNK_SIZE: Final = 1 << 20


@dataclass
class SearchResult:
    """What a search saw: files searched, matched, and skipped (binary or unreadable)."""

    searched: int = 0
    matched: list[str] = field(default_factory=list)
    binary: list[str] = field(default_factory=list)
    unreadable: list[str] = field(default_factory=list)

    def metadata(self) -> dict[str, Any]:
        return {
            "files_searched": self.searched,
            "files_matched": len(self.matched),
            "matched_files": cap_list(self.matched),
            "files_skipped_binary": len(self.binary),
            "files_skipped_unreadable": len(self.unreadable),
            "skipped_files": cap_list(self.binary + self.unreadable),
        }


class _Binary(Exception):
    """The file holds a NUL byte in its first chunk: not text, skipped."""


def file_contains(path: Path, needle: str, case_sensitive: bool) -> bool:
    """Stream ``path`` and look for ``needle``, matches across chunk boundaries included.

    :raises _Binary: when the first chunk holds a NUL byte (git's and grep's test).
    :raises OSError: when the file cannot be read.
    """
    fold = (lambda text: text) if case_sensitive else str.casefold
    needle = fold(needle)
    decoder = codecs.getincrementaldecoder("utf-8")(errors="replace")
    tail = ""
    with _open_regular(path) as stream:
        first = True
        while chunk := stream.read(CHUNK_SIZE):
            if first and b"\0" in chunk:
                raise _Binary(path)
            first = False
            text = tail + fold(decoder.decode(chunk))
            if needle in text:
                return True
            tail = text[len(text) - len(needle) + 1 :] if len(needle) > 1 else ""
    return needle in tail + fold(decoder.decode(b"", final=True))


def _open_regular(path: Path) -> BinaryIO:
    """``path`` open for reading if it is a regular file (no FIFO, device, nor symlink).

    :raises OSError: otherwise, or when it cannot be opened.
    """
    stream = os.fdopen(os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_NOFOLLOW), "rb")
    if not stat.S_ISREG(os.fstat(stream.fileno()).st_mode):
        stream.close()
        raise OSError(f"{path} is not a regular file")
    return stream


def _wanted(name: str, extensions: Sequence[str] | None) -> bool:
    return extensions is None or name.lower().endswith(tuple(extensions))


def walk_files(folder: Path, root: Path, recursive: bool) -> Iterator[Path]:
    """Regular files under ``folder`` (resolved paths inside ``root``), each directory once."""
    seen: set[tuple[int, int]] = set()
    pending = [folder]
    while pending:
        directory = pending.pop()
        try:
            info = directory.stat()
            if (info.st_dev, info.st_ino) in seen:
                continue
            seen.add((info.st_dev, info.st_ino))
            entries = sorted(os.scandir(directory), key=lambda entry: entry.name)
        except OSError:
            continue
        for entry in entries:
            path = resolve_inside(Path(entry.path), root)
            if path is None:
                continue  # a symlink out of the repository or a loop: never followed
            if path.is_dir():
                if recursive and entry.name not in SKIPPED_DIRS:
                    pending.append(path)
            elif path.is_file():
                yield path


@final
class FileContentsScorer:
    """``"C"`` if any file under ``folder_path`` contains ``search_string``."""

    __slots__ = (
        "case_sensitive",
        "file_extensions",
        "folder_path",
        "interim_score",
        "metrics",
        "name",
        "recursive",
        "search_string",
        "type",
    )

    def __init__(
        self,
        folder_path: str,
        search_string: str,
        case_sensitive: bool,
        recursive: bool,
        file_extensions: list[str] | None,
        interim_score: bool,
    ):
        self.type = self.name = "file_contents"
        self.metrics: Sequence[Metric] = (accuracy, stderr)
        self.folder_path = folder_path
        self.search_string = search_string
        self.case_sensitive = case_sensitive
        self.recursive = recursive
        self.file_extensions = file_extensions
        self.interim_score = interim_score

    def score(self, context: ScoringContext) -> Score:
        root = context.root.resolve()
        folder = resolve_inside(root / self.folder_path, root)
        parameters = {"folder_path": self.folder_path, "search_string": self.search_string}
        if folder is None:
            return error_score(
                self.type, "folder_path is outside the repository (or a symlink loop)", **parameters
            )
        if not folder.is_dir():
            return make_score(
                INCORRECT,
                self.type,
                explanation=f"folder {self.folder_path!r} not found",
                metadata={"error": "folder_not_found", **parameters},
            )
        result = self.search(folder, root)
        found = bool(result.matched)
        files = f"{result.searched} files under {self.folder_path!r}"
        return make_score(
            bool_value(found),
            self.type,
            explanation=(
                f"{self.search_string!r} found in {len(result.matched)} of {files}"
                if found
                else f"{self.search_string!r} not found ({files} searched)"
            ),
            metadata={**parameters, **result.metadata()},
        )

    def search(self, folder: Path, root: Path) -> SearchResult:
        """Look in every wanted file under ``folder``."""
        result = SearchResult()
        for path in walk_files(folder, root, self.recursive):
            if not _wanted(path.name, self.file_extensions):
                continue
            relative = path.relative_to(root).as_posix()
            try:
                matched = file_contains(path, self.search_string, self.case_sensitive)
            except _Binary:
                result.binary.append(relative)
                continue
            except OSError:
                result.unreadable.append(relative)
                continue
            result.searched += 1
            if matched:
                result.matched.append(relative)
        return result


def _extensions(file_extensions: Sequence[str] | None) -> list[str] | None:
    """Lower-cased extensions, each with its leading dot (``"py"`` -> ``".py"``)."""
    if file_extensions is None:
        return None
    if isinstance(file_extensions, str):
        raise ConfigError("file_extensions: expected a list of extensions such as ['.py']")
    return [ext.lower() if ext.startswith(".") else f".{ext.lower()}" for ext in file_extensions]


def file_contents_scorer(
    folder_path: str,
    search_string: str,
    case_sensitive: bool = True,
    recursive: bool = True,
    file_extensions: list[str] | None = None,
    interim_score: bool = False,
) -> FileContentsScorer:
    """A scorer that looks for ``search_string`` in the files under ``folder_path``.

    :param folder_path: relative to the repository root; never escapes it.
    :param file_extensions: only files ending so (``[".py", "txt"]``); all when None.
    :param interim_score: kept for compatibility; a search shares nothing anyway.
    :raises ConfigError: for an empty search string or an absolute folder path.
    """
    if not search_string:
        raise ConfigError("search_string: must not be empty")
    if "\0" in folder_path:
        raise ConfigError(f"folder_path: {folder_path!r} must not contain a NUL character")
    if Path(folder_path).is_absolute():
        raise ConfigError(f"folder_path: {folder_path!r} must be relative to the repository")
    return FileContentsScorer(
        folder_path,
        search_string,
        case_sensitive,
        recursive,
        _extensions(file_extensions),
        interim_score,
    )
