"""``file_contents``: does any file under a folder contain a string? (docs/configuration.md)

Every regular file under the folder is searched, text or binary, as bytes for the string's
UTF-8 encoding: a file holding a NUL byte is no hiding place, and neither is a folder such as
``node_modules`` or ``venv`` — only the one walk's skip list (:mod:`pytest_scoring.fs.walk`)
and the folders the evaluator excludes are left out, and the score names them.

The scored repository may be hostile: the folder and every symlink are resolved and must stay
inside the repository, a folder reached twice (symlink loop) is searched once, and files are
streamed in chunks so a huge file costs no memory. A file is opened without following a
symlink and without blocking, then must be a regular file: a FIFO or a link swapped in after
the walk is counted unreadable, never waited on nor followed out.
"""

from __future__ import annotations

import codecs
import os
import stat
from collections import Counter
from collections.abc import Callable
from collections.abc import Iterator
from collections.abc import Sequence
from dataclasses import dataclass
from dataclasses import field
from pathlib import Path
from typing import Any
from typing import BinaryIO
from typing import Final
from typing import TypeVar
from typing import final

from pytest_scoring.core.metrics import Metric
from pytest_scoring.core.metrics import accuracy
from pytest_scoring.core.metrics import stderr
from pytest_scoring.core.score import INCORRECT
from pytest_scoring.core.score import Score
from pytest_scoring.core.score import bool_value
from pytest_scoring.core.score import cap_list
from pytest_scoring.core.score import error_score
from pytest_scoring.core.score import make_score
from pytest_scoring.errors import ConfigError
from pytest_scoring.fs.paths import locate
from pytest_scoring.fs.paths import resolve_inside
from pytest_scoring.fs.paths import unmapped_hint
from pytest_scoring.fs.walk import TreeWalk
from pytest_scoring.scorers.base import ScoringContext
from pytest_scoring.scorers.scorer_type import InspectForm
from pytest_scoring.scorers.scorer_type import ScorerType
from pytest_scoring.text import plural

#: Bytes read at a time; a match may straddle two chunks.
CHUNK_SIZE: Final = 1 << 20
METRICS: Final = (accuracy, stderr)

Text = TypeVar("Text", bytes, str)


@dataclass
class SearchResult:
    """What a search saw: files searched and matched, files and folders left out and why."""

    searched: int = 0
    matched: list[str] = field(default_factory=list)
    #: Relative path -> why the file was not searched.
    skipped: dict[str, str] = field(default_factory=dict)
    #: Folders not entered: version control's store and the evaluator's ``exclude``.
    folders_skipped: list[str] = field(default_factory=list)

    def metadata(self) -> dict[str, Any]:
        return {
            "files_searched": self.searched,
            "files_matched": len(self.matched),
            "matched_files": cap_list(self.matched),
            "files_skipped": len(self.skipped),
            "files_skipped_by_reason": dict(Counter(self.skipped.values())),
            "skipped_files": cap_list(sorted(self.skipped)),
            "folders_skipped": cap_list(self.folders_skipped),
        }


def _matcher(needle: str, case_sensitive: bool) -> Callable[[BinaryIO], bool]:
    """A function telling whether a stream holds ``needle``, across chunk boundaries.

    Case-sensitive: the bytes of ``needle`` in UTF-8. Otherwise both sides are case-folded
    text; the file is decoded with ``surrogateescape``, so bytes that are not UTF-8 (a binary
    file) stay as they are instead of turning into replacement characters.
    """
    if case_sensitive:
        return lambda stream: _contains(_byte_chunks(stream), needle.encode("utf-8"))
    folded = needle.casefold()
    return lambda stream: _contains(_folded_chunks(stream), folded)


def _byte_chunks(stream: BinaryIO) -> Iterator[bytes]:
    while chunk := stream.read(CHUNK_SIZE):
        yield chunk


def _folded_chunks(stream: BinaryIO) -> Iterator[str]:
    decoder = codecs.getincrementaldecoder("utf-8")(errors="surrogateescape")
    for chunk in _byte_chunks(stream):
        yield decoder.decode(chunk).casefold()
    yield decoder.decode(b"", final=True).casefold()


def _contains(chunks: Iterator[Text], needle: Text) -> bool:
    tail = needle[:0]
    for chunk in chunks:
        window = tail + chunk
        if needle in window:
            return True
        tail = window[len(window) - len(needle) + 1 :] if len(needle) > 1 else needle[:0]
    return False


def file_contains(path: Path, needle: str, case_sensitive: bool) -> bool:
    """Whether the regular file ``path`` holds ``needle`` (bytes, or case-folded text).

    :raises OSError: when it cannot be read or is not a regular file (a FIFO is never waited on).
    """
    with _open_regular(path) as stream:
        return _matcher(needle, case_sensitive)(stream)


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


def walk_files(
    folder: Path, root: Path, recursive: bool, exclude: Sequence[Path], result: SearchResult
) -> Iterator[tuple[str, Path]]:
    """``(relative path, real path)`` of the files under ``folder``, each folder once.

    A symlink is followed when it stays inside ``root`` (a linked folder is searched too);
    one that leads out, loops or dangles is recorded in ``result.skipped``.
    """
    seen: set[tuple[int, int]] = set()
    pending = [folder]
    while pending:
        top = pending.pop()
        info = top.stat()
        if (info.st_dev, info.st_ino) in seen:
            continue
        seen.add((info.st_dev, info.st_ino))
        walk = TreeWalk(root, top=top, exclude=exclude, recursive=recursive)
        for entry in walk:
            real = resolve_inside(entry.path, root) if entry.is_symlink else entry.path
            if entry.is_dir:
                continue
            if real is None or not real.exists():
                result.skipped[entry.relpath] = "symlink leading out, dangling or in a loop"
            elif real.is_dir():
                if recursive:
                    pending.append(real)
            else:
                yield entry.relpath, real
        result.folders_skipped += walk.skipped


@final
class FileContentsScorer:
    """``"C"`` if any file under ``folder_path`` contains ``search_string``."""

    __slots__ = (
        "case_sensitive",
        "detects",
        "exclude",
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
        exclude: list[str],
    ):
        self.type = self.name = "file_contents"
        self.metrics: Sequence[Metric] = METRICS
        #: Its ``"C"`` means the string was found: a finding, not a success.
        self.detects = True
        self.folder_path = folder_path
        self.search_string = search_string
        self.case_sensitive = case_sensitive
        self.recursive = recursive
        self.file_extensions = file_extensions
        self.interim_score = interim_score
        self.exclude = exclude

    def score(self, context: ScoringContext) -> Score:
        located = locate(self.folder_path, context.root.resolve(), context.path_map)
        folder = located.path
        parameters = {"folder_path": self.folder_path, "search_string": self.search_string}
        if folder is None:
            return error_score(
                self.type, "folder_path is outside the repository (or a symlink loop)", **parameters
            )
        if not folder.is_dir():
            hint = unmapped_hint(self.folder_path, context.path_map)
            return make_score(
                INCORRECT,
                self.type,
                explanation=f"folder {self.folder_path!r} not found{hint}",
                metadata={"error": "folder_not_found", **parameters},
            )
        result = self.search(folder, located.bound)
        found = bool(result.matched)
        files = f"{plural(result.searched, 'file')} under {self.folder_path!r}"
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
        exclude = [root / path for path in self.exclude]
        for relpath, path in walk_files(folder, root, self.recursive, exclude, result):
            if not _wanted(path.name, self.file_extensions):
                continue
            try:
                matched = file_contains(path, self.search_string, self.case_sensitive)
            except OSError:
                result.skipped[relpath] = "unreadable or not a regular file"
                continue
            result.searched += 1
            if matched:
                result.matched.append(relpath)
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
    exclude: list[str] | None = None,
) -> FileContentsScorer:
    """A scorer that looks for ``search_string`` in the files under ``folder_path``.

    :param folder_path: relative to the repository root (never escaping it), or absolute:
        the evaluator's own folder, or a sandbox path mapped by ``--score-path-map``.
    :param search_string: the text to find, as its UTF-8 bytes (in binary files too).
    :param case_sensitive: false also finds the string in other letter cases.
    :param recursive: false searches only the files directly in ``folder_path``.
    :param file_extensions: only files ending so (``[".py", "txt"]``); all when None.
    :param interim_score: kept for compatibility; a search shares nothing anyway.
    :param exclude: folders not to search, relative to the repository root.
    :raises ConfigError: for an empty search string or a folder path with a NUL character.
    """
    if not search_string:
        raise ConfigError("search_string: must not be empty")
    if "\0" in folder_path:
        raise ConfigError(f"folder_path: {folder_path!r} must not contain a NUL character")
    return FileContentsScorer(
        folder_path,
        search_string,
        case_sensitive,
        recursive,
        _extensions(file_extensions),
        interim_score,
        _excluded_folders(exclude),
    )


def _excluded_folders(exclude: Sequence[str] | None) -> list[str]:
    """The ``exclude`` folders, checked like ``folder_path``."""
    if exclude is None:
        return []
    if isinstance(exclude, str):
        raise ConfigError("exclude: expected a list of folders such as ['vendor']")
    for folder in exclude:
        if Path(folder).is_absolute() or ".." in Path(folder).parts:
            raise ConfigError(f"exclude: {folder!r} must be a folder inside the repository")
    return list(exclude)


TYPE: Final = ScorerType(
    "file_contents",
    file_contents_scorer,
    METRICS,
    detects=True,
    inspect=InspectForm(
        "file_contents_scorer",
        positional=(
            "folder_path",
            "search_string",
            "case_sensitive",
            "recursive",
            "file_extensions",
            "interim_score",
        ),
        keyword=("repo_path", "exclude"),
        annotations={"file_extensions": "Sequence[str] | None"},
        docs={"folder_path": "the folder in the sandbox: absolute, or relative to the repository."},
        note="The folder is read to the evaluator's machine and searched there, every file, "
        "binary ones too (docs/inspect.md).",
        reads="the folder in the sandbox",
    ),
)
