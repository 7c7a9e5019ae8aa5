"""Find the SQLite database files of a repository (docs/databases.md).

Walks the tree without following symlinks: a hostile repository could point a symlink at a
database outside itself, and snapshots must only ever read what lives inside the root. Only
regular files count: a FIFO or device named ``app.db`` (planted by a test after discovery)
would block a reader forever, so the header check opens without blocking and looks first.
"""

from __future__ import annotations

import fnmatch
import os
import stat
from collections.abc import Iterator
from collections.abc import Sequence
from pathlib import Path
from typing import Final

#: Folders never searched: version control, dependencies, virtual environments.
SKIPPED_DIRS: Final = frozenset({".git", "node_modules", ".venv", "venv", "__pycache__"})
#: The first 16 bytes of every SQLite 3 database file.
SQLITE_HEADER: Final = b"SQLite format 3\x00"


def matches_pattern(relpath: str, pattern: str) -> bool:
    """Whether a relative POSIX path matches a database glob at any depth.

    A pattern without ``/`` matches the file name (``*.db``); one with ``/`` matches the
    path or any tail of it (``data/*.db`` finds ``app/data/x.db``); ``**/`` may match no folder.
    """
    if "/" not in pattern:
        return fnmatch.fnmatchcase(relpath.rsplit("/", 1)[-1], pattern)
    candidates = {pattern, pattern.replace("**/", "")}
    return any(
        fnmatch.fnmatchcase(relpath, candidate) or fnmatch.fnmatchcase(relpath, f"*/{candidate}")
        for candidate in candidates
    )


def _skipped(directory: Path, excluded: frozenset[Path]) -> bool:
    return (
        directory.name in SKIPPED_DIRS
        or directory.is_symlink()
        or (directory / "pyvenv.cfg").exists()
        or directory.resolve() in excluded
    )


def _walk(root: Path, excluded: frozenset[Path]) -> Iterator[tuple[str, Path]]:
    """``(relative POSIX path, path)`` of every file name under ``root`` (not yet checked)."""
    for current, dirs, files in os.walk(root, followlinks=False):
        here = Path(current)
        dirs[:] = sorted(d for d in dirs if not _skipped(here / d, excluded))
        prefix = here.relative_to(root).as_posix() + "/" if here != root else ""
        for name in files:
            yield prefix + name, here / name


def find_databases(root: Path, patterns: Sequence[str], exclude: Sequence[Path] = ()) -> list[str]:
    """Database files under ``root`` matching any of ``patterns``, as sorted relative paths.

    :param patterns: globs such as ``*.db``, matched at any depth.
    :param exclude: folders to skip (the report root), wherever they are.
    :returns: relative POSIX paths; symlinked files and folders are never included.
    """
    excluded = frozenset(Path(path).resolve() for path in exclude)
    return sorted(
        relpath
        for relpath, path in _walk(root, excluded)
        # the patterns first: a file system call for every file of a large tree is slow
        if any(matches_pattern(relpath, pattern) for pattern in patterns)
        and not path.is_symlink()
        and path.is_file()
    )


def sqlite_header_error(path: Path) -> str | None:
    """Why ``path`` is not a SQLite database, or ``None`` when its header says it is.

    An empty file counts as an (empty) database, as SQLite itself treats it.
    """
    try:
        # O_NONBLOCK: opening a FIFO for reading would otherwise wait for a writer forever.
        with os.fdopen(os.open(path, os.O_RDONLY | os.O_NONBLOCK), "rb") as handle:
            if not stat.S_ISREG(os.fstat(handle.fileno()).st_mode):
                return f"{path.name} is not a regular file"
            head = handle.read(len(SQLITE_HEADER))
    except OSError as error:
        return f"cannot read {path.name}: {error.strerror}"
    if head and head != SQLITE_HEADER:
        return f"{path.name} is not a SQLite database (no SQLite header)"
    return None
