"""``composite``: a formula over the scores of other scorers (docs/configuration.md)."""

from __future__ import annotations

import math
from collections.abc import Callable
from collections.abc import Mapping
from collections.abc import Sequence
from typing import Any
from typing import Final
from typing import final

from pytest_scoring.core.metrics import Metric
from pytest_scoring.core.metrics import mean
from pytest_scoring.core.metrics import stderr
from pytest_scoring.core.score import NOANSWER
from pytest_scoring.core.score import Score
from pytest_scoring.core.score import Value
from pytest_scoring.core.score import bool_value
from pytest_scoring.core.score import error_score
from pytest_scoring.core.score import make_score
from pytest_scoring.errors import ConfigError
from pytest_scoring.errors import FormulaError
from pytest_scoring.scorers.base import Scorer
from pytest_scoring.scorers.base import ScoringContext
from pytest_scoring.scorers.base import run_scorer
from pytest_scoring.scorers.formula import Formula
from pytest_scoring.scorers.formula import parse_formula
from pytest_scoring.scorers.scorer_type import InspectForm
from pytest_scoring.scorers.scorer_type import ScorerType

#: A formula given from Python: the child scores by name -> the composite's value.
FormulaFunction = Callable[[Mapping[str, "ScoreView"]], Any]


@final
class ScoreView(dict[str, Any]):
    """A child score as a callable formula receives it: a copy of the score dict that also
    reads like Inspect AI's ``Score`` (``scores["x"].value``), so a callable written for
    inspect_toolkit works unchanged and ``scores["x"]["value"]`` keeps working."""

    __slots__ = ()

    @property
    def value(self) -> Any:
        """The score's value: ``"C"``, ``"I"``, ``"P"``, ``"N"`` or a number."""
        return self.get("value")

    @property
    def answer(self) -> Any:
        return self.get("answer")

    @property
    def explanation(self) -> Any:
        return self.get("explanation")

    @property
    def metadata(self) -> dict[str, Any]:
        """The score's metadata (``{}`` when it has none)."""
        return self.get("metadata") or {}


#: String results a formula may return as the value itself.
SCORE_LETTERS: Final = frozenset({"C", "I", "P", "N"})
METRICS: Final = (mean, stderr)


def formula_value(result: Any) -> Value:
    """A formula's result as a score value: a number, a bool as "C"/"I", or a letter.

    :raises FormulaError: for any other result (a list, NaN, another string…).
    """
    if isinstance(result, bool):
        return bool_value(result)
    if isinstance(result, int | float) and math.isfinite(result):
        return result
    if isinstance(result, str) and result in SCORE_LETTERS:
        return result
    shown = repr(result)[:100]
    raise FormulaError(
        f"the result {shown} is not a finite number, a bool or one of 'C', 'I', 'P', 'N'"
    )


def _child_name(child: Scorer | str) -> str:
    return child if isinstance(child, str) else child.name


@final
class CompositeScorer:
    """Runs (or reuses) the listed scorers, then evaluates the formula over their scores."""

    __slots__ = ("children", "detects", "formula", "metrics", "name", "type")

    def __init__(self, children: Sequence[Scorer | str], formula: Formula | FormulaFunction):
        self.type = "composite"
        self.name = "composite"
        self.metrics: Sequence[Metric] = METRICS
        #: ``detects: true`` in the configuration: a formula such as ``attack_succeeded``
        #: whose ``"C"`` is a finding.
        self.detects = False
        #: Scorer objects run when needed; names only reuse scores already computed.
        self.children = list(children)
        self.formula = formula

    def score(self, context: ScoringContext) -> Score:
        scores: dict[str, Score] = {}
        for child in self.children:
            child_score = self._child_score(child, context)
            if child_score is None:
                return error_score(self.type, f"scorer {child!r} has no score in this session")
            scores[_child_name(child)] = child_score
        metadata: dict[str, Any] = {
            "formula": self._formula_text(),
            "scores": {name: _summary(score) for name, score in scores.items()},
        }
        try:
            value = formula_value(self._evaluate(scores))
        except FormulaError as error:
            return error_score(self.type, f"formula: {error}", **metadata)
        explanation = f"{self._formula_text()} = {value!r}"
        return make_score(value, self.type, explanation=explanation, metadata=metadata)

    def _child_score(self, child: Scorer | str, context: ScoringContext) -> Score | None:
        """The child's score: reused unless it is interim, else computed now."""
        if isinstance(child, str):
            return context.scores.get(child)
        reusable = not getattr(child, "interim_score", False)
        if reusable and child.name in context.scores:
            return context.scores[child.name]
        return run_scorer(child, context)

    def _evaluate(self, scores: Mapping[str, Score]) -> Any:
        if isinstance(self.formula, Formula):
            return self.formula.evaluate(scores)
        try:
            return self.formula({name: ScoreView(score) for name, score in scores.items()})
        except Exception as error:  # a user's callable: any failure is this score's "N"
            raise FormulaError(f"{type(error).__name__}: {error}") from error

    def _formula_text(self) -> str:
        if isinstance(self.formula, Formula):
            return self.formula.text
        return getattr(self.formula, "__qualname__", repr(self.formula))


def _summary(score: Score) -> dict[str, Any]:
    """What the composite's metadata keeps of a child score (its metadata has its own row)."""
    return {"value": score.get("value", NOANSWER), "explanation": score.get("explanation")}


def composite_scorer(
    scorers: Sequence[Scorer | str], formula: str | FormulaFunction
) -> CompositeScorer:
    """A scorer whose value is ``formula`` over the scores of ``scorers``.

    :param scorers: the scorers (or names of scorers of the same session) the formula reads;
        computed scores are reused, ``interim_score=True`` ones are computed afresh.
    :param formula: an expression such as ``"max(a.value, b.value)"`` (checked now; the
        language is in docs/configuration.md), or a callable taking the scores by name, each
        a :class:`ScoreView` (``scores["a"].value`` or ``scores["a"]["value"]``).
    :raises ConfigError: when the formula is outside the language or names an unlisted scorer.
    """
    if isinstance(scorers, str) or not isinstance(scorers, Sequence):
        raise ConfigError("scorers: expected a list of scorer names")
    names = [_child_name(child) for child in scorers]
    if callable(formula):
        return CompositeScorer(scorers, formula)
    try:
        parsed = parse_formula(formula, names)
    except FormulaError as error:
        raise ConfigError(f"formula: {error}") from None
    return CompositeScorer(scorers, parsed)


TYPE: Final = ScorerType(
    "composite",
    composite_scorer,
    METRICS,
    from_evidence=True,
    inspect=InspectForm(
        "composite_scorer",
        positional=("scorers", "formula"),
        annotations={
            "scorers": "Sequence[Scorer]",
            "formula": "str | composite.FormulaFunction",
        },
        docs={
            "scorers": "Inspect scorers of this package or others; each one's name in the "
            "formula is its registry name without ``_scorer`` (``db_diff_change.value == "
            '"C"``). Those of this package that already scored the sample are reused (unless '
            "``interim_score``); others are run now.",
        },
        reads="its scorers' scores",
    ),
)
