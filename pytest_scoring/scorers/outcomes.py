"""Tally test outcomes from pytest's own reports, one final outcome per test id (docs/scoring.md).

Pure bookkeeping over :class:`PhaseRecord` dicts, the one shape every route delivers: the
plugin converts pytest's ``TestReport`` objects (on the controller under pytest-xdist, where
workers' reports are replayed), the probe of a child run streams them as JSON lines, and the
CLI feeds outcomes read from JUnit XML.
"""

from __future__ import annotations

from dataclasses import dataclass
from dataclasses import field
from typing import Any
from typing import Final
from typing import Literal
from typing import NotRequired
from typing import Protocol
from typing import TypedDict

from pytest_scoring.scorers.score import cap_text

Outcome = Literal["passed", "failed", "error", "skipped", "xfailed", "xpassed"]
OUTCOMES: tuple[Outcome, ...] = ("passed", "failed", "error", "skipped", "xfailed", "xpassed")
#: Characters kept of a test's message: every test of a large suite may fail, and each
#: message lands in ``scores.json`` and the report's page.
MESSAGE_CAP: Final = 1000


class TestRecord(TypedDict):
    """One test's final outcome, as stored in ``scores.json`` under ``tests.tests``."""

    nodeid: str
    outcome: Outcome
    duration: float
    user_properties: list[list[Any]]
    #: Why it failed, errored, was skipped or xfailed (capped); absent for a passing test.
    message: NotRequired[str]


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
    passed: int
    failed: int
    error: int
    skipped: int
    xfailed: int
    xpassed: int
    total: int


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


def phase_record(report: RunReport) -> PhaseRecord:
    """The :class:`PhaseRecord` of a pytest ``TestReport``."""
    record: PhaseRecord = {
        "nodeid": report.nodeid,
        "when": report.when or "",
        "outcome": report.outcome,
        "duration": float(report.duration or 0.0),
        "user_properties": [list(item) for item in report.user_properties],
    }
    if hasattr(report, "wasxfail"):
        record["wasxfail"] = str(report.wasxfail)
    if report.outcome != "passed":
        text = short_longrepr(report.longrepr)
        if text:
            record["longrepr"] = text
    return record


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


class CollectionReport(Protocol):
    @property
    def nodeid(self) -> str: ...
    @property
    def outcome(self) -> str: ...
    @property
    def longrepr(self) -> object: ...


@dataclass
class _TestState:
    outcome: Outcome | None = None
    duration: float = 0.0
    user_properties: list[list[Any]] = field(default_factory=list)
    message: str | None = None


def _phase_outcome(record: PhaseRecord) -> Outcome | None:
    """The outcome one phase (setup/call/teardown) contributes, or None when it says nothing."""
    wasxfail = "wasxfail" in record
    if record["outcome"] == "skipped":
        return "xfailed" if wasxfail else "skipped"
    if record["when"] == "call":
        if record["outcome"] == "passed":
            return "xpassed" if wasxfail else "passed"
        return "failed"
    return "error" if record["outcome"] == "failed" else None


def _message(record: PhaseRecord, outcome: Outcome) -> str | None:
    """Why a test did not pass: the phase's text, or for an xfail its reason."""
    if outcome in ("passed", "xpassed"):
        return None
    if outcome == "xfailed" and record.get("wasxfail"):
        return cap_text(record["wasxfail"], MESSAGE_CAP)
    return record.get("longrepr") or None


@dataclass
class OutcomeTally:
    """The final outcome of every test id seen in a session.

    A test whose setup or teardown fails is an ``error``, unless its call already failed.
    A test rerun by pytest-rerunfailures starts afresh with each attempt, so the last
    attempt's outcome is the one kept.
    """

    tests: dict[str, _TestState] = field(default_factory=dict)
    #: Test ids pytest collected (the controller learns them from xdist's workers).
    collected: set[str] = field(default_factory=set)

    def record_test(self, report: RunReport) -> None:
        """Fold one pytest phase report into that test's outcome."""
        self.record_phase(phase_record(report))

    def record_phase(self, record: PhaseRecord) -> None:
        """Fold one phase into that test's outcome."""
        if record["outcome"] == "rerun":  # a failed attempt; the next one starts with setup
            return
        state = self.tests.setdefault(record["nodeid"], _TestState())
        if record["when"] == "setup":
            # A new attempt (rerunfailures) starts with setup: forget the previous one.
            state.outcome, state.duration, state.message = None, 0.0, None
        state.duration += float(record.get("duration") or 0.0)
        state.user_properties = record.get("user_properties", [])
        phase = _phase_outcome(record)
        if phase is None or state.outcome == "failed":
            return
        if phase == "error" or state.outcome is None or state.outcome == "passed":
            state.outcome, state.message = phase, _message(record, phase)

    def record_collection(self, report: CollectionReport) -> None:
        """A failed collector counts as one ``error``, once per collector id."""
        if report.outcome == "failed":
            message = short_longrepr(report.longrepr)
            self.tests[report.nodeid] = _TestState(outcome="error", message=message)

    def record_outcome(
        self, nodeid: str, outcome: Outcome, duration: float = 0.0, message: str | None = None
    ) -> None:
        """Set one test's final outcome directly (e.g. read from JUnit XML)."""
        message = cap_text(message, MESSAGE_CAP) if message else None
        self.tests[nodeid] = _TestState(outcome=outcome, duration=duration, message=message)

    def records(self) -> list[TestRecord]:
        """Every test with a known outcome, in the order first seen."""
        records: list[TestRecord] = []
        for nodeid, state in self.tests.items():
            if state.outcome is None:
                continue
            record: TestRecord = {
                "nodeid": nodeid,
                "outcome": state.outcome,
                "duration": round(state.duration, 6),
                "user_properties": state.user_properties,
            }
            if state.message:
                record["message"] = state.message
            records.append(record)
        return records

    def counts(self) -> Counts:
        """Per-outcome counts and ``total = passed + failed + error``."""
        tally = dict.fromkeys(OUTCOMES, 0)
        for state in self.tests.values():
            if state.outcome is not None:
                tally[state.outcome] += 1
        return {
            "passed": tally["passed"],
            "failed": tally["failed"],
            "error": tally["error"],
            "skipped": tally["skipped"],
            "xfailed": tally["xfailed"],
            "xpassed": tally["xpassed"],
            "total": tally["passed"] + tally["failed"] + tally["error"],
        }

    def ids_with(self, outcome: Outcome) -> list[str]:
        """Test ids whose final outcome is ``outcome``."""
        return [nodeid for nodeid, state in self.tests.items() if state.outcome == outcome]

    def to_json(self) -> dict[str, Any]:
        """The ``tests`` section of ``scores.json``."""
        return {"counts": self.counts(), "tests": self.records()}
