"""``db_diff_change``: database changes that happen only in this repository (docs/reference.md).

The reference side (copy the checkout, snapshot, copy the tests in, run pytest, snapshot) runs
in a background thread started at session start, so it overlaps the solution's own tests; the
scorer joins it when the session is scored, diffs, and applies the selector to ``after_only``.

Both diffs stream their rows into a SQLite file (:mod:`pytest_scoring.db.diff_store`) where
the diff-of-diffs is split; the selector reads ``after_only`` back row by row, so memory does
not grow with the number of changed rows (issue 12).

The rerun is a child of the evaluation's :class:`~pytest_scoring.process.children.ChildRunner`:
supervised, as the children's user, in a copy that user owns.
"""

from __future__ import annotations

import shutil
import sqlite3
import threading
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from typing import Final

from pytest_scoring.db.diff import diff_snapshots
from pytest_scoring.db.diff_of_diffs import SplitDiffs
from pytest_scoring.db.diff_shape import cap_diff
from pytest_scoring.db.diff_shape import cap_diff_of_diffs
from pytest_scoring.db.diff_shape import fit_diff
from pytest_scoring.db.diff_shape import fit_diff_of_diffs
from pytest_scoring.db.diff_shape import has_changes
from pytest_scoring.db.diff_shape import lost_databases
from pytest_scoring.db.diff_store import REFERENCE
from pytest_scoring.db.diff_store import SOLUTION
from pytest_scoring.db.diff_store import DiffStore
from pytest_scoring.db.discovery import find_databases
from pytest_scoring.db.snapshot import Snapshot
from pytest_scoring.db.snapshot import read_in_place
from pytest_scoring.db.snapshot import reset_databases
from pytest_scoring.db.snapshot import take_snapshot
from pytest_scoring.errors import DatabaseError
from pytest_scoring.errors import OptionError
from pytest_scoring.errors import ScoringError
from pytest_scoring.plugin.options import DEFAULT_TEST_PATTERNS
from pytest_scoring.plugin.options import ScoringSettings
from pytest_scoring.process.children import ChildRunner
from pytest_scoring.reference.child import ChildRun
from pytest_scoring.reference.child import reference_timeout
from pytest_scoring.reference.child import run_child
from pytest_scoring.reference.copy import CopiedTests
from pytest_scoring.reference.copy import check_reference_dir
from pytest_scoring.reference.copy import check_test_pattern
from pytest_scoring.reference.copy import copy_test_files
from pytest_scoring.reference.copy import copy_tree
from pytest_scoring.scorers.base import ScoringContext
from pytest_scoring.scorers.db_change import checked_selector
from pytest_scoring.scorers.db_change import session_selector_timeout
from pytest_scoring.scorers.metrics import Metric
from pytest_scoring.scorers.metrics import accuracy
from pytest_scoring.scorers.metrics import stderr
from pytest_scoring.scorers.score import METADATA_LIST_CAP
from pytest_scoring.scorers.score import REPORT_FILE_CAP
from pytest_scoring.scorers.score import Score
from pytest_scoring.scorers.score import bool_value
from pytest_scoring.scorers.score import cap_list
from pytest_scoring.scorers.score import error_score
from pytest_scoring.scorers.score import make_score
from pytest_scoring.selector.evaluation import SelectorTimeout
from pytest_scoring.selector.evaluation import budget_for
from pytest_scoring.selector.language import Selector
from pytest_scoring.selector.language import Verdict

SCORER_TYPE: Final = "db_diff_change"
NEEDS_REFERENCE: Final = "db_diff_change needs a reference checkout: --score-reference=DIR"
#: Rows per list kept in ``reference_diff.json`` / ``diff_of_diffs.json`` (as in ``diff.json``).
FILE_MAX_ROWS: Final = 1000


@dataclass
class ReferenceSide:
    """What the reference rerun produced: the copy's snapshots and the child run."""

    initial: Snapshot
    final: Snapshot
    tests: CopiedTests
    run: ChildRun


@dataclass
class Diffs:
    """The diffs every ``db_diff_change`` scorer of a session shares.

    ``split.reference`` and ``split.solution`` keep at most :data:`FILE_MAX_ROWS` example rows
    per list; every row is in ``split``'s store, from which ``file_parts`` (the diff-of-diffs
    with examples) and the selectors' ``after_only`` are read.
    """

    split: SplitDiffs
    file_parts: dict[str, Any]
    metadata: dict[str, Any]


class ReferenceRerun:
    """The reference side of one session, run in the background from session start."""

    def __init__(
        self,
        settings: ScoringSettings,
        patterns: Sequence[str],
        timeout: float,
        children: ChildRunner,
    ):
        self.settings = settings
        self.patterns = list(patterns)
        self.timeout = timeout
        self.children = children
        self.started = time.monotonic()
        self._thread = threading.Thread(target=self._work, name="pytest-scoring-reference")
        self._cancel = threading.Event()
        #: The evaluator's files (the initial snapshot), and the copy the rerun may write.
        self._workdir = children.folder("reference")
        self._checkout = children.workspace("reference-checkout")
        self._store: DiffStore | None = None
        self._store_dir: Path | None = None
        self._side: ReferenceSide | None = None
        self._error: BaseException | None = None
        self._diffs: Diffs | None = None

    def start(self) -> None:
        self._thread.start()

    def _work(self) -> None:
        try:
            self._side = self._run(self._workdir, self._checkout / "checkout")
        except Exception as error:  # surfaced when a scorer asks for the result
            self._error = error

    def _databases(self, root: Path) -> list[str]:
        """Databases under ``root`` (the repository or the copy), skipping the same folders."""
        excluded = self.settings.excluded_folders(root)
        return find_databases(root, self.settings.db_patterns, excluded)

    def _run(self, workdir: Path, copy: Path) -> ReferenceSide:
        assert self.settings.reference is not None
        # The report root and our own folders are never copied (a reference above /tmp…).
        reference = self.settings.reference
        excluded = self.settings.excluded_folders(reference)
        own = [self.settings.report_root, workdir, copy.parent]
        copy_tree(reference, copy, exclude=[*own, *excluded])
        initial = take_snapshot(
            copy, self._databases(copy), workdir / "initial", source=str(self.settings.reference)
        )
        if self.children.guard is not None:
            self.children.guard.add_files(initial.files.values())
        tests = copy_test_files(
            self.settings.root, self.patterns, copy, exclude=self.settings.excluded_folders()
        )
        self.children.give(copy)
        run = run_child(
            self.children,
            copy,
            self.settings.selection,
            self.timeout,
            deterministic=self.settings.deterministic,
            cancel=self._cancel,
        )
        final = read_in_place(copy, self._databases(copy), source=f"{copy} (reference rerun)")
        return ReferenceSide(initial, final, tests, run)

    def _join(self) -> ReferenceSide:
        """Wait for the background run; a second Ctrl-C while waiting kills it."""
        try:
            self._thread.join()
        except KeyboardInterrupt:
            self._cancel.set()
            raise
        if isinstance(self._error, OSError | ScoringError):
            raise ReferenceRunError(f"the reference copy failed: {self._error}", {})
        if self._error is not None:
            raise self._error
        assert self._side is not None
        return self._side

    def diffs(self, context: ScoringContext) -> Diffs:
        """Join the background run and diff it against this session's final databases.

        :raises ScoringError: when the reference run gave no usable result (reason inside).
        """
        if self._diffs is None:
            solution_duration = round(time.monotonic() - self.started, 3)
            try:
                self._diffs = self._compare(self._join(), context, solution_duration)
            finally:
                shutil.rmtree(self._workdir, ignore_errors=True)
                shutil.rmtree(self._checkout, ignore_errors=True)
        return self._diffs

    def _compare(self, side: ReferenceSide, context: ScoringContext, duration: float) -> Diffs:
        metadata = {**self._metadata(side, context), "solution_duration": duration}
        problem = side.run.failure(self.timeout)
        if problem is not None:
            raise ReferenceRunError(problem, metadata)
        root = self.settings.root
        solution_final = read_in_place(root, self._databases(root))
        self._store_dir = self.children.folder("diffs")
        self._store = DiffStore(self._store_dir / "rows.db")
        split = split_runs(
            side.initial, side.final, solution_final, self.settings.db_patterns, self._store
        )
        return Diffs(split, split.parts(FILE_MAX_ROWS), metadata)

    def close(self) -> None:
        """After every scorer has scored: end the rerun if it still runs (scoring stopped
        early), remove its folders and the stored rows."""
        self._cancel.set()
        if self._thread.is_alive():
            self._thread.join()
        shutil.rmtree(self._workdir, ignore_errors=True)
        shutil.rmtree(self._checkout, ignore_errors=True)
        if self._store is not None:
            self._store.close()
            self._store = None
        if self._store_dir is not None:
            shutil.rmtree(self._store_dir, ignore_errors=True)
            self._store_dir = None

    def _metadata(self, side: ReferenceSide, context: ScoringContext) -> dict[str, Any]:
        reference_tally = side.run.tally or {}
        here = context.tally.collected | set(context.tally.tests)
        missing = sorted(set(reference_tally.get("collected", [])) - here)
        return {
            "reference": str(self.settings.reference),
            "test_patterns": self.patterns,
            "test_files_copied": len(side.tests.copied),
            "test_files_skipped": cap_list(side.tests.skipped),
            "reference_counts": reference_tally.get("counts"),
            "solution_counts": context.tally.counts(),
            "missing_tests": cap_list(missing),
            "missing_tests_count": len(missing),
            "reference_duration": side.run.duration,
            "reference_exit_code": side.run.exit_code,
            "reference_timed_out": side.run.timed_out,
            "reference_output": side.run.output if side.run.failure(self.timeout) else "",
        }


def split_runs(
    initial: Snapshot,
    reference_final: Snapshot,
    solution_final: Snapshot,
    db_patterns: Sequence[str],
    store: DiffStore,
) -> SplitDiffs:
    """Diff both runs from the initial state, every row into ``store``, and split them.

    The two diffs keep :data:`FILE_MAX_ROWS` examples per list; the store keeps every row.
    """
    reference, solution = (
        diff_snapshots(initial, final, FILE_MAX_ROWS, db_patterns, row_sink=store.sink(side))
        for final, side in ((reference_final, REFERENCE), (solution_final, SOLUTION))
    )
    store.add_lists(REFERENCE, reference, ["schema"])
    store.add_lists(SOLUTION, solution, ["schema"])
    return SplitDiffs(reference, solution, store, complete=True)


def reset_solution_databases(settings: ScoringSettings) -> None:
    """``--score-db-reset`` before the solution's tests, also when no ``db_change`` runs.

    Restoring twice (``db_change`` resets too) is harmless: no test has run yet.

    :raises DatabaseError: when the databases cannot be restored.
    """
    root = settings.root
    relpaths = find_databases(root, settings.db_patterns, settings.excluded_folders())
    try:
        reset_databases(root, relpaths, settings.reset_store(), settings.report_root)
    except (OSError, sqlite3.Error) as error:
        raise DatabaseError(f"--score-db-reset: cannot restore the databases: {error}") from None


class ReferenceRunError(ScoringError):
    """The reference run gave no usable result; carries what is known for the score."""

    def __init__(self, message: str, metadata: dict[str, Any]):
        super().__init__(message)
        self.metadata = metadata


class DiffChangeScorer:
    """``db_diff_change``: the selector on changes made only by this repository's code."""

    def __init__(
        self,
        selector: Selector | None,
        test_patterns: Sequence[str],
        selector_timeout: float | None = None,
    ):
        self.name = SCORER_TYPE
        self.type = SCORER_TYPE
        self.metrics: Sequence[Metric] = (accuracy, stderr)
        self.selector = selector
        self.test_patterns = list(test_patterns)
        #: Seconds the selector may take; ``None``: the session's ``--score-selector-timeout``.
        self.selector_timeout = selector_timeout

    def _resource_key(self) -> str:
        return f"reference:{'|'.join(self.test_patterns)}"

    def start(self, context: ScoringContext) -> None:
        """Launch the reference rerun (shared by scorers with the same test patterns)."""
        settings = context.settings
        if settings is None:
            return
        if settings.reference is None:
            raise ScoringError(NEEDS_REFERENCE)
        if self._resource_key() not in context.resources:
            if settings.db_reset:
                reset_solution_databases(settings)
            timeout = min(reference_timeout(), context.children.time_limit or float("inf"))
            rerun = ReferenceRerun(settings, self.test_patterns, timeout, context.children)
            context.resources[self._resource_key()] = rerun
            rerun.start()

    def score(self, context: ScoringContext) -> Score:
        rerun = context.resources.get(self._resource_key())
        if not isinstance(rerun, ReferenceRerun):
            return error_score(self.type, "the reference rerun did not start")
        try:
            diffs = rerun.diffs(context)
        except ReferenceRunError as error:
            return error_score(self.type, str(error), **error.metadata)
        value_cap = rerun.settings.value_cap
        context.report_files["reference_diff.json"] = fit_diff(
            diffs.split.reference, FILE_MAX_ROWS, value_cap, REPORT_FILE_CAP
        )
        context.report_files["diff_of_diffs.json"] = fit_diff_of_diffs(
            diffs.file_parts, FILE_MAX_ROWS, value_cap, REPORT_FILE_CAP
        )
        after_only = diffs.split.part_for_selectors("after_only")
        metadata = {
            "selector": self.selector.source if self.selector else None,
            **diffs.metadata,
            "reference_diff": cap_diff(diffs.split.reference, METADATA_LIST_CAP, value_cap),
            "solution_diff": cap_diff(diffs.split.solution, METADATA_LIST_CAP, value_cap),
            "diff_of_diffs": cap_diff_of_diffs(diffs.file_parts, METADATA_LIST_CAP, value_cap),
        }
        if self.selector is None:
            verdict = Verdict(has_changes(after_only))
        else:
            budget = budget_for(self.selector_timeout, session_selector_timeout(context))
            try:
                verdict = self.selector.evaluate(after_only, budget)
            except SelectorTimeout as error:
                return error_score(self.type, str(error), **metadata)
        lost = lost_databases(diffs.split.solution)
        if not verdict.matched and lost:
            return error_score(
                self.type,
                f"cannot tell what the session did: {'; '.join(lost.values())}",
                lost_databases=lost,
                **metadata,
            )
        return make_score(
            bool_value(verdict.matched),
            self.type,
            explanation=self._explain(verdict.matched),
            metadata={**metadata, "selector_warnings": list(verdict.warnings)},
        )

    def _explain(self, matched: bool) -> str:
        if self.selector is None:
            what = "database changes" if matched else "no database change"
        else:
            what = "changes the selector matches" if matched else "no change the selector matches"
        return f"this repository makes {what} beyond what the reference run does"


def db_diff_change_scorer(
    selector: Any = None,
    test_patterns: Sequence[str] | None = None,
    selector_timeout: float | None = None,
) -> DiffChangeScorer:
    """Score changes that happen only in this repository, not in the reference checkout.

    :param selector: a selector (JSON object) for the ``after_only`` part of the diff-of-diffs;
        None scores ``"C"`` for any such change.
    :param test_patterns: globs of test files copied into the reference copy, default
        ``tests/**/*.py``, ``tests/**/*.js``, ``tests/**/*.ts``.
    :param selector_timeout: seconds the selector may take before the score is ``"N"``;
        ``None``: ``--score-selector-timeout`` (default 60).
    :raises ScoringError: for an invalid selector or a pattern that leaves the repository.
    """
    patterns = list(DEFAULT_TEST_PATTERNS if test_patterns is None else test_patterns)
    for index, pattern in enumerate(patterns):
        try:
            check_test_pattern(pattern)
        except OptionError as error:
            raise OptionError(f"test_patterns[{index}]: {error}") from None
    return DiffChangeScorer(
        checked_selector(selector, selector_timeout), patterns, selector_timeout
    )


def check_reference_setting(settings: ScoringSettings) -> None:
    """Before any test runs: a readable reference folder and a valid rerun timeout.

    :raises ScoringError: naming ``--score-reference`` or the timeout variable.
    """
    if settings.reference is None:
        raise ScoringError(NEEDS_REFERENCE)
    settings.reference = check_reference_dir(settings.reference)
    reference_timeout()  # a bad $PYTEST_SCORING_REFERENCE_TIMEOUT is named now, not at the end
