"""``run``'s progress, read from the probe's stream: a spinner on a terminal, lines elsewhere.

On a terminal one status line says how many tests are done out of those collected, how many
passed, failed, errored and have not run yet, the elapsed time and the test running now. When
the output is not a terminal (CI, a pipe) the same is printed as lines: when the tests are
collected, every :data:`LINE_INTERVAL` seconds, and once they are over.
"""

from __future__ import annotations

import time
from pathlib import Path
from types import TracebackType
from typing import Any
from typing import Final

from pytest_scoring.process.stream import ProbeState
from pytest_scoring.process.stream import Progress
from pytest_scoring.text import outcome_counts

#: Seconds between two progress lines when the output is not a terminal.
LINE_INTERVAL: Final = 10.0


def describe(progress: Progress, elapsed: float) -> str:
    """``3/10 tests (2 passed, 1 failed, 7 pending), 4 s`` (the count collected is unknown
    until collection ends)."""
    return f"{tests_done(progress)}, {elapsed:.0f} s"


def tests_done(progress: Progress) -> str:
    """``3/10 tests (2 passed, 1 failed, 7 pending)``: a test not run yet is pending (once
    the session is over, not run), never failed."""
    of = "" if progress.collected is None else f"/{progress.collected}"
    counts = {
        "passed": progress.passed,
        "failed": progress.failed,
        "error": progress.error,
        "not run" if progress.ended else "pending": progress.pending,
    }
    parts = outcome_counts(counts)
    return f"{progress.done}{of} tests" + (f" ({parts})" if parts else "")


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


def eta_text(seconds: float) -> str:
    """``about 40 s left``, ``about 3 min left``."""
    if seconds < 90:
        return f"about {max(seconds, 1):.0f} s left"
    return f"about {seconds / 60:.0f} min left"


class BatchDisplay:
    """Shows a batch's progress on a rich console: a bar with the count of repositories done,
    the repositories being scored with their tests, and the time left; plain lines when the
    output is not a terminal (one per repository done, and every :data:`LINE_INTERVAL`)."""

    def __init__(self, console: Any, total: int, kept: int):
        """:param total: the repositories this run scores; ``kept``: those it keeps."""
        self.console = console
        self.total = total
        self.kept = kept
        self.done = 0
        self.unscored = 0
        self.started = time.monotonic()
        self._running: dict[str, str] = {}
        self._progress: Any = None
        self._task: Any = None
        self._last_line = self.started

    def __enter__(self) -> BatchDisplay:
        if self.console.is_terminal:
            from rich.progress import BarColumn
            from rich.progress import MofNCompleteColumn
            from rich.progress import Progress
            from rich.progress import SpinnerColumn
            from rich.progress import TextColumn
            from rich.progress import TimeRemainingColumn

            self._progress = Progress(
                SpinnerColumn(),
                TextColumn("{task.description}"),
                BarColumn(),
                MofNCompleteColumn(),
                TimeRemainingColumn(),
                TextColumn("{task.fields[running]}", markup=False),
                console=self.console,
            )
            self._progress.__enter__()
            self._task = self._progress.add_task(self._counts(), total=self.total, running="")
        elif self.kept:
            self.say(f"pytest-scoring: {self.kept} repositories kept from an earlier run")
        return self

    def __exit__(
        self,
        kind: type[BaseException] | None,
        error: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        if self._progress is not None:
            self._progress.__exit__(kind, error, traceback)

    def _counts(self) -> str:
        parts = [f"{self.kept} kept"] if self.kept else []
        parts += [f"{self.unscored} N"] if self.unscored else []
        return "repositories" + (f" ({', '.join(parts)})" if parts else "")

    def running(self, name: str, progress: Progress | None, scoring: bool) -> None:
        """A repository's tests moved on (``progress`` None: they have not started)."""
        if progress is None:
            self._running[name] = "starting"
        else:
            self._running[name] = tests_done(progress) + (", scoring" if scoring else "")
        self._refresh()

    def finished(self, name: str, line: str, scored: bool) -> None:
        """A repository has its sample; ``line`` says what it scored."""
        self._running.pop(name, None)
        self.done += 1
        self.unscored += not scored
        self.say(f"pytest-scoring: [{self.done}/{self.total}] {line}")
        if self._progress is not None:
            self._progress.update(self._task, advance=1, description=self._counts())
        self._refresh()

    def _refresh(self) -> None:
        text = "; ".join(f"{name}: {state}" for name, state in self._running.items())
        if self._progress is not None:
            self._progress.update(self._task, running=text)
            return
        if time.monotonic() - self._last_line >= LINE_INTERVAL and self._running:
            self._last_line = time.monotonic()
            left = ""
            if self.done:
                per_repository = (time.monotonic() - self.started) / self.done
                left = f", {eta_text(per_repository * (self.total - self.done))}"
            self.say(f"pytest-scoring: {self.done}/{self.total} repositories{left}; {text}")

    def say(self, line: str) -> None:
        """Print a line now (above the bar on a terminal)."""
        self.console.print(line, highlight=False, markup=False, soft_wrap=True)
