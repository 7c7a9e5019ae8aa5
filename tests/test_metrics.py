"""Metrics over the scores of a report's samples."""

from __future__ import annotations

import math

import pytest

from pytest_scoring.core.metrics import accuracy
from pytest_scoring.core.metrics import compute_metrics
from pytest_scoring.core.metrics import mean
from pytest_scoring.core.metrics import stderr
from pytest_scoring.core.metrics import threshold_accuracy
from pytest_scoring.core.score import Score
from pytest_scoring.core.score import value_to_float


def scores(*values: object) -> list[Score]:
    return [{"value": v} for v in values]  # type: ignore[misc]


@pytest.mark.parametrize(
    ("value", "number"),
    [
        ("C", 1.0),
        ("I", 0.0),
        ("P", 0.5),
        ("N", 0.0),
        (75, 75.0),
        (True, 1.0),
        ("yes", 1.0),
        ("2.5", 2.5),
        ("nonsense", 0.0),
        ([1, 2], 0.0),
    ],
)
def test_values_map_to_numbers_like_inspect(value: object, number: float) -> None:
    assert value_to_float(value) == number


def test_mean_and_stderr_use_the_sample_standard_deviation() -> None:
    sample = scores(50.0, 75.0, 100.0, "C")
    assert mean(sample) == pytest.approx(56.5)
    expected = math.sqrt(sum((x - 56.5) ** 2 for x in (50, 75, 100, 1)) / 3) / 2
    assert stderr(sample) == pytest.approx(expected)


def test_one_sample_has_no_stderr_and_no_samples_give_zero_not_nan() -> None:
    assert stderr(scores("C")) == 0.0
    assert compute_metrics([mean, stderr, accuracy], []) == {
        "mean": 0.0,
        "stderr": 0.0,
        "accuracy": 0.0,
    }


def test_accuracy_is_the_share_of_correct() -> None:
    assert accuracy(scores("C", "I", "N", "C")) == 0.5


def test_threshold_accuracy_names_and_bounds() -> None:
    at_100 = threshold_accuracy(100, inclusive=True, scale=100)
    over_0 = threshold_accuracy(0, inclusive=False, scale=100)
    assert (at_100.name, over_0.name) == ("accuracy_at_100", "accuracy_over_0")
    assert at_100(scores(100.0, 99.99, 100)) == pytest.approx(200 / 3)
    assert over_0(scores(0, 0.01)) == 50.0
    assert over_0(scores(math.nan, 5)) == 100.0
