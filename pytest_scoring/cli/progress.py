"""``run``'s progress, read from the probe's stream: a spinner on a terminal, lines elsewhere.

On a terminal one status line says how many tests are done out of those collected, how many
failed, the elapsed time and the test running now. When the output is not a terminal (CI, a
pipe) the same is printed as lines: when the tests are collected, every
:data:`LINE_INTERVAL` seconds, and once they are over.
"""

from __future__ import annotations

import time
from pathlib import Path
from types import TracebackType
from typing import Any
from typing import Final

from pytest_scoring.process.stream import ProbeState
from pytest_scoring.process.stream import Progress

#: Seconds between two progress lines when the output is not a terminal.
LINE_INTERVAL: Final = 10.0


def describe(progress: Progress, elapsed: float) -> str:
    """``3/10 tests (1 failed), 4 s`` (the count collected is unknown until collection ends)."""
    of = "" if progress.collected is None else f"/{progress.collected}"
    failed = f" ({progress.failed} failed)" if progress.failed else ""
    return f"{progress.done}{of} tests{failed}, {elapsed:.0f} s"


class ProgressDisplay:
    """Shows the progress of one run on a rich console."""

    def __init__(self, console: Any, repo: Path):
        self.console = console
        self.repo = repo
        self.started = time.monotonic()
        self._status: Any = None
        self._collected_said = False
        self._last_line = self.started

    def __enter__(self) -> ProgressDisplay:
        if self.console.is_terminal:
            self._status = self.console.status(f"pytest in {self.repo}")
            self._status.__enter__()
        return self

    def __exit__(
        self,
        kind: type[BaseException] | None,
        error: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        if self._status is not None:
            self._status.__exit__(kind, error, traceback)

    def update(self, state: ProbeState, done: bool) -> None:
        """Take the probe's state (``done``: the tests are over)."""
        progress = state.progress()
        elapsed = time.monotonic() - self.started
        text = describe(progress, elapsed)
        if self._status is not None:
            current = f" — {progress.current}" if progress.current and not done else ""
            stage = ", scoring" if done else ""
            self._status.update(f"pytest in {self.repo}: {text}{stage}{current}")
            return
        if progress.collected is not None and not self._collected_said:
            self._collected_said = True
            self.say(f"pytest-scoring: collected {progress.collected} tests")
        if done:
            self.say(f"pytest-scoring: {text}; scoring")
        elif time.monotonic() - self._last_line >= LINE_INTERVAL:
            self._last_line = time.monotonic()
            self.say(f"pytest-scoring: {text}")

    def say(self, line: str) -> None:
        """Print a line now (above the spinner on a terminal)."""
        self.console.print(line, highlight=False, markup=False, soft_wrap=True)
