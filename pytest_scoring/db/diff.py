"""The database diff (docs/databases.md), computed by SQLite over two attached snapshots.

Both sides of one database are attached to one in-memory connection (read-only) and diffed
inside one read transaction, so a live database read in place cannot move underneath. Per
table, the set-based passes of :mod:`pytest_scoring.db.table_rows` stream the differing rows;
only those reach Python, and only the kept examples are built: memory grows with
``max_rows``, never with table size.
"""

from __future__ import annotations

import contextlib
import os
import sqlite3
from collections.abc import Callable
from collections.abc import Iterable
from collections.abc import Iterator
from collections.abc import Mapping
from collections.abc import Sequence
from functools import partial
from pathlib import Path
from typing import TYPE_CHECKING
from typing import Final
from typing import cast
from typing import final

from pytest_scoring.db.diff_types import ChangedRowJSON
from pytest_scoring.db.diff_types import DatabaseEntryJSON
from pytest_scoring.db.diff_types import DataTableJSON
from pytest_scoring.db.diff_types import DiffJSON
from pytest_scoring.db.diff_types import PlanesJSON
from pytest_scoring.db.diff_types import RowJSON
from pytest_scoring.db.diff_types import RowKind
from pytest_scoring.db.diff_types import SchemaTableJSON
from pytest_scoring.db.diff_types import TableStatus
from pytest_scoring.db.diff_types import empty_planes
from pytest_scoring.db.discovery import find_databases
from pytest_scoring.db.large_values import UNREADABLE_VALUE
from pytest_scoring.db.large_values import guard
from pytest_scoring.db.large_values import limit_values
from pytest_scoring.db.large_values import too_large
from pytest_scoring.db.schema import Pairing
from pytest_scoring.db.schema import Table
from pytest_scoring.db.schema import pairing
from pytest_scoring.db.schema import quote
from pytest_scoring.db.schema import read_tables
from pytest_scoring.db.schema import schema_changes
from pytest_scoring.db.snapshot import LOCK_TIMEOUT
from pytest_scoring.db.snapshot import Snapshot
from pytest_scoring.db.snapshot import read_in_place
from pytest_scoring.db.snapshot import read_only_uri
from pytest_scoring.db.table_rows import row_events
from pytest_scoring.errors import DatabaseError

if TYPE_CHECKING:
    from pytest_scoring.core.budget import TimeBudget
    from pytest_scoring.db.engine import RowSink

#: Examples kept per row list of a table (``counts`` stay exact).
DEFAULT_MAX_ROWS: Final = 1000
DEFAULT_DB_PATTERNS: Final = ("*.db", "*.sqlite", "*.sqlite3")
_BEFORE: Final = "b"
_AFTER: Final = "a"
#: SQLite virtual-machine steps between two calls of a row stream's progress handler.
PROGRESS_STEPS: Final = 10_000
#: Receives every differing row of one table: ``kind, row, times``.
TableSink = Callable[[str, RowJSON, int], None]


@final
class _Examples:
    """An exact count and at most ``limit`` examples of one row list."""

    __slots__ = ("count", "limit", "rows")

    def __init__(self, limit: int | None):
        self.limit = limit
        self.rows: list[RowJSON] = []
        self.count = 0

    def wants_example(self) -> bool:
        return self.limit is None or len(self.rows) < self.limit

    def add(self, build: Callable[[], RowJSON], times: int = 1) -> None:
        """Count ``times`` equal rows; ``build`` makes the row only if an example is wanted."""
        if self.wants_example():
            row = build()
            for _ in range(times if self.limit is None else min(times, self.limit)):
                if self.wants_example():
                    self.rows.append(row)
        self.count += times

    @property
    def truncated(self) -> bool:
        return len(self.rows) < self.count


def _count(connection: sqlite3.Connection, table: Table | None) -> int:
    if table is None:
        return 0
    return int(connection.execute(f"SELECT count(*) FROM {table.ref}").fetchone()[0])


def _data_changes(
    connection: sqlite3.Connection,
    before: Table | None,
    after: Table | None,
    limit: int | None,
    sink: TableSink | None = None,
    plan: Pairing | None = None,
) -> DataTableJSON:
    """The data-plane entry of one table (docs/databases.md).

    A table holding a value too large to read is read guarded
    (:mod:`~pytest_scoring.db.large_values`): found out first when a sink takes the rows,
    else when SQLite refuses the value (the table is then diffed again, guarded).

    :param sink: also receives every differing row (``kind, row, times``), examples or not.
    :param plan: how rows pair (default: worked out from the tables' SQLite schema); an
        engine whose tables were copied into SQLite files says it (PostgreSQL: issue 31).
    """
    if sink is not None:
        before, after = guard(connection, before), guard(connection, after)
        return _table_entry(connection, before, after, limit, sink, plan)
    try:
        return _table_entry(connection, before, after, limit, plan=plan)
    except sqlite3.DataError as error:
        if not too_large(error):
            raise
    old, new = guard(connection, before, known=True), guard(connection, after, known=True)
    return _table_entry(connection, old, new, limit, plan=plan)


def _table_entry(
    connection: sqlite3.Connection,
    before: Table | None,
    after: Table | None,
    limit: int | None,
    sink: TableSink | None = None,
    plan: Pairing | None = None,
) -> DataTableJSON:
    lists = {kind: _Examples(limit) for kind in ("added", "removed", "changed")}
    plan = (plan or pairing(connection, before, after)) if before and after else None
    for kind, build, times in row_events(connection, before, after, plan):
        if sink is not None:
            row = build()
            sink(kind, row, times)
            build = partial(_itself, row)
        lists[kind].add(build, times)
    added, removed, changed = (lists[kind].count for kind in ("added", "removed", "changed"))
    status: TableStatus = "added" if before is None else "removed" if after is None else "unchanged"
    if status == "unchanged" and (added or removed or changed):
        status = "changed"
    entry: DataTableJSON = {
        "status": status,
        "rows_added": lists["added"].rows,
        "rows_removed": lists["removed"].rows,
        # the changed events build rows_changed entries
        "rows_changed": cast("list[ChangedRowJSON]", lists["changed"].rows),
        "before_rows": _count(connection, before),
        "after_rows": _count(connection, after),
        "counts": {"added": added, "removed": removed, "changed": changed},
        "truncated": any(examples.truncated for examples in lists.values()),
    }
    if plan is not None:
        entry["pairing"] = plan.to_json()
    return entry


def _itself(row: RowJSON) -> RowJSON:
    return row


def _changed(tables: Mapping[str, DataTableJSON] | Mapping[str, SchemaTableJSON]) -> bool:
    """A plane's ``has_changes``."""
    return any(entry["status"] != "unchanged" for entry in tables.values())


def planes(data: dict[str, DataTableJSON], schema: dict[str, SchemaTableJSON]) -> PlanesJSON:
    """A database's two planes from their tables' entries."""
    return {
        "data": {"has_changes": _changed(data), "tables": data},
        "schema": {"has_changes": _changed(schema), "tables": schema},
    }


def _attach(connection: sqlite3.Connection, path: Path | None, schema: str) -> None:
    uri = ":memory:" if path is None else read_only_uri(path)
    connection.execute(f"ATTACH DATABASE ? AS {quote(schema)}", (uri,))


def _compare(
    connection: sqlite3.Connection,
    before: Path | None,
    after: Path | None,
    limit: int | None,
    sink: RowSink | None,
    relpath: str,
) -> PlanesJSON:
    """Both planes of one database, read inside one transaction."""
    try:
        old, new = _open_sides(connection, before, after)
        names = sorted(set(old) | set(new))
        data = {
            n: _data_changes(
                connection, old.get(n), new.get(n), limit, sink and partial(sink, relpath, n)
            )
            for n in names
        }
        schema = {n: schema_changes(old.get(n), new.get(n)) for n in names}
        return planes(data, schema)
    finally:
        if connection.in_transaction:
            connection.execute("ROLLBACK")
        for name in (_BEFORE, _AFTER):
            _detach(connection, name)


def _open_sides(
    connection: sqlite3.Connection, before: Path | None, after: Path | None
) -> tuple[dict[str, Table], dict[str, Table]]:
    """Attach both sides, open the read transaction and read each side's tables."""
    _attach(connection, before, _BEFORE)
    _attach(connection, after, _AFTER)
    connection.execute("BEGIN")
    return read_tables(connection, _BEFORE), read_tables(connection, _AFTER)


def _detach(connection: sqlite3.Connection, schema: str) -> None:
    attached = {row[1] for row in connection.execute("PRAGMA database_list")}
    if schema in attached:
        connection.execute(f"DETACH DATABASE {quote(schema)}")


def _side_error(before: Snapshot, after: Snapshot, relpath: str) -> str | None:
    problems = [
        f"{side}: {snapshot.errors[relpath]}"
        for side, snapshot in (("before", before), ("after", after))
        if relpath in snapshot.errors
    ]
    return "; ".join(problems) or None


def _diff_database(
    connection: sqlite3.Connection,
    before: Snapshot,
    after: Snapshot,
    relpath: str,
    limit: int | None,
    sink: RowSink | None,
) -> DatabaseEntryJSON:
    entry: DatabaseEntryJSON = {
        "comparisons": empty_planes(),
        "info": {
            "path_before": before.path_of(relpath),
            "path_after": after.path_of(relpath),
            "exists_before": relpath in before.names(),
            "exists_after": relpath in after.names(),
        },
    }
    real_path = after.real_paths.get(relpath) or before.real_paths.get(relpath)
    if real_path is not None:  # reached through a symlink inside the repository
        entry["info"]["real_path"] = real_path
    error = _side_error(before, after, relpath)
    unreadable = [
        side
        for side, snapshot in (("before", before), ("after", after))
        if relpath in snapshot.errors
    ]
    if unreadable:
        entry["info"]["unreadable"] = unreadable
    if error is None:
        try:
            entry["comparisons"] = _compare(
                connection,
                before.files.get(relpath),
                after.files.get(relpath),
                limit,
                sink,
                relpath,
            )
        except sqlite3.Error as problem:
            error = f"{relpath}: {UNREADABLE_VALUE if too_large(problem) else problem}"
    if error is not None:
        entry["error"] = error
    return entry


def _connect(timeout: float) -> sqlite3.Connection:
    """The in-memory connection both sides of a database are attached to."""
    connection = sqlite3.connect(":memory:", uri=True, isolation_level=None, timeout=timeout)
    connection.text_factory = lambda data: data.decode("utf-8", "replace")
    limit_values(connection)
    connection.execute("PRAGMA temp_store = FILE")
    return connection


#: For an engine that copies its tables into SQLite files (PostgreSQL, issue 31): the
#: connection the sides are attached to (as ``b`` and ``a``), and the data-plane entry of
#: one table whose rows pair as the engine says.
diff_connection = _connect
diff_table = _data_changes


@final
class RowStream:
    """Every row of one row list of one table, read afresh from both sides on each iteration.

    What selectors see of a table whose examples were cut: they look at every change while
    memory stays flat, however many rows the session changed.
    """

    __slots__ = ("after", "before", "budget", "kind", "table", "timeout")

    def __init__(
        self,
        before: Path | None,
        after: Path | None,
        table: str,
        kind: RowKind,
        timeout: float = LOCK_TIMEOUT,
        budget: TimeBudget | None = None,
    ):
        self.before, self.after, self.table, self.kind = before, after, table, kind
        self.timeout = timeout
        #: The selector's time budget, also checked inside SQLite while it looks for the rows.
        self.budget = budget

    def __iter__(self) -> Iterator[RowJSON]:
        connection = _connect(self.timeout)
        if self.budget is not None:
            connection.set_progress_handler(self.budget.sqlite_progress, PROGRESS_STEPS)
        try:
            old, new = _open_sides(connection, self.before, self.after)
            # Guarded up front: a pass started again would give the selector rows twice.
            events = row_events(
                connection,
                guard(connection, old.get(self.table)),
                guard(connection, new.get(self.table)),
            )
            # Closed before the connection: a reader that stops early ends the passes cleanly.
            with contextlib.closing(events):
                for kind, build, times in events:
                    if kind == self.kind:
                        row = build()
                        for _ in range(times):
                            yield row
        except sqlite3.OperationalError:
            if self.budget is not None:
                self.budget.check()  # SQLite was interrupted by the progress handler
            raise
        finally:
            connection.close()


def diff_databases(
    before: Snapshot,
    after: Snapshot,
    max_rows: int | None = DEFAULT_MAX_ROWS,
    relpaths: Iterable[str] | None = None,
    timeout: float = LOCK_TIMEOUT,
    row_sink: RowSink | None = None,
) -> dict[str, DatabaseEntryJSON]:
    """The entry of each database (docs/databases.md), by relative path, sorted.

    :param max_rows: examples kept per row list; ``None`` keeps every row (counts are
        always exact).
    :param relpaths: only these databases (default: every database either side saw).
    :param timeout: seconds to wait for a database another connection has locked.
    :param row_sink: receives every differing row as it is computed (``database, table,
        kind, row, times``), also those beyond ``max_rows``: the diff-of-diffs stores them.
    """
    wanted = sorted(relpaths if relpaths is not None else before.names() | after.names())
    connection = _connect(timeout)
    try:
        return {
            relpath: _diff_database(connection, before, after, relpath, max_rows, row_sink)
            for relpath in wanted
        }
    finally:
        connection.close()


def whole_diff(
    before_source: str,
    after_source: str,
    db_patterns: Sequence[str],
    comparisons: dict[str, DatabaseEntryJSON],
) -> DiffJSON:
    """A diff of the databases' ``comparisons`` (of every engine), with its sources."""
    return {
        "status": "success",
        "before_source": before_source,
        "after_source": after_source,
        "db_patterns": list(db_patterns),
        "comparisons": comparisons,
    }


def diff_snapshots(
    before: Snapshot,
    after: Snapshot,
    max_rows: int | None = DEFAULT_MAX_ROWS,
    db_patterns: Sequence[str] = DEFAULT_DB_PATTERNS,
    relpaths: Iterable[str] | None = None,
    timeout: float = LOCK_TIMEOUT,
    row_sink: RowSink | None = None,
) -> DiffJSON:
    """The diff (docs/databases.md) between two snapshots of the same repository's databases.

    The parameters are :func:`diff_databases`'s.

    :returns: the JSON-ready diff; an unreadable database gets an ``error`` entry.
    """
    comparisons = diff_databases(before, after, max_rows, relpaths, timeout, row_sink)
    return whole_diff(before.source, after.source, db_patterns, comparisons)


def diff_paths(
    before: str | os.PathLike[str],
    after: str | os.PathLike[str],
    max_rows: int | None = DEFAULT_MAX_ROWS,
) -> DiffJSON:
    """Diff two database files, or two folders of databases (read in place, read-only).

    :raises DatabaseError: when a path is missing or one is a file and the other a folder.
    """
    before, after = Path(before), Path(after)
    for path in (before, after):
        if not path.exists():
            raise DatabaseError(f"{path}: no such file or folder")
    if before.is_dir() != after.is_dir():
        raise DatabaseError(f"{before} and {after}: give two database files or two folders")
    if before.is_dir():
        relpaths = sorted({*_databases(before), *_databases(after)})
        old, new = read_in_place(before, relpaths), read_in_place(after, relpaths)
    else:
        old = _single(before, after.name)
        new = _single(after, after.name)
    return diff_snapshots(old, new, max_rows)


def _databases(folder: Path) -> list[str]:
    return find_databases(folder, DEFAULT_DB_PATTERNS)


def _single(path: Path, key: str) -> Snapshot:
    """One database file under the name ``key``."""
    snapshot = read_in_place(path.parent, [path.name], source=str(path))
    snapshot.files = {key: path} if snapshot.files else {}
    snapshot.errors = {key: snapshot.errors[path.name]} if snapshot.errors else {}
    snapshot.origins = {key: path}
    return snapshot
