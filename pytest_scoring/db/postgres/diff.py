"""The diff of two PostgreSQL databases, computed by the SQLite diff's own passes.

Each side is streamed, table by table, into a SQLite file of its own (columns without a
declared type, so SQLite converts no value); the two files are attached as the SQLite diff
attaches two snapshots, and every table is diffed by the same passes, with the pairing
PostgreSQL's catalog gives: by primary key, then through UNIQUE constraints, then as
multisets. The result has exactly the SQLite diff's shape, plus ``info.engine`` and
``info.sequences``; memory stays flat in the number of rows (docs/databases.md).
"""

from __future__ import annotations

import contextlib
import re
import sqlite3
import tempfile
from collections.abc import Callable
from collections.abc import Generator
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from functools import partial
from pathlib import Path
from typing import IO
from typing import TYPE_CHECKING
from typing import Any
from typing import Final
from typing import NamedTuple
from typing import TypeVar
from typing import final

import psycopg

from pytest_scoring.db.diff import DEFAULT_MAX_ROWS
from pytest_scoring.db.diff import PROGRESS_STEPS
from pytest_scoring.db.diff import diff_connection
from pytest_scoring.db.diff import diff_table
from pytest_scoring.db.diff import planes
from pytest_scoring.db.diff_types import DatabaseEntryJSON
from pytest_scoring.db.diff_types import PlanesJSON
from pytest_scoring.db.diff_types import empty_planes
from pytest_scoring.db.large_values import UNREADABLE_VALUE
from pytest_scoring.db.large_values import guard
from pytest_scoring.db.large_values import too_large
from pytest_scoring.db.postgres import untouched
from pytest_scoring.db.postgres.admin import connect
from pytest_scoring.db.postgres.admin import opened
from pytest_scoring.db.postgres.catalog import PgTable
from pytest_scoring.db.postgres.catalog import rows
from pytest_scoring.db.postgres.catalog import sequences
from pytest_scoring.db.postgres.catalog import tables
from pytest_scoring.db.postgres.differing import DifferingRows
from pytest_scoring.db.postgres.differing import MostlyDifferent
from pytest_scoring.db.postgres.differing import compare_streams
from pytest_scoring.db.postgres.differing import fast
from pytest_scoring.db.postgres.differing import fetches
from pytest_scoring.db.postgres.differing import new_seed
from pytest_scoring.db.postgres.differing import stream
from pytest_scoring.db.schema import Pairing
from pytest_scoring.db.schema import Table
from pytest_scoring.db.schema import UniqueIndex
from pytest_scoring.db.schema import quote
from pytest_scoring.db.schema import schema_changes
from pytest_scoring.db.snapshot import LOCK_TIMEOUT
from pytest_scoring.db.table_rows import row_events
from pytest_scoring.errors import DatabaseError

if TYPE_CHECKING:
    from pytest_scoring.core.budget import TimeBudget

#: The engine's name in ``info.engine``.
ENGINE: Final = "postgresql"
#: Rows inserted into the SQLite copy per statement batch.
_BATCH: Final = 2000
T = TypeVar("T")
#: Receives every differing row: ``database, table, kind, row, times``.
RowSink = Callable[[str, str, str, dict[str, Any], int], None]


@final
class Export(NamedTuple):
    """One side of a PostgreSQL database, copied into a SQLite file."""

    path: Path
    tables: dict[str, PgTable]
    sequences: dict[str, int | None]
    #: Tables whose key values collided in text form: their rows pair by content.
    no_key: frozenset[str]
    #: Row counts of the tables of which only the rows that differ were copied.
    counts: dict[str, int]


@final
class _Reading(NamedTuple):
    """One side being read: its connection (inside its transaction), tables and copy."""

    side: str
    connection: psycopg.Connection[Any]
    tables: dict[str, PgTable]
    sequences: dict[str, int | None]
    copy: sqlite3.Connection
    path: Path


@contextlib.contextmanager
def _reading(
    side: str, connection: psycopg.Connection[Any], dest: Path, only: str | None
) -> Iterator[_Reading]:
    """One side's read: one ``REPEATABLE READ`` read-only transaction under the pinned
    settings (a database read in place, the finish state in process, cannot move
    underneath), and the SQLite file its rows go to."""
    with _named(side), connection.transaction():
        connection.execute("SET TRANSACTION ISOLATION LEVEL REPEATABLE READ READ ONLY")
        # Both sides are read at once: their backends, not workers of theirs, share the cores.
        connection.execute("SET LOCAL max_parallel_workers_per_gather = 0")
        found, last = tables(connection), sequences(connection)
        if only is not None:
            found = {name: table for name, table in found.items() if name == only}
        # Used by one thread at a time, not always this one (:func:`_copy_differing`).
        copy = sqlite3.connect(dest, isolation_level=None, check_same_thread=False)
        with contextlib.closing(copy):
            copy.execute("PRAGMA journal_mode = OFF")
            copy.execute("PRAGMA synchronous = OFF")
            yield _Reading(side, connection, found, last, copy, dest)


@contextlib.contextmanager
def _named(side: str) -> Iterator[None]:
    """A failure to read turned into a :class:`SideError` naming ``side``."""
    try:
        yield
    except SideError:
        raise
    except (psycopg.Error, DatabaseError) as error:
        raise SideError(side, str(error).strip().splitlines()[0]) from None


def export(
    old: _Reading | None, new: _Reading | None, budget: TimeBudget | None = None
) -> tuple[Export | None, Export | None]:
    """Every table of both sides into their SQLite files.

    A table both sides have with the same columns is compared first, when it can be
    (:func:`_differing`): only the rows that differ are copied. Any other table is copied
    whole, as is one most of whose rows differ.

    :param budget: checked after each batch of rows.
    """
    no_key: dict[str, set[str]] = {"before": set(), "after": set()}
    counts: dict[str, dict[str, int]] = {"before": {}, "after": {}}
    seed, whole = new_seed(), set[str]()
    for reading, other in ((old, new), (new, old)):
        if reading is None:
            continue
        for name, table in reading.tables.items():
            paired = other is not None and name in other.tables
            if paired and other is not None and name not in whole and _comparable(table, other):
                if reading is new or _copy_differing(reading, other, name, seed, budget, counts):
                    continue
                whole.add(name)  # and read whole on both sides
            with _named(reading.side):
                if not _copy_table(reading.connection, reading.copy, table, budget):
                    no_key[reading.side].add(name)
    return tuple(  # type: ignore[return-value]
        None
        if reading is None
        else Export(
            reading.path,
            reading.tables,
            reading.sequences,
            frozenset(no_key[reading.side]),
            counts[reading.side],
        )
        for reading in (old, new)
    )


def _comparable(table: PgTable, other: _Reading) -> bool:
    """Whether only the rows of ``table`` that differ from ``other``'s may be copied: the same
    columns, and a primary key whose values pair exactly or none (every row then pairs as
    SQLite's passes pair it, whichever rows are left out as the same on both sides)."""
    theirs = other.tables[table.name]
    keyless = not table.primary_key and not theirs.primary_key
    return table.columns == theirs.columns and (keyless or fast(table, theirs))


def _copy_differing(
    old: _Reading,
    new: _Reading,
    name: str,
    seed: int,
    budget: TimeBudget | None,
    counts: dict[str, dict[str, int]],
) -> bool:
    """The rows of one table that differ between the sides, into both copies.

    :returns: ``False`` (nothing copied) when most rows differ, or the sides cannot be
        compared: the table is then read whole.
    """
    with tempfile.TemporaryFile("w+") as old_handles, tempfile.TemporaryFile("w+") as new_handles:
        try:
            sides = _differing(old, new, name, seed, old_handles, new_handles, budget)
        except MostlyDifferent:
            return False
        if sides is None:
            return False
        # Both sides' servers look their rows up at once (each on its own connection).
        with ThreadPoolExecutor(2) as pool:
            fetched = [
                pool.submit(_copy_rows, reading, name, side, budget)
                for reading, side in ((old, sides[0]), (new, sides[1]))
            ]
            for reading, side, future in zip((old, new), sides, fetched, strict=True):
                future.result()
                counts[reading.side][name] = side.rows
    return True


def _differing(
    old: _Reading,
    new: _Reading,
    name: str,
    seed: int,
    old_handles: IO[str],
    new_handles: IO[str],
    budget: TimeBudget | None,
) -> tuple[DifferingRows, DifferingRows] | None:
    """Where the rows of one table that differ are: where both sides hold the same table
    file read the same way, the rows no session wrote are known without reading them
    (:mod:`~pytest_scoring.db.postgres.untouched`); else, for a table with an exact primary
    key, both sides' text is compared; else ``None``.

    :raises MostlyDifferent: when most rows differ.
    """
    check = None if budget is None else budget.check
    table = old.tables[name]
    was, now = _on(old, untouched.layout, table), _on(new, untouched.layout, table)
    if was is not None and was == now:
        pages = max(_on(old, untouched.pages, table), _on(new, untouched.pages, table))
        return untouched.compare(
            _side_records(old, name, pages), _side_records(new, name, pages), old_handles,
            new_handles, check,
        )  # fmt: skip
    if not fast(table, new.tables[name]):
        return None
    return compare_streams(
        _side_stream(old, name, seed), _side_stream(new, name, seed), old_handles, new_handles,
        table, check,
    )  # fmt: skip


def _on(
    reading: _Reading, read: Callable[[psycopg.Connection[Any], PgTable], T], table: PgTable
) -> T:
    """``read`` of one side's table, a failure naming the side."""
    with _named(reading.side):
        return read(reading.connection, table)


def _copy_rows(
    reading: _Reading, name: str, side: DifferingRows, budget: TimeBudget | None
) -> None:
    """The rows of one side's table that ``side`` names into its copy."""
    with _named(reading.side):
        _copy_table(reading.connection, reading.copy, reading.tables[name], budget, side)


def _side_stream(reading: _Reading, name: str, seed: int) -> Generator[bytes]:
    with _named(reading.side):
        yield from stream(reading.connection, reading.tables[name], seed)


def _side_records(reading: _Reading, name: str, pages: int) -> Generator[bytes]:
    with _named(reading.side):
        yield from untouched.records(reading.connection, reading.tables[name], pages)


def _copy_table(
    connection: psycopg.Connection[Any],
    copy: sqlite3.Connection,
    table: PgTable,
    budget: TimeBudget | None = None,
    differing: DifferingRows | None = None,
) -> bool:
    """One table's rows into the SQLite file. :returns: whether its key stayed unique there.

    :param differing: only the rows its keys or ctids name
        (:func:`~pytest_scoring.db.postgres.differing.fetches`; default: every row).
    """
    names = table.column_names()
    if not names:
        return True
    # A key of one integer column is the copy's rowid: no index to build, lookups by rowid.
    rowid_key = len(table.primary_key) == 1 and table.kind(table.primary_key[0]) == "integer"
    columns = ", ".join(
        f"{quote(name)} INTEGER PRIMARY KEY" if rowid_key and name in table.primary_key
        else quote(name)
        for name in names
    )  # fmt: skip
    copy.execute(f"CREATE TABLE {quote(copy_name(table.name))} ({columns})")
    insert = f"INSERT INTO {quote(copy_name(table.name))} VALUES ({', '.join('?' * len(names))})"
    copy.execute("BEGIN")
    if differing is None:
        copy.executemany(insert, rows(connection, table, budget))
    else:
        for where in fetches(table, differing):
            copy.executemany(insert, rows(connection, table, budget, where))
    copy.execute("COMMIT")
    if rowid_key or not table.primary_key:
        return True
    key = ", ".join(quote(name) for name in table.primary_key)
    try:
        copy.execute(
            f"CREATE UNIQUE INDEX {quote('i' + copy_name(table.name))} "
            f"ON {quote(copy_name(table.name))} ({key})"
        )
    except sqlite3.IntegrityError:
        return False  # two keys PostgreSQL tells apart read the same as text
    return True


def copy_name(name: str) -> str:
    """A diff name as the SQLite copy names its table: ``t_`` and the name, each ``^`` doubled
    and each ASCII capital written ``^`` and its small letter.

    SQLite folds ASCII case in names and keeps ``sqlite_…`` to itself, PostgreSQL does
    neither: ``Accounts`` beside ``accounts``, or a table named ``sqlite_master``, would
    otherwise make the copy, and so the database's whole diff, fail. (Its unique index is
    the same name with ``i`` in front: no table's.)
    """
    escaped = name.replace("^", "^^")
    return "t_" + re.sub("[A-Z]", lambda capital: "^" + capital.group().lower(), escaped)


def _table(export: Export | None, name: str, schema: str) -> Table | None:
    if export is None or name not in export.tables or not export.tables[name].columns:
        return None
    pg = export.tables[name]
    return Table(schema, copy_name(name), pg.columns, pg.primary_key, without_rowid=False)


def _pairing(before: Export, after: Export, name: str) -> Pairing:
    """By the primary key both sides declare (its values unique in text form on both), then
    through the before side's UNIQUE constraints the after side has the columns of."""
    old, new = before.tables[name], after.tables[name]
    usable = name not in before.no_key | after.no_key
    key = old.primary_key if usable and old.primary_key == new.primary_key else ()
    candidates = [*([old.primary_key] if old.primary_key else []), *old.unique]
    present = set(new.column_names())
    unique = [
        UniqueIndex(f"unique_{number}", columns, ("BINARY",) * len(columns))
        for number, columns in enumerate(candidates)
        if set(columns) != set(key) and set(columns) <= present
    ]
    return Pairing(key, tuple(sorted(unique, key=lambda index: len(index.columns))))


def _attached(before: Export | None, after: Export | None) -> sqlite3.Connection:
    connection = diff_connection(LOCK_TIMEOUT)
    for export, schema in ((before, "b"), (after, "a")):
        uri = ":memory:" if export is None else f"file:{export.path}?mode=ro"
        connection.execute(f"ATTACH DATABASE ? AS {schema}", (uri,))
    return connection


def compare(
    before: Export | None,
    after: Export | None,
    max_rows: int | None = DEFAULT_MAX_ROWS,
    sink: RowSink | None = None,
    key: str = "",
) -> PlanesJSON:
    """Both planes of one database from its two exports (``None``: absent on that side).

    :param key: the database's key in the diff, given to ``sink`` with each row.
    """
    connection = _attached(before, after)
    try:
        names = sorted({*(before.tables if before else {}), *(after.tables if after else {})})
        data, schema = {}, {}
        for name in names:
            old, new = _table(before, name, "b"), _table(after, name, "a")
            plan = _pairing(before, after, name) if before and after and old and new else None
            table_sink = None if sink is None else partial(sink, key, name)
            data[name] = diff_table(connection, old, new, max_rows, table_sink, plan)
            for export, count in ((before, "before_rows"), (after, "after_rows")):
                if export is not None and name in export.counts:
                    data[name][count] = export.counts[name]  # type: ignore[literal-required]
            schema[name] = schema_changes(_schema_side(before, name), _schema_side(after, name))
        return planes(data, schema)
    finally:
        connection.close()


def _schema_side(export: Export | None, name: str) -> Table | None:
    if export is None or name not in export.tables:
        return None
    pg = export.tables[name]
    return Table("", name, pg.columns, pg.primary_key, without_rowid=False)


def _sequences(after: Export | None) -> dict[str, int | None]:
    """Each sequence's last value at finish (``None`` before its first ``nextval``): a
    sequence only the before side has is absent."""
    return dict(after.sequences) if after is not None else {}


@final
class Side(NamedTuple):
    """One side of a database's diff: a database read by the admin role."""

    #: The database's name; ``None``: the database does not exist on this side.
    database: str | None
    #: A snapshot or clone closed to connections (opened for the admin's read only).
    closed: bool = True


class SideError(DatabaseError):
    """One side of a database could not be read."""

    def __init__(self, side: str, message: str):
        super().__init__(f"{side}: {message}")
        #: ``before`` or ``after``.
        self.side = side


@contextlib.contextmanager
def _side_connection(
    admin_url: str, side: Side, name: str
) -> Iterator[psycopg.Connection[Any] | None]:
    if side.database is None:
        yield None
        return
    with _named(name), contextlib.ExitStack() as stack:
        if side.closed:
            connection = stack.enter_context(opened(admin_url, side.database))
        else:
            connection = stack.enter_context(connect(admin_url, side.database))
        yield connection


@contextlib.contextmanager
def exported(
    admin_url: str,
    before: Side,
    after: Side,
    only: str | None = None,
    budget: TimeBudget | None = None,
) -> Iterator[tuple[Export | None, Export | None]]:
    """Both sides copied into SQLite files of a private temporary folder, removed on exit.

    Both sides are read at once, each on a connection of its own.

    :param only: copy this table only.
    :param budget: checked while the rows are copied.
    :raises SideError: naming the side that could not be read.
    """
    with (
        tempfile.TemporaryDirectory(prefix="pytest-scoring-pg-") as folder,
        contextlib.ExitStack() as stack,
    ):
        readings: list[_Reading | None] = []
        for side, name in ((before, "before"), (after, "after")):
            connection = stack.enter_context(_side_connection(admin_url, side, name))
            dest = Path(folder) / f"{name}.db"
            readings.append(
                None if connection is None
                else stack.enter_context(_reading(name, connection, dest, only))
            )  # fmt: skip
        old, new = export(readings[0], readings[1], budget)
        stack.close()
        yield old, new


def diff_databases(
    admin_url: str,
    before: Side,
    after: Side,
    key: str,
    max_rows: int | None = DEFAULT_MAX_ROWS,
    sink: RowSink | None = None,
    label: str | None = None,
) -> DatabaseEntryJSON:
    """One database's entry of a diff (docs/databases.md), ``info.engine`` ``postgresql``.

    :param key: the database's key in the diff (its ``name``).
    :param label: what ``info.path_before`` and ``path_after`` show (default: the names of
        the databases read).
    :returns: the entry; a side that cannot be read gets ``error`` and ``info.unreadable``.
    """
    entry: DatabaseEntryJSON = {
        "comparisons": empty_planes(),
        "info": {
            "engine": ENGINE,
            "path_before": label or before.database or "",
            "path_after": label or after.database or "",
            "exists_before": before.database is not None,
            "exists_after": after.database is not None,
            "sequences": {},
        },
    }
    try:
        with exported(admin_url, before, after) as (old, new):
            entry["comparisons"] = compare(old, new, max_rows, sink, key)
            entry["info"]["sequences"] = _sequences(new)
    except SideError as error:
        entry["error"] = str(error)
        entry["info"]["unreadable"] = [error.side]
    except sqlite3.Error as problem:  # as the SQLite engine reports a value it cannot diff
        entry["comparisons"] = empty_planes()
        entry["error"] = f"{key}: {UNREADABLE_VALUE if too_large(problem) else problem}"
    return entry


def row_stream(
    admin_url: str,
    before: Side,
    after: Side,
    table: str,
    kind: str,
    budget: TimeBudget | None = None,
) -> Iterator[dict[str, Any]]:
    """Every row of one row list of one table, that table of both sides read afresh (flat
    memory).

    :param budget: a selector's time budget, checked while the table is copied and inside
        SQLite while its rows are paired.
    """
    with exported(admin_url, before, after, only=table, budget=budget) as (old, new):
        connection = _attached(old, new)
        if budget is not None:
            connection.set_progress_handler(budget.sqlite_progress, PROGRESS_STEPS)
        try:
            plan = None
            if old and new and table in old.tables and table in new.tables:
                plan = _pairing(old, new, table)
            events = row_events(
                connection,
                guard(connection, _table(old, table, "b")),
                guard(connection, _table(new, table, "a")),
                plan,
            )
            with contextlib.closing(events):
                for event, build, times in events:
                    if event == kind:
                        row = build()
                        for _ in range(times):
                            yield row
        except sqlite3.OperationalError:
            if budget is not None:
                budget.check()  # SQLite was interrupted by the progress handler
            raise
        finally:
            connection.close()
