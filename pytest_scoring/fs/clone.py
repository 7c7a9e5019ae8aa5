"""Copying a file as cheaply as the file system allows: a reflink where it can make one.

On Btrfs, XFS and other copy-on-write file systems ``ioctl(FICLONE)`` makes the copy share the
source's blocks until either is written, so a private copy of a large repository costs almost
nothing; elsewhere (ext4, tmpfs, across file systems) the bytes are copied.
"""

from __future__ import annotations

import contextlib
import errno
import shutil
from pathlib import Path
from typing import Final

#: ``_IOW(0x94, 9, int)`` from ``linux/fs.h``.
FICLONE: Final = 0x40049409
#: Errors that only mean "no reflink here": copy the bytes instead.
_NO_REFLINK: Final = {
    errno.EBADF,
    errno.EINVAL,
    errno.ENOTTY,
    errno.EOPNOTSUPP,
    errno.EXDEV,
    errno.ENOSYS,
    errno.EPERM,
}


def clone_file(source: Path, target: Path) -> None:
    """Copy ``source`` to ``target`` (a reflink when possible), with its mode and times."""
    with source.open("rb") as reader, target.open("wb") as writer:
        if not _reflink(reader.fileno(), writer.fileno()):
            shutil.copyfileobj(reader, writer)
    shutil.copystat(source, target)


def _reflink(source_fd: int, target_fd: int) -> bool:
    with contextlib.suppress(ImportError):
        import fcntl

        try:
            fcntl.ioctl(target_fd, FICLONE, source_fd)
        except OSError as error:
            if error.errno not in _NO_REFLINK:
                raise
            return False
        return True
    return False
