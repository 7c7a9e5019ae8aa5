"""Helpers for tests that check a killed process is really gone."""

from __future__ import annotations

import time
from pathlib import Path


def running(pid: int) -> bool:
    """Whether a process runs (a killed one may linger as a zombie until reaped)."""
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except OSError:
        return False
    return state != "Z"


def dies_within(pid: int, seconds: float = 5) -> bool:
    """A killed process disappears a moment after the signal is sent, not at once."""
    deadline = time.monotonic() + seconds
    while running(pid):
        if time.monotonic() > deadline:
            return False
        time.sleep(0.05)
    return True
