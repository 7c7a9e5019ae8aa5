"""The database seam: what an engine (SQLite, PostgreSQL) gives the evaluator.

An engine is bound to one place: a repository folder's database files for SQLite, a server's
databases for PostgreSQL. The evaluator asks it for the databases there, a snapshot of them
before the session, their state after it, and the diff of the two in the one JSON shape
(:mod:`pytest_scoring.db.diff_types`); the rest (caps, selectors, the diff-of-diffs, the
report, the evidence) never sees which engine made a diff. A database is named by the key
its diff entry has: a path relative to the repository for SQLite, the configured ``name``
for a server's database.

docs/architecture.md (How to add a database engine) lists the files to touch and the tests an
engine must pass (``tests/test_db_engines.py``).
"""

from __future__ import annotations

from collections.abc import Callable
from collections.abc import Collection
from collections.abc import Iterable
from collections.abc import Mapping
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING
from typing import Any
from typing import NotRequired
from typing import Protocol
from typing import TypedDict
from typing import TypeVar
from typing import runtime_checkable

from pytest_scoring.db.diff_types import DatabaseEntryJSON
from pytest_scoring.db.diff_types import RowJSON
from pytest_scoring.db.diff_types import RowKind

if TYPE_CHECKING:
    from pytest_scoring.core.budget import TimeBudget

#: Receives every differing row as a diff computes it, examples or not:
#: ``database, table, kind, row, times`` (``times`` equal rows; kind ``added``, ``removed``,
#: ``changed``). The diff-of-diffs stores them (:mod:`pytest_scoring.db.diff_store`).
RowSink = Callable[[str, str, str, RowJSON, int], None]

#: A row of a database's final state: ``database, table, key, columns left unread`` → the
#: row's other columns, or None (:meth:`DatabaseEngine.read_row` of the state at hand).
RowReader = Callable[[str, str, Mapping[str, Any], Collection[str]], dict[str, Any] | None]


class EngineSnapshot(Protocol):
    """One side of a diff as an engine holds it: per database, a readable state or an error."""

    @property
    def source(self) -> str:
        """What this side is, for the diff's ``before_source`` / ``after_source``."""
        ...

    @property
    def errors(self) -> Mapping[str, str]:
        """Database → why it could not be read on this side."""
        ...

    @property
    def files(self) -> Mapping[str, Path]:
        """Database → the file holding its state, for an engine whose states are files
        (empty for a server's): the evaluator fingerprints these under ``run`` and keeps them
        as evidence (``--evidence all``)."""
        ...

    def names(self) -> set[str]:
        """Every database this side saw, readable or not (a name in neither ``names()`` nor
        the other side's did not exist)."""
        ...


#: The snapshot type of one engine.
S = TypeVar("S", bound=EngineSnapshot)


class DatabaseEngine(Protocol[S]):
    """One kind of database at one place. Every method may be called from a thread of its
    own (the reference rerun runs in the background), never on the same snapshot at once."""

    @property
    def name(self) -> str:
        """``sqlite``, ``postgresql``: a non-SQLite engine writes it to each entry's
        ``info.engine``."""
        ...

    def find(self) -> list[str]:
        """The databases there now, by name, sorted.

        Must not open or change them: a hostile repository's file named ``app.db`` may be a
        FIFO, and a database may be locked by a test.
        """
        ...

    def snapshot(self, names: Sequence[str], folder: Path, source: str) -> S:
        """A consistent copy of each database's *committed* state, that nothing the session
        runs can change afterwards.

        Each database is copied atomically (one transaction: a half-applied commit is never
        seen); a database that cannot be read gets an error instead, and the others are still
        copied. A name that no longer exists is left out.

        :param folder: a new private folder of the evaluator's for the copies (an engine that
            keeps them elsewhere, such as a server's template databases, may leave it empty).
        :param source: what the snapshot is (``session start``), for the diff.
        """
        ...

    def read_final(self, names: Sequence[str], source: str) -> S:
        """The state after the session, for one diff: may be read in place instead of
        copied, provided :meth:`diff` then reads each database in one consistent
        (read-only) transaction and never writes it."""
        ...

    def diff(
        self, before: S, after: S, max_rows: int | None, sink: RowSink | None = None
    ) -> dict[str, DatabaseEntryJSON]:
        """The entry of every database either side saw, by name, sorted.

        Rows are streamed, never held whole: memory grows with ``max_rows`` (the examples
        kept per row list; ``None`` keeps all), not with table size, and ``counts`` are
        exact. A database unreadable on either side, or failing while diffed, gets an entry
        with empty planes, ``error`` and ``info.unreadable``; a database on one side only has
        all its tables ``added`` (``removed``).

        :param sink: receives every differing row, also those beyond ``max_rows``.
        """
        ...

    def rows(
        self,
        before: S,
        after: S,
        database: str,
        table: str,
        kind: RowKind,
        budget: TimeBudget | None = None,
    ) -> Iterable[Any]:
        """Every row of one row list of one table, as the diff's entries show them.

        Re-iterable: each iteration reads both sides afresh, in flat memory (what selectors
        see of a table whose examples were cut): :data:`RowJSON` rows, ``rows_changed``
        entries (:class:`~pytest_scoring.db.diff_types.ChangedRowJSON`) for ``changed``.

        :param budget: the selector's time budget, checked while reading.
        :raises DatabaseError: when a side cannot be read while iterating (SQLite's own
            ``sqlite3.Error`` is let through as it is: the callers catch both).
        """
        ...

    def read_row(
        self,
        state: S,
        database: str,
        table: str,
        key: Mapping[str, Any],
        leave_out: Collection[str] = (),
    ) -> dict[str, Any] | None:
        """The row whose key is ``key`` in ``state`` (columns named in ``leave_out`` left
        unread), or ``None`` when there is none or it cannot be read. Never reads a value
        too large to hold; never raises for a missing table or column."""
        ...

    def reset(self, names: Sequence[str], store: Path, base: Path | None) -> list[str]:
        """Restore each database kept in ``store`` to its kept state, and keep the state of
        each of ``names`` not kept yet (``--score-db-reset``).

        Writes only the databases it restores, never through a link leading out of the
        place; a database deleted since is created again.

        :param store: the evaluator's folder for this repository's kept states.
        :param base: the folder ``store`` lives in: neither ``store`` nor a folder between
            them may be a symlink.
        :returns: the names restored.
        :raises OSError: when the store cannot be used.
        """
        ...

    def release(self, snapshot: S) -> None:
        """Free what ``snapshot`` holds (a server's snapshot databases); called once the
        session is scored, also after a failure. A file-based engine's copies go with their
        folder, which the caller removes."""
        ...


class CreatedJSON(TypedDict):
    """A database the session created on a server (``databases.created`` in ``db_change``'s
    metadata)."""

    name: str
    #: The role that owned it when it was first seen.
    owner: str
    #: Whether it still existed at finish (then its entry in the diff has it against nothing).
    present_at_finish: bool
    #: Its key in the diff, when that is not its name (a name another database has there).
    key: NotRequired[str]


class DatabaseWatch(Protocol):
    """A server watched while the session runs (:meth:`WatchingEngine.watch`)."""

    #: Why the server could not be watched for a while (the first failure), or None.
    error: str | None

    def stop(self) -> None:
        """Stop watching (also when the finish state is never read); may be called again."""
        ...


@runtime_checkable
class WatchingEngine(Protocol):
    """An engine on a server where the session may create databases of its own (PostgreSQL):
    watched from the start snapshot to the finish state, and diffed against nothing when they
    are still there (docs/databases.md#created-databases)."""

    def watch(self) -> DatabaseWatch:
        """Start watching, right after the start snapshot; never raises."""
        ...

    def read_created(
        self, state: Any, watch: DatabaseWatch, reserved: Collection[str]
    ) -> list[CreatedJSON]:
        """Stop ``watch`` and add each created database still there to the finish ``state``,
        under a key none of ``reserved`` (the other engines' databases) has.

        :returns: every database the session created, present at finish or not.
        """
        ...
