"""Tally test outcomes from pytest's own reports, one final outcome per test id (docs/scoring.md).

Pure bookkeeping over one test phase at a time, whatever the route: the plugin reads
pytest's ``TestReport`` objects (on the controller under pytest-xdist, where workers' reports
are replayed), the probe of a child run streams :class:`PhaseRecord` JSON lines, and the CLI
feeds outcomes read from JUnit XML. Each test's outcome follows the one rule of
:mod:`pytest_scoring.core.rule`.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable
from collections.abc import Iterable
from collections.abc import Mapping
from collections.abc import Sequence
from dataclasses import dataclass
from dataclasses import field
from typing import Any
from typing import Literal
from typing import NotRequired
from typing import Protocol
from typing import TypedDict

from pytest_scoring.core.determinism import DEFAULT_FLAKY
from pytest_scoring.core.determinism import FlakyRule
from pytest_scoring.core.determinism import flaky_outcome
from pytest_scoring.core.determinism import is_flaky
from pytest_scoring.core.rule import MESSAGE_CAP
from pytest_scoring.core.rule import OUTCOMES
from pytest_scoring.core.rule import SILENT
from pytest_scoring.core.rule import ExpectedOutcome
from pytest_scoring.core.rule import Outcome
from pytest_scoring.core.rule import TestState
from pytest_scoring.core.rule import judged
from pytest_scoring.core.rule import phase_message
from pytest_scoring.core.rule import phase_outcome
from pytest_scoring.core.rule import worse
from pytest_scoring.core.score import cap_text
from pytest_scoring.text import tests_text


class TestRecord(TypedDict):
    """One test's final outcome, as stored in ``scores.json`` under ``tests.tests``."""

    nodeid: str
    outcome: Outcome
    duration: float
    user_properties: list[list[Any]]
    #: Why it failed, errored, was skipped or xfailed (capped); absent for a passing test.
    message: NotRequired[str]
    #: ``{"passed": n, "failed": n, "skipped": n}`` when the test had subtests.
    subtests: NotRequired[dict[str, int]]
    #: The outcome the expected set asked for, when there is one and it lists the test.
    expected: NotRequired[ExpectedOutcome]
    #: Every attempt's outcome, the session's first, when the test was rerun (``--retries``).
    attempts: NotRequired[list[Outcome]]


class PhaseRecord(TypedDict, total=False):
    """One finished phase of one test, as every route reports it (JSON-safe)."""

    nodeid: str
    #: ``setup``, ``call`` or ``teardown``.
    when: str
    #: pytest's phase outcome: ``passed``, ``failed``, ``skipped`` (or ``rerun``).
    outcome: str
    #: The xfail reason when the phase was an expected failure (``wasxfail``), else absent.
    wasxfail: str
    duration: float
    user_properties: list[list[Any]]
    #: A subtest's context (``msg``, ``kwargs``) when this report is a subtest's.
    subtest: dict[str, Any]
    #: The failure's text, capped: pytest's crash line (``AssertionError: assert 1 == 2``
    #: with its explanation) rather than the whole traceback, or a skip's reason.
    longrepr: str


class Counts(TypedDict):
    """``tests.counts``: how many tests counted how; ``total = passed+failed+error+missing``."""

    passed: int
    failed: int
    error: int
    skipped: int
    xfailed: int
    xpassed: int
    #: Expected tests of which no report arrived (only with an expected set).
    missing: int
    #: Tests outside the expected set: listed, not counted (only with an expected set).
    extra: int
    #: Tests collected but never run (the session ended first); counted as failed, or as
    #: missing when an expected set lists them.
    not_run: int
    total: int
    #: Flaky tests left out of ``total`` (``--flaky exclude``; only after reruns).
    flaky: NotRequired[int]


class RunReport(Protocol):
    """What we read of a pytest ``TestReport`` (also satisfied by xdist's replayed ones)."""

    @property
    def nodeid(self) -> str: ...
    @property
    def when(self) -> str | None: ...
    @property
    def outcome(self) -> str: ...
    @property
    def duration(self) -> float: ...
    @property
    def user_properties(self) -> list[tuple[str, object]]: ...
    @property
    def longrepr(self) -> object: ...


def _finished(state: TestState) -> bool:
    """The test's attempt is over: its teardown reported, it errored in setup, or its outcome
    was given whole (JUnit)."""
    return state.finished or state.direct is not None or state.setup == "error"


def short_longrepr(longrepr: object) -> str | None:
    """The short text of a pytest ``longrepr``, capped: for a failure its crash line, for a
    skip (``(path, line, reason)``) its reason."""
    crash = getattr(longrepr, "reprcrash", None)
    if crash is not None and getattr(crash, "message", None):
        text = str(crash.message)
    elif isinstance(longrepr, tuple) and len(longrepr) == 3:
        text = str(longrepr[2])
    else:
        text = "" if longrepr is None else str(longrepr)
    return cap_text(text, MESSAGE_CAP) if text else None


def subtest_context(report: object) -> dict[str, Any] | None:
    """``{"msg", "kwargs"}`` of a subtest's report, or None for a test's own report.

    pytest 9's built-in subtests (``subtests`` fixture and unittest's ``subTest``) and the
    pytest-subtests plugin both give their reports a ``context`` with ``msg`` and ``kwargs``;
    both serialize it for pytest-xdist, so the controller's replayed report has it too.
    """
    context = getattr(report, "context", None)
    if context is None or not hasattr(context, "msg") or not hasattr(context, "kwargs"):
        return None
    msg = context.msg
    kwargs = dict(context.kwargs or {})
    return {
        "msg": msg if msg is None else str(msg),
        "kwargs": {str(key): _json_scalar(value) for key, value in kwargs.items()},
    }


def _json_scalar(value: object) -> object:
    return value if isinstance(value, str | int | float | bool | None) else repr(value)


class CollectionReport(Protocol):
    @property
    def nodeid(self) -> str: ...
    @property
    def outcome(self) -> str: ...
    @property
    def longrepr(self) -> object: ...


#: One phase report as the tally keeps it until it is folded in: ``_fold``'s arguments.
_Phase = tuple[str, str, str, float, Sequence[list[Any]], str | None, str | None, bool]


@dataclass
class OutcomeTally:
    """The final outcome of every test id seen in a session (the rule: docs/scoring.md).

    With an expected set (:attr:`expected`), :meth:`counts` counts the set's tests only;
    every other test is ``extra``.
    """

    #: Every test's state, by id (read through :attr:`tests`).
    _tests: dict[str, TestState] = field(default_factory=dict, init=False, repr=False)
    #: Test ids pytest collected (the controller learns them from xdist's workers).
    collected: set[str] = field(default_factory=set)
    #: Test ids pytest collected more than once in one collection, and how many times: two
    #: different tests whose ids pytest writes alike (``tests\test_a.py`` and
    #: ``tests/test_a.py``), never attempts of one test (docs/scoring.md#integrity).
    collided: dict[str, int] = field(default_factory=dict)
    #: The expected set, ``{test id: expected outcome}``, or None to count every test.
    expected: Mapping[str, ExpectedOutcome] | None = None
    #: What the report says about the set's source (``{"source", "tests", "dropped"}``).
    expected_source: dict[str, Any] | None = None
    #: Every attempt's outcome of each test rerun (``--retries``; the session's first), by id.
    attempts: dict[str, list[Outcome]] = field(default_factory=dict)
    #: How a test whose attempts differ counts (``--flaky``).
    flaky_rule: FlakyRule = DEFAULT_FLAKY
    #: The session broke off (an INTERNALERROR): a test whose teardown never reported did
    #: not finish and counts as not run, whichever hook saw its last phase first.
    broken: bool = False
    #: Put before every id: the rootdir's path relative to the repository root (``"sub/"``),
    #: so that ids do not move when a repository moves pytest's rootdir with an ini file.
    id_prefix: str = ""
    #: Records folded in so far: with the sizes of :attr:`tests` and :attr:`collected` and
    #: the expected set, what the answers in :attr:`_memo` were computed for.
    _changes: int = field(default=0, init=False, repr=False)
    #: Phase reports read but not yet folded in (see :meth:`record_test`).
    _pending: list[_Phase] = field(default_factory=list, init=False, repr=False)
    _memo: dict[str, Any] = field(default_factory=dict, init=False, repr=False)
    _memo_state: tuple[int, ...] = field(default=(), init=False, repr=False)

    @property
    def tests(self) -> dict[str, TestState]:
        """Every test's state, by id, in the order first seen."""
        self._fold_pending()
        return self._tests

    def record_test(self, report: RunReport) -> None:
        """Read one pytest phase report (a subtest's too); it is folded into its test's
        outcome when the tally is next asked anything.

        This runs for every phase of every test while the tests run: it only copies what
        the outcome rule needs, leaving the folding to one loop at the end (issue 17). The
        copy is taken now, so that a report changed after it was logged changes nothing.
        """
        outcome, properties = report.outcome, report.user_properties
        self._pending.append(
            (
                report.nodeid,
                report.when or "",
                outcome,
                float(report.duration or 0.0),
                [list(item) for item in properties] if properties else (),
                str(report.wasxfail) if hasattr(report, "wasxfail") else None,
                None if outcome == "passed" else short_longrepr(report.longrepr),
                hasattr(report, "context") and subtest_context(report) is not None,
            )
        )

    def _fold_pending(self) -> None:
        """Fold in the phases read so far: before anything reads :attr:`_tests`.

        The list is emptied of what was folded only, so that a phase a probe's reader thread
        appends meanwhile is folded next time, never lost.
        """
        pending, folded = self._pending, 0
        for phase in pending:
            self._fold(*phase)
            folded += 1
        del pending[:folded]

    def record_phase(self, record: PhaseRecord) -> None:
        """Read one phase record (a child's probe line), as :meth:`record_test` does."""
        self._pending.append(
            (
                record["nodeid"],
                record["when"],
                record["outcome"],
                float(record.get("duration") or 0.0),
                record.get("user_properties", ()),
                record.get("wasxfail"),
                record.get("longrepr"),
                "subtest" in record,
            )
        )

    def _fold(
        self,
        nodeid: str,
        when: str,
        outcome: str,
        duration: float,
        user_properties: Sequence[list[Any]],
        wasxfail: str | None,
        longrepr: str | None,
        is_subtest: bool,
    ) -> None:
        """One phase into its test's state: the bookkeeping of the outcome rule.

        :param wasxfail: the xfail reason, None when the phase was no expected failure.
        :param longrepr: why the phase did not pass (capped), None when it passed.
        """
        if outcome == "rerun":  # a failed attempt; the next one starts with setup
            return
        self._changes += 1
        if self.id_prefix:
            nodeid = self.id_prefix + nodeid
        state = self._tests.get(nodeid)
        opening = is_subtest or when == "setup"
        if state is None:
            state = self._tests[nodeid] = TestState(shared=nodeid in self.collided)
        elif opening and not state.shared and state.starts_anew(when):
            state = self._tests[nodeid] = TestState()  # keeps the id's place in the order
        if is_subtest:
            state.count_subtest(outcome, longrepr)
            return
        state.duration += duration
        state.user_properties = user_properties
        # Most phases of most sessions are a passing setup or teardown, which says nothing.
        phase = (
            None
            if outcome == "passed" and when != "call"
            else phase_outcome(when, outcome, wasxfail is not None)
        )
        if phase not in SILENT:
            message = phase_message(phase, wasxfail, longrepr)
            if message is not None:
                state.note(when, message)
        if when == "setup":
            state.setup = worse(state.setup, phase) if state.shared else phase
            state.setup_seen = True
        elif when == "call":
            state.call = worse(state.call, phase) if state.shared else phase
        elif when == "teardown":
            state.finished = True
            state.teardown_failed = phase == "error" or (state.shared and state.teardown_failed)

    def record_collection(self, report: CollectionReport) -> None:
        """A failed collector counts as one ``error``, once per collector id."""
        if report.outcome == "failed":
            message = short_longrepr(report.longrepr)
            state = TestState(direct="error", messages={"direct": message} if message else None)
            self.tests[self.id_prefix + report.nodeid] = state
            self._changes += 1

    def record_collected(self, nodeids: Iterable[str]) -> None:
        """Test ids pytest collected, as it gives them (relative to its rootdir): one
        collection's list (a pytest-xdist worker's), in which an id twice is a collision."""
        listed = [self.id_prefix + nodeid for nodeid in nodeids]
        self.collected.update(listed)
        if len(set(listed)) < len(listed):
            for nodeid, times in Counter(listed).items():
                if times > 1:
                    self.collided[nodeid] = max(times, self.collided.get(nodeid, 0))

    def record_outcome(
        self, nodeid: str, outcome: Outcome, duration: float = 0.0, message: str | None = None
    ) -> None:
        """Set one test's final outcome directly (e.g. read from JUnit XML)."""
        messages = {"direct": cap_text(message, MESSAGE_CAP)} if message else None
        self.tests[nodeid] = TestState(direct=outcome, duration=duration, messages=messages)
        self._changes += 1

    def rerun_ids(self) -> list[str]:
        """The collected tests to run again (``--retries``): those that did not pass (failed,
        errored or never ran) in their latest attempt; with an expected set, its tests only."""
        self._fold_pending()
        wanted = self.expected
        latest = {nodeid: tries[-1] for nodeid, tries in self.attempts.items()}
        ids = []
        for nodeid in sorted(self.collected):
            if wanted is not None and nodeid not in wanted:
                continue
            outcome = latest.get(nodeid) or self._first_attempt(nodeid)
            counted = outcome if wanted is None else judged(outcome, wanted[nodeid])
            if counted in ("failed", "error"):
                ids.append(nodeid)
        return ids

    def _first_attempt(self, nodeid: str) -> Outcome:
        """The session's own outcome of a test: a test that never ran failed."""
        state = self._tests.get(nodeid)
        outcome = state.final() if state is not None else None
        return "failed" if outcome is None else outcome

    def record_attempt(self, nodeid: str, outcome: Outcome | None) -> None:
        """One more attempt of a test, from a rerun (``--retries``); a test the rerun never
        ran failed that attempt."""
        self._fold_pending()
        tries = self.attempts.setdefault(nodeid, [self._first_attempt(nodeid)])
        tries.append("failed" if outcome is None else outcome)
        self._changes += 1

    def flaky(self) -> dict[str, list[Outcome]]:
        """The tests whose attempts differ, with every attempt's outcome (``tests.flaky``)."""
        return {nodeid: list(tries) for nodeid, tries in self.attempts.items() if is_flaky(tries)}

    def _excluded(self) -> set[str]:
        """Flaky tests ``--flaky exclude`` leaves out of ``total``."""
        if self.flaky_rule != "exclude":
            return set()
        return set(self.flaky())

    def outcome_of(self, nodeid: str) -> Outcome | None:
        """The final outcome of one test, or None when none arrived."""
        return self._finished().get(nodeid)

    def collected_nothing(self) -> bool:
        """No test was collected, and no collector failed: pytest's exit status 5."""
        self._fold_pending()
        return not self.collected and not self._tests

    def not_run(self) -> list[str]:
        """Collected tests with no final outcome: the session ended before they ran."""
        return list(self._memoized("not_run", self._not_run))

    def _not_run(self) -> list[str]:
        finished, excluded = self._finished(), self._excluded()
        return sorted(
            nodeid for nodeid in self.collected if nodeid not in finished and nodeid not in excluded
        )

    def counted_not_run(self) -> int:
        """How many of the tests counted in ``total`` never ran: every one without an
        expected set (counted as ``failed``), those it lists with one (``missing``)."""
        not_run = self.not_run()
        if self.expected is None:
            return len(not_run)
        return sum(1 for nodeid in not_run if nodeid in self.expected)

    def text(self) -> str:
        """The counts in the views' one wording (:func:`pytest_scoring.text.tests_text`)."""
        return tests_text(self.counts(), self.counted_not_run(), self.expected is not None)

    def missing(self) -> list[str]:
        """Expected tests with no final outcome (not collected, deselected, not run…)."""
        finished = self._finished()
        excluded = self._excluded()
        return [
            nodeid
            for nodeid in self.expected or {}
            if nodeid not in finished and nodeid not in excluded
        ]

    def extra(self) -> list[str]:
        """Tests with an outcome that the expected set does not list (none without a set)."""
        if self.expected is None:
            return []
        return [nodeid for nodeid in self._finished() if nodeid not in self.expected]

    def _finished(self) -> dict[str, Outcome]:
        """Every test with a final outcome, in the order first seen."""
        finished: dict[str, Outcome] = self._memoized("finished", self._final_outcomes)
        return finished

    def _final_outcomes(self) -> dict[str, Outcome]:
        states = [
            (key, state)
            for key, state in self._tests.items()
            if not self.broken or _finished(state)
        ]
        finals = {nodeid: state.final() for nodeid, state in states}
        for nodeid, tries in self.attempts.items():
            finals[nodeid] = flaky_outcome(tries, self.flaky_rule)
        return {nodeid: outcome for nodeid, outcome in finals.items() if outcome is not None}

    def _memoized(self, name: str, compute: Callable[[], Any]) -> Any:
        """``compute()``, computed once for the tally as it is now.

        Scoring a session asks the same questions many times (every test scorer wants the
        counts and the failing ids), and each answer walks every test (issue 17). Any record
        folded in, test id collected or expected set given makes every answer stale.
        """
        self._fold_pending()
        state = (
            self._changes,
            len(self._tests),
            len(self.collected),
            id(self.expected),
            self.broken,
        )
        if state != self._memo_state:
            self._memo, self._memo_state = {}, state
        if name not in self._memo:
            self._memo[name] = compute()
        return self._memo[name]

    def _judge(self, nodeid: str, outcome: Outcome | None) -> Outcome | Literal["missing"] | None:
        if nodeid in self._excluded():
            return None
        if self.expected is None:
            return "failed" if outcome is None and nodeid in self.collected else outcome
        if nodeid not in self.expected:
            return None
        return judged(outcome, self.expected[nodeid])

    def records(self) -> list[TestRecord]:
        """Every test with a known outcome, in the order first seen."""
        records: list[TestRecord] = []
        excluded = {nodeid: self.attempts[nodeid][-1] for nodeid in self._excluded()}
        for nodeid, outcome in {**self._finished(), **excluded}.items():
            state = self._tests.get(nodeid) or TestState()
            record: TestRecord = {
                "nodeid": nodeid,
                "outcome": outcome,
                "duration": round(state.duration, 6),
                "user_properties": list(state.user_properties),
            }
            message = None if outcome in ("passed", "xpassed") else state.message()
            if message:
                record["message"] = message
            if state.subtests:
                record["subtests"] = dict(sorted(state.subtests.items()))
            if self.expected is not None and nodeid in self.expected:
                record["expected"] = self.expected[nodeid]
            if nodeid in self.attempts:
                record["attempts"] = list(self.attempts[nodeid])
            records.append(record)
        return records

    def counts(self) -> Counts:
        """How many tests counted how (docs/scoring.md#counts)."""
        counts: Counts = self._memoized("counts", self._count)
        return counts.copy()

    def _count(self) -> Counts:
        tally: dict[str, int] = dict.fromkeys((*OUTCOMES, "missing"), 0)
        if self.expected is None:
            for outcome in self._finished().values():
                tally[outcome] += 1
            not_run = self.not_run()
            tally["failed"] += len(not_run)
        else:
            finished = self._finished()
            for nodeid, wanted in self.expected.items():
                observed = finished.get(nodeid)
                tally[judged(observed, wanted)] += 1
                if observed == "xpassed":
                    tally["xpassed"] += 1
            not_run = self.not_run()
        excluded = self._excluded()
        if self.expected is not None:  # an excluded expected test is neither pass nor miss
            for nodeid in excluded & self.expected.keys():
                tally[judged(None, self.expected[nodeid])] -= 1
        counts: Counts = {
            "passed": tally["passed"],
            "failed": tally["failed"],
            "error": tally["error"],
            "skipped": tally["skipped"],
            "xfailed": tally["xfailed"],
            "xpassed": tally["xpassed"],
            "missing": tally["missing"],
            "extra": len(self.extra()),
            "not_run": len(not_run),
            "total": tally["passed"] + tally["failed"] + tally["error"] + tally["missing"],
        }
        if self.attempts:
            counts["flaky"] = len(excluded)
        return counts

    def ids_with(self, outcome: Outcome | Literal["missing"]) -> list[str]:
        """Test ids that count as ``outcome``: judged against the expected set when there is one."""
        by_count: dict[str | None, list[str]] = self._memoized("by_count", self._ids_by_count)
        return list(by_count.get(outcome, ()))

    def _ids_by_count(self) -> dict[str | None, list[str]]:
        """Every test id under how it counts: the expected set's, or every test seen, then the
        tests collected but never seen."""
        ids = [*self._tests, *sorted(self.collected - self._tests.keys())]
        if self.expected is not None:
            ids = list(self.expected)
        finished = self._finished()
        by_count: dict[str | None, list[str]] = {}
        for nodeid in ids:
            counted = self._judge(nodeid, finished.get(nodeid))
            by_count.setdefault(counted, []).append(nodeid)
        return by_count

    def subtest_counts(self) -> dict[str, int]:
        """Subtests by outcome over every test's last attempt (empty without subtests)."""
        return dict(self._memoized("subtests", self._subtest_counts))

    def _subtest_counts(self) -> dict[str, int]:
        totals: dict[str, int] = {}
        for state in self._tests.values():
            for outcome, number in (state.subtests or {}).items():
                totals[outcome] = totals.get(outcome, 0) + number
        return dict(sorted(totals.items()))

    def to_json(self) -> dict[str, Any]:
        """The ``tests`` section of ``scores.json``."""
        section: dict[str, Any] = {"counts": self.counts(), "tests": self.records()}
        section["not_run"] = self.not_run()
        if self.attempts:
            section["flaky"] = self.flaky()
        if self.expected is not None:
            section["missing"] = self.missing()
            section["extra"] = self.extra()
            section["expected_tests"] = self.expected_source
        return section
