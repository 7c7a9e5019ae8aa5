"""The three test scorers and the ``test_runner`` dispatcher (docs/scoring.md)."""

from __future__ import annotations

from collections.abc import Callable
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any
from typing import Final
from typing import final

from pytest_scoring.errors import ConfigError
from pytest_scoring.scorers.base import ScoringContext
from pytest_scoring.scorers.metrics import Metric
from pytest_scoring.scorers.metrics import mean
from pytest_scoring.scorers.metrics import stderr
from pytest_scoring.scorers.metrics import threshold_accuracy
from pytest_scoring.scorers.outcomes import OUTCOMES
from pytest_scoring.scorers.outcomes import OutcomeTally
from pytest_scoring.scorers.score import METADATA_LIST_CAP
from pytest_scoring.scorers.score import Score
from pytest_scoring.scorers.score import Value
from pytest_scoring.scorers.score import bool_value
from pytest_scoring.scorers.score import cap_list
from pytest_scoring.scorers.score import make_score
from pytest_scoring.text import outcome_counts


def percent_passing(tally: OutcomeTally) -> float:
    """``round(100 * passed / total, 2)``, 0 when no test ran."""
    counts = tally.counts()
    if counts["total"] == 0:
        return 0
    return round(100 * counts["passed"] / counts["total"], 2)


def _all_pass_value(tally: OutcomeTally) -> Value:
    counts = tally.counts()
    return bool_value(counts["total"] > 0 and counts["failed"] == counts["error"] == 0)


def _percent_failing(tally: OutcomeTally) -> Value:
    return round(100 - percent_passing(tally), 2)


@final
@dataclass(frozen=True)
class _TestScoring:
    """How one test scorer turns the tally into a value, and its metrics."""

    value: Callable[[OutcomeTally], Value]
    metrics: tuple[Metric, ...]


TEST_SCORINGS: Final[dict[str, _TestScoring]] = {
    "all_tests_pass": _TestScoring(_all_pass_value, (mean, stderr)),
    "percent_passing_tests": _TestScoring(
        percent_passing, (mean, stderr, threshold_accuracy(100, inclusive=True, scale=100))
    ),
    "percent_failing_tests": _TestScoring(
        _percent_failing, (mean, stderr, threshold_accuracy(0, inclusive=False, scale=100))
    ),
}

#: ``test_runner(scoring_method)`` values and the scorer each selects.
SCORING_METHODS: Final = {
    "pass-fail": "all_tests_pass",
    "percent-pass": "percent_passing_tests",
    "percent-fail": "percent_failing_tests",
}


def test_metadata(tally: OutcomeTally) -> dict[str, Any]:
    """Counts and the (capped) ids of failing and erroring tests."""
    failed, errors = tally.ids_with("failed"), tally.ids_with("error")
    return {
        "counts": tally.counts(),
        "failed_tests": cap_list(failed),
        "error_tests": cap_list(errors),
        "truncated": max(len(failed), len(errors)) > METADATA_LIST_CAP,
    }


def _explain(tally: OutcomeTally) -> str:
    counts = tally.counts()
    return outcome_counts({outcome: counts[outcome] for outcome in OUTCOMES}) or "no tests ran"


@final
class TestScorer:
    """One of ``all_tests_pass``, ``percent_passing_tests``, ``percent_failing_tests``."""

    __slots__ = ("metrics", "name", "scoring_method", "type")

    # pytest would try to collect a class named Test*; this one is no test.
    __test__ = False

    def __init__(self, kind: str, name: str | None = None, scoring_method: str | None = None):
        self.type = kind
        self.name = name or kind
        self.scoring_method = scoring_method
        self.metrics: Sequence[Metric] = TEST_SCORINGS[kind].metrics

    def score(self, context: ScoringContext) -> Score:
        value = TEST_SCORINGS[self.type].value(context.tally)
        metadata = test_metadata(context.tally)
        if self.scoring_method is not None:
            metadata["scoring_method"] = self.scoring_method
        return make_score(
            value,
            self.type,
            explanation=_explain(context.tally),
            metadata=metadata,
        )


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
