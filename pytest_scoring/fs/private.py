"""What only the evaluator may write: folders it alone owns, and locks held on files.

A folder whose content the evaluator trusts later (the locks of the runs' user ids, the copies
of an interpreter) must belong to the evaluator's user and be writable by no other: else
another user could have put, removed or replaced a name in it.
"""

from __future__ import annotations

import fcntl
import os
import stat
from pathlib import Path


def folder_problem(path: Path) -> str | None:
    """Why ``path`` is not a folder only this user may write, or None when it is."""
    try:
        info = path.lstat()
    except OSError as error:
        return f"{path}: {error.strerror or error}"
    if stat.S_ISLNK(info.st_mode):
        return f"{path} is a symlink"
    if not stat.S_ISDIR(info.st_mode):
        return f"{path} is not a folder"
    if info.st_uid != os.geteuid():
        return f"{path} belongs to another user"
    if info.st_mode & (stat.S_IWGRP | stat.S_IWOTH):
        return f"{path} is writable by other users"
    return None


def try_lock(path: Path, flags: int, mode: int = 0o600) -> int | None:
    """A descriptor of ``path`` (opened with ``flags``) holding an exclusive lock on it until
    it is closed, or None when another process holds the lock."""
    descriptor = os.open(path, flags | os.O_CLOEXEC, mode)
    try:
        fcntl.flock(descriptor, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        os.close(descriptor)
        return None
    return descriptor
