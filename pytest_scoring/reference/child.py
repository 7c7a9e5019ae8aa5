"""The reference rerun's child process: pytest in the reference copy, with a timeout.

pytest runs there in its own process group; at the timeout (or a cancel) the whole group is
killed, so nothing the copied tests started outlives the run.
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import threading
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from typing import Final

from pytest_scoring.errors import OptionError
from pytest_scoring.process import kill_group
from pytest_scoring.process import pytest_command
from pytest_scoring.scorers.score import cap_text

#: Environment variable giving the reference run's timeout in seconds (``run --timeout`` sets it).
TIMEOUT_ENV: Final = "PYTEST_SCORING_REFERENCE_TIMEOUT"
DEFAULT_TIMEOUT: Final = 600.0
#: How much of the reference run's output a score keeps (its end says what went wrong).
OUTPUT_TAIL: Final = 4_000


def reference_timeout(environ: dict[str, str] | None = None) -> float:
    """The reference run's timeout: ``$PYTEST_SCORING_REFERENCE_TIMEOUT`` or 600 seconds.

    :raises OptionError: when the variable is not a positive number.
    """
    text = (os.environ if environ is None else environ).get(TIMEOUT_ENV, "")
    if not text:
        return DEFAULT_TIMEOUT
    try:
        value = float(text)
    except ValueError:
        value = -1.0
    if not 0 < value < float("inf"):
        raise OptionError(f"{TIMEOUT_ENV}={text!r}: expected a positive number of seconds")
    return value


@dataclass
class ChildRun:
    """How the pytest process in the reference copy ended."""

    exit_code: int | None
    timed_out: bool
    duration: float
    #: The tally it wrote (``counts``, ``tests``, ``collected``), or None when it wrote none.
    tally: dict[str, Any] | None
    #: The end of its output.
    output: str

    def failure(self, timeout: float) -> str | None:
        """Why the run gave no usable result, or None when it did."""
        if self.timed_out:
            return f"the reference run timed out after {timeout:g} s and was killed"
        if self.tally is not None:
            return None
        if self.exit_code is not None and self.exit_code < 0:
            name = signal.Signals(-self.exit_code).name
            return f"the reference run was killed by {name} before it finished"
        return f"the reference run ended (exit status {self.exit_code}) without results"


def _read_tally(path: Path) -> dict[str, Any] | None:
    """The child's tally, or None when it is missing or not the shape our plugin writes.

    The copied test files run in the child, so a hostile ``conftest.py`` may overwrite it.
    """
    try:
        content = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    if not isinstance(content, dict) or not _is_counts(content.get("counts")):
        return None
    collected = content.get("collected")
    if not isinstance(collected, list) or not all(isinstance(item, str) for item in collected):
        return None
    return content


def _is_counts(counts: Any) -> bool:
    return isinstance(counts, dict) and all(
        isinstance(value, int) and not isinstance(value, bool) for value in counts.values()
    )


def _tail(path: Path) -> str:
    try:
        text = path.read_bytes()[-OUTPUT_TAIL:].decode("utf-8", "replace")
    except OSError:
        return ""
    return cap_text(text, OUTPUT_TAIL)


def _wait(process: subprocess.Popen[bytes], timeout: float, cancel: threading.Event) -> bool:
    """Wait for the run to end by itself (True), or until the timeout or a cancel (False)."""
    deadline = time.monotonic() + timeout
    while process.poll() is None:
        remaining = deadline - time.monotonic()
        if remaining <= 0 or cancel.is_set():
            return False
        with contextlib.suppress(subprocess.TimeoutExpired):
            process.wait(timeout=min(0.2, remaining))
    return True


def run_child(
    cwd: Path,
    workdir: Path,
    extra_args: Sequence[str],
    timeout: float,
    cancel: threading.Event | None = None,
) -> ChildRun:
    """Run pytest in ``cwd`` in a new process group; kill the group at ``timeout`` seconds.

    :param cancel: set it to kill the run at once (the session was interrupted).
    """
    tally_file, log_file = workdir / "tally.json", workdir / "output.txt"
    started = time.monotonic()
    with log_file.open("wb") as log:
        process = subprocess.Popen(
            pytest_command(f"--score-tally-output={tally_file}", *extra_args),
            cwd=cwd,
            stdin=subprocess.DEVNULL,
            stdout=log,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
        try:
            timed_out = not _wait(process, timeout, cancel or threading.Event())
        finally:
            kill_group(process.pid)
            process.wait()
    return ChildRun(
        exit_code=None if timed_out else process.returncode,
        timed_out=timed_out,
        duration=round(time.monotonic() - started, 3),
        tally=None if timed_out else _read_tally(tally_file),
        output=_tail(log_file),
    )
