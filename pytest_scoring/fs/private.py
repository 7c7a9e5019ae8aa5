"""The evaluator's own files and folders: its caches, a batch's samples, the locks of the runs'
user ids, the copies of an interpreter (docs/security.md).

A file or folder is the evaluator's only when its own user owns it, no one else may write it
and it is not a symlink; a folder is kept where no one else can move it either (each folder
above it is the evaluator's or root's, and writable by no one else unless sticky, as ``/tmp``
is). Files are read without following a link and written new, private (0600), never through
an old file or a link.
"""

from __future__ import annotations

import contextlib
import fcntl
import hashlib
import json
import os
import stat
from pathlib import Path
from typing import Any
from typing import BinaryIO
from typing import Final

_BLOCK: Final = 1024 * 1024


def private_problem(path: Path) -> str | None:
    """Why ``path`` is not a folder or regular file that only the evaluator can write, or
    None when it is one."""
    try:
        info = path.lstat()
    except OSError as error:
        return f"{path}: {error.strerror or error}"
    return _problem(path, info)


def folder_problem(path: Path) -> str | None:
    """Why ``path`` is not a folder that only the evaluator can write, or None when it is."""
    problem = private_problem(path)
    if problem is None and not path.is_dir():
        return f"{path} is not a folder"
    return problem


def _problem(path: Path, info: os.stat_result) -> str | None:
    if stat.S_ISLNK(info.st_mode):
        return f"{path} is a symlink"
    if not (stat.S_ISDIR(info.st_mode) or stat.S_ISREG(info.st_mode)):
        return f"{path} is neither a folder nor a regular file"
    if info.st_uid != os.geteuid():
        return f"{path} belongs to another user"
    if info.st_mode & (stat.S_IWGRP | stat.S_IWOTH):
        return f"{path} is writable by other users"
    return None


def read_private_json(folder: Path, name: str) -> dict[str, Any] | None:
    """The JSON object in ``folder/name``, when the folder and the file are the evaluator's
    own (no one else can have planted or changed them); None otherwise."""
    path = folder / name
    if private_problem(folder) or private_problem(path):
        return None
    try:
        content = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    return content if isinstance(content, dict) else None


def movable_problem(folder: Path) -> str | None:
    """Why another user could replace ``folder`` (a folder above it is theirs, or they may
    write in it and it is not sticky), or None when none can."""
    for above in folder.absolute().parents:
        try:
            info = above.stat()
        except OSError as error:
            return f"{above}: {error.strerror or error}"
        if info.st_uid not in (0, os.geteuid()):
            return f"{above} belongs to another user"
        open_to_others = info.st_mode & (stat.S_IWGRP | stat.S_IWOTH)
        if open_to_others and not info.st_mode & stat.S_ISVTX:
            return f"{above} is writable by other users"
    return None


def open_regular(path: Path) -> BinaryIO:
    """``path`` open for reading: a regular file, never through a link (inside a folder of
    the evaluator's, no one else can have put it there).

    :raises OSError: when it is missing, a link or not a regular file.
    """
    descriptor = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK)
    if not stat.S_ISREG(os.fstat(descriptor).st_mode):
        os.close(descriptor)
        raise OSError(f"{path} is not a regular file")
    return os.fdopen(descriptor, "rb")


def new_private_file(path: Path) -> BinaryIO:
    """A new private file at ``path`` open for writing (never an old file nor a link).

    :raises OSError: when ``path`` exists or cannot be made.
    """
    path.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
    flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW
    return os.fdopen(os.open(path, flags, 0o600), "wb")


def copy_hashed(source: Path, target: Path) -> str | None:
    """Copy a regular file to the new file ``target``; its SHA-256, or None when it cannot."""
    digest = hashlib.sha256()
    with contextlib.suppress(OSError), open_regular(source) as reader:
        with new_private_file(target) as out:
            while block := reader.read(_BLOCK):
                digest.update(block)
                out.write(block)
        return digest.hexdigest()
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
