"""The reference side of ``db_diff_change``: the rerun, the baseline, and their diffs
(docs/reference.md).

The rerun (copy the checkout, snapshot, copy this repository's tests in, run pytest, read the
databases) runs in a background thread started at session start, so it overlaps the
solution's own tests; so does the baseline (the reference's own tests,
:mod:`pytest_scoring.reference.baseline`). The rerun's diff from the initial reference state is
made in that thread as soon as the rerun ends (while the session may still run); when the
session is scored both runs are joined and the session's and the baseline's diffs follow.

Every diff streams its rows into a SQLite file (:mod:`pytest_scoring.db.diff_store`) where
the diff-of-diffs is split; selectors read their part back row by row, so memory does not
grow with the number of changed rows (issue 12).

The rerun runs beside the session, so never as its user: it gets a runner of its own
(:meth:`~pytest_scoring.process.children.ChildRunner.for_another_run`), supervised, as a user
of its own under ``run`` as root, in a copy only that user owns.
"""

from __future__ import annotations

import contextlib
import shutil
import threading
import time
from collections.abc import Callable
from collections.abc import Collection
from collections.abc import Mapping
from collections.abc import Sequence
from dataclasses import dataclass
from dataclasses import field
from functools import partial
from pathlib import Path
from typing import TYPE_CHECKING
from typing import Any
from typing import Final
from typing import Generic

from pytest_scoring.core.outcomes import OutcomeTally
from pytest_scoring.core.score import cap_list
from pytest_scoring.core.settings import ScoringSettings
from pytest_scoring.db.diff_of_diffs import SplitDiffs
from pytest_scoring.db.diff_store import BASELINE
from pytest_scoring.db.diff_store import REFERENCE
from pytest_scoring.db.diff_store import SOLUTION
from pytest_scoring.db.diff_store import DiffStore
from pytest_scoring.db.diff_types import DiffJSON
from pytest_scoring.db.diff_types import RowJSON
from pytest_scoring.db.engine import DatabaseEngine
from pytest_scoring.db.engine import RowReader
from pytest_scoring.db.engine import RowSink
from pytest_scoring.db.engine import S
from pytest_scoring.db.session import SessionDatabases
from pytest_scoring.db.session import engine_diff
from pytest_scoring.db.session import final_state
from pytest_scoring.db.session import snapshot_now
from pytest_scoring.db.session import sqlite_engine
from pytest_scoring.db.snapshot import Snapshot
from pytest_scoring.errors import DatabaseError
from pytest_scoring.errors import ScoringError
from pytest_scoring.fs.copy import copy_tree
from pytest_scoring.process.children import ChildRunner
from pytest_scoring.reference.baseline import Baseline
from pytest_scoring.reference.baseline import BaselineOptions
from pytest_scoring.reference.baseline import BaselineRun
from pytest_scoring.reference.baseline import baseline_for
from pytest_scoring.reference.baseline import give_urls
from pytest_scoring.reference.baseline_cache import BaselineCache
from pytest_scoring.reference.child import ChildRun
from pytest_scoring.reference.child import run_child
from pytest_scoring.reference.copy import CopiedTests
from pytest_scoring.reference.copy import copy_test_files
from pytest_scoring.reference.tests_from import install_tests

if TYPE_CHECKING:
    from pytest_scoring.db.clones import RunClones

#: Rows per list kept in ``reference_diff.json`` / ``diff_of_diffs.json`` (as in ``diff.json``).
FILE_MAX_ROWS: Final = 1000


@dataclass
class ReferenceSide:
    """What the reference rerun produced: the copy's snapshots and the child run."""

    initial: Snapshot
    final: Snapshot
    tests: CopiedTests
    run: ChildRun
    #: Each server engine and its clones' state after the run (read in place).
    servers: list[tuple[Any, Any]] = field(default_factory=list)


@dataclass
class ServerRuns(Generic[S]):
    """One server engine's states of the runs: its databases are cloned for the reference's
    (and the baseline's) run from the session's start snapshot."""

    engine: DatabaseEngine[S]
    initial: S
    reference: S
    solution: S
    baseline: S | None = None


@dataclass
class Diffs:
    """The diffs every ``db_diff_change`` scorer of a session shares.

    ``split.reference`` and ``split.solution`` keep at most :data:`FILE_MAX_ROWS` example rows
    per list; every row is in ``split``'s store, from which ``file_parts`` (the diff-of-diffs
    with examples) and the selectors' ``after_only`` are read.
    """

    split: SplitDiffs
    file_parts: dict[str, DiffJSON]
    metadata: dict[str, Any]
    #: Test ids the reference rerun collected that this session did not.
    missing_from_rerun: list[str]
    #: The baseline (None when no scorer counts test changes), or why there is none.
    baseline: Baseline | str | None = None
    #: The files of this session's final databases, where they are files read here (not in
    #: a sandbox), by name: kept as evidence.
    solution_files: Mapping[str, Path] = field(default_factory=dict)
    #: Reads a row of this session's final databases (None: not at hand, in a sandbox).
    read_row: RowReader | None = None

    def missing_tests(self, counting: bool, session: OutcomeTally) -> dict[str, Any]:
        """Tests the solution deleted: the baseline's collected ids this session lacks (the
        rerun's, when test changes do not count or the baseline failed)."""
        baseline = self.baseline
        if counting and isinstance(baseline, Baseline) and baseline.failure is None:
            missing = sorted(set(baseline.collected) - _collected_here(session))
        else:
            missing = self.missing_from_rerun
        return {"missing_tests": cap_list(missing), "missing_tests_count": len(missing)}

    def baseline_failure(self) -> str | None:
        """Why the baseline gave no usable result, or None when it did (or was not run)."""
        if isinstance(self.baseline, Baseline):
            return self.baseline.failure
        return self.baseline


class ReferenceRerun:
    """The reference side of one session, run in the background from session start."""

    def __init__(
        self,
        settings: ScoringSettings,
        patterns: Sequence[str],
        timeout: float,
        children: ChildRunner,
        initial: Snapshot | None = None,
        turns: Turns | None = None,
        databases: SessionDatabases | None = None,
    ):
        """:param initial: the reference's databases before any test ran, when already
        snapshotted (and fingerprinted) by the caller.
        :param turns: how the runs take turns when they share a user id (:func:`turns_for`);
            None: the rerun runs beside the session.
        :param databases: the session's databases, started, when it has server databases:
            the rerun runs on clones of their start snapshots, and is diffed against their
            finish state."""
        self.settings = settings
        self.initial = initial
        self.patterns = list(patterns)
        self.timeout = timeout
        self.children = children
        self.started = time.monotonic()
        self._thread = threading.Thread(target=self._work, name="pytest-scoring-reference")
        self._cancel = threading.Event()
        #: Set once the rerun's pytest has ended (a baseline waiting for it starts).
        self.child_done = threading.Event()
        self.turns = turns
        #: The baseline run whose diff joins this rerun's (None: no scorer counts tests).
        self.baseline: BaselineRun | None = None
        #: The evaluator's files (the initial snapshot), and the copy the rerun may write.
        self._workdir = children.folder("reference")
        self._runner = children.for_another_run("reference-run")
        self._checkout = self._runner.workspace("checkout")
        #: Made here, before any thread: the runner numbers its folders.
        self._store_dir: Path | None = children.folder("diffs")
        self._store: DiffStore | None = None
        #: The rerun's diff, made into ``_store`` as soon as the rerun ended.
        self._reference_diff: DiffJSON | None = None
        self._side: ReferenceSide | None = None
        self._error: BaseException | None = None
        self._diffs: Diffs | None = None
        self.databases = databases
        self._clones: RunClones | None = None

    def start(self) -> None:
        self._thread.start()

    def _work(self) -> None:
        try:
            self._side = self._run(self._workdir, self._checkout / "checkout")
        except Exception as error:  # surfaced when a scorer asks for the result
            self._error = error
        finally:
            self.child_done.set()
        if self._side is not None:
            self._diff_reference(self._side)

    def _diff_reference(self, side: ReferenceSide) -> None:
        """The rerun's diff, made once it ended with results: the session may still be
        running, and the evaluator has nothing else to do until it ends. When the diff
        fails (or is cancelled), :meth:`_compare` makes it again and reports the failure as
        it always did."""
        if side.run.failure(self.timeout) is not None:
            return
        assert self._store_dir is not None
        store = DiffStore(self._store_dir / "rows.db")
        sink = _cancellable(store.sink(REFERENCE), self._cancel)
        try:
            engine = sqlite_engine(self.settings)
            diff = engine_diff(
                engine, side.initial, side.final, self.settings.db_patterns, FILE_MAX_ROWS, sink
            )
        except Exception:  # made again by _compare, which says why it fails
            store.close()
            (self._store_dir / "rows.db").unlink(missing_ok=True)
            return
        self._store, self._reference_diff = store, diff

    def _run(self, workdir: Path, copy: Path) -> ReferenceSide:
        assert self.settings.reference is not None
        # The report root and our own folders are never copied (a reference above /tmp…).
        reference = self.settings.reference
        excluded = self.settings.excluded_folders(reference)
        own = [self.settings.report_root, workdir, copy.parent, *self._areas()]
        copy_tree(reference, copy, exclude=[*own, *excluded])
        initial = self.initial
        if initial is None:
            engine = sqlite_engine(self.settings, copy)
            initial = snapshot_now(engine, workdir / "initial", str(reference))
            if self.children.guard is not None:
                self.children.guard.add_files(initial.files.values())
        if self.settings.tests_from_is_reference():
            self._wait_for_session()
            return ReferenceSide(initial, *self._baseline_run())
        tests, args = self._tests(copy)
        self._runner.give(copy)
        self._wait_for_session()
        self._clone_servers()
        with self.turns.lock if self.turns is not None else contextlib.nullcontext():
            run = run_child(
                self._runner,
                copy,
                [*args, *self.settings.selection],
                self.timeout,
                deterministic=self.settings.deterministic,
                cancel=self._cancel,
            )
        self.child_done.set()
        final = final_state(sqlite_engine(self.settings, copy), f"{copy} (reference rerun)")
        servers = self._clones.finals() if self._clones is not None else []
        return ReferenceSide(initial, final, tests, run, servers)

    def _clone_servers(self) -> None:
        """Clone the session's server databases for the rerun, which receives each clone's
        URL through its database's ``env`` variable (never the application's database)."""
        if self.databases is None or not self.settings.databases:
            return
        from pytest_scoring.db.clones import clone_states

        self._clones = clone_states(
            self.databases.server_states(), self.settings.databases, "the reference rerun"
        )
        give_urls(self._runner, self._clones.urls())

    def _wait_for_session(self) -> None:
        """Copies made, wait until the session's tests are over when the runs take
        :attr:`turns` (a cancelled rerun goes on to end at once)."""
        if self.turns is not None:
            wait_until(self.turns.session_done, self._cancel)

    def _areas(self) -> list[Path]:
        """The evaluation's private area, should the reference hold it (a checkout above
        the temporary folder)."""
        return [self.children.area] if self.children.area is not None else []

    def _tests(self, copy: Path) -> tuple[CopiedTests, list[str]]:
        """The tests the rerun runs, put into its copy, and their pytest arguments: PATH's
        with ``--tests-from`` (docs/security.md), else this repository's test files."""
        if self.settings.tests_from is None:
            excluded = self.settings.excluded_folders()
            return copy_test_files(self.settings.root, self.patterns, copy, exclude=excluded), []
        installed = install_tests(self.settings.tests_from, copy)
        return CopiedTests(copied=installed.evaluators), installed.args

    def _baseline_run(self) -> tuple[Snapshot, CopiedTests, ChildRun, list[tuple[Any, Any]]]:
        """``--tests-from`` is the reference: the rerun would run the reference's own tests on
        its own code, as the baseline does; the baseline's run is the rerun's."""
        self.child_done.set()  # a baseline waiting for the rerun to end may start
        assert self.baseline is not None, "the scorer starts the baseline"
        baseline = self.baseline.result()
        if isinstance(baseline, str) or baseline.final is None:
            why = baseline if isinstance(baseline, str) else baseline.failure
            raise ReferenceRunError(
                f"the reference run (the baseline, --tests-from being the reference) failed: {why}",
                {},
            )
        tally = {"counts": baseline.counts, "collected": baseline.collected}
        run = ChildRun(baseline.exit_code, baseline.timed_out, baseline.duration, tally, "")
        return baseline.final, CopiedTests(), run, baseline.servers

    def _join(self) -> ReferenceSide:
        """Wait for the background run; a second Ctrl-C while waiting kills it."""
        try:
            self._thread.join()
        except KeyboardInterrupt:
            self._cancel.set()
            raise
        if isinstance(self._error, ReferenceRunError):
            raise self._error
        if isinstance(self._error, OSError | ScoringError):
            raise ReferenceRunError(f"the reference copy failed: {self._error}", {})
        if self._error is not None:
            raise self._error
        assert self._side is not None
        return self._side

    def diffs(self, session: OutcomeTally) -> Diffs:
        """Join the background run and diff it against this session's final databases.

        :raises ScoringError: when the reference run gave no usable result (reason inside).
        """
        if self._diffs is None:
            solution_duration = round(time.monotonic() - self.started, 3)
            if self.turns is not None:
                self.turns.session_done.set()  # the session is over: the runs' turn
            try:
                self._diffs = self._compare(self._join(), session, solution_duration)
            finally:
                shutil.rmtree(self._workdir, ignore_errors=True)
                shutil.rmtree(self._checkout, ignore_errors=True)
                self._drop_clones()
        return self._diffs

    def _drop_clones(self) -> None:
        if self._clones is not None:
            self._clones.drop()
            self._clones = None

    def _compare(self, side: ReferenceSide, session: OutcomeTally, duration: float) -> Diffs:
        metadata = {**self._metadata(side, session), "solution_duration": duration}
        problem = side.run.failure(self.timeout)
        if problem is not None:
            missing = _missing_from(side.run.tally, session)
            metadata.update(missing_tests=cap_list(missing), missing_tests_count=len(missing))
            raise ReferenceRunError(problem, metadata)
        baseline = self.baseline.result() if self.baseline is not None else None
        usable = baseline.final if isinstance(baseline, Baseline) else None
        engine = sqlite_engine(self.settings)
        solution_final = final_state(engine, str(self.settings.root))
        assert self._store_dir is not None
        if self._store is None:
            self._store = DiffStore(self._store_dir / "rows.db")
        self._store.baseline = usable is not None
        split = split_runs(
            engine,
            side.initial,
            side.final,
            solution_final,
            self.settings.db_patterns,
            self._store,
            baseline_final=usable,
            servers=self._server_runs(side, baseline if isinstance(baseline, Baseline) else None),
            reference_diff=self._reference_diff,
        )
        missing = _missing_from(side.run.tally, session)
        parts = split.parts(FILE_MAX_ROWS)
        read_row = self._row_reader(partial(engine.read_row, solution_final))
        files = solution_final.files
        return Diffs(split, parts, metadata, missing, baseline, files, read_row)

    def _server_runs(self, side: ReferenceSide, baseline: Baseline | None) -> list[ServerRuns[Any]]:
        """Each server engine's states: the session's start snapshot and finish state, the
        rerun's clones, the baseline's (when it ran and cloned them)."""
        if self.databases is None or not side.servers:
            return []
        starts = {id(engine): state for engine, state in self.databases.server_states()}
        finals = {id(engine): state for engine, state in baseline.servers} if baseline else {}
        return [
            ServerRuns(
                engine,
                starts[id(engine)],
                after,
                self.databases.final_of(engine),
                finals.get(id(engine)),
            )
            for engine, after in side.servers
        ]

    def _row_reader(self, sqlite_rows: RowReader) -> RowReader:
        """Reads a row of the session's finish state: a server database's from its engine."""
        databases = self.databases
        if databases is None or not self.settings.databases:
            return sqlite_rows

        def read_row(
            database: str, table: str, key: Mapping[str, Any], leave_out: Collection[str]
        ) -> dict[str, Any] | None:
            return databases.read_row(database, table, key, leave_out)

        return read_row

    @property
    def computed(self) -> Diffs | None:
        """The diffs, once a scorer asked for them (None before, or when the run failed)."""
        return self._diffs

    def reference_copies(self) -> list[Path]:
        """The rerun's copy of the reference and the baseline's: the report names them as the
        reference."""
        baseline = [] if self.baseline is None else self.baseline.reference_copies()
        return [self._checkout / "checkout", *baseline]

    def close(self) -> None:
        """After every scorer has scored: end the rerun if it still runs (scoring stopped
        early), remove its folders and the stored rows."""
        self._cancel.set()
        if self._thread.is_alive():
            self._thread.join()
        self._drop_clones()
        shutil.rmtree(self._workdir, ignore_errors=True)
        self._runner.close()
        if self._store is not None:
            self._store.close()
            self._store = None
        if self._store_dir is not None:
            shutil.rmtree(self._store_dir, ignore_errors=True)
            self._store_dir = None

    def _metadata(self, side: ReferenceSide, session: OutcomeTally) -> dict[str, Any]:
        reference_tally = side.run.tally or {}
        return {
            "reference": str(self.settings.reference),
            "test_patterns": self.patterns,
            "test_files_copied": len(side.tests.copied),
            "test_files_skipped": cap_list(side.tests.skipped),
            "reference_counts": reference_tally.get("counts"),
            "solution_counts": session.counts(),
            "reference_duration": side.run.duration,
            "reference_exit_code": side.run.exit_code,
            "reference_timed_out": side.run.timed_out,
            "reference_output": side.run.output if side.run.failure(self.timeout) else "",
        }


def _collected_here(session: OutcomeTally) -> set[str]:
    """The test ids this session collected (collection errors too)."""
    return session.collected | set(session.tests)


def _missing_from(tally: dict[str, Any] | None, session: OutcomeTally) -> list[str]:
    """Test ids the rerun collected that this session did not: tests the solution deleted."""
    return sorted(set((tally or {}).get("collected", [])) - _collected_here(session))


@dataclass
class Turns:
    """How the runs of one evaluation that share a user id take turns: the rerun's and the
    baseline's pytest start once the session's tests are over, one at a time."""

    #: Set when the session is scored (its tests are over).
    session_done: threading.Event = field(default_factory=threading.Event)
    #: Held by the run whose pytest runs now.
    lock: threading.Lock = field(default_factory=threading.Lock)


def turns_for(children: ChildRunner) -> Turns | None:
    """The turns the runs take, or None when each runs as a user id of its own (``run`` as
    root) and they all overlap. Under one user id, the session's processes could signal,
    trace or write into a rerun running beside them (process/users.py)."""
    return None if children.users is not None else Turns()


class _Cancelled(Exception):
    """The evaluation stopped while a diff was being made."""


def _cancellable(sink: RowSink, cancel: threading.Event) -> RowSink:
    """``sink``, which stops the diff feeding it once ``cancel`` is set."""

    def receive(relpath: str, table: str, kind: str, row: RowJSON, times: int) -> None:
        if cancel.is_set():
            raise _Cancelled
        sink(relpath, table, kind, row, times)

    return receive


def wait_until(event: threading.Event, cancel: threading.Event) -> None:
    """Wait for ``event``, or until ``cancel`` is set."""
    while not event.wait(0.2) and not cancel.is_set():
        pass


def split_runs(
    engine: DatabaseEngine[S],
    initial: S,
    reference_final: S,
    solution_final: S,
    db_patterns: Sequence[str],
    store: DiffStore,
    baseline_final: S | None = None,
    servers: Sequence[ServerRuns[Any]] = (),
    reference_diff: DiffJSON | None = None,
) -> SplitDiffs:
    """Diff the runs from the initial state, every row into ``store``, and split them.

    The diffs keep :data:`FILE_MAX_ROWS` examples per list; the store keeps every row.

    :param engine: the engine whose snapshots the states are.

    :param baseline_final: the baseline's final databases, when its diff joins the split
        (``store``'s ``baseline`` is true).
    :param servers: the server engines' states, whose entries join each diff (a server
        database the baseline did not clone is unchanged in its diff).
    :param reference_diff: the reference run's diff, already made into ``store`` (the first
        diff there, as the runs' order is).
    """
    runs = [(reference_final, REFERENCE), (solution_final, SOLUTION)]
    if baseline_final is not None:
        runs.append((baseline_final, BASELINE))
    diffs = [
        reference_diff
        if side == REFERENCE and reference_diff is not None
        else engine_diff(engine, initial, final, db_patterns, FILE_MAX_ROWS, store.sink(side))
        for final, side in runs
    ]
    for server in servers:
        finals = {REFERENCE: server.reference, SOLUTION: server.solution}
        finals[BASELINE] = server.baseline if server.baseline is not None else server.initial
        for diff, (_final, side) in zip(diffs, runs, strict=True):
            entries = server.engine.diff(
                server.initial, finals[side], FILE_MAX_ROWS, store.sink(side)
            )
            if set(entries) & set(diff["comparisons"]):
                raise DatabaseError(f"two databases are named {min(entries)!r}; name them apart")
            diff["comparisons"].update(entries)
            diff["comparisons"] = dict(sorted(diff["comparisons"].items()))
    for diff, (_final, side) in zip(diffs, runs, strict=True):
        store.add_lists(side, diff, ["schema"])
    baseline = diffs[2] if baseline_final is not None else None
    return SplitDiffs(diffs[0], diffs[1], store, complete=True, baseline=baseline)


class ReferenceRunError(ScoringError):
    """The reference run gave no usable result; carries what is known for the score."""

    def __init__(self, message: str, metadata: dict[str, Any]):
        super().__init__(message)
        self.metadata = metadata


def start_baseline(
    settings: ScoringSettings,
    children: ChildRunner,
    timeout: float,
    rerun_done: threading.Event,
    turns: Turns | None = None,
    databases: SessionDatabases | None = None,
) -> BaselineRun:
    """Start the baseline in the background (:func:`baseline_for`, cached per reference).

    Without ``turns`` (a user id of its own) it runs beside the session and the rerun, sharing
    the cores with them (their tests wait on I/O too); with them it waits for the rerun's
    pytest to end (which waits for the session), then for its turn: no two runs overlap.

    :param databases: the session's databases, started, when it has server databases: the
        baseline runs on clones of their start snapshots.
    """
    folder = children.folder("baseline")
    clone = None
    if databases is not None and settings.databases:
        from pytest_scoring.db.clones import clone_states

        states = databases.server_states()
        clone = partial(clone_states, states, settings.databases, "the baseline run")

    def work(cancel: threading.Event) -> Baseline:
        if turns is None:
            return compute_baseline(settings, children, folder, timeout, cancel, clone=clone)
        wait_until(rerun_done, cancel)
        with turns.lock:
            return compute_baseline(settings, children, folder, timeout, cancel, clone=clone)

    run = BaselineRun(work, folder)
    run.start()
    return run


def compute_baseline(
    settings: ScoringSettings,
    children: ChildRunner,
    folder: Path,
    timeout: float,
    cancel: threading.Event | None = None,
    never_inside: Sequence[Path] = (),
    clone: Callable[[], RunClones] | None = None,
) -> Baseline:
    """The baseline of ``settings.reference`` with this evaluation's options and the
    evaluator's cache; its final databases fingerprinted by ``children``'s guard.

    A batch of repositories calls it once for all of them (docs/cli.md#many-repositories).

    :param folder: a private folder that receives the final databases.
    :param never_inside: more folders a scored repository can write (a batch's repositories).
    :param clone: clones the session's server databases for the run (never cached).
    """
    assert settings.reference is not None
    never = [*settings.scored_places(), *never_inside]
    cache = BaselineCache.open(never, route=settings.cache_route)
    baseline = baseline_for(
        settings.reference,
        baseline_options(settings, children),
        folder,
        cache,
        timeout=timeout,
        like=children,
        cancel=cancel,
        clone=clone,
    )
    if baseline.final is not None and children.guard is not None:
        children.guard.add_files(baseline.final.files.values())
    return baseline


def baseline_options(settings: ScoringSettings, children: ChildRunner) -> BaselineOptions:
    """What the baseline depends on besides the reference: this session's options."""
    assert settings.reference is not None
    reference = settings.reference.resolve()
    own = [settings.report_root, *([children.area] if children.area is not None else [])]
    excluded = set()
    for folder in (*settings.excluded_folders(reference), *own):
        resolved = folder.resolve()
        if resolved.is_relative_to(reference) and resolved != reference:
            excluded.add(resolved.relative_to(reference).as_posix())
    return BaselineOptions(
        db_patterns=tuple(settings.db_patterns),
        excluded=tuple(sorted(excluded)),
        selection=tuple(settings.selection),
        deterministic=settings.deterministic,
        python=children.python,
        tests_from=settings.tests_from_is_reference(),
    )
