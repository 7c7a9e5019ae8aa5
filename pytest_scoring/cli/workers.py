"""The worker processes of a batch: each scores one repository, as ``run`` scores one.

A worker is forked from a fork server that imported every module the evaluator uses, so it
starts at once, and with nothing of an earlier repository in it: one fresh process per
repository, whatever the one before did to its evaluator. It runs in a session of its own
(Ctrl-C on the terminal reaches the batch only, which passes it on, once per Ctrl-C, as ``run``
passes it to pytest), calls :func:`~pytest_scoring.cli.runner.run_repository` with the batch's
shared work, and answers over a pipe: the probe's progress while the tests run, then the
repository's sample, or why it has none.
"""

from __future__ import annotations

import contextlib
import multiprocessing
import os
import signal
import time
import traceback
from collections.abc import Callable
from dataclasses import dataclass
from dataclasses import field
from multiprocessing.connection import Connection
from multiprocessing.context import ForkServerContext
from typing import Any
from typing import Final

from pytest_scoring.cli.request import RunRequest
from pytest_scoring.cli.request import preloaded_modules
from pytest_scoring.cli.runner import BatchJob
from pytest_scoring.cli.runner import run_repository
from pytest_scoring.errors import ScoringError
from pytest_scoring.process.environment import adopt_captured
from pytest_scoring.process.stream import ProbeState
from pytest_scoring.process.stream import Progress
from pytest_scoring.report.samples import read_sample

#: Seconds a worker may run beyond twice ``--timeout`` before it is killed (copies, scoring).
WORKER_MARGIN: Final = 120.0
#: Seconds between two progress messages of a worker.
PROGRESS_INTERVAL: Final = 0.5


@dataclass(frozen=True)
class Job:
    """One repository of a batch, for a worker."""

    request: RunRequest
    batch: BatchJob
    #: The batch's own environment (the fork server's may be older): the worker takes it.
    environ: dict[str, str] = field(default_factory=lambda: dict(os.environ))


@dataclass(frozen=True)
class Answer:
    """What a worker said when it finished: the sample, or why there is none."""

    #: The repository's entry of ``samples[]`` (None: it has none).
    sample: dict[str, Any] | None
    #: What went wrong or was partial (``run``'s summary lines), or why there is no sample.
    notes: list[str] = field(default_factory=list)
    #: pytest's own output when it refused to run.
    pytest_error: str | None = None


def fork_server() -> ForkServerContext:
    """The context whose fork server preloads the evaluator's modules (started on first use)."""
    context = multiprocessing.get_context("forkserver")
    context.set_forkserver_preload(preloaded_modules())
    return context


class Worker:
    """A running worker process and what it said so far."""

    def __init__(self, context: ForkServerContext, job: Job):
        receiving, sending = context.Pipe(duplex=False)
        self.job = job
        self.process = context.Process(target=work, args=(job, sending), name="pytest-scoring")
        self.process.start()
        sending.close()
        self.connection = receiving
        self.started = time.monotonic()
        self.limit = self.started + 2 * job.request.timeout + WORKER_MARGIN
        #: The probe's progress of the repository's tests (None: not started yet).
        self.progress: Progress | None = None
        #: The tests are over and the repository is being scored.
        self.scoring = False
        self.answer: Answer | None = None

    def receive(self) -> None:
        """Take every message waiting on the pipe."""
        with contextlib.suppress(EOFError, OSError):
            while self.answer is None and self.connection.poll():
                kind, content = self.connection.recv()
                if kind == "progress":
                    self.progress, self.scoring = content
                else:
                    self.answer = content

    def finished(self) -> bool:
        """The process is gone (its answer, if any, read)."""
        if self.process.is_alive():
            return False
        self.receive()
        self.process.join()
        self.connection.close()
        return True

    def outcome(self) -> Answer:
        """The worker's answer; a worker that ended without one gives a reason."""
        if self.answer is not None:
            return self.answer
        code = self.process.exitcode
        how = f"killed by {signal.Signals(-code).name}" if code and code < 0 else f"exit {code}"
        return Answer(None, [f"the evaluator's worker ended without a result ({how})"])

    def past_limit(self) -> bool:
        return time.monotonic() > self.limit

    def interrupt(self) -> None:
        """Pass a Ctrl-C on (the first stops pytest, a second kills the tests)."""
        with contextlib.suppress(ProcessLookupError):
            os.kill(self.process.pid or 0, signal.SIGINT)

    def kill(self) -> None:
        """End the worker now; its supervisors then end the repository's processes."""
        self.answer = Answer(
            None, [f"the run went on past {self.limit - self.started:.0f} s and was stopped"]
        )
        self.process.kill()
        with contextlib.suppress(ProcessLookupError):  # anything it started in its session
            os.killpg(self.process.pid or 0, signal.SIGKILL)


def work(job: Job, connection: Connection) -> None:
    """A worker's life: score the repository, answer, exit."""
    os.setsid()
    _silence()
    os.environ.clear()
    os.environ.update(job.environ)
    adopt_captured(job.batch.shared.environment)
    os.chdir(job.request.invocation_dir)
    send = _sender(connection)
    said: list[str] = []
    try:
        result = run_repository(job.request, _progress_sender(send), _note(said), job.batch)
    except ScoringError as error:
        send("answer", Answer(None, [str(error)]))
    except KeyboardInterrupt:
        send("answer", Answer(None, ["interrupted before the tests ran"]))
    except Exception as error:  # never lose a repository to a bug: say what it was
        detail = traceback.format_exc(limit=-3)
        send("answer", Answer(None, [f"{type(error).__name__}: {error}", detail]))
    else:
        sample = read_sample(result.report) if result.report is not None else None
        notes = [*result.summary_lines(job.request.timeout), *said]
        if sample is None and not notes:
            notes = [result.evaluation.report_error or "no sample was written"]
        send("answer", Answer(sample, notes, result.pytest_error))
    finally:
        connection.close()


def _silence() -> None:
    """Nothing a worker prints may break the batch's display: its output goes nowhere."""
    null = os.open(os.devnull, os.O_WRONLY)
    for descriptor in (1, 2):
        os.dup2(null, descriptor)
    os.close(null)


def _note(notes: list[str]) -> Callable[[str], None]:
    """``say`` for :func:`run_repository`: its lines become the repository's notes."""
    return lambda line: notes.append(line.removeprefix("pytest-scoring: "))


def _sender(connection: Connection) -> Callable[[str, object], None]:
    def send(kind: str, content: object) -> None:
        with contextlib.suppress(OSError):  # the batch is gone: finish the repository anyway
            connection.send((kind, content))

    return send


def _progress_sender(
    send: Callable[[str, object], None],
) -> Callable[[ProbeState, bool], None]:
    """``on_progress`` for :func:`run_repository`: a message when something changed, at
    most every :data:`PROGRESS_INTERVAL` seconds, and always at the end of the tests."""
    last: list[Any] = [None, 0.0]

    def on_progress(state: ProbeState, done: bool) -> None:
        now = (state.progress(), done)
        if now != last[0] and (done or time.monotonic() - last[1] >= PROGRESS_INTERVAL):
            last[:] = [now, time.monotonic()]
            send("progress", now)

    return on_progress
