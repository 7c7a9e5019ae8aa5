"""``composite``: formulas over other scorers' scores, from Python and from a config file."""

from __future__ import annotations

import json
from collections.abc import Mapping
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pytest

from pytest_scoring import composite_scorer
from pytest_scoring import file_contents_scorer
from pytest_scoring.core.metrics import Metric
from pytest_scoring.core.metrics import mean
from pytest_scoring.core.metrics import stderr
from pytest_scoring.core.outcomes import OutcomeTally
from pytest_scoring.core.score import Score
from pytest_scoring.core.score import make_score
from pytest_scoring.errors import ConfigError
from pytest_scoring.errors import FormulaError
from pytest_scoring.scorers.base import ScoringContext
from pytest_scoring.scorers.base import run_scorers
from pytest_scoring.scorers.composite import formula_value


class CountingScorer:
    """A real scorer that counts how often it is asked (to see reuse)."""

    type = "counting"
    metrics: Sequence[Metric] = (mean,)

    def __init__(self, name: str, value: Any, interim_score: bool = False):
        self.name = name
        self.value = value
        self.interim_score = interim_score
        self.calls = 0

    def score(self, context: ScoringContext) -> Score:
        self.calls += 1
        return make_score(self.value, self.type, explanation=f"call {self.calls}")


def context(tmp_path: Path) -> ScoringContext:
    return ScoringContext(root=tmp_path, tally=OutcomeTally())


def test_a_composite_reuses_scores_already_computed(tmp_path: Path) -> None:
    a, b = CountingScorer("a", 80), CountingScorer("b", "C")
    both = composite_scorer([a, b], "a.value / 100 * (b.value == 'C')")
    scores = run_scorers([a, b, both], context(tmp_path))
    assert scores["composite"]["value"] == 0.8
    assert (a.calls, b.calls) == (1, 1)
    assert both.metrics == (mean, stderr)


def test_an_interim_scorer_is_computed_afresh_for_the_composite(tmp_path: Path) -> None:
    fresh = CountingScorer("fresh", 1, interim_score=True)
    scores = run_scorers([fresh, composite_scorer([fresh], "fresh.value")], context(tmp_path))
    assert fresh.calls == 2
    assert scores["composite"]["metadata"]["scores"]["fresh"]["explanation"] == "call 2"


def test_a_composite_runs_a_scorer_not_scored_yet(tmp_path: Path) -> None:
    (tmp_path / "a.txt").write_text("needle")
    finder = file_contents_scorer(".", "needle")
    result = run_scorers([composite_scorer([finder], "file_contents.value")], context(tmp_path))
    assert result["composite"]["value"] == "C"


def test_a_callable_formula_gets_the_scores_by_name(tmp_path: Path) -> None:
    a = CountingScorer("a", 30)

    def halve(scores: Mapping[str, Score]) -> float:
        return float(scores["a"]["value"]) / 2

    result = run_scorers([a, composite_scorer([a], halve)], context(tmp_path))["composite"]
    assert result["value"] == 15
    assert result["metadata"]["formula"].endswith("halve")


def test_a_formula_that_raises_scores_no_answer_and_the_others_stay(tmp_path: Path) -> None:
    a, zero = CountingScorer("a", 1), CountingScorer("zero", 0)
    scores = run_scorers(
        [a, zero, composite_scorer([a, zero], "a.value / zero.value")], context(tmp_path)
    )
    assert scores["composite"]["value"] == "N"
    assert "division by zero" in scores["composite"]["metadata"]["error"]
    assert scores["a"]["value"] == 1


def test_a_failing_callable_scores_no_answer(tmp_path: Path) -> None:
    a = CountingScorer("a", 1)
    result = run_scorers(
        [composite_scorer([a], lambda scores: scores["missing"])], context(tmp_path)
    )
    assert result["composite"]["value"] == "N"
    assert "KeyError" in result["composite"]["metadata"]["error"]


def test_a_named_scorer_missing_from_the_session_scores_no_answer(tmp_path: Path) -> None:
    result = run_scorers([composite_scorer(["ghost"], "ghost.value")], context(tmp_path))
    assert result["composite"]["value"] == "N"
    assert "'ghost' has no score" in str(result["composite"]["explanation"])


@pytest.mark.parametrize(
    ("result", "value"),
    [(True, "C"), (False, "I"), (3, 3), (0.5, 0.5), ("P", "P"), ("N", "N")],
)
def test_a_formula_result_becomes_a_score_value(result: object, value: object) -> None:
    assert formula_value(result) == value


@pytest.mark.parametrize("result", [None, "yes", [1], float("nan"), float("inf"), {"a": 1}])
def test_a_formula_result_that_is_no_score_value_is_refused(result: object) -> None:
    with pytest.raises(FormulaError):
        formula_value(result)


def test_a_formula_naming_an_unlisted_scorer_is_refused_when_built() -> None:
    with pytest.raises(ConfigError, match=r"^formula: line 1, column 12: name 'b'"):
        composite_scorer(["a"], "a.value + (b.value)")


def test_a_composite_in_a_real_session_reads_a_json_config(pytester: pytest.Pytester) -> None:
    pytester.makepyfile("def test_ok(): pass\ndef test_bad(): assert False")
    config = {
        "scorers": [
            {"type": "percent_passing_tests"},
            {"type": "all_tests_pass"},
            {
                "type": "composite_scorer",
                "name": "half_or_all",
                "scorers": ["percent_passing_tests", "all_tests_pass"],
                "formula": "all_tests_pass.value == 'C' or percent_passing_tests.value >= 50",
            },
            {
                "type": "composite",
                "name": "broken",
                "scorers": ["percent_passing_tests"],
                "formula": "percent_passing_tests.value / 0",
            },
        ]
    }
    pytester.path.joinpath("scores.json").write_text(json.dumps(config))
    result = pytester.runpytest("--score-config=scores.json", "-p", "no:cacheprovider")
    result.assert_outcomes(passed=1, failed=1)
    result.stdout.fnmatch_lines(
        ["percent_passing_tests: 50 *", "half_or_all: C *", "broken: N *division by zero*"]
    )
    (report,) = pytester.path.joinpath("scores").glob("scan_id=*")
    scores = json.loads(report.joinpath("scores.json").read_text())["scores"]
    assert scores["half_or_all"]["metadata"]["scores"]["all_tests_pass"]["value"] == "I"
    assert set(scores) == {"percent_passing_tests", "all_tests_pass", "half_or_all", "broken"}


def test_a_hostile_formula_in_a_config_stops_the_session_and_runs_nothing(
    pytester: pytest.Pytester,
) -> None:
    marker = pytester.path / "pwned"
    formula = f"__import__('os').system('touch {marker}')"
    config = [
        {"type": "all_tests_pass"},
        {"type": "composite", "scorers": ["all_tests_pass"], "formula": formula},
    ]
    pytester.path.joinpath("scores.json").write_text(json.dumps(config))
    pytester.makepyfile("def test_ok(): pass")
    result = pytester.runpytest("--score-config=scores.json")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines(
        ["*scorers[[]1[]].formula: line 1, column 18: calling method 'system' is not allowed"]
    )
    assert not marker.exists()
