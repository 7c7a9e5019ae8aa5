"""The three test scorers and the ``test_runner`` dispatcher (docs/scoring.md)."""

from __future__ import annotations

from collections.abc import Callable
from collections.abc import Mapping
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any
from typing import Final
from typing import final

from pytest_scoring.core.metrics import Metric
from pytest_scoring.core.metrics import mean
from pytest_scoring.core.metrics import stderr
from pytest_scoring.core.metrics import threshold_accuracy
from pytest_scoring.core.outcomes import OutcomeTally
from pytest_scoring.core.score import COUNTED_AS_KEY
from pytest_scoring.core.score import INCORRECT
from pytest_scoring.core.score import METADATA_LIST_CAP
from pytest_scoring.core.score import NOANSWER
from pytest_scoring.core.score import REPOSITORY
from pytest_scoring.core.score import TAMPERING
from pytest_scoring.core.score import UNSCORED_KEY
from pytest_scoring.core.score import Score
from pytest_scoring.core.score import Value
from pytest_scoring.core.score import bool_value
from pytest_scoring.core.score import cap_list
from pytest_scoring.core.score import make_score
from pytest_scoring.core.signals import tampering_kinds
from pytest_scoring.errors import ConfigError
from pytest_scoring.scorers.base import ScoringContext
from pytest_scoring.scorers.scorer_type import InspectForm
from pytest_scoring.scorers.scorer_type import ScorerType
from pytest_scoring.text import value_text


def percent_passing(tally: OutcomeTally) -> float:
    """``round(100 * passed / total, 2)``, 0 when no test ran."""
    return percent_of_counts(tally.counts())


def percent_of_counts(counts: Mapping[str, Any]) -> float:
    """:func:`percent_passing` from a report's test ``counts``."""
    total, passed = counts.get("total") or 0, counts.get("passed") or 0
    if total == 0:
        return 0
    return round(100 * passed / total, 2)


def _all_pass_value(tally: OutcomeTally) -> Value:
    counts = tally.counts()
    failing = counts["failed"] + counts["error"] + counts["missing"]
    return bool_value(counts["total"] > 0 and failing == 0)


def _percent_failing(tally: OutcomeTally) -> Value:
    return round(100 - percent_passing(tally), 2)


@final
@dataclass(frozen=True)
class _TestScoring:
    """How one test scorer turns the tally into a value, and its metrics."""

    value: Callable[[OutcomeTally], Value]
    metrics: tuple[Metric, ...]
    #: The value of a failed sample, which a tampering ``"N"`` counts as in every metric: for
    #: ``percent_failing_tests`` that is 100 (and ``accuracy_over_0`` counts it), not 0.
    failed: Value


TEST_SCORINGS: Final[dict[str, _TestScoring]] = {
    "all_tests_pass": _TestScoring(_all_pass_value, (mean, stderr), INCORRECT),
    "percent_passing_tests": _TestScoring(
        percent_passing, (mean, stderr, threshold_accuracy(100, inclusive=True, scale=100)), 0
    ),
    "percent_failing_tests": _TestScoring(
        _percent_failing, (mean, stderr, threshold_accuracy(0, inclusive=False, scale=100)), 100
    ),
}

#: The explanation of a test score of a session that collected no test.
NO_TESTS: Final = "no tests collected"

#: ``test_runner(scoring_method)`` values and the scorer each selects.
SCORING_METHODS: Final = {
    "pass-fail": "all_tests_pass",
    "percent-pass": "percent_passing_tests",
    "percent-fail": "percent_failing_tests",
}


def test_metadata(context: ScoringContext) -> dict[str, Any]:
    """Counts, the (capped) ids of tests that failed, errored, never ran or are missing,
    subtest counts, the expected set's source, flaky tests (after reruns) and the integrity
    signals."""
    tally = context.tally
    lists = {
        "failed_tests": tally.ids_with("failed"),
        "error_tests": tally.ids_with("error"),
        "not_run_tests": tally.not_run(),
    }
    if tally.expected is not None:
        lists["missing_tests"] = tally.missing()
        lists["extra_tests"] = tally.extra()
    metadata: dict[str, Any] = {"counts": tally.counts()}
    metadata.update({key: cap_list(ids) for key, ids in lists.items()})
    metadata["truncated"] = max(len(ids) for ids in lists.values()) > METADATA_LIST_CAP
    subtests = tally.subtest_counts()
    if subtests:
        metadata["subtests"] = subtests
    if tally.expected_source is not None:
        metadata["expected_tests"] = tally.expected_source
    if tally.attempts:  # reruns ran: the tests whose attempts differ, each attempt's outcome
        metadata["flaky"] = tally.flaky()
    metadata.update(_test_changes(context))
    metadata["integrity"] = context.integrity
    return metadata


def _test_changes(context: ScoringContext) -> dict[str, Any]:
    """``tests_modified`` (what the repository changed in its tests, the excerpts left to the
    signals) and its count, when a reference or ``--tests-from`` is known."""
    settings = context.settings
    if settings is None or not (settings.reference or settings.tests_from):
        return {}
    # Loaded only with a reference: most sessions have none.
    from pytest_scoring.reference.test_changes import change_list

    changes = context.inputs.test_changes
    if changes is None:
        return {}
    return {"tests_modified": cap_list(change_list(changes)), "tests_modified_count": len(changes)}


def _missing_fixtures(context: ScoringContext) -> str | None:
    """Why tests errored for want of a fixture, when ``--tests-from`` removed the
    repository's conftest.py that defined it (docs/security.md)."""
    if context.settings is None or context.settings.tests_from is None:
        return None
    from pytest_scoring.reference.tests_from import missing_fixtures_note

    installed = context.inputs.tests_from
    if installed is None or not installed.fixtures_gone:
        return None
    records = context.tally.records()
    messages = (r.get("message", "") for r in records if r["outcome"] == "error")
    return missing_fixtures_note(installed.fixtures_gone, messages)


def tampering(context: ScoringContext) -> list[str]:
    """The strict kinds among the session's signals that are not the evaluator's: when there
    is one, the test scores are ``"N"`` (docs/scoring.md#integrity)."""
    return tampering_kinds(context.integrity, context.strict, context.evaluator_side)


def counted_percent_passing(context: ScoringContext) -> float:
    """The pass percentage as the gates (``--fail-under``) count it: 0 when tampering is
    proven, as the metrics count a tampering ``"N"``."""
    return 0.0 if tampering(context) else percent_passing(context.tally)


@final
class TestScorer:
    """One of ``all_tests_pass``, ``percent_passing_tests``, ``percent_failing_tests``."""

    __slots__ = ("detects", "metrics", "name", "scoring_method", "type")

    # pytest would try to collect a class named Test*; this one is no test.
    __test__ = False

    def __init__(self, kind: str, name: str | None = None, scoring_method: str | None = None):
        self.type = kind
        self.name = name or kind
        self.scoring_method = scoring_method
        self.metrics: Sequence[Metric] = TEST_SCORINGS[kind].metrics
        #: Its ``"C"`` means tests pass, not that something was detected.
        self.detects = False

    def score(self, context: ScoringContext) -> Score:
        metadata = test_metadata(context)
        if self.scoring_method is not None:
            metadata["scoring_method"] = self.scoring_method
        explanation = context.tally.text()
        missing_fixtures = _missing_fixtures(context)
        if missing_fixtures is not None:
            explanation = f"{explanation}; {missing_fixtures}"
        # pytest never started on the repository's configuration: what follows from that
        # (its early end) is no tampering.
        if context.not_started is not None:  # never only "no tests ran": pytest said why
            metadata[UNSCORED_KEY] = context.not_started.unscored
            return make_score(NOANSWER, self.type, context.not_started.reason, None, metadata)
        kinds = tampering(context)
        if kinds:
            failed = TEST_SCORINGS[self.type].failed
            metadata.update(
                {UNSCORED_KEY: TAMPERING, "strict_kinds": kinds, COUNTED_AS_KEY: failed}
            )
            withheld = (
                f"not scored: integrity signal {', '.join(kinds)} (strict); counted as "
                f"{value_text(failed)} ({explanation})"
            )
            return make_score(NOANSWER, self.type, withheld, None, metadata)
        if context.tally.collected_nothing() and context.tally.expected is None:
            # pytest exits 5 here: an empty suite is no score of 0, and no pass (issue 29).
            failed = TEST_SCORINGS[self.type].failed
            metadata.update({UNSCORED_KEY: REPOSITORY, COUNTED_AS_KEY: failed})
            return make_score(NOANSWER, self.type, NO_TESTS, None, metadata)
        value = TEST_SCORINGS[self.type].value(context.tally)
        if self.type == "all_tests_pass" and not context.complete:
            value, explanation = INCORRECT, f"{explanation}; the session did not complete"
        return make_score(value, self.type, explanation=explanation, metadata=metadata)


def all_tests_pass_scorer() -> TestScorer:
    """``"C"`` when at least one test ran and none failed or errored."""
    return TestScorer("all_tests_pass")


def percent_passing_tests_scorer() -> TestScorer:
    """The share of passing tests among passed, failed and erroring ones, in percent."""
    return TestScorer("percent_passing_tests")


def percent_failing_tests_scorer() -> TestScorer:
    """``100 - percent_passing_tests``."""
    return TestScorer("percent_failing_tests")


def test_runner_scorer(scoring_method: str = "percent-pass") -> TestScorer:
    """One test scorer chosen by ``scoring_method``.

    :param scoring_method: ``"pass-fail"``, ``"percent-pass"`` or ``"percent-fail"``.
    :raises ConfigError: for any other method.
    """
    if scoring_method not in SCORING_METHODS:
        choices = ", ".join(repr(m) for m in SCORING_METHODS)
        raise ConfigError(f"scoring_method: {scoring_method!r} is not one of {choices}")
    return TestScorer(
        SCORING_METHODS[scoring_method], name="test_runner", scoring_method=scoring_method
    )


#: The Inspect front end's parameters of every test scorer (how the tests run in the sandbox).
INSPECT_PARAMETERS: Final = (
    "repo_path",
    "expected_tests",
    "strict",
    "tests_from",
    "black_box",
    "verifier_sandbox",
    "env",
    "retries",
    "flaky",
    "evidence",
)

TYPES: Final = (
    *(
        ScorerType(
            kind,
            factory,
            TEST_SCORINGS[kind].metrics,
            from_evidence=True,
            inspect=InspectForm(kind, keyword=INSPECT_PARAMETERS, reads="the tests' one run"),
        )
        for kind, factory in (
            ("all_tests_pass", all_tests_pass_scorer),
            ("percent_passing_tests", percent_passing_tests_scorer),
            ("percent_failing_tests", percent_failing_tests_scorer),
        )
    ),
    ScorerType(
        "test_runner",
        test_runner_scorer,
        None,
        from_evidence=True,
        inspect=InspectForm(
            "test_runner_scorer",
            positional=("scoring_method",),
            keyword=INSPECT_PARAMETERS,
            registered=False,
            reads="the tests' one run",
        ),
    ),
)
