"""Metrics over the scores of all samples in one report (docs/scoring.md).

Values map to numbers as Inspect AI's ``value_to_float`` does; a ``"N"`` that says what it
counts as (``metadata.counted_as``: a tampering ``"N"`` counts as a failed sample) counts as
that. Every metric returns a finite float, because Inspect Scout rejects a null or NaN metric.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any
from typing import final

from pytest_scoring.core.score import CORRECT
from pytest_scoring.core.score import INFRASTRUCTURE
from pytest_scoring.core.score import NOANSWER
from pytest_scoring.core.score import UNSCORED_KEY
from pytest_scoring.core.score import UNSCORED_KINDS
from pytest_scoring.core.score import Score
from pytest_scoring.core.score import counted_value
from pytest_scoring.core.score import value_to_float


@final
@dataclass(frozen=True, slots=True)
class Metric:
    """A named function from the scores of all samples to one number."""

    #: The key under which the value is stored (``mean``, ``accuracy_at_100``…).
    name: str
    compute: Callable[[Sequence[Score]], float]

    def __call__(self, scores: Sequence[Score]) -> float:
        value = self.compute(scores)
        return value if math.isfinite(value) else 0.0


def _numbers(scores: Sequence[Score]) -> list[float]:
    return [value_to_float(counted_value(score)) for score in scores]


def _mean(scores: Sequence[Score]) -> float:
    numbers = _numbers(scores)
    return sum(numbers) / len(numbers) if numbers else 0.0


def _stderr(scores: Sequence[Score]) -> float:
    numbers = _numbers(scores)
    n = len(numbers)
    if n < 2:
        return 0.0
    average = sum(numbers) / n
    variance = sum((x - average) ** 2 for x in numbers) / (n - 1)
    return math.sqrt(variance) / math.sqrt(n)


def _accuracy(scores: Sequence[Score]) -> float:
    if not scores:
        return 0.0
    return sum(1 for score in scores if counted_value(score) == CORRECT) / len(scores)


mean = Metric("mean", _mean)
stderr = Metric("stderr", _stderr)
accuracy = Metric("accuracy", _accuracy)


def threshold_accuracy(threshold: float, inclusive: bool = True, scale: float = 1.0) -> Metric:
    """Share of finite values ``>= threshold`` (inclusive) or ``> threshold``, times ``scale``.

    Named ``accuracy_at_<t>`` when inclusive, ``accuracy_over_<t>`` otherwise.
    """

    def compute(scores: Sequence[Score]) -> float:
        numbers = [x for x in _numbers(scores) if math.isfinite(x)]
        if not numbers:
            return 0.0
        passing = [x for x in numbers if (x >= threshold if inclusive else x > threshold)]
        return scale * len(passing) / len(numbers)

    label = f"{threshold:g}"
    return Metric(f"accuracy_{'at' if inclusive else 'over'}_{label}", compute)


def compute_metrics(metrics: Sequence[Metric], scores: Sequence[Score]) -> dict[str, float]:
    """Every metric's value over the given scores, keyed by metric name."""
    return {metric.name: metric(scores) for metric in metrics}


def unscored_kind(score: Score) -> str | None:
    """A ``"N"``'s ``metadata.unscored`` (``infrastructure`` when it says none); None for a
    score with a value."""
    if score.get("value") != NOANSWER:
        return None
    metadata = score.get("metadata")
    kind = metadata.get(UNSCORED_KEY) if isinstance(metadata, dict) else None
    return kind if kind in UNSCORED_KINDS else INFRASTRUCTURE


def denominators(metrics: Sequence[Metric], scores: Sequence[Score]) -> dict[str, Any]:
    """One scorer's metrics over two denominators (docs/scoring.md#two-denominators):

    * ``all``: every sample, each ``"N"`` as 0 (or its ``counted_as``);
    * ``scored``: every sample but those the evaluator failed (``infrastructure``); a
      ``tampering`` or ``repository`` ``"N"`` still counts as 0, so that no metric rewards a
      repository for not being scored;

    with the number of samples in each and of each kind of ``"N"``.
    """
    kinds = [unscored_kind(score) for score in scores]
    scored = [score for score, kind in zip(scores, kinds, strict=True) if kind != INFRASTRUCTURE]
    return {
        "all": {"samples": len(scores), **compute_metrics(metrics, scores)},
        "scored": {"samples": len(scored), **compute_metrics(metrics, scored)},
        "unscored": {kind: kinds.count(kind) for kind in UNSCORED_KINDS},
    }
