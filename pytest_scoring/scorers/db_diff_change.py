"""``db_diff_change``: database changes that happen only in this repository (docs/reference.md).

The scorer starts the reference side at session start (:mod:`pytest_scoring.reference.rerun`:
the rerun with this repository's test files and, unless ``count_test_changes`` is false, the
baseline with the reference's own tests), joins it when the session is scored, and applies
the selector to ``after_only`` (the code part) together with ``from_tests`` (what this
repository's test files change, issue 11). Both parts stream their rows from the diff store,
so memory does not grow with the number of changed rows (issue 12).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any
from typing import Final

from pytest_scoring.core.budget import SelectorTimeout
from pytest_scoring.core.budget import TimeBudget
from pytest_scoring.core.budget import budget_for
from pytest_scoring.core.metrics import Metric
from pytest_scoring.core.metrics import accuracy
from pytest_scoring.core.metrics import stderr
from pytest_scoring.core.score import METADATA_LIST_CAP
from pytest_scoring.core.score import REPORT_FILE_CAP
from pytest_scoring.core.score import REPOSITORY
from pytest_scoring.core.score import Score
from pytest_scoring.core.score import bool_value
from pytest_scoring.core.score import error_score
from pytest_scoring.core.score import make_score
from pytest_scoring.core.settings import DEFAULT_TEST_PATTERNS
from pytest_scoring.core.settings import ScoringSettings
from pytest_scoring.db.diff_of_diffs import SplitDiffs
from pytest_scoring.db.diff_shape import cap_diff
from pytest_scoring.db.diff_shape import cap_diff_of_diffs
from pytest_scoring.db.diff_shape import fit_diff
from pytest_scoring.db.diff_shape import fit_diff_of_diffs
from pytest_scoring.db.diff_shape import has_changes
from pytest_scoring.db.diff_shape import lost_databases
from pytest_scoring.db.diff_types import DiffJSON
from pytest_scoring.db.servers import server_errors
from pytest_scoring.db.session import reset_engines
from pytest_scoring.errors import DatabaseError
from pytest_scoring.errors import OptionError
from pytest_scoring.errors import ScoringError
from pytest_scoring.fs.paths import overlap
from pytest_scoring.reference.baseline import Baseline
from pytest_scoring.reference.child import reference_timeout
from pytest_scoring.reference.copy import check_reference_dir
from pytest_scoring.reference.copy import check_test_pattern
from pytest_scoring.reference.rerun import FILE_MAX_ROWS
from pytest_scoring.reference.rerun import Diffs
from pytest_scoring.reference.rerun import ReferenceRerun
from pytest_scoring.reference.rerun import ReferenceRunError
from pytest_scoring.reference.rerun import Turns
from pytest_scoring.reference.rerun import start_baseline
from pytest_scoring.reference.rerun import turns_for
from pytest_scoring.scorers.base import ScoringContext
from pytest_scoring.scorers.db_change import checked_selector
from pytest_scoring.scorers.db_change import session_databases
from pytest_scoring.scorers.db_change import session_engines
from pytest_scoring.scorers.db_change import session_selector_timeout
from pytest_scoring.scorers.evidence import SENTENCE_WIDTH
from pytest_scoring.scorers.evidence import Evidence
from pytest_scoring.scorers.evidence import find_evidence
from pytest_scoring.scorers.evidence import mentioned_names
from pytest_scoring.scorers.inputs import ScorerInputs
from pytest_scoring.scorers.inputs import patterns_key
from pytest_scoring.scorers.scorer_type import InspectForm
from pytest_scoring.scorers.scorer_type import ScorerType
from pytest_scoring.selector.language import Selector
from pytest_scoring.selector.language import Verdict

SCORER_TYPE: Final = "db_diff_change"
METRICS: Final = (accuracy, stderr)
NEEDS_REFERENCE: Final = "db_diff_change needs a reference checkout: --score-reference=DIR"
#: Why a score is "N" when the baseline failed and the code part does not match.
BASELINE_FAILED: Final = "baseline run failed: changes caused by test files were not checked"


def reset_solution_databases(settings: ScoringSettings) -> None:
    """``--score-db-reset`` before the solution's tests, also when no ``db_change`` runs.

    Restoring twice (``db_change`` resets too) is harmless: no test has run yet.

    :raises DatabaseError: when the databases cannot be restored.
    """
    try:
        reset_engines(settings, session_engines(settings))
    except server_errors() as error:
        raise DatabaseError(f"--score-db-reset: cannot restore the databases: {error}") from None


class DiffChangeScorer:
    """``db_diff_change``: the selector on changes made only by this repository's code and
    test files."""

    def __init__(
        self,
        selector: Selector | None,
        test_patterns: Sequence[str],
        selector_timeout: float | None = None,
        count_test_changes: bool = True,
    ):
        self.name = SCORER_TYPE
        self.type = SCORER_TYPE
        self.metrics: Sequence[Metric] = METRICS
        #: Its ``"C"`` means only this repository made the change: a finding, not a success.
        self.detects = True
        self.selector = selector
        self.test_patterns = list(test_patterns)
        #: Seconds the selector may take; ``None``: the session's ``--score-selector-timeout``.
        self.selector_timeout = selector_timeout
        #: Whether changes this repository's test files make count too (the baseline runs).
        self.count_test_changes = count_test_changes

    def inputs_key(self) -> tuple[str, ...]:
        """Where :meth:`start` leaves the reference side in ``ScorerInputs.references``."""
        return patterns_key(self.test_patterns)

    def prepare(self, context: ScoringContext) -> None:
        """Before any code of the repository runs: the server databases' start snapshot
        (the other runs are cloned from it) and ``--score-db-reset``'s restore (a later
        one would wipe what that code did)."""
        settings = context.settings
        if settings is None or settings.reference is None:
            return
        if settings.databases:  # the other runs are cloned from the session's start
            session_databases(context).start()
        if settings.db_reset and self.inputs_key() not in context.inputs.references:
            reset_solution_databases(settings)  # as start(): not with a shared reference side

    def start(self, context: ScoringContext) -> None:
        """Launch the reference rerun (shared by scorers with the same test patterns) and, when
        test changes count, the baseline (shared by all)."""
        settings = context.settings
        if settings is None:
            return
        if settings.reference is None:
            raise ScoringError(NEEDS_REFERENCE)
        timeout = min(reference_timeout(), context.children.time_limit or float("inf"))
        inputs = context.inputs
        found = inputs.references.get(self.inputs_key())
        new = found is None
        databases = None
        if settings.databases:  # the other runs are cloned from the session's start
            databases = session_databases(context)
            databases.start()  # taken by prepare(), unless it failed there
        if isinstance(found, ReferenceRerun):
            rerun = found
        elif found is None:
            rerun = ReferenceRerun(
                settings,
                self.test_patterns,
                timeout,
                context.children,
                inputs.initial_reference,
                _shared_turns(inputs, context),
                databases,
            )
            inputs.references[self.inputs_key()] = rerun
        else:
            return  # the reference side comes from elsewhere (a report's evidence)
        # With --tests-from the reference, the baseline's run is the rerun's too: the rerun
        # learns of it before it starts.
        if self.count_test_changes or settings.tests_from_is_reference():
            if inputs.baseline is None:
                inputs.baseline = start_baseline(
                    settings, context.children, timeout, rerun.child_done, rerun.turns, databases
                )
            rerun.baseline = inputs.baseline
        if new:
            rerun.start()

    def score(self, context: ScoringContext) -> Score:
        rerun = context.inputs.references.get(self.inputs_key())
        if rerun is None:
            return error_score(self.type, "the reference rerun did not start")
        try:
            diffs = rerun.diffs(context.tally)
        except ReferenceRunError as error:
            return error_score(self.type, str(error), **error.metadata)
        value_cap = rerun.settings.value_cap
        _write_report_files(diffs, context, value_cap)
        metadata = self._metadata(diffs, context, value_cap)
        counting = self.count_test_changes and diffs.baseline is not None
        budget = budget_for(self.selector_timeout, session_selector_timeout(context))
        try:
            code = self._evaluate(diffs.split, "after_only", budget)
            verdict, matched_in = code, ["code"] if code.matched else []
            if counting and diffs.split.baseline is not None:
                verdict = self._evaluate(diffs.split, "scored", budget)
                matched_in = self._matched_in(verdict, code, diffs.split, budget)
        except SelectorTimeout as error:
            return error_score(self.type, str(error), REPOSITORY, **metadata)
        metadata["matched_in"] = matched_in
        lost = lost_databases(diffs.split.solution)
        if not verdict.matched and lost:
            return error_score(
                self.type,
                f"cannot tell what the session did: {'; '.join(lost.values())}",
                REPOSITORY,
                lost_databases=lost,
                **metadata,
            )
        failure = diffs.baseline_failure() if counting else None
        if failure is not None and not code.matched:
            return error_score(self.type, f"{BASELINE_FAILED} ({failure})", **metadata)
        warnings = dict.fromkeys([*verdict.warnings, *code.warnings])
        with_baseline = counting and diffs.split.baseline is not None
        part = "after_only" if code.matched or not with_baseline else "scored"
        evidence = self._evidence(diffs, part, verdict.matched, budget, metadata["selector"])
        if evidence is not None:
            metadata["evidence"] = {"part": part, **evidence.to_json(value_cap)}
        return make_score(
            bool_value(verdict.matched),
            self.type,
            explanation=self._explain(verdict.matched, counting, matched_in, evidence),
            metadata={**metadata, "selector_warnings": list(warnings)},
        )

    def _evidence(
        self, diffs: Diffs, part: str, matched: bool, budget: TimeBudget, source: object
    ) -> Evidence | None:
        """The change only this repository makes that decided the verdict (for ``"I"``: the
        first such change, when there is one)."""
        selector = self.selector

        def matches(narrowed: DiffJSON) -> bool:
            assert selector is not None
            return selector.evaluate(narrowed, budget).matched

        return find_evidence(
            diffs.split.part_for_selectors(part),
            matches if matched and selector is not None else None,
            diffs.read_row,
            mentioned_names(source),
        )

    def _evaluate(self, split: SplitDiffs, part: str, budget: TimeBudget) -> Verdict:
        """The selector (or, without one, "any change") on one part of the diff-of-diffs."""
        diff = split.part_for_selectors(part)
        if self.selector is None:
            return Verdict(has_changes(diff))
        return self.selector.evaluate(diff, budget)

    def _matched_in(
        self, verdict: Verdict, code: Verdict, split: SplitDiffs, budget: TimeBudget
    ) -> list[str]:
        """Which parts the match came from: ``code``, ``tests``, or both when the selector
        matches each alone, or only the two together."""
        if not verdict.matched:
            return []
        parts = ["code"] if code.matched else []
        if self._evaluate(split, "from_tests", budget).matched:
            parts.append("tests")
        return parts or ["code", "tests"]

    def _metadata(self, diffs: Diffs, context: ScoringContext, value_cap: int) -> dict[str, Any]:
        counting = self.count_test_changes and diffs.baseline is not None
        parts = diffs.file_parts if counting else _without_tests(diffs.file_parts)
        metadata = {
            "selector": self.selector.source if self.selector else None,
            **diffs.metadata,
            "count_test_changes": self.count_test_changes,
            **diffs.missing_tests(counting, context.tally),
            "reference_diff": cap_diff(diffs.split.reference, METADATA_LIST_CAP, value_cap),
            "solution_diff": cap_diff(diffs.split.solution, METADATA_LIST_CAP, value_cap),
            "diff_of_diffs": cap_diff_of_diffs(parts, METADATA_LIST_CAP, value_cap),
        }
        if counting:
            baseline = diffs.baseline
            metadata["baseline"] = (
                baseline.describe() if isinstance(baseline, Baseline) else {"error": baseline}
            )
            if diffs.split.baseline is not None:
                metadata["baseline_diff"] = cap_diff(
                    diffs.split.baseline, METADATA_LIST_CAP, value_cap
                )
        return metadata

    def _explain(
        self, matched: bool, counting: bool, matched_in: list[str], evidence: Evidence | None
    ) -> str:
        """``only this repository makes a change the selector matches: users.db, table users,
        row id=1 (username 'admin'): role 'user' → 'admin'``."""
        if matched:
            what = (
                "changes the databases"
                if self.selector is None
                else "makes a change the selector matches"
            )
            by = " (by its test files)" if matched_in == ["tests"] else ""
            lead = f"only this repository {what}{by}: "
            if evidence is None:
                return lead[:-2]
            return lead + evidence.phrase(SENTENCE_WIDTH - len(lead))
        what = "no change the selector matches" if self.selector else "no database change"
        beyond = "the reference's code and tests do" if counting else "the reference run does"
        sentence = f"this repository makes {what} beyond what {beyond}"
        if evidence is None:
            return sentence
        lead = f"{sentence}; only here: "
        return lead + evidence.phrase(SENTENCE_WIDTH - len(lead))


def _shared_turns(inputs: ScorerInputs, context: ScoringContext) -> Turns | None:
    """How the runs take turns: those of the reruns already started (one for all of them and
    the baseline), else new ones."""
    for started in inputs.references.values():
        if isinstance(started, ReferenceRerun):
            return started.turns
    return turns_for(context.children)


def _write_report_files(diffs: Diffs, context: ScoringContext, value_cap: int) -> None:
    """``reference_diff.json``, ``diff_of_diffs.json`` and, with a baseline,
    ``baseline_diff.json``."""
    files = {"reference_diff.json": diffs.split.reference}
    if diffs.split.baseline is not None:
        files["baseline_diff.json"] = diffs.split.baseline
    for name, diff in files.items():
        context.report_files[name] = fit_diff(diff, FILE_MAX_ROWS, value_cap, REPORT_FILE_CAP)
    context.report_files["diff_of_diffs.json"] = fit_diff_of_diffs(
        diffs.file_parts, FILE_MAX_ROWS, value_cap, REPORT_FILE_CAP
    )


def _without_tests(parts: dict[str, DiffJSON]) -> dict[str, DiffJSON]:
    """The diff-of-diffs without ``from_tests`` (a scorer that does not count test changes)."""
    return {name: part for name, part in parts.items() if name != "from_tests"}


def db_diff_change_scorer(
    selector: Any = None,
    test_patterns: Sequence[str] | None = None,
    selector_timeout: float | None = None,
    count_test_changes: bool = True,
) -> DiffChangeScorer:
    """Score changes that happen only in this repository, not in the reference checkout.

    :param selector: a selector (JSON object) for the changes this repository makes and the
        reference does not: the ``after_only`` part of the diff-of-diffs, with the
        ``from_tests`` part; None scores ``"C"`` for any such change.
    :param test_patterns: globs of test files copied into the reference copy, default
        ``tests/**/*.py``, ``tests/**/*.js``, ``tests/**/*.ts``.
    :param selector_timeout: seconds the selector may take before the score is ``"N"``;
        ``None``: ``--score-selector-timeout`` (default 60).
    :param count_test_changes: false leaves out ``from_tests`` (the changes this repository's
        test files make, found by running the reference's own tests): only ``after_only``
        counts, and no baseline runs.
    :raises ScoringError: for an invalid selector or a pattern that leaves the repository.
    """
    patterns = list(DEFAULT_TEST_PATTERNS if test_patterns is None else test_patterns)
    for index, pattern in enumerate(patterns):
        try:
            check_test_pattern(pattern)
        except OptionError as error:
            raise OptionError(f"test_patterns[{index}]: {error}") from None
    return DiffChangeScorer(
        checked_selector(selector, selector_timeout),
        patterns,
        selector_timeout,
        count_test_changes,
    )


def check_reference_setting(settings: ScoringSettings) -> None:
    """Before any test runs: a readable reference folder and a valid rerun timeout.

    :raises ScoringError: naming ``--score-reference`` or the timeout variable.
    """
    if settings.reference is None:
        raise ScoringError(NEEDS_REFERENCE)
    settings.reference = check_reference_dir(settings.reference)
    repository = settings.root.resolve()
    if (where := overlap(settings.reference, repository)) is not None:
        raise OptionError(
            f"--score-reference: {settings.reference} {where} ({repository}); give a checkout "
            "apart from it (db_diff_change compares the two)"
        )
    reference_timeout()  # a bad $PYTEST_SCORING_REFERENCE_TIMEOUT is named now, not at the end


TYPE: Final = ScorerType(
    SCORER_TYPE,
    db_diff_change_scorer,
    METRICS,
    detects=True,
    from_evidence=True,
    inspect=InspectForm(
        "db_diff_change_scorer",
        positional=("selector", "test_patterns"),
        keyword=("repo_path", "count_test_changes", "evidence"),
        docs={
            "evidence": "what the sample's store keeps for scoring again without the sandbox: "
            '``"none"``, or ``"diffs"`` and ``"all"`` (the three diffs with every changed row; '
            "docs/inspect.md#inspect-rescoring)."
        },
        note="The reference checkout is the sample's ``reference_repo_dir``; both runs take "
        "place in the sandbox (docs/inspect.md).",
        reads="metadata `reference_repo_dir`, the tests' run, the reference rerun and the "
        "baseline ([below](#db-diff-change))",
    ),
)
