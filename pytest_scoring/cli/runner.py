"""Backend of ``pytest-scoring run``: score a repository from outside (docs/cli.md).

pytest runs in the repository in a subprocess with the plugin, in its own process group. At
the wall-clock timeout the group gets SIGINT, so pytest stops, scores what ran and writes an
incomplete report; if it is still there after a grace period, the group is killed. The
reference rerun (``--reference``) gets a shorter timeout of its own so that its result (or the
reason it has none) still makes it into the report.
"""

from __future__ import annotations

import contextlib
import os
import queue
import re
import signal
import subprocess
import tempfile
import threading
import time
from collections.abc import Callable
from collections.abc import Iterator
from collections.abc import Sequence
from dataclasses import dataclass
from dataclasses import field
from pathlib import Path
from typing import IO
from typing import Any
from typing import Final

from pytest_scoring.errors import OptionError
from pytest_scoring.plugin.options import COMMAND_LINE_ONLY
from pytest_scoring.plugin.options import STEERING_SETTINGS
from pytest_scoring.plugin.options import split_config_argument
from pytest_scoring.process import kill_group
from pytest_scoring.process import pytest_command
from pytest_scoring.reference.child import TIMEOUT_ENV
from pytest_scoring.reference.child import reference_timeout
from pytest_scoring.report.markdown import GITHUB_SUMMARY_ENV
from pytest_scoring.report.result import SCAN_DIR_PREFIX
from pytest_scoring.text import number_text
from pytest_scoring.text import plural

#: Share of ``--timeout`` the reference rerun may take, leaving time to score and report.
REFERENCE_SHARE: Final = 0.8
#: Longest wait after SIGINT before the run's process group is killed.
MAX_GRACE: Final = 30.0
#: pytest's exit status for a usage error (bad option, bad configuration file).
PYTEST_USAGE_ERROR: Final = 4
OUTPUT_KEPT: Final = 100

_OUTCOME_CHARS: Final = re.compile(r"^(?:\S+\.py )?([.FEsxXR]+)\s*(?:\[\s*\d+%\])?$")
#: ``-v`` lines: ``path::test PASSED`` (or xdist's ``[gw0] [ 50%] PASSED path::test``), never
#: the short summary's ``FAILED path::test - reason``.
_VERBOSE_OUTCOME: Final = re.compile(
    r"^(?:\S+::\S+.* |\[gw\d+\] \[\s*\d+%\] )(PASSED|FAILED|ERROR|SKIPPED|XFAIL|XPASS)\b"
)
_COLLECTED: Final = re.compile(r"\bcollected (\d+) items?\b|\[(\d+) items?\]")


@dataclass
class RunRequest:
    """What ``pytest-scoring run`` was asked to do; paths are made absolute on creation."""

    repo: Path
    report_root: Path
    timeout: float
    reference: Path | None = None
    #: ``FILE`` or ``FILE#NAME`` (one fixture of a fixtures file).
    config: str | None = None
    selector: str | None = None
    fail_under: float | None = None
    pytest_args: Sequence[str] = ()
    #: ``SANDBOX=LOCAL`` pairs (``--path-map``), LOCAL relative to the repository.
    path_maps: Sequence[str] = ()
    #: ``--strict[=KINDS]`` (``""``: the default kinds), passed on as ``--score-strict``.
    strict: str | None = None
    #: ``--expected-tests``, as a file pytest reads (set by :meth:`expected_tests_file`).
    expected_file: Path | None = None

    def __post_init__(self) -> None:
        self.repo = _folder(self.repo, "REPO")
        self.report_root = self.report_root.absolute()
        if self.reference is not None:
            self.reference = _folder(self.reference, "--reference")
        if self.config is not None:
            self.config = _config_argument(self.config)
        if self.timeout <= 0:
            raise OptionError(f"--timeout: {self.timeout:g} is not a positive number of seconds")

    def arguments(self) -> list[str]:
        """The pytest arguments: the options as ``--score-*`` flags, then the user's."""
        ignored = [f"--override-ini={name}=" for name in STEERING_SETTINGS]
        args = [*ignored, COMMAND_LINE_ONLY, "--score", f"--score-report={self.report_root}"]
        if self.reference is not None:
            args.append(f"--score-reference={self.reference}")
        if self.config is not None:
            args.append(f"--score-config={self.config}")
        args += [f"--score-path-map={pair}" for pair in self.path_maps]
        if self.selector is not None:
            args.append(f"--score-selector={_absolute_file_argument(self.selector)}")
        if self.fail_under is not None:
            args.append(f"--score-fail-under={number_text(self.fail_under)}")
        if self.expected_file is not None:
            args.append(f"--score-expected-tests={self.expected_file}")
        if self.strict is not None:
            args.append(f"--score-strict={self.strict}" if self.strict else "--score-strict")
        return [*args, *self.pytest_args]

    @contextlib.contextmanager
    def expected_tests_file(self, source: str | None) -> Iterator[None]:
        """Resolve ``--expected-tests`` here, on the evaluator's side: a folder runs now (or
        comes from the cache), never inside the scored repository's pytest, which gets the
        set as a JSON file in a private folder for the run's duration."""
        if source is None:
            yield
            return
        from pytest_scoring.reference.expected import load_expected_tests
        from pytest_scoring.reference.expected import write_expected_file

        expected = load_expected_tests(Path.cwd() / source, "--expected-tests")
        with tempfile.TemporaryDirectory(prefix="pytest-scoring-run-") as private:
            self.expected_file = write_expected_file(expected, Path(private))
            try:
                yield
            finally:
                self.expected_file = None

    def environment(self) -> dict[str, str]:
        """The child's environment: the reference rerun must end well before the run does.

        GitHub's step summary file is left out: ``run`` writes the summary itself from the
        report, and the scored repository has no business writing there.
        """
        share = REFERENCE_SHARE * self.timeout
        environment = {**os.environ, TIMEOUT_ENV: number_text(min(reference_timeout(), share))}
        environment.pop(GITHUB_SUMMARY_ENV, None)
        return environment


def _folder(path: Path, what: str) -> Path:
    if not path.is_dir():
        raise OptionError(f"{what}: {path} is not a folder")
    return path.resolve()


def _config_argument(text: str) -> str:
    """``--config FILE[#NAME]`` with FILE made absolute (pytest runs elsewhere)."""
    path, entry = split_config_argument(text, Path.cwd())
    if not path.is_file():
        raise OptionError(f"--config: {path} is not a file")
    return str(path.absolute()) + ("" if entry is None else f"#{entry}")


def _absolute_file_argument(text: str) -> str:
    """``@FILE`` relative to where ``run`` was started (pytest runs elsewhere)."""
    return f"@{Path(text[1:]).absolute()}" if text.startswith("@") else text


@dataclass
class Progress:
    """What the run's output says so far."""

    started: float = field(default_factory=time.monotonic)
    collected: int | None = None
    done: int = 0
    #: The last lines of output, for a message when the run ends without a report.
    lines: list[str] = field(default_factory=list)
    _partial: str = ""

    def elapsed(self) -> float:
        return time.monotonic() - self.started

    def feed(self, text: str) -> None:
        """Take a chunk of pytest's output (progress characters arrive before their newline)."""
        *complete, self._partial = (self._partial + text).split("\n")
        for line in complete:
            self._count(line, final=True)
        self.lines = [*self.lines, *complete][-OUTPUT_KEPT:]

    def _count(self, line: str, final: bool) -> None:
        collected = _COLLECTED.search(line)
        if collected:
            self.collected = int(collected.group(1) or collected.group(2))
        elif _VERBOSE_OUTCOME.match(line):
            self.done += 1
        elif final and (match := _OUTCOME_CHARS.match(line.strip())):
            self.done += len(match.group(1))

    def tests_done(self) -> int:
        """Tests finished, counting the characters of the line pytest is still writing."""
        match = _OUTCOME_CHARS.match(self._partial.strip())
        return self.done + (len(match.group(1)) if match else 0)

    def describe(self) -> str:
        if self.collected is None:
            return f"{plural(self.tests_done(), 'test')}, {self.elapsed():.0f} s"
        done = min(self.tests_done(), self.collected)
        stage = ", scoring" if done == self.collected else ""
        return f"{done}/{plural(self.collected, 'test')}{stage}, {self.elapsed():.0f} s"


@dataclass
class RunResult:
    """How the pytest run ended and where its report is."""

    exit_code: int | None
    timed_out: bool
    report: Path | None
    progress: Progress

    def failure(self) -> str:
        """Why no report was written, with the end of pytest's output."""
        usage = [
            line.removeprefix("ERROR: ")
            for line in self.progress.lines
            if line.startswith("ERROR:")
        ]
        if self.exit_code == PYTEST_USAGE_ERROR and usage:
            return "\n".join(usage)
        tail = "\n".join(self.progress.lines[-20:])
        how = "timed out" if self.timed_out else f"ended with exit status {self.exit_code}"
        return f"pytest {how} without writing a report; its output ended with:\n{tail}"


def _reports(root: Path) -> set[Path]:
    return set(root.glob(f"{SCAN_DIR_PREFIX}*")) if root.is_dir() else set()


def _pump(stream: IO[bytes], chunks: queue.Queue[bytes]) -> None:
    """Forward the child's output in chunks (a reader thread: reads block)."""
    for chunk in iter(lambda: stream.read1(4096), b""):  # type: ignore[attr-defined]
        chunks.put(chunk)
    chunks.put(b"")


def _drain(chunks: queue.Queue[bytes], progress: Progress, wait: float) -> bool:
    """Feed what arrived within ``wait`` seconds; False once the output has ended."""
    try:
        chunk = chunks.get(timeout=wait)
    except queue.Empty:
        return True
    progress.feed(chunk.decode("utf-8", "replace"))
    return chunk != b""


def _stop(process: subprocess.Popen[bytes], timeout: float) -> None:
    """SIGINT first (pytest scores what ran), the group killed after a grace period."""
    kill_group(process.pid, signal.SIGINT)
    try:
        process.wait(timeout=min(MAX_GRACE, max(2.0, timeout / 4)))
    except subprocess.TimeoutExpired:
        kill_group(process.pid)


def _follow(
    process: subprocess.Popen[bytes],
    timeout: float,
    progress: Progress,
    on_progress: Callable[[Progress], Any],
) -> bool:
    """Read the run's output to its end, stopping the run at the timeout; True if it was."""
    assert process.stdout is not None
    chunks: queue.Queue[bytes] = queue.Queue()
    threading.Thread(target=_pump, args=(process.stdout, chunks), daemon=True).start()
    deadline, timed_out = progress.started + timeout, False
    while _drain(chunks, progress, wait=0.2):
        on_progress(progress)
        if process.poll() is not None:
            kill_group(process.pid)  # children the tests left running keep the output open
        if not timed_out and time.monotonic() > deadline:
            timed_out = True
            threading.Thread(target=_stop, args=(process, timeout), daemon=True).start()
    process.wait()
    return timed_out


def run_repository(
    request: RunRequest, on_progress: Callable[[Progress], Any] = lambda progress: None
) -> RunResult:
    """Run pytest with the plugin in ``request.repo`` and find the report it wrote."""
    before = _reports(request.report_root)
    progress = Progress()
    with subprocess.Popen(
        pytest_command(*request.arguments()),
        cwd=request.repo,
        env={**request.environment(), "PYTHONUNBUFFERED": "1"},
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        start_new_session=True,
    ) as process:
        timed_out = _follow(process, request.timeout, progress, on_progress)
    new = sorted(_reports(request.report_root) - before, key=lambda path: path.stat().st_mtime)
    return RunResult(process.returncode, timed_out, new[-1] if new else None, progress)


def percent_passing_in(scores_json: dict[str, Any]) -> float:
    """``percent_passing_tests`` recomputed from a report's test counts (for ``--fail-under``)."""
    counts = scores_json.get("tests", {}).get("counts", {})
    passed, total = counts.get("passed", 0), counts.get("total", 0)
    return round(100 * passed / total, 2) if total else 0
