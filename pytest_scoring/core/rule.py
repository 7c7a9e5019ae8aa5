"""The outcome rule: one test's reported phases, attempts and subtests -> its final outcome.

The same rule on every route (docs/scoring.md), applied by :class:`TestState` as the tally
(:mod:`.outcomes`) feeds it phase by phase:

* a setup error makes the test an ``error``;
* otherwise the call's outcome counts, made ``failed`` by any failed subtest (a skipped
  subtest never makes the test skipped);
* a teardown error turns any outcome but ``failed`` into ``error``;
* a rerun test counts with its last attempt;
* tests that share one id (an ``id_collision``) count with the worst outcome any reported.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any
from typing import Final
from typing import Literal

from pytest_scoring.core.score import cap_text

Outcome = Literal["passed", "failed", "error", "skipped", "xfailed", "xpassed"]
OUTCOMES: tuple[Outcome, ...] = ("passed", "failed", "error", "skipped", "xfailed", "xpassed")
#: What an expected set may ask of a test (docs/scoring.md#expected-tests).
ExpectedOutcome = Literal["passed", "skipped", "xfailed"]
EXPECTED_OUTCOMES: tuple[ExpectedOutcome, ...] = ("passed", "skipped", "xfailed")
#: Characters kept of a test's message: every test of a large suite may fail, and each
#: message lands in ``scores.json`` and the report's page.
MESSAGE_CAP: Final = 1000


def merged(previous: Outcome | None, entry: Outcome) -> Outcome:
    """One test's outcome from two JUnit entries with its id, in file order.

    pytest writes a call failure followed by a teardown error as two ``<testcase>`` elements,
    and pytest-rerunfailures one per attempt (the failed ones empty): a failure anywhere
    stays, an error turns the rest into an error (as a teardown error does), and otherwise
    the later attempt counts.
    """
    if previous is None:
        return entry
    if "failed" in (previous, entry):
        return "failed"
    if "error" in (previous, entry):
        return "error"
    return entry


@dataclass(slots=True)
class TestState:
    """One test's latest attempt, phase by phase; :meth:`final` applies the outcome rule.

    Built once per test of the session and kept to its end: containers most tests never
    fill stay None until used (issue 17).
    """

    #: The outcome setup decided on its own: ``error``, ``skipped`` or ``xfailed``.
    setup: Outcome | None = None
    call: Outcome | None = None
    teardown_failed: bool = False
    #: Subtests by outcome, once the test has one.
    subtests: dict[str, int] | None = None
    duration: float = 0.0
    user_properties: Sequence[list[Any]] = ()
    #: Why each phase did not pass (``setup``, ``call``, ``subtest``: the first failed one,
    #: ``teardown``); the final outcome's own reason becomes the test's message.
    messages: dict[str, str] | None = None
    #: An outcome set directly (JUnit XML), bypassing the phases.
    direct: Outcome | None = None
    setup_seen: bool = False
    #: Its teardown was reported: the attempt is over.
    finished: bool = False
    #: pytest collected several tests with this id (an ``id_collision``): every phase keeps
    #: the worst outcome any of them reported, whatever order their reports came in.
    shared: bool = False

    def starts_anew(self, when: str) -> bool:
        """Whether a setup or subtest report opens another attempt (pytest-rerunfailures).

        An attempt opens with its setup report, or with a subtest's report: rerunfailures
        logs an attempt's phase reports only once it is over, while subtests report the
        moment they finish, so they arrive before that attempt's setup.
        """
        return self.finished or (when == "setup" and self.setup_seen)

    def count_subtest(self, outcome: str, longrepr: str | None) -> None:
        subtests = self.subtests = self.subtests or {}
        subtests[outcome] = subtests.get(outcome, 0) + 1
        if outcome == "failed" and longrepr is not None:
            self.note("subtest", longrepr, first=True)

    def note(self, phase: str, message: str, first: bool = False) -> None:
        """Keep why ``phase`` did not pass (``first``: unless a message is kept already)."""
        messages = self.messages = self.messages or {}
        if not (first and phase in messages):
            messages[phase] = message

    def final(self) -> Outcome | None:
        """The test's outcome, or None while it has none (it never finished a phase that says)."""
        return self._decided()[0]

    def message(self) -> str | None:
        """Why the test did not pass: the text of the phase that decided its outcome."""
        outcome, phase = self._decided()
        if outcome in SILENT or self.messages is None:
            return None
        return self.messages.get(phase)

    def _decided(self) -> tuple[Outcome | None, str]:
        """The outcome rule: the final outcome and the phase that decided it."""
        if self.direct is not None:
            return self.direct, "direct"
        if self.setup == "error":
            return "error", "setup"
        outcome, phase = (self.setup, "setup") if self.setup else (self.call, "call")
        if self.shared and self.setup and worse(self.call, self.setup) != self.setup:
            outcome, phase = self.call, "call"
        failed_subtest = self.subtests is not None and self.subtests.get("failed")
        if failed_subtest and outcome is not None and outcome != "failed":
            outcome, phase = "failed", "subtest"
        if self.teardown_failed and outcome != "failed":
            return "error", "teardown"
        return outcome, phase


#: How bad each outcome is, for tests that share one id: the worst counts.
_BADNESS: Final[dict[Outcome | None, int]] = {
    None: -1,
    "passed": 0,
    "xpassed": 1,
    "xfailed": 2,
    "skipped": 3,
    "failed": 4,
    "error": 5,
}


def worse(first: Outcome | None, second: Outcome | None) -> Outcome | None:
    """The worse of two outcomes (None: nothing reported)."""
    return first if _BADNESS[first] >= _BADNESS[second] else second


#: Phase outcomes that need no message (most phases of most sessions).
SILENT: Final = frozenset((None, "passed", "xpassed"))


def phase_message(
    outcome: Outcome | None, wasxfail: str | None, longrepr: str | None
) -> str | None:
    """Why a phase did not pass: its text, or for an xfail its reason."""
    if outcome in SILENT:
        return None
    if outcome == "xfailed" and wasxfail:
        return cap_text(wasxfail, MESSAGE_CAP)
    return longrepr or None


def phase_outcome(when: str, outcome: str, xfail: bool) -> Outcome | None:
    """The outcome one phase reports on its own, or None when it says nothing (a pass of
    setup or teardown)."""
    if outcome == "skipped":
        return "xfailed" if xfail else "skipped"
    if when == "call":
        if outcome == "passed":
            return "xpassed" if xfail else "passed"
        return "failed"
    return "error" if outcome == "failed" else None


def judged(observed: Outcome | None, wanted: ExpectedOutcome) -> Outcome | Literal["missing"]:
    """How an expected test counts (docs/scoring.md#expected-tests).

    ``passed``/``xpassed`` pass; a skip or xfail the source had too is neutral (counted under
    that name, outside ``total``); ``error`` stays an error; everything else fails.
    """
    if observed is None:
        return "missing"
    if observed in ("passed", "xpassed"):
        return "passed"
    if observed in ("skipped", "xfailed") and observed == wanted:
        return observed
    return "error" if observed == "error" else "failed"
