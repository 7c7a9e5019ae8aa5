"""Find the SQLite database files of a repository (docs/databases.md).

Every file whose path matches a database glob counts, wherever it is: the walk
(:mod:`pytest_scoring.fs.walk`) skips only version control's store and the folders the evaluator
excludes, and :func:`unsearched_folders` names those of them that hold a matching file. A
matching symlink counts too: snapshots diff it under the link's path when it stays inside the
repository, and report an error when it leads out (docs/security.md). Only regular files are
read: a FIFO or device named ``app.db`` (planted by a test after discovery) would block a
reader forever, so the header check opens without blocking and looks first.
"""

from __future__ import annotations

import fnmatch
import os
import stat
from collections.abc import Iterable
from collections.abc import Sequence
from pathlib import Path
from typing import Final
from typing import NamedTuple

from pytest_scoring.fs.walk import TreeWalk

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


def _matches_any(relpath: str, patterns: Sequence[str]) -> bool:
    return any(matches_pattern(relpath, pattern) for pattern in patterns)


class Discovery(NamedTuple):
    """The databases of a tree, and the folders that were not searched for them."""

    #: Relative POSIX paths of matching regular files and symlinks, sorted.
    databases: list[str]
    #: Relative paths of the folders left out (version control, evaluator's exclusions).
    skipped: list[str]


def discover(root: Path, patterns: Sequence[str], exclude: Iterable[Path] = ()) -> Discovery:
    """Find the files under ``root`` matching any of ``patterns`` (globs at any depth).

    :param exclude: folders not to search (the report root, the evaluator's exclusions).
    """
    walk = TreeWalk(root, exclude=exclude)
    databases = sorted(
        entry.relpath
        for entry in walk
        # the patterns first: a file system call for every file of a large tree is slow
        if (entry.is_file or entry.is_symlink) and _matches_any(entry.relpath, patterns)
    )
    return Discovery(databases, walk.skipped)


def find_databases(root: Path, patterns: Sequence[str], exclude: Iterable[Path] = ()) -> list[str]:
    """The relative paths of :func:`discover`'s databases."""
    return discover(root, patterns, exclude).databases


def unsearched_folders(root: Path, skipped: Iterable[str], patterns: Sequence[str]) -> list[str]:
    """The ``skipped`` folders that hold a file matching ``patterns``.

    A repository could keep a database there, out of every diff; the score says so.
    """
    return [
        folder
        for folder in skipped
        if any(
            not entry.is_dir and _matches_any(entry.relpath, patterns)
            for entry in TreeWalk(root, root / folder)
        )
    ]


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
