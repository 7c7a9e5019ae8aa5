"""The reference rerun's child: pytest in the reference copy, supervised, with a timeout.

It runs like every child of the evaluator (docs/security.md): through the supervisor, which
kills everything the copied tests started once it ends, with the launcher and the probe, whose
stream gives the outcomes and collected ids. The child writes no file that the evaluator
reads back; a stream its witnesses show was tampered with gives no result.
"""

from __future__ import annotations

import os
import threading
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from typing import Final

from pytest_scoring.core.score import cap_text
from pytest_scoring.errors import OptionError
from pytest_scoring.process.children import ChildRunner
from pytest_scoring.process.children import read_tail
from pytest_scoring.process.witness import witness_signals

#: Environment variable giving the reference run's timeout in seconds (``run --timeout`` caps it).
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
    #: Its outcomes (``counts``, ``tests``, ``collected``), or None when its session did not end.
    tally: dict[str, Any] | None
    #: The end of its output.
    output: str
    #: The signal that killed it, or why it could not start.
    signal: str | None = None
    error: str | None = None
    #: What its stream or exit show was done to them (``stream_forged``, ``exit_mismatch``).
    tampered: str | None = None

    def failure(self, timeout: float, what: str = "the reference run") -> str | None:
        """Why the run gave no usable result, or None when it did.

        :param what: how the messages name the run.
        """
        if self.timed_out:
            return f"{what} timed out after {timeout:g} s and was killed"
        if self.error is not None:
            return f"{what} could not start: {self.error}"
        if self.tampered is not None:
            return f"{what} gave no result that can be trusted: {self.tampered}"
        if self.tally is not None:
            return None
        if self.signal is not None:
            return f"{what} was killed by {self.signal} before it finished"
        return f"{what} ended (exit status {self.exit_code}) without results"


def run_child(
    children: ChildRunner,
    cwd: Path,
    args: Sequence[str],
    timeout: float,
    deterministic: bool = False,
    cancel: threading.Event | None = None,
) -> ChildRun:
    """Run pytest in ``cwd``; at ``timeout`` seconds its whole tree is killed.

    :param cancel: set it to kill the run at once (the session was interrupted).
    """
    child = children.start_pytest(cwd, args, timeout, deterministic=deterministic, grace=0)
    ended = child.wait(cancel=cancel)
    state = child.state
    tampered = "; ".join(s["detail"] for s in witness_signals(state, child.ending(ended)))
    usable = state.finished_session() and not ended.timed_out and not tampered
    return ChildRun(
        exit_code=ended.exit_code,
        timed_out=ended.timed_out,
        duration=ended.duration,
        tally=state.to_json() if usable else None,
        output=cap_text(read_tail(child.log, OUTPUT_TAIL), OUTPUT_TAIL),
        signal=ended.signal,
        error=ended.error,
        tampered=tampered or None,
    )
