"""Starting and stopping child processes: one owner for how pytest is launched and killed."""

from __future__ import annotations

import contextlib
import os
import signal
import sys


def pytest_command(*args: str) -> list[str]:
    """pytest in this interpreter with our plugin, loaded even when plugin autoload is off.

    ``no:scoring`` first: the entry point would otherwise register the module a second time.
    """
    return [
        sys.executable,
        "-m",
        "pytest",
        "-p",
        "no:scoring",
        "-p",
        "pytest_scoring.plugin",
        *args,
    ]


def kill_group(pid: int, sig: signal.Signals = signal.SIGKILL) -> None:
    """Signal a whole process group (a test may have started children of its own)."""
    with contextlib.suppress(ProcessLookupError, PermissionError):  # the group is already gone
        os.killpg(pid, sig)
