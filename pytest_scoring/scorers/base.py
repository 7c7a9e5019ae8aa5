"""What every scorer is, what it is given, and how a list of them runs.

A scorer is a small object with a ``name`` (its key in ``scores.json``, its Parquet file
and its variable in formulas), a ``type`` (the scorer type users write, stored as
``metadata.scorer``), its metrics, and a ``score(context)`` method. Scorers never raise
into pytest: :func:`run_scorers` turns any exception into a ``"N"`` score. A scorer whose
``detects`` is true is a detector: its ``"C"`` is a finding (an attack happened), which the
views show as "detected", never as a success (``metadata.detects``).
"""

from __future__ import annotations

import json
import traceback
from collections.abc import Callable
from collections.abc import Sequence
from dataclasses import dataclass
from dataclasses import field
from pathlib import Path
from typing import TYPE_CHECKING
from typing import Any
from typing import Protocol
from typing import runtime_checkable

from pytest_scoring.core.metrics import Metric
from pytest_scoring.core.outcomes import OutcomeTally
from pytest_scoring.core.score import DETECTS_KEY
from pytest_scoring.core.score import Score
from pytest_scoring.core.score import error_score
from pytest_scoring.core.score import with_unscored
from pytest_scoring.core.signals import EvaluatorSide
from pytest_scoring.scorers.inputs import ScorerInputs

if TYPE_CHECKING:
    from pytest_scoring.core.settings import ScoringSettings
    from pytest_scoring.core.signals import Signal
    from pytest_scoring.fs.guard import FileGuard
    from pytest_scoring.process.children import ChildRunner
    from pytest_scoring.process.witness import NotStarted


@runtime_checkable
class Scorer(Protocol):
    """The interface of every scorer, built in or registered through the hook."""

    #: Key of the score in the report and variable name in formulas.
    name: str
    #: The scorer type (``percent_passing_tests``, ``db_change``…).
    type: str
    #: Metrics computed over all samples of a report.
    metrics: Sequence[Metric]

    def score(self, context: ScoringContext) -> Score:
        """Score the session described by ``context``."""
        ...


@dataclass
class ScoringContext:
    """Everything a scorer may read about the finished session.

    Expensive inputs (database diffs, the reference rerun) live in :attr:`inputs`, typed,
    filled by the front end or lazily by the first scorer that needs one and shared between
    scorers (``interim_score=True`` scorers bypass them).
    """

    #: The scored repository's root folder.
    root: Path
    tally: OutcomeTally
    settings: ScoringSettings | None = None
    #: Scores computed so far in this session, by scorer name (composite reads these).
    scores: dict[str, Score] = field(default_factory=dict)
    #: Shared inputs (snapshots, diffs, reference results), live or from evidence.
    inputs: ScorerInputs = field(default_factory=ScorerInputs)
    #: Extra JSON files for the report folder (``diff.json``…), by file name.
    report_files: dict[str, Any] = field(default_factory=dict)
    #: Run-level errors for ``_errors.jsonl``: ``{scanner, error, traceback}``.
    errors: list[dict[str, str]] = field(default_factory=list)
    #: Integrity signals of the session (docs/scoring.md#integrity).
    integrity: list[Signal] = field(default_factory=list)
    #: Signal kinds that make the test scores ``N`` (``--score-strict``, ``run --strict``).
    strict: frozenset[str] = frozenset()
    #: What was the evaluator's: its signals inform, never make a score ``N``.
    evaluator_side: EvaluatorSide = field(default_factory=EvaluatorSide)
    #: False when the session did not end as pytest meant it to (interrupted, ``pytest.exit``).
    complete: bool = True
    #: Why pytest never started a session (its own first error line), or None: the test
    #: scores are then "N", saying why.
    not_started: NotStarted | None = None
    #: The evaluation's own runner (``run``'s: its user, environment, limits); None until
    #: :attr:`children` is first asked for one.
    runner: ChildRunner | None = None
    #: Answers for a scorer instead of running it, when it answers at all: re-scoring's
    #: check of what a report's evidence can decide (composite's children pass it too).
    gate: Callable[[Scorer], Score | None] | None = None

    @property
    def children(self) -> ChildRunner:
        """How scorers start processes (the reference rerun, ``sandbox_state`` commands): the
        evaluation's user, environment and supervisor."""
        if self.runner is None:
            # Made on first use: a session that starts no process never loads the supervisor.
            from pytest_scoring.process.children import ChildRunner

            self.runner = ChildRunner()
        return self.runner

    @property
    def guard(self) -> FileGuard | None:
        """The fingerprints of the evaluator's files (``pytest-scoring run`` only)."""
        return self.runner.guard if self.runner is not None else None

    @property
    def path_map(self) -> dict[str, Path]:
        """Sandbox path prefixes and their local folders (``--score-path-map``, ``paths:``)."""
        return self.settings.path_map if self.settings is not None else {}


def run_scorer(scorer: Scorer, context: ScoringContext) -> Score:
    """Run one scorer, turning any exception into a ``"N"`` score and an error entry."""
    gated = context.gate(scorer) if context.gate is not None else None
    try:
        score = with_unscored(gated if gated is not None else _reportable(scorer.score(context)))
    except Exception as error:  # a scorer must never take the session down
        context.errors.append(
            {
                "scanner": scorer.name,
                "error": f"{type(error).__name__}: {error}",
                "traceback": traceback.format_exc(),
            }
        )
        score = error_score(scorer.type, error)
    if is_detector(scorer):
        metadata = score.get("metadata")
        score["metadata"] = {**(metadata if isinstance(metadata, dict) else {}), DETECTS_KEY: True}
    context.scores[scorer.name] = score
    return score


def is_detector(scorer: object) -> bool:
    """Whether the scorer's ``"C"`` is a finding (``detects``, built in or configured)."""
    return getattr(scorer, "detects", False) is True


def _reportable(score: object) -> Score:
    """The score a scorer returned, checked now: a plugin's bad answer (not a dict, metadata
    keyed by tuples, a cycle) would otherwise break the report of every scorer at the end."""
    if not isinstance(score, dict) or "value" not in score:
        raise TypeError(f"score() returned {type(score).__name__}, not a Score dict with a value")
    json.dumps(score, default=str)  # raises for what no JSON report can hold
    return score  # type: ignore[return-value]


def run_scorers(scorers: Sequence[Scorer], context: ScoringContext) -> dict[str, Score]:
    """Run every scorer in order; each sees the scores of those before it."""
    return {scorer.name: run_scorer(scorer, context) for scorer in scorers}
