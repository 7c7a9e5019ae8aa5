"""The reference rerun's mechanics (docs/reference.md).

A private copy of the reference checkout is made (the checkout itself is only read), the scored
repository's test files are copied over it, and pytest runs there in its own process group
with a timeout. The scored repository may be hostile: a test pattern never writes outside the
copy, and no symlink leads out of either tree; a symlink loop counts as leading out.
"""

from __future__ import annotations

import fnmatch
import os
import shutil
from collections.abc import Iterator
from collections.abc import Sequence
from dataclasses import dataclass
from dataclasses import field
from pathlib import Path
from pathlib import PurePosixPath
from typing import Final

from pytest_scoring.errors import OptionError
from pytest_scoring.fs.copy import is_regular_file
from pytest_scoring.fs.paths import resolve_inside
from pytest_scoring.fs.walk import TreeWalk

_GLOB_CHARS: Final = frozenset("*?[")


def check_reference_dir(reference: Path) -> Path:
    """The reference checkout, resolved; it must be a readable folder.

    :raises OptionError: naming ``--score-reference`` and the path.
    """
    if not reference.is_dir():
        raise OptionError(f"--score-reference: {reference} is not a folder")
    if not os.access(reference, os.R_OK | os.X_OK):
        raise OptionError(f"--score-reference: {reference} cannot be read")
    return reference.resolve()


def check_test_pattern(pattern: str) -> list[str]:
    """A test pattern split into path segments; it must stay inside the repository.

    :raises OptionError: for an absolute pattern or one with a ``..`` segment.
    """
    segments = pattern.replace("\\", "/").split("/")
    if not pattern or PurePosixPath(pattern.replace("\\", "/")).is_absolute() or ":" in segments[0]:
        raise OptionError(f"{pattern!r}: must be relative to the repository")
    if ".." in segments:
        raise OptionError(f"{pattern!r}: '..' would leave the repository")
    return [segment for segment in segments if segment not in ("", ".")]


def _matches(parts: Sequence[str], segments: Sequence[str]) -> bool:
    """Glob match of a relative path against pattern segments (``**`` spans folders)."""
    if not segments:
        return not parts
    head, rest = segments[0], segments[1:]
    if head == "**":
        return any(_matches(parts[index:], rest) for index in range(len(parts) + 1))
    return bool(parts) and fnmatch.fnmatchcase(parts[0], head) and _matches(parts[1:], rest)


@dataclass
class CopiedTests:
    """Which of the scored repository's test files went into the reference copy."""

    copied: list[str] = field(default_factory=list)
    #: Matched files not copied: symlinks leading out of the repository, non-regular files,
    #: and a pattern's folder when it is a symlink (``tests`` linked elsewhere).
    skipped: list[str] = field(default_factory=list)


def _literal_base(segments: Sequence[str]) -> list[str]:
    """The leading segments without glob characters: the only folder worth walking."""
    base: list[str] = []
    for segment in segments[:-1]:
        if _GLOB_CHARS & set(segment) or segment == "**":
            break
        base.append(segment)
    return base


def pattern_folder(pattern: str) -> str:
    """The folder whose tree holds every file ``pattern`` matches (``"."`` for any)."""
    return "/".join(_literal_base(check_test_pattern(pattern))) or "."


def _candidate_files(root: Path, segments: list[str], exclude: Sequence[Path]) -> Iterator[Path]:
    base = root.joinpath(*_literal_base(segments))
    if not base.is_dir():
        return
    if base.resolve() != base:
        yield base  # reached through a symlink: never followed, listed as skipped
        return
    for entry in TreeWalk(root, top=base, exclude=exclude):
        if not entry.is_dir and _matches(entry.relpath.split("/"), segments):
            yield entry.path


def _safe_target(dest: Path, relpath: str) -> Path:
    """Where ``relpath`` goes inside ``dest``, refusing anything that resolves outside it."""
    target = dest / relpath
    if resolve_inside(target.parent, dest) is None:
        raise OptionError(f"test file {relpath!r} would be written outside the reference copy")
    target.parent.mkdir(parents=True, exist_ok=True)
    if target.is_symlink():
        target.unlink()  # replace the link itself; never write through it
    return target


def copy_test_files(
    root: Path, patterns: Sequence[str], dest: Path, exclude: Sequence[Path] = ()
) -> CopiedTests:
    """Copy the files of ``root`` matched by ``patterns`` to the same places under ``dest``.

    A symlink is copied as the content it points to only when that stays inside ``root``.

    :raises OptionError: for a pattern that is absolute or climbs out with ``..``.
    """
    root, dest = root.resolve(), dest.resolve()
    result = CopiedTests()
    seen: set[str] = set()  # a file matched by several patterns is handled once
    for pattern in patterns:
        for path in _candidate_files(root, check_test_pattern(pattern), exclude):
            relpath = path.relative_to(root).as_posix()
            if relpath in seen:
                continue
            seen.add(relpath)
            source = resolve_inside(path, root)
            if source is None or not is_regular_file(source):
                result.skipped.append(relpath)
                continue
            target = _safe_target(dest, relpath)
            if target.is_dir():
                result.skipped.append(relpath)
                continue
            shutil.copyfile(source, target)
            result.copied.append(relpath)
    return result
