"""A user id of its own for every run of the repository's code (``run`` as root).

Two runs under one user can signal, trace and write into each other: a scored session that
finds the reference rerun's copy through ``/proc`` could write its own change into it, and a
process left by one ``run`` could rewrite another's tests. So every run (the scored session,
the reference rerun, the baseline, an expected-tests folder) gets a user id no other run has
at the same time, on this machine, from :data:`FIRST_UID` up: ids without a user database
entry, from a range that Linux distributions and systemd leave unused. Each id is held by an
exclusive ``flock`` on a file of its own in a folder only root may write
(:data:`LOCK_FOLDER`); the kernel drops the lock when the evaluator ends, however it ends. An
id that still owns a process (left by a run whose containment was partial) is never handed out.

``--user NAME`` is held the same way: a second ``run`` naming the same user while the first
runs is refused.
"""

from __future__ import annotations

import contextlib
import os
import pwd
import threading
from pathlib import Path
from typing import Final

from pytest_scoring.errors import OptionError
from pytest_scoring.fs.private import folder_problem
from pytest_scoring.fs.private import try_lock
from pytest_scoring.process.supervisor import ChildUser

#: The first user id a run gets when ``--user`` names none.
FIRST_UID: Final = 2_000_000_001
#: How many ids from :data:`FIRST_UID` on the runs may take.
UID_COUNT: Final = 100_000
#: Where the locks of the ids in use are (``/run`` is emptied at boot, as locks should be).
LOCK_FOLDER: Final = Path("/run/pytest-scoring/uids")


class UserPool:
    """The user ids this evaluator holds, each locked until it is released."""

    def __init__(self, folder: Path = LOCK_FOLDER) -> None:
        self.folder = folder
        self._held: dict[int, int] = {}
        self._lock = threading.Lock()

    def take(self) -> ChildUser:
        """A user id no other run holds, locked for this one.

        :raises OptionError: when the lock folder is not root's alone, or every id is taken.
        """
        folder = self._locks()
        with self._lock:
            for uid in range(FIRST_UID, FIRST_UID + UID_COUNT):
                if uid in self._held or _has_entry(uid):
                    continue
                descriptor = _try_lock(folder, uid)
                if descriptor is None:
                    continue
                if _owns_processes(uid):  # left by an earlier run: never shared
                    os.close(descriptor)
                    continue
                self._held[uid] = descriptor
                return ChildUser(str(uid), uid, uid)
        raise OptionError(f"no free user id for a run: {UID_COUNT} are in use")

    def claim(self, user: ChildUser) -> None:
        """Hold the user ``--user`` names for this run.

        :raises OptionError: when another run holds it now.
        """
        folder = self._locks()
        with self._lock:
            descriptor = None if user.uid in self._held else _try_lock(folder, user.uid)
            if descriptor is None:
                raise OptionError(
                    f"--user {user.name}: another run uses this user now, and two runs never "
                    "share one: name another user, or none"
                )
            self._held[user.uid] = descriptor

    def release(self, user: ChildUser) -> None:
        """Let another run have ``user`` (its processes are all gone)."""
        with self._lock:
            descriptor = self._held.pop(user.uid, None)
        if descriptor is not None:
            os.close(descriptor)

    def close(self) -> None:
        """Release every id still held."""
        with self._lock:
            held, self._held = self._held, {}
        for descriptor in held.values():
            os.close(descriptor)

    def _locks(self) -> Path:
        """The lock folder, made root's alone if it is new.

        :raises OptionError: when it (or the folder above it) is not.
        """
        try:
            self.folder.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
            self.folder.mkdir(mode=0o700, exist_ok=True)
        except OSError as error:
            raise OptionError(
                f"cannot keep the locks of the runs' user ids in {self.folder}: "
                f"{error.strerror or error}"
            ) from None
        for path in (self.folder.parent, self.folder):
            problem = folder_problem(path)
            if problem is not None:
                raise OptionError(f"cannot keep the locks of the runs' user ids: {problem}")
        return self.folder


def _try_lock(folder: Path, uid: int) -> int | None:
    """An open descriptor holding the lock of ``uid``, or None when another run holds it."""
    return try_lock(folder / str(uid), os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW)


def _has_entry(uid: int) -> bool:
    """Whether the user database names ``uid`` (then some account may own files as it)."""
    try:
        pwd.getpwuid(uid)
    except KeyError:
        return False
    return True


def _owns_processes(uid: int) -> bool:
    """Whether a process runs with ``uid`` as its real, effective or saved user id."""
    entries = os.listdir("/proc") if os.path.isdir("/proc") else []
    for entry in entries:
        if not entry.isdigit():
            continue
        path = f"/proc/{entry}/status"
        with contextlib.suppress(OSError), open(path, encoding="utf-8", errors="replace") as status:
            for line in status:
                if line.startswith("Uid:"):
                    if str(uid) in line.split()[1:4]:
                        return True
                    break
    return False
