"""``pytest-scoring rescore``: a report's scores computed again from its evidence (issue 28).

The scorers read the same inputs as in the session that wrote the report (the tally, the
session's diff), rebuilt from ``evidence/``; what the evidence cannot decide scores ``"N"``
with the reason. The old report is never changed: the result is a new scan folder whose
provenance names the original run (``rescored_from``).
"""

from __future__ import annotations

import hashlib
import json
import shutil
import tempfile
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from typing import Final

from pytest_scoring.core.determinism import FlakyRule
from pytest_scoring.core.outcomes import OutcomeTally
from pytest_scoring.core.score import COUNTED_AS_KEY
from pytest_scoring.core.score import INFRASTRUCTURE
from pytest_scoring.core.score import TAMPERING
from pytest_scoring.core.score import Score
from pytest_scoring.core.score import error_score
from pytest_scoring.core.settings import ScoringSettings
from pytest_scoring.core.signals import EvaluatorSide
from pytest_scoring.core.signals import StrictKinds
from pytest_scoring.core.signals import parse_strict
from pytest_scoring.db.diff_of_diffs import SplitDiffs
from pytest_scoring.db.diff_store import BASELINE
from pytest_scoring.db.diff_store import REFERENCE
from pytest_scoring.db.diff_store import SOLUTION
from pytest_scoring.db.diff_store import DiffStore
from pytest_scoring.db.sqlite_engine import file_row_reader
from pytest_scoring.errors import OptionError
from pytest_scoring.errors import ReportError
from pytest_scoring.evaluation.evidence import DATABASES_DIR
from pytest_scoring.evaluation.evidence import OUTCOMES
from pytest_scoring.evaluation.evidence import PROVENANCE_KEY
from pytest_scoring.evaluation.evidence import REFERENCE_DIR
from pytest_scoring.evaluation.evidence import SESSION_DIFF
from pytest_scoring.evaluation.evidence import read_manifest
from pytest_scoring.process.witness import NotStarted
from pytest_scoring.reference.baseline import Baseline
from pytest_scoring.reference.rerun import FILE_MAX_ROWS
from pytest_scoring.reference.rerun import Diffs
from pytest_scoring.report.provenance import provenance
from pytest_scoring.report.reader import read_scores
from pytest_scoring.report.result import EVIDENCE_DIR
from pytest_scoring.report.result import SessionResult
from pytest_scoring.report.samples import SAMPLES_DIR
from pytest_scoring.scorers.base import Scorer
from pytest_scoring.scorers.base import ScoringContext
from pytest_scoring.scorers.base import run_scorers
from pytest_scoring.scorers.db_change import StoredDatabases
from pytest_scoring.scorers.db_diff_change import DiffChangeScorer
from pytest_scoring.scorers.inputs import patterns_key
from pytest_scoring.scorers.registry import BUILTIN_TYPES
from pytest_scoring.scorers.tests import TEST_SCORINGS

#: Why a scorer that needs the repository (or evidence that was not kept) is ``"N"``.
NEEDS_REPOSITORY: Final = "needs the repository: run again"
#: Why the test scores of a report the repository's processes could write are ``"N"``.
UNTRUSTED_ROUTE: Final = (
    "not scored: the report was written {where}, where the repository's code could change "
    "its outcomes; re-run with `pytest-scoring run`"
)
#: The routes whose kept outcomes no code of the repository could write: ``run`` (the evaluator
#: writes the report once the repository's processes have ended) and ``inspect`` (the scorers
#: write a sample's store on the evaluator's machine, from the probe's authenticated stream).
TRUSTED_ROUTES: Final = frozenset({"run", "inspect"})


@dataclass
class Evidence:
    """One report's evidence, read and checked against its manifest."""

    folder: Path
    scores: dict[str, Any]
    #: The files whose SHA-256 matches the manifest, by name under ``evidence/``.
    files: dict[str, Path]
    #: Why some files cannot be trusted or were not kept, by name.
    problems: dict[str, str]
    route: str
    #: Where it was read from when that is not ``folder``: an eval log.
    origin: Path | None = None

    def json(self, name: str) -> Any:
        return json.loads(self.files[name].read_bytes())

    def why_not(self, name: str) -> str:
        return self.problems.get(name, "not kept")


def read_evidence(folder: Path) -> list[Evidence]:
    """The checked evidence of the report ``folder``: one, or one per sample of a batch.

    A batch's samples are checked against the batch's own ``scores.json``, outside the
    sample folders.

    :raises OptionError: when the folder is no report or kept no evidence.
    """
    try:
        scores = read_scores(folder)
    except ReportError as error:
        raise OptionError(f"REPORT: {error}") from None
    samples = scores.get("samples")
    if samples is None:
        return [_checked(folder, scores)]
    return [
        _checked(
            folder / SAMPLES_DIR / str(sample.get("id")),
            {"scan_id": scores.get("scan_id"), **sample},
        )
        for sample in samples
    ]


def _checked(folder: Path, scores: dict[str, Any]) -> Evidence:
    """One report's (or sample's) evidence, each file checked against the manifest and the
    manifest against the provenance in ``scores``."""
    found = read_manifest(folder)
    if found is None:
        raise OptionError(f"{folder}: the report kept no evidence; run again with --evidence diffs")
    manifest, digest = found
    recorded = (scores.get("provenance") or {}).get(PROVENANCE_KEY) or {}
    problems = {str(k): str(v) for k, v in (manifest.get("omitted") or {}).items()}
    files: dict[str, Path] = {}
    if recorded.get("manifest") != digest:
        why = "the evidence manifest does not match the report's provenance (changed after the run)"
        problems.update(dict.fromkeys(manifest.get("files") or {}, why))
    else:
        for name, entry in (manifest.get("files") or {}).items():
            path = folder / EVIDENCE_DIR / name
            try:
                actual = hashlib.sha256(path.read_bytes()).hexdigest()
            except OSError as error:
                problems[name] = f"evidence/{name} cannot be read: {error.strerror}"
                continue
            if actual != entry.get("sha256"):
                problems[name] = f"evidence/{name} was changed after the run (SHA-256 mismatch)"
            else:
                files[name] = path
    return Evidence(folder, scores, files, problems, str(manifest.get("route")))


@dataclass
class RescoreOptions:
    """What ``rescore`` was asked to change."""

    #: Builds the scorers from settings (the configuration file, the selector).
    settings: ScoringSettings
    expected: Mapping[str, Any] | None = None
    expected_source: dict[str, Any] | None = None
    #: ``--strict``; None: the original run's kinds.
    strict: StrictKinds | None = None


def rescore(evidence: Evidence, scorers: list[Scorer], options: RescoreOptions) -> SessionResult:
    """The scores of ``scorers`` on one report's evidence."""
    original = evidence.scores.get("provenance") or {}
    strict = options.strict
    if strict is None:  # the kinds the original run applied
        strict = parse_strict(
            ",".join((original.get("options") or {}).get("strict") or []) or "none"
        )
    context = _context(evidence, options, strict)
    context.gate = _gate(evidence, context)
    try:
        scores = run_scorers(scorers, context)
    finally:
        context.inputs.close()
    rescored_from = {
        "scan_id": evidence.scores.get("scan_id"),
        "sample": evidence.scores.get("id"),
        "path": str(evidence.origin or evidence.folder),
        "created": evidence.scores.get("created"),
        "provenance": original,
    }
    settings = options.settings
    options_json = {
        "selector": settings.selector,
        "config": None if settings.config_file is None else str(settings.config_file),
        "expected_tests": options.expected_source,
        "strict": sorted(strict.kinds),
    }
    made = provenance("rescore", options_json, {})
    made["rescored_from"] = rescored_from
    return SessionResult(
        repository=str(evidence.scores.get("repository")),
        scorers=scorers,
        scores=scores,
        tests=context.tally.to_json(),
        complete=bool(evidence.scores.get("complete", True)),
        errors=context.errors,
        files=context.report_files,
        integrity=context.integrity,
        provenance=made,
    )


def _context(evidence: Evidence, options: RescoreOptions, strict: StrictKinds) -> ScoringContext:
    """The scorers' inputs rebuilt from the evidence: the tally under the new expected set,
    the signals, the session's diff."""
    outcomes: dict[str, Any] = evidence.json(OUTCOMES) if OUTCOMES in evidence.files else {}
    context = outcomes_context(
        outcomes,
        evidence.folder,
        options.settings,
        options.expected,
        options.expected_source,
        strict.kinds,
    )
    diff = evidence.json(SESSION_DIFF) if SESSION_DIFF in evidence.files else None
    prefix = f"{DATABASES_DIR}/"
    finals = {
        name.removeprefix(prefix): path
        for name, path in evidence.files.items()
        if name.startswith(prefix)
    }
    problem = f"{NEEDS_REPOSITORY} (session diff: {evidence.why_not(SESSION_DIFF)})"
    context.inputs.databases = StoredDatabases(options.settings, diff, problem, finals)
    for name in evidence.files:
        if name.startswith(f"{REFERENCE_DIR}/"):
            kept = evidence.json(name)
            key = patterns_key(kept["test_patterns"])
            context.inputs.references[key] = StoredReference(options.settings, kept, finals)
    return context


def outcomes_context(
    outcomes: Mapping[str, Any],
    root: Path,
    settings: ScoringSettings,
    expected: Mapping[str, Any] | None,
    expected_source: dict[str, Any] | None,
    strict: frozenset[str],
    flaky: FlakyRule | None = None,
) -> ScoringContext:
    """A scoring context over kept outcomes (``outcomes.json``, or an Inspect sample's store):
    the tally under ``expected``, the signals, ``strict`` the kinds that make the test scores
    ``"N"``; ``flaky`` (None: the kept rule) how a test whose attempts differ counts."""
    tally = OutcomeTally(expected=expected, expected_source=expected_source)
    tally.collected.update(outcomes.get("collected", []))
    tally.collided.update(outcomes.get("collided", {}))
    tally.attempts.update(outcomes.get("attempts", {}))
    tally.flaky_rule = flaky or outcomes.get("flaky_rule", tally.flaky_rule)
    for test in outcomes.get("tests", []):
        tally.record_outcome(
            test["nodeid"], test["outcome"], test.get("duration", 0.0), test.get("message")
        )
    integrity = list(outcomes.get("integrity", []))
    if expected is not None:  # with a set, selection cannot change a score (as in a run)
        integrity = [signal for signal in integrity if signal["kind"] != "selection"]
    side = outcomes.get("evaluator_side") or {}
    not_started = outcomes.get("not_started")
    return ScoringContext(
        root=root,
        tally=tally,
        settings=settings,
        integrity=integrity,
        strict=strict,
        evaluator_side=EvaluatorSide(
            frozenset(side.get("paths", [])), tuple(side.get("caused", []))
        ),
        complete=bool(outcomes.get("complete", True)),
        not_started=None if not not_started else NotStarted(**not_started),
    )


class StoredReference:
    """``db_diff_change``'s reference side as a report's evidence kept it: the three diffs are
    split again in a diff store of their own, as the live rerun split them."""

    def __init__(self, settings: ScoringSettings, kept: dict[str, Any], finals: dict[str, Path]):
        """:param finals: the session's final databases kept (``--evidence all``), by path."""
        self.settings = settings
        self._kept = kept
        self._finals = finals
        self._folder: Path | None = None
        self._store: DiffStore | None = None
        self._diffs: Diffs | None = None

    def diffs(self, session: OutcomeTally) -> Diffs:
        if self._diffs is None:
            kept = self._kept
            baseline_diff = kept.get("baseline_diff")
            self._folder = Path(tempfile.mkdtemp(prefix="pytest-scoring-rescore-"))
            store = DiffStore(self._folder / "rows.db", baseline=baseline_diff is not None)
            self._store = store
            sides = [(REFERENCE, kept["reference"]), (SOLUTION, kept["solution"])]
            if baseline_diff is not None:
                sides.append((BASELINE, baseline_diff))
            for side, diff in sides:
                store.add_lists(side, diff, ["data", "schema"])
            split = SplitDiffs(
                kept["reference"], kept["solution"], store, complete=True, baseline=baseline_diff
            )
            baseline = kept.get("baseline")
            self._diffs = Diffs(
                split,
                split.parts(FILE_MAX_ROWS),
                kept["metadata"],
                kept["missing_from_rerun"],
                Baseline(final=None, **baseline) if isinstance(baseline, dict) else baseline,
                dict(self._finals),
                file_row_reader(self._finals) if self._finals else None,
            )
        return self._diffs

    def close(self) -> None:
        """Remove the diff store (after scoring)."""
        if self._store is not None:
            self._store.close()
            self._store = None
        if self._folder is not None:
            shutil.rmtree(self._folder, ignore_errors=True)
            self._folder = None


def _gate(evidence: Evidence, context: ScoringContext) -> Any:
    """The check that answers for scorers the evidence cannot decide."""
    extra_partial = evidence.scores.get("containment") == "partial"
    route = evidence.route

    def gate(scorer: Scorer) -> Score | None:
        if scorer.type in TEST_SCORINGS:
            return _test_gate(scorer, evidence, route, extra_partial)
        if (
            isinstance(scorer, DiffChangeScorer)
            and scorer.inputs_key() not in context.inputs.references
        ):
            lost = [name for name in evidence.problems if name.startswith(f"{REFERENCE_DIR}/")]
            reason = evidence.why_not(lost[0]) if lost else "not kept"
            return needs_repository(scorer.type, f"reference rerun: {reason}")
        if from_evidence(scorer):
            return None
        return needs_repository(scorer.type)

    return gate


def from_evidence(scorer: Scorer) -> bool:
    """Whether the scorer decides from a report's evidence alone: its built-in type says so
    in the registry, or a plugin's scorer says so itself (``from_evidence = True``)."""
    kind = BUILTIN_TYPES.get(scorer.type)
    return (kind is not None and kind.from_evidence) or getattr(scorer, "from_evidence", 0) is True


def needs_repository(scorer_type: str, what: str | None = None) -> Score:
    """The ``"N"`` of a scorer that cannot decide from what was kept (``what``: which
    evidence, and why it is not there)."""
    reason = NEEDS_REPOSITORY if what is None else f"{NEEDS_REPOSITORY} ({what})"
    return error_score(scorer_type, reason, INFRASTRUCTURE)


def _test_gate(scorer: Scorer, evidence: Evidence, route: str, partial: bool) -> Score | None:
    """A test score is ``"N"`` when its outcomes are untrusted: tampered or not kept evidence,
    a report written in process or under partial containment."""
    problem = None if OUTCOMES in evidence.files else evidence.why_not(OUTCOMES)
    return untrusted_outcomes(scorer.type, problem, route, partial)


def untrusted_outcomes(
    scorer_type: str, problem: str | None, route: str, partial: bool
) -> Score | None:
    """The ``"N"`` of a test scorer whose kept outcomes cannot decide: not kept (``problem``
    says why), or written by a route where the repository's code could shape them (in
    process, under partial containment); None when they can."""
    failed = TEST_SCORINGS[scorer_type].failed
    if problem is not None:
        reason = f"{NEEDS_REPOSITORY} (outcomes: {problem})"
        return error_score(scorer_type, reason, TAMPERING, **{COUNTED_AS_KEY: failed})
    if route not in TRUSTED_ROUTES or partial:
        where = "in process" if route not in TRUSTED_ROUTES else "under partial containment"
        reason = UNTRUSTED_ROUTE.format(where=where)
        return error_score(scorer_type, reason, TAMPERING, **{COUNTED_AS_KEY: failed})
    return None
