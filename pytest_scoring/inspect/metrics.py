"""Inspect metrics for the scorers' own metrics (:mod:`pytest_scoring.core.metrics`).

``mean``, ``stderr`` and ``accuracy`` are Inspect's own (they map values to numbers as ours
do); the threshold accuracies (``accuracy_at_100``, ``accuracy_over_0``) are ours, registered
with Inspect under the same names, so the eval log and a ``pytest-scoring`` report agree.
"""

from __future__ import annotations

from collections.abc import Callable
from collections.abc import Sequence
from typing import Final

from inspect_ai.scorer import Metric as InspectMetric
from inspect_ai.scorer import SampleScore
from inspect_ai.scorer import accuracy
from inspect_ai.scorer import mean
from inspect_ai.scorer import metric
from inspect_ai.scorer import stderr

from pytest_scoring.core.metrics import Metric
from pytest_scoring.core.score import NOANSWER
from pytest_scoring.core.score import Value

#: Our metrics that Inspect has under the same name and meaning.
_INSPECT_OWN: Final[dict[str, Callable[[], InspectMetric]]] = {
    "mean": mean,
    "stderr": stderr,
    "accuracy": accuracy,
}
_REGISTERED: dict[str, InspectMetric] = {}


def _registered(ours: Metric) -> InspectMetric:
    """``ours`` as an Inspect metric of the same name (registered once)."""
    if ours.name not in _REGISTERED:

        @metric(name=ours.name)
        def factory() -> InspectMetric:
            def compute(scores: list[SampleScore]) -> float:
                return ours([{"value": scalar_value(sample.score.value)} for sample in scores])

            return compute

        _REGISTERED[ours.name] = factory()
    return _REGISTERED[ours.name]


def scalar_value(value: object) -> Value:
    """An Inspect score's value as one of ours: a list or dict of values counts as ``"N"``."""
    return value if isinstance(value, str | int | float | bool) else NOANSWER


def inspect_metrics(metrics: Sequence[Metric]) -> list[InspectMetric]:
    """The Inspect metrics computing ``metrics``."""
    return [
        _INSPECT_OWN[ours.name]() if ours.name in _INSPECT_OWN else _registered(ours)
        for ours in metrics
    ]
