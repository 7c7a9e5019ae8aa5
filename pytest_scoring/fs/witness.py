"""Files no process may change while the tests run, watched from the evaluator's side.

``--tests-from`` puts the evaluator's tests (their data, snapshots and conftests too) into the
copy that the repository's processes own, so a process of the repository could rewrite one of
them while the tests run and put it back before the end. On Linux the evaluator watches each
of those files, and every folder from the copy's root down to them, with inotify before the
child starts: the kernel queues every change, whoever makes it and however briefly, and the
evaluator reads the queue once the child's tree is gone. Only the watched files and folders
raise events, so nothing the tests do elsewhere can fill the queue. A file inotify cannot
watch (another system, the watch limit reached) is compared by content after the run instead,
which misses a change that was undone (docs/security.md#the-evaluators-tests).
"""

from __future__ import annotations

import contextlib
import ctypes
import ctypes.util
import errno
import hashlib
import os
import struct
import sys
from collections.abc import Iterable
from dataclasses import dataclass
from dataclasses import field
from pathlib import Path
from typing import Any
from typing import Final

from pytest_scoring.core.signals import Signal
from pytest_scoring.core.signals import make_signal
from pytest_scoring.fs.walk import TreeWalk

IN_MODIFY: Final = 0x002
IN_ATTRIB: Final = 0x004
IN_CLOSE_WRITE: Final = 0x008
IN_MOVE_SELF: Final = 0x800
IN_DELETE_SELF: Final = 0x400
IN_Q_OVERFLOW: Final = 0x4000
IN_DONT_FOLLOW: Final = 0x02000000
IN_NONBLOCK: Final = 0o4000
IN_CLOEXEC: Final = 0o2000000
#: What a watched file must never see: its bytes written, its metadata or links changed
#: (an unlink is a link count change), the file itself moved or deleted.
FILE_EVENTS: Final = IN_MODIFY | IN_ATTRIB | IN_CLOSE_WRITE | IN_MOVE_SELF | IN_DELETE_SELF
#: What a watched folder must never see: itself moved or deleted (new names inside it are
#: the tests' own business: pytest's caches, their output).
FOLDER_EVENTS: Final = IN_MOVE_SELF | IN_DELETE_SELF
_EVENT: Final = struct.Struct("iIII")
_WHAT: Final = (
    (IN_MODIFY, "written"),
    (IN_CLOSE_WRITE, "opened for writing"),
    (IN_ATTRIB, "changed (its mode, owner, times or links)"),
    (IN_MOVE_SELF, "moved"),
    (IN_DELETE_SELF, "deleted"),
    (IN_Q_OVERFLOW, "overrun: more changes were made than inotify could queue"),
)


def _libc() -> Any:
    if not sys.platform.startswith("linux"):
        return None
    try:
        return ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6", use_errno=True)
    except OSError:
        return None


_LIBC: Final = _libc()


@dataclass
class FilesWitness:
    """The evaluator's files in a tree, watched while the tests run (:meth:`start`), and what
    happened to them (:meth:`changes`)."""

    root: Path
    #: inotify's descriptor, or None where it is not used.
    descriptor: int | None = None
    #: What each watch is: a path relative to ``root``, a folder's ending with ``/``.
    watched: dict[int, str] = field(default_factory=dict)
    #: Files compared by content after the run instead: relative path -> SHA-256.
    digests: dict[str, str | None] = field(default_factory=dict)

    @classmethod
    def start(cls, root: Path, relpaths: Iterable[str]) -> FilesWitness:
        """Watch the files and folders ``relpaths`` name under ``root`` (a folder ends with
        ``/`` and stands for everything in it) from now on."""
        witness = cls(root)
        files, folders = witness._expand(relpaths)
        if _LIBC is not None:
            descriptor = _LIBC.inotify_init1(IN_NONBLOCK | IN_CLOEXEC)
            witness.descriptor = descriptor if descriptor >= 0 else None
        for relpath in sorted(folders):
            witness._watch(relpath, FOLDER_EVENTS)
        for relpath in files:
            if not witness._watch(relpath, FILE_EVENTS):
                witness.digests[relpath] = _digest(root / relpath)
        return witness

    def _expand(self, relpaths: Iterable[str]) -> tuple[list[str], set[str]]:
        """The files named (a folder's by walking it), and every folder leading to them."""
        files: list[str] = []
        for relpath in relpaths:
            path = self.root / relpath.rstrip("/")
            if not relpath.endswith("/"):
                files.append(relpath)
                continue
            base = relpath.rstrip("/")
            for entry in TreeWalk(path):
                if entry.is_file:
                    files.append(f"{base}/{entry.relpath}")
        folders = {"./"}
        for relpath in files:
            parts = relpath.split("/")[:-1]
            folders.update("/".join(parts[:depth]) + "/" for depth in range(1, len(parts) + 1))
        return files, folders

    def _watch(self, relpath: str, mask: int) -> bool:
        """Add an inotify watch; False when it cannot be had (no inotify, the limit)."""
        if _LIBC is None or self.descriptor is None:
            return False
        path = os.fsencode(self.root / relpath)
        watch = _LIBC.inotify_add_watch(self.descriptor, path, mask | IN_DONT_FOLLOW)
        if watch < 0:
            return False
        self.watched[watch] = relpath
        return True

    def changes(self) -> list[str]:
        """What happened to the watched files and folders since :meth:`start`, one sentence
        per path (empty when nothing did); the watch ends. Call it once every process of the
        child's tree is gone."""
        found = self._events()
        for relpath, digest in self.digests.items():
            if _digest(self.root / relpath) != digest:
                found.setdefault(relpath, {})["changed"] = None
        return [f"{relpath} was {' and '.join(whats)}" for relpath, whats in found.items()]

    def signals(self) -> list[Signal]:
        """:meth:`changes` as ``patched`` signals: the evaluator's files are not the
        repository's to change, and no file of the repository's is to blame by name."""
        return [
            make_signal("patched", f"the evaluator's {change} while the tests ran")
            for change in self.changes()
        ]

    def _events(self) -> dict[str, dict[str, None]]:
        """What inotify queued: each path, and what was done to it (in order, each once)."""
        if self.descriptor is None:
            return {}
        try:
            data = self._read_all()
        finally:
            self.close()
        found: dict[str, dict[str, None]] = {}
        offset = 0
        while offset + _EVENT.size <= len(data):
            watch, mask, _, length = _EVENT.unpack_from(data, offset)
            offset += _EVENT.size + length
            relpath = "the queue" if mask & IN_Q_OVERFLOW else self.watched.get(watch)
            for bit, what in _WHAT:
                if relpath is not None and mask & bit:
                    found.setdefault(relpath, {})[what] = None
        return found

    def _read_all(self) -> bytes:
        assert self.descriptor is not None
        chunks = []
        while True:
            try:
                chunk = os.read(self.descriptor, 64 * 1024)
            except BlockingIOError:
                break
            except OSError as error:
                if error.errno == errno.EINTR:
                    continue
                break
            if not chunk:
                break
            chunks.append(chunk)
        return b"".join(chunks)

    def close(self) -> None:
        """End the watch without reading it (the run did not get as far as the tests)."""
        if self.descriptor is not None:
            with contextlib.suppress(OSError):
                os.close(self.descriptor)
            self.descriptor = None


def _digest(path: Path) -> str | None:
    """A regular file's SHA-256 (never through a symlink), or None when there is none."""
    try:
        descriptor = os.open(path, os.O_RDONLY | os.O_NOFOLLOW)
    except OSError:
        return None
    with os.fdopen(descriptor, "rb") as handle:
        return hashlib.file_digest(handle, "sha256").hexdigest()
