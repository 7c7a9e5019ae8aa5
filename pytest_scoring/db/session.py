"""A session's databases, over every engine: snapshot before, state after, the diff.

This is the one place that runs the database side of a test session (docs/databases.md):
``--score-db-reset``, the start snapshot, the finish state and their diff, shared by every
database scorer. The plugin and ``pytest-scoring run`` reach it through ``db_change``'s
resource; the reference rerun, the baseline, a batch's shared reference and the Inspect
scorers snapshot and diff their own places with :func:`snapshot_now`, :func:`final_state`
and :func:`engine_diff`, the same calls.
"""

from __future__ import annotations

import os
import shutil
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

from pytest_scoring.core.settings import SNAPSHOTS_PREFIX
from pytest_scoring.core.settings import ScoringSettings
from pytest_scoring.db.diff import DEFAULT_MAX_ROWS
from pytest_scoring.db.diff import whole_diff
from pytest_scoring.db.diff_shape import stream_cut_rows
from pytest_scoring.db.diff_types import DatabaseEntryJSON
from pytest_scoring.db.diff_types import DiffJSON
from pytest_scoring.db.diff_types import RowKind
from pytest_scoring.db.engine import CreatedJSON
from pytest_scoring.db.engine import DatabaseEngine
from pytest_scoring.db.engine import DatabaseWatch
from pytest_scoring.db.engine import RowSink
from pytest_scoring.db.engine import S
from pytest_scoring.db.engine import WatchingEngine
from pytest_scoring.db.servers import described
from pytest_scoring.db.servers import server_errors
from pytest_scoring.db.servers import terminated
from pytest_scoring.db.snapshot import Snapshot
from pytest_scoring.db.sqlite_engine import SqliteEngine
from pytest_scoring.errors import DatabaseError
from pytest_scoring.fs.leftovers import held_temporary_folder

if TYPE_CHECKING:
    from collections.abc import Iterable

    from pytest_scoring.core.budget import TimeBudget
    from pytest_scoring.fs.guard import FileGuard

#: Why a diff is asked for before the start snapshot was taken.
NO_START: Final = "no database snapshot was taken at session start"


def sqlite_engine(settings: ScoringSettings, root: Path | None = None) -> SqliteEngine:
    """The SQLite databases of the repository (or of ``root``, a copy laid out like it),
    with the session's patterns and exclusions."""
    return SqliteEngine(
        settings.root if root is None else root,
        settings.db_patterns,
        settings.excluded_folders(root),
    )


def snapshot_now(engine: DatabaseEngine[S], folder: Path, source: str) -> S:
    """A snapshot of every database the engine finds now."""
    return engine.snapshot(engine.find(), folder, source)


def final_state(engine: DatabaseEngine[S], source: str, before: S | None = None) -> S:
    """The state after a run: every database found now, and every one ``before`` saw (a
    database gone since is diffed as removed)."""
    names = set(engine.find()) | (before.names() if before is not None else set())
    return engine.read_final(sorted(names), source)


def engine_diff(
    engine: DatabaseEngine[S],
    before: S,
    after: S,
    db_patterns: Sequence[str],
    max_rows: int | None = DEFAULT_MAX_ROWS,
    sink: RowSink | None = None,
) -> DiffJSON:
    """The whole diff of one engine's two states (:meth:`DatabaseEngine.diff`)."""
    comparisons = engine.diff(before, after, max_rows, sink)
    return whole_diff(before.source, after.source, db_patterns, comparisons)


def reset_store(settings: ScoringSettings, engine: DatabaseEngine[Any]) -> Path:
    """Where ``--score-db-reset`` keeps an engine's first-seen states: SQLite's in the
    repository's store itself (as before engines), another's in a folder beside it."""
    store = settings.reset_store()
    return (
        store
        if isinstance(engine, SqliteEngine)
        else store.with_name(f"{store.name}-{engine.name}")
    )


def reset_engines(settings: ScoringSettings, engines: Sequence[DatabaseEngine[Any]]) -> None:
    """``--score-db-reset``: restore every engine's databases to their first-seen state (a
    server's only when the evaluator's command line asked: not for the repository's ini).

    :raises OSError: when a store cannot be used.
    """
    for engine in engines:
        if settings.db_reset_servers or isinstance(engine, SqliteEngine):
            engine.reset(engine.find(), reset_store(settings, engine), settings.report_root)


@dataclass
class _Tracked(Generic[S]):
    """One engine and the session's two states of it."""

    engine: DatabaseEngine[S]
    #: The keys a database the session creates on this engine's server must keep apart from.
    reserved: Callable[[], set[str]] = set
    before: S | None = None
    after: S | None = None
    #: The server watched for databases the session creates (a :class:`WatchingEngine`'s).
    watch: DatabaseWatch | None = None
    #: What the watch saw, once the finish state is read.
    created: list[CreatedJSON] = field(default_factory=list)

    def final(self) -> S:
        if self.after is None:
            assert self.before is not None, "the start snapshot first"
            after = final_state(self.engine, "session finish", self.before)
            if self.watch is not None:
                assert isinstance(self.engine, WatchingEngine)
                self.created = self.engine.read_created(after, self.watch, self.reserved())
            self.after = after
        return self.after

    def rows(
        self, database: str, table: str, kind: RowKind, budget: TimeBudget | None
    ) -> Iterable[Any]:
        assert self.before is not None
        return self.engine.rows(self.before, self.final(), database, table, kind, budget)


class SessionDatabases:
    """The session's databases: the start snapshot, the finish state and their diff, over
    every engine (SQLite, the repository's files, first)."""

    def __init__(
        self,
        settings: ScoringSettings,
        guard: FileGuard | None = None,
        engines: Sequence[DatabaseEngine[Any]] | None = None,
    ):
        """:param guard: fingerprints the start snapshot's files, under ``pytest-scoring run``.
        :param engines: the engines (default: SQLite under the repository).
        """
        self.settings = settings
        self.guard = guard
        chosen = [sqlite_engine(settings)] if engines is None else engines
        self._tracked: list[_Tracked[Any]] = [
            _Tracked(engine, partial(self._reserved, index)) for index, engine in enumerate(chosen)
        ]
        #: Why the start snapshot could not be taken, for the scores that needed it.
        self.start_error = NO_START
        self._started = False
        self._workdir: Path | None = None
        #: Holds the snapshot copies' folder while this session lives (a sweep leaves it).
        self._hold: int | None = None
        self._diff: DiffJSON | None = None

    @classmethod
    def from_snapshots(
        cls, settings: ScoringSettings, before: Snapshot, after: Snapshot
    ) -> SessionDatabases:
        """SQLite databases snapshotted elsewhere (in an Inspect sandbox): their diff, shared."""
        databases = cls(settings)
        databases._tracked[0].before, databases._tracked[0].after = before, after
        databases._started = True
        return databases

    @property
    def started(self) -> bool:
        """Whether the start snapshot was taken."""
        return self._started

    def unsearched(self) -> list[str]:
        """The folders left out of discovery that hold a file matching the patterns."""
        return [
            folder
            for tracked in self._tracked
            if isinstance(tracked.engine, SqliteEngine)
            for folder in tracked.engine.unsearched()
        ]

    def start(self) -> None:
        """Reset if asked, then snapshot every database's committed state (once per session).

        :raises DatabaseError: when the report root cannot hold the snapshot.
        """
        if self._started:
            return
        scratch = self.settings.scratch_folder()
        try:
            if self.settings.db_reset:
                reset_engines(self.settings, [tracked.engine for tracked in self._tracked])
        except server_errors() as error:
            self.start_error = f"--score-db-reset: {error}"
            raise DatabaseError(self.start_error) from None
        try:
            scratch.mkdir(parents=True, exist_ok=True)
            self._workdir, self._hold = held_temporary_folder(scratch, SNAPSHOTS_PREFIX)
        except server_errors() as error:
            self.start_error = f"cannot snapshot databases under {scratch}: {error}"
            raise DatabaseError(self.start_error) from None
        for index, tracked in enumerate(self._tracked):
            folder = self._workdir / ("before" if index == 0 else f"before-{index}")
            tracked.before = snapshot_now(tracked.engine, folder, "session start")
            if self.guard is not None:
                self.guard.add_files(tracked.before.files.values())
            if isinstance(tracked.engine, WatchingEngine):
                tracked.watch = tracked.engine.watch()
        self._started = True

    def _reserved(self, index: int) -> set[str]:
        """The keys the other engines' databases have: those of engines listed before the
        ``index``-th at finish (a server's include what the session created there), every
        other's at the start, and at finish those of every engine that watches nothing."""
        names: set[str] = set()
        for other, tracked in enumerate(self._tracked):
            if other != index and tracked.before is not None:
                names |= tracked.before.names()
                if other < index or tracked.watch is None:
                    names |= tracked.final().names()
        return names

    def _check_started(self) -> None:
        if not self._started:
            raise DatabaseError(self.start_error)

    def diff(self, shared: bool = True) -> DiffJSON:
        """The session diff, computed once and shared unless ``shared`` is false."""
        if shared and self._diff is not None:
            return self._diff
        self._check_started()
        comparisons: dict[str, DatabaseEntryJSON] = {}
        for tracked in self._tracked:
            entries = tracked.engine.diff(tracked.before, tracked.final(), DEFAULT_MAX_ROWS)
            same = sorted(set(comparisons) & set(entries))
            if same:  # one entry would hide the other's changes
                raise DatabaseError(f"two databases are named {same[0]!r}; name them apart")
            comparisons.update(entries)
        first = self._tracked[0]
        assert first.before is not None
        sources = (first.before.source, first.final().source)
        diff = whole_diff(*sources, self.settings.db_patterns, comparisons)
        if shared:
            self._diff = diff
        return diff

    def complete(self, diff: DiffJSON, budget: TimeBudget) -> DiffJSON:
        """``diff`` where the tables whose examples were cut stream every row (for selectors),
        within the selector's time budget."""
        self._check_started()

        def rows(database: str, table: str, kind: RowKind) -> Iterable[Any]:
            return self._owner(database).rows(database, table, kind, budget)

        return stream_cut_rows(diff, rows)

    def _owner(self, database: str) -> _Tracked[Any]:
        """The engine that diffed ``database``."""
        for tracked in self._tracked:
            assert tracked.before is not None
            if database in tracked.before.names() | tracked.final().names():
                return tracked
        raise DatabaseError(f"{database}: no engine has this database")

    def problem(self) -> str | None:
        """Why no diff can be had (no start snapshot), or None."""
        return None if self._started else self.start_error

    def read_row(
        self, database: str, table: str, key: Mapping[str, Any], leave_out: Collection[str]
    ) -> dict[str, Any] | None:
        """A row of a database's finish state, by key (its columns in ``leave_out`` unread)."""
        if not self._started:
            return None
        for tracked in self._tracked:
            final = tracked.final()
            if database in final.names():
                return tracked.engine.read_row(final, database, table, key, leave_out)
        return None

    def server_states(self) -> list[tuple[DatabaseEngine[Any], Any]]:
        """Each server engine (not SQLite's, the repository's files) and its start snapshot:
        what the reference's and the baseline's runs are cloned from.

        :raises DatabaseError: when the start snapshot was not taken.
        """
        self._check_started()
        return [
            (tracked.engine, tracked.before)
            for tracked in self._tracked
            if not isinstance(tracked.engine, SqliteEngine)
        ]

    def final_of(self, engine: DatabaseEngine[S]) -> S:
        """``engine``'s finish state (read once, shared with the session's diff)."""
        for tracked in self._tracked:
            if tracked.engine is engine:
                final: S = tracked.final()
                return final
        raise DatabaseError(f"{engine.name}: not an engine of this session")

    def ended(self) -> dict[str, dict[str, list[Any]]]:
        """What was ended on each server database to take its states, by name:
        ``{"start": […], "finish": […]}`` (backends and prepared transactions; only
        databases where something was)."""
        found: dict[str, dict[str, list[Any]]] = {}
        for tracked in self._tracked if self._started else []:
            for moment, state in (("start", tracked.before), ("finish", tracked.after)):
                for name, ended in terminated(state).items():
                    found.setdefault(name, {"start": [], "finish": []})[moment] = ended
        return found

    def created(self) -> dict[str, Any] | None:
        """The databases the session created on the servers, for ``db_change``'s metadata:
        ``{"created": […]}`` (with ``watch_errors`` when a server could not be watched for a
        while); None when no server was watched."""
        watched = [tracked for tracked in self._tracked if tracked.watch is not None]
        if not watched:
            return None
        for tracked in watched:
            tracked.final()
        found: dict[str, Any] = {
            "created": [entry for tracked in watched for entry in tracked.created]
        }
        errors = [t.watch.error for t in watched if t.watch is not None and t.watch.error]
        if errors:
            found["watch_errors"] = errors
        return found

    def start_states(self) -> dict[str, Any]:
        """What identifies each server database's start snapshot, by name (the provenance's)."""
        return {
            name: state
            for tracked in (self._tracked if self._started else [])
            for name, state in described(tracked.before).items()
        }

    def final_files(self) -> dict[str, Path]:
        """The files holding the finish state, by database (``--evidence all``)."""
        if not self._started:
            return {}
        return {name: path for t in self._tracked for name, path in t.final().files.items()}

    def close(self) -> None:
        """Free the snapshots and remove their copies (after scoring)."""
        for tracked in self._tracked:
            if tracked.watch is not None:
                tracked.watch.stop()
            if tracked.before is not None:
                tracked.engine.release(tracked.before)
        if self._workdir is not None:
            shutil.rmtree(self._workdir, ignore_errors=True)
            self._workdir = None
        if self._hold is not None:
            os.close(self._hold)
            self._hold = None
