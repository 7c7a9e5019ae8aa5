"""Witnesses outside the child: how a pytest child really ended, against what its stream says.

The probe's stream is authenticated (:mod:`pytest_scoring.kit.channel`): code in the child
cannot add a line to it, but it can still cut it short, take lines out of it, or end the
process around pytest. The supervisor sees what the child cannot change: its real exit
status, whether a signal killed it, whether the evaluator's own deadline or Ctrl-C ended it.
From both, two signals (docs/security.md#the-probes-channel):

* ``stream_forged``: lines that did not verify, a gap or a repeat in the chain, lines after
  the end record, an end record counting other phases than arrived; or no end record from a
  child that exited on its own after pytest had started its session (unless an installed
  plugin says it ended the process: pytest-timeout's ``thread`` method);
* ``exit_mismatch``: exit status 1 while every test passed (unless an installed plugin says
  why: pytest-cov's ``--cov-fail-under``), exit status 0 without the end record, or a session
  that ended normally while collected tests reported no phase.

Neither is raised for what the evaluator caused: a child its deadline or Ctrl-C ended gives
no tampering signal (the run is incomplete, and ``early_end`` says so). When pytest never
started its session on the repository's configuration, :func:`not_started` says why, in
pytest's own first error line.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import TYPE_CHECKING
from typing import Final

from pytest_scoring.core.signals import Signal
from pytest_scoring.core.signals import make_signal

if TYPE_CHECKING:  # types only: an in-process session loads neither the stream nor the supervisor
    from pytest_scoring.process.stream import ProbeState
    from pytest_scoring.process.supervisor import ChildExit

#: Installed plugins that make pytest exit 1 with every test passed, and the line each
#: writes to pytest's output when it does (registered name, pattern).
EXIT_EXPLANATIONS: Final = (
    ("pytest_cov", re.compile(r"Required test coverage of \S+ not reached")),
)
#: Installed plugins that end the test process on their own, without pytest's end of the
#: session, and the line each writes first: pytest-timeout's ``thread`` method dumps the
#: stacks and exits with status 1 (registered name, pattern).
END_EXPLANATIONS: Final = (("timeout", re.compile(r"\+{3,} Timeout \+{3,}")),)
#: Characters of pytest's output a reason quotes.
REASON_CHARS: Final = 500
_ARGPARSE_ERROR: Final = re.compile(r"^\S+: error: ")


@dataclass(frozen=True)
class ChildEnding:
    """How a pytest child ended, as the evaluator saw it from outside."""

    #: Its exit status; None when a signal killed it or it never started.
    exit_code: int | None
    #: The evaluator ended it: its deadline, its Ctrl-C, its cancelling the run.
    by_evaluator: bool = False
    #: The end of pytest's output (its terminal), for explanations.
    output: str = ""

    @classmethod
    def of(cls, ended: ChildExit, output: str) -> ChildEnding:
        """How a supervised child ended (:class:`ChildExit`), with the end of its output."""
        killed = ended.signal is not None or ended.error is not None
        return cls(
            exit_code=None if killed else ended.exit_code,
            by_evaluator=ended.timed_out or ended.interrupted,
            output=output,
        )

    @property
    def exited(self) -> bool:
        """The child exited on its own, with a status."""
        return self.exit_code is not None and not self.by_evaluator


@dataclass(frozen=True)
class NotStarted:
    """Why pytest never started a session: the test scores are ``"N"`` with this reason."""

    reason: str
    #: ``metadata.unscored``: the repository's configuration, or the evaluator's side.
    unscored: str = "repository"


def black_box_refusal(refused: dict[str, str], option: str = "--black-box") -> NotStarted:
    """The test scores' reason when ``option`` (``run --black-box``, the Inspect scorers'
    ``black_box``) refused a file of the repository."""
    return NotStarted(
        f"{option}: the test process tried to load {refused['file']} of the repository "
        f"({refused['event']}); with {option} its code runs only in subprocesses the tests "
        "start",
        unscored="repository",
    )


def witness_signals(state: ProbeState, ending: ChildEnding) -> list[Signal]:
    """``stream_forged`` and ``exit_mismatch``, each once when it applies."""
    signals = []
    forged = _stream_problems(state, ending)
    if forged:
        signals.append(make_signal("stream_forged", "; ".join(forged)))
    mismatch = _exit_mismatch(state, ending)
    if mismatch is not None:
        signals.append(make_signal("exit_mismatch", mismatch))
    return signals


def _stream_problems(state: ProbeState, ending: ChildEnding) -> list[str]:
    problems = state.stream_problems(cut_expected=not ending.exited)
    ended_by_a_plugin = ending.exit_code != 0 and _explained(state, ending, END_EXPLANATIONS)
    if state.end is None and state.start is not None and ending.exited and not ended_by_a_plugin:
        problems.append(f"no end record (pytest exited with status {ending.exit_code})")
    return problems


def _exit_mismatch(state: ProbeState, ending: ChildEnding) -> str | None:
    """Why the exit status contradicts the stream, or None."""
    if not ending.exited:
        return None
    status = ending.exit_code
    if status == 0 and state.end is None:
        return "pytest exited with status 0 without the probe's end record"
    stopped = state.interrupted() or bool(state.stop()[0])
    if state.start is None or stopped:
        return None  # never started (not_started says why), or early_end says why it stopped
    tally = state.tally
    not_run = tally.not_run()
    if state.end is not None and not_run:
        collected = len(tally.collected)
        return (
            f"pytest ended its session (exit status {state.exit_status()}), but {len(not_run)} "
            f"of the {collected} collected test(s) reported no phase"
        )
    all_passed = not not_run and not any(
        record["outcome"] in ("failed", "error") for record in tally.records()
    )
    if status == 1 and all_passed and not _explained(state, ending, EXIT_EXPLANATIONS):
        return "pytest exited with status 1, but no test failed or errored"
    return None


def _explained(
    state: ProbeState, ending: ChildEnding, explanations: tuple[tuple[str, re.Pattern[str]], ...]
) -> bool:
    """An installed plugin of ``explanations`` (loaded by its distribution's entry point,
    not a conftest's object registered under its name) says in pytest's output why."""
    plugins = (state.start or {}).get("installed") or []
    return any(
        name in plugins and pattern.search(ending.output) is not None
        for name, pattern in explanations
    )


def not_started(state: ProbeState, ending: ChildEnding) -> NotStarted | None:
    """Why pytest never started its session, when it exited with an error before it did."""
    if state.start is not None or not ending.exited or ending.exit_code == 0:
        return None
    from pytest_scoring.kit.launch import NO_CHANNEL  # the launcher's own statuses
    from pytest_scoring.kit.launch import NO_PYTEST

    if ending.exit_code in (NO_PYTEST, NO_CHANNEL):
        return NotStarted(first_error_line(ending.output), unscored="infrastructure")
    line = first_error_line(ending.output) or f"pytest exited with status {ending.exit_code}"
    return NotStarted(f"pytest could not start on the repository's configuration: {line}")


#: pytest's exit status after an INTERNALERROR (``pytest.ExitCode.INTERNAL_ERROR``).
INTERNAL_ERROR: Final = 3
#: What pytest puts before every line of an INTERNALERROR's traceback.
INTERNAL_ERROR_PREFIX: Final = "INTERNALERROR>"


def internal_error(exception: str | None) -> NotStarted:
    """Why the test scores are ``"N"`` when pytest ended its session with an INTERNALERROR:
    the same words by every route (docs/scoring.md#broken-sessions). What the scored code
    caused: ``unscored: "repository"``.

    :param exception: the error's last line (``SystemError: boom``), when known.
    """
    said = f" ({exception[:REASON_CHARS]})" if exception else ""
    return NotStarted(
        f"pytest stopped its session with an INTERNALERROR{said}: the session did not complete",
        unscored="repository",
    )


def internal_error_line(output: str) -> str | None:
    """The last ``INTERNALERROR>`` line of pytest's output (the exception), or None."""
    found = None
    for line in output.splitlines():
        if line.startswith(INTERNAL_ERROR_PREFIX) and line[len(INTERNAL_ERROR_PREFIX) :].strip():
            found = line[len(INTERNAL_ERROR_PREFIX) :].strip()
    return found


def first_error_line(output: str) -> str:
    """pytest's own first error line in its output: a usage error (``pytest: error: …``),
    an ``ERROR: …`` line, the exception of a conftest that failed to import (``E   …``), or
    else the last line (a traceback ends with its exception)."""
    lines = [line.strip() for line in output.splitlines() if line.strip()]
    for line in lines:
        if _ARGPARSE_ERROR.match(line) or (
            line.startswith("ERROR: ") and not line.startswith("ERROR: usage:")
        ):
            return line[:REASON_CHARS]
    failed = [line for line in lines if line.startswith("E ")]
    if failed:
        return f"{lines[0]} {failed[0][1:].strip()}"[:REASON_CHARS]
    return lines[-1][:REASON_CHARS] if lines else ""
