"""The disk watch: a bound on what the children of one evaluation leave on disk (``--limit disk``).

The file-size limit bounds one file; nothing in the kernel bounds how many files a user writes
into folders it owns. The watch measures, now and then, every folder the children may write
(the copies they run in, their ``HOME`` and ``TMPDIR``, their output logs) with the one walker
(:mod:`pytest_scoring.fs.walk`, every folder entered, each file counted once by the blocks it
holds), and past the bound kills every child it knows of and keeps the reason.

It runs in a thread of the evaluator: a pause between two walks is ten times the last walk's
duration, and at least :data:`PAUSE` seconds, so a large tree costs about a tenth of a core.
What a burst writes between two walks can pass the bound until the next one; the evaluator
measures once more when the tests are over (:meth:`DiskWatch.check`).
"""

from __future__ import annotations

import os
import threading
import time
from pathlib import Path
from typing import Final

from pytest_scoring.fs.walk import TreeWalk
from pytest_scoring.process.supervisor import Supervisor
from pytest_scoring.text import size_text

#: The shortest pause between two measures, in seconds.
PAUSE: Final = 1.0
#: How many times the last walk's duration the watch waits before the next one.
SLOWDOWN: Final = 10.0


class DiskWatch:
    """Measures the children's folders against ``limit`` bytes; past it, kills the children."""

    def __init__(self, limit: int | None) -> None:
        self.limit = limit
        #: Why the bound was passed (set once, and kept).
        self.exceeded: str | None = None
        self._folders: list[Path] = []
        self._running: set[Supervisor] = set()
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    def add(self, folder: Path) -> None:
        """Measure ``folder`` (and everything below it) from now on."""
        with self._lock:
            self._folders.append(folder)

    def track(self, supervisor: Supervisor) -> None:
        """A child now running, killed should the bound be passed (at once if it was)."""
        with self._lock:
            self._running.add(supervisor)
            self._start()
        if self.exceeded is not None:
            supervisor.kill()

    def untrack(self, supervisor: Supervisor) -> None:
        with self._lock:
            self._running.discard(supervisor)

    def check(self) -> str | None:
        """Measure now; why the bound is passed (now or before), or None."""
        if self.limit is None or self.exceeded is not None:
            return self.exceeded
        used = self.measure()
        if used > self.limit:
            self.exceeded = (
                f"the repository's processes wrote more than --limit disk={size_text(self.limit)} "
                f"({size_text(used)} in their folders)"
            )
            with self._lock:
                running = list(self._running)
            for supervisor in running:
                supervisor.kill()
        return self.exceeded

    def measure(self) -> int:
        """Bytes on disk of every watched folder, each file counted once."""
        with self._lock:
            folders = list(self._folders)
        seen: set[tuple[int, int]] = set()
        return sum(_blocks(folder, seen) for folder in folders)

    def stop(self) -> None:
        """End the watch's thread (a later child starts it again)."""
        self._stop.set()
        thread, self._thread = self._thread, None
        if thread is not None:
            thread.join()

    def _start(self) -> None:
        if self.limit is None or self._thread is not None:
            return
        self._stop = threading.Event()
        self._thread = threading.Thread(
            target=self._watch, args=(self._stop,), name="pytest-scoring-disk", daemon=True
        )
        self._thread.start()

    def _watch(self, stop: threading.Event) -> None:
        pause = PAUSE
        while not stop.wait(pause):
            started = time.monotonic()
            if self.check() is not None:
                return
            pause = max(PAUSE, SLOWDOWN * (time.monotonic() - started))


def _blocks(folder: Path, seen: set[tuple[int, int]]) -> int:
    """Bytes that ``folder`` and everything below it hold on disk (hard links once)."""
    total = _size(folder, seen)
    for entry in TreeWalk(folder, skipped_names=frozenset()):
        total += _size(entry.path, seen)
    return total


def _size(path: Path, seen: set[tuple[int, int]]) -> int:
    try:
        info = os.lstat(path)
    except OSError:  # gone meanwhile
        return 0
    identity = (info.st_dev, info.st_ino)
    if identity in seen:
        return 0
    seen.add(identity)
    return info.st_blocks * 512
