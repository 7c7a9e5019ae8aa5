"""Helpers for tests that start processes and check that killed ones are really gone.

No helper here bounds how long a working run may take: on a loaded machine a child may need
many seconds to start. Each waits for an event (a file written when ready, a process gone)
and gives up only after :data:`HANG_GUARD` seconds, which only a hang reaches.
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable
from pathlib import Path
from typing import Final

#: Seconds after which a wait is a hang, not a slow machine: the suite must not block forever.
HANG_GUARD: Final = 600.0


def wait_until(condition: Callable[[], bool], what: str) -> None:
    """Poll ``condition`` until it holds; fail the test only if it never does (a hang)."""
    deadline = time.monotonic() + HANG_GUARD
    while not condition():
        assert time.monotonic() < deadline, f"still waiting for {what} after {HANG_GUARD:g} s"
        time.sleep(0.05)


def running(pid: int) -> bool:
    """Whether a process runs (a killed one may linger as a zombie until reaped)."""
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except OSError:
        return False
    return state != "Z"


def processes_working_in(folder: Path) -> list[int]:
    """Live processes (other than this one) whose working directory is ``folder`` or below.

    Every process a run started in ``folder`` inherits it, whatever its pid or process group,
    so this finds what a kill left behind without a pid file that may not be written yet.
    """
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit() or int(entry.name) == os.getpid():
            continue
        try:
            cwd = Path(os.readlink(entry / "cwd"))
        except OSError:  # gone, a zombie, or not ours to read
            continue
        if cwd.is_relative_to(folder) and running(int(entry.name)):
            found.append(int(entry.name))
    return found


def all_gone(folder: Path) -> None:
    """Wait until no process works in ``folder`` (a SIGKILL takes effect soon, not at once)."""
    wait_until(lambda: not processes_working_in(folder), f"the processes in {folder} to end")


def dies(pid: int) -> None:
    """Wait until the process ``pid`` has ended."""
    wait_until(lambda: not running(pid), f"process {pid} to end")
