"""Folders the evaluator builds under a temporary name, and what a killed run left of them.

A report folder, a batch's folder or a session's snapshot copies are built under a hidden
name and renamed or removed when done. While its builder lives, such a folder is held by an
exclusive lock (``flock``) on the folder itself, which the kernel drops when that process
ends, however it ends (``kill -9`` included). A leftover is such a folder of the evaluator's
that no process holds: the next command that writes in the same place removes it
(docs/report.md#the-folder). A folder another process is building (a
concurrent ``run`` writing into the same report root) is held, and left alone.
"""

from __future__ import annotations

import fcntl
import os
import shutil
import stat
import tempfile
from collections.abc import Callable
from collections.abc import Iterable
from pathlib import Path
from typing import Final

from pytest_scoring.fs.private import try_lock

#: How often a new folder is made again when a sweep removed it before it was held.
_ATTEMPTS: Final = 5


def hold(path: Path) -> int | None:
    """An exclusive lock on the folder ``path``, held until the descriptor returned is closed;
    None when another process (or another descriptor of this one) holds it.

    :raises OSError: when ``path`` is not a folder that can be opened.
    """
    return try_lock(path, os.O_RDONLY | os.O_DIRECTORY)


def make_held(make: Callable[[], Path]) -> tuple[Path, int]:
    """A new folder, made by ``make`` (``mkdir``, ``mkdtemp``) and held by this process.

    A sweep may find the folder between its making and its lock and remove it: it is then
    made again.

    :returns: the folder and the descriptor that holds it (close it to let it go).
    :raises OSError: when the folder cannot be made.
    """
    for _ in range(_ATTEMPTS):
        path = make()
        descriptor = os.open(path, os.O_RDONLY | os.O_DIRECTORY)
        fcntl.flock(descriptor, fcntl.LOCK_EX)  # waits for a sweep that holds it now
        if _is_open_as(path, descriptor):
            return path, descriptor
        os.close(descriptor)
    raise OSError(f"{path} was removed each time it was made")


def held_temporary_folder(parent: Path, prefix: str) -> tuple[Path, int]:
    """A new private folder ``parent/<prefix><random>``, held by this process."""
    return make_held(lambda: Path(tempfile.mkdtemp(prefix=prefix, dir=parent)))


def _is_open_as(path: Path, descriptor: int) -> bool:
    """``path`` is still the folder open as ``descriptor`` (not removed, not replaced)."""
    try:
        found, held = path.lstat(), os.fstat(descriptor)
    except OSError:
        return False
    return (found.st_dev, found.st_ino) == (held.st_dev, held.st_ino)


def _own_folder(path: Path) -> bool:
    """A folder (not a link) of the evaluator's own user."""
    try:
        info = path.lstat()
    except OSError:
        return False
    return stat.S_ISDIR(info.st_mode) and info.st_uid == os.geteuid()


def remove_leftovers(
    parent: Path, patterns: Iterable[str], keep: Callable[[Path], bool] = lambda path: False
) -> list[str]:
    """Remove the folders of ``parent`` that match ``patterns``, are the evaluator's and that
    no process holds; their names.

    :param keep: folders that are no leftovers even when no one holds them.
    """
    removed = []
    for pattern in patterns:
        for path in sorted(parent.glob(pattern)):
            if not _own_folder(path) or keep(path):
                continue
            try:
                descriptor = hold(path)
            except OSError:
                continue
            if descriptor is None:  # its builder lives
                continue
            try:
                shutil.rmtree(path)
            except OSError:
                continue
            finally:
                os.close(descriptor)
            removed.append(path.name)
    return removed
