"""Inspect metrics for the scorers' own metrics (:mod:`pytest_scoring.core.metrics`).

``accuracy`` is Inspect's own (it maps values to numbers as ours does, and Inspect's epoch
reducer has made every ``"C"`` a 1 before a metric sees it). The others (``mean``,
``stderr``, ``accuracy_at_100``, ``accuracy_over_0``) are ours, registered with Inspect under
the same names, so the eval log and a ``pytest-scoring`` report agree: Inspect's own ``mean``
would count a tampering ``"N"`` of ``percent_failing_tests`` as 0, its best value, where ours
counts it as its ``metadata.counted_as`` (100), as every metric of a report does.
"""

from __future__ import annotations

from collections.abc import Callable
from collections.abc import Sequence
from typing import Final

from inspect_ai.scorer import Metric as InspectMetric
from inspect_ai.scorer import SampleScore
from inspect_ai.scorer import accuracy
from inspect_ai.scorer import metric

from pytest_scoring.core.metrics import Metric
from pytest_scoring.core.score import NOANSWER
from pytest_scoring.core.score import Score
from pytest_scoring.core.score import Value
from pytest_scoring.core.score import is_tampering

#: Our metrics that Inspect has under the same name and meaning (used by the database
#: scorers, whose "N" is never a tampering one).
_INSPECT_OWN: Final[dict[str, Callable[[], InspectMetric]]] = {"accuracy": accuracy}
_REGISTERED: dict[str, InspectMetric] = {}


def _registered(ours: Metric) -> InspectMetric:
    """``ours`` as an Inspect metric of the same name (registered once)."""
    if ours.name not in _REGISTERED:

        @metric(name=ours.name)
        def factory() -> InspectMetric:
            def compute(scores: list[SampleScore]) -> float:
                return ours([sample_score(sample) for sample in scores])

            return compute

        _REGISTERED[ours.name] = factory()
    return _REGISTERED[ours.name]


def sample_score(sample: SampleScore) -> Score:
    """A sample's score as our metrics read it. Inspect's epoch reducer has turned a ``"N"``
    into 0 by then and kept its metadata: a tampering one is a ``"N"`` again, counted as
    its ``counted_as``."""
    metadata = dict(sample.score.metadata or {})
    score: Score = {"value": scalar_value(sample.score.value), "metadata": metadata}
    if is_tampering(score):
        score["value"] = NOANSWER
    return score


def scalar_value(value: object) -> Value:
    """An Inspect score's value as one of ours: a list or dict of values counts as ``"N"``."""
    return value if isinstance(value, str | int | float | bool) else NOANSWER


def inspect_metrics(metrics: Sequence[Metric]) -> list[InspectMetric]:
    """The Inspect metrics computing ``metrics``."""
    return [
        _INSPECT_OWN[ours.name]() if ours.name in _INSPECT_OWN else _registered(ours)
        for ours in metrics
    ]
