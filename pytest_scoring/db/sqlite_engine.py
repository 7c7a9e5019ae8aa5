"""SQLite behind the database seam (:mod:`pytest_scoring.db.engine`): a folder's database files.

The work is done by the modules it wraps: :mod:`~pytest_scoring.db.discovery` finds the
files, :mod:`~pytest_scoring.db.snapshot` copies and resets them, :mod:`~pytest_scoring.db.diff`
diffs two snapshots. A database's name is its path relative to the folder.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Collection
from collections.abc import Iterable
from collections.abc import Mapping
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING
from typing import Any
from typing import Final
from typing import final

from pytest_scoring.db.diff import RowStream
from pytest_scoring.db.diff import diff_databases
from pytest_scoring.db.diff_types import DatabaseEntryJSON
from pytest_scoring.db.diff_types import RowKind
from pytest_scoring.db.discovery import discover
from pytest_scoring.db.discovery import unsearched_folders
from pytest_scoring.db.large_values import limit_values
from pytest_scoring.db.schema import quote
from pytest_scoring.db.snapshot import LOCK_TIMEOUT
from pytest_scoring.db.snapshot import Snapshot
from pytest_scoring.db.snapshot import read_in_place
from pytest_scoring.db.snapshot import read_only_uri
from pytest_scoring.db.snapshot import reset_databases
from pytest_scoring.db.snapshot import take_snapshot

if TYPE_CHECKING:
    from pytest_scoring.core.budget import TimeBudget
    from pytest_scoring.db.engine import RowReader
    from pytest_scoring.db.engine import RowSink

#: Seconds :meth:`SqliteEngine.read_row` waits for a locked database (it only names a row).
_ROW_TIMEOUT: Final = 1.0


@final
class SqliteEngine:
    """The SQLite databases under one folder (a repository, a copy of one)."""

    name: Final = "sqlite"

    def __init__(
        self,
        root: Path,
        patterns: Sequence[str],
        exclude: Iterable[Path] = (),
        timeout: float = LOCK_TIMEOUT,
    ):
        """:param patterns: the database globs (``--score-db-pattern``).
        :param exclude: folders not searched (the report root, the evaluator's exclusions).
        :param timeout: seconds to wait for a database another connection has locked.
        """
        self.root = root
        self.patterns = list(patterns)
        self.exclude = list(exclude)
        self.timeout = timeout
        #: The folders the last :meth:`find` left out.
        self.skipped: list[str] = []

    def find(self) -> list[str]:
        found = discover(self.root, self.patterns, self.exclude)
        self.skipped = found.skipped
        return found.databases

    def unsearched(self) -> list[str]:
        """The folders the last :meth:`find` left out that hold a file matching the patterns
        (``metadata.unsearched_folders``)."""
        return unsearched_folders(self.root, self.skipped, self.patterns)

    def snapshot(self, names: Sequence[str], folder: Path, source: str) -> Snapshot:
        return take_snapshot(self.root, names, folder, source, self.timeout)

    def read_final(self, names: Sequence[str], source: str) -> Snapshot:
        return read_in_place(self.root, names, source)

    def diff(
        self,
        before: Snapshot,
        after: Snapshot,
        max_rows: int | None,
        sink: RowSink | None = None,
    ) -> dict[str, DatabaseEntryJSON]:
        return diff_databases(before, after, max_rows, timeout=self.timeout, row_sink=sink)

    def rows(
        self,
        before: Snapshot,
        after: Snapshot,
        database: str,
        table: str,
        kind: RowKind,
        budget: TimeBudget | None = None,
    ) -> Iterable[Any]:
        old, new = before.files.get(database), after.files.get(database)
        return RowStream(old, new, table, kind, self.timeout, budget)

    def read_row(
        self,
        state: Snapshot,
        database: str,
        table: str,
        key: Mapping[str, Any],
        leave_out: Collection[str] = (),
    ) -> dict[str, Any] | None:
        return read_sqlite_row(state.files.get(database), table, key, leave_out)

    def reset(self, names: Sequence[str], store: Path, base: Path | None) -> list[str]:
        return reset_databases(self.root, names, store, base)

    def release(self, snapshot: Snapshot) -> None:
        """Nothing to free: the copies go with the caller's folder."""


def file_row_reader(files: Mapping[str, Path]) -> RowReader:
    """Reads rows of the database files ``files`` (by name): final databases kept as a
    report's evidence."""

    def read_row(
        database: str, table: str, key: Mapping[str, Any], leave_out: Collection[str]
    ) -> dict[str, Any] | None:
        return read_sqlite_row(files.get(database), table, key, leave_out)

    return read_row


def read_sqlite_row(
    path: Path | None, table: str, key: Mapping[str, Any], leave_out: Collection[str] = ()
) -> dict[str, Any] | None:
    """:meth:`SqliteEngine.read_row` from the database file at ``path`` (read-only).

    SQLite refuses any value too large to hold: a repository's gigabyte value is never read.
    """
    if path is None or not key:
        return None
    names = list(key)
    skipped = {*names, *leave_out}
    where = " AND ".join(f"{quote(name)} IS ?" for name in names)
    try:
        connection = sqlite3.connect(read_only_uri(path), uri=True, timeout=_ROW_TIMEOUT)
    except (sqlite3.Error, OSError):
        return None
    limit_values(connection)
    try:
        info = connection.execute("SELECT name FROM pragma_table_info(?)", (table,))
        columns = [name for (name,) in info if name not in skipped]
        if not columns:
            return None
        selected = ", ".join(quote(column) for column in columns)
        sql = f"SELECT {selected} FROM {quote(table)} WHERE {where} LIMIT 1"
        row = connection.execute(sql, [key[name] for name in names]).fetchone()
    except (sqlite3.Error, OverflowError, TypeError):
        return None
    finally:
        connection.close()
    return None if row is None else dict(zip(columns, row, strict=True))
