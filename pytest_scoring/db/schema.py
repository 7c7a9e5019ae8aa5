"""What the diff needs to know about a table on each side: columns, key, how rows pair.

Every identifier that reaches SQL goes through :func:`quote`; values are always bound.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Sequence
from typing import Final
from typing import NamedTuple
from typing import final

from pytest_scoring.db.diff_types import ColumnChange
from pytest_scoring.db.diff_types import ColumnJSON
from pytest_scoring.db.diff_types import PairingJSON
from pytest_scoring.db.diff_types import SchemaTableJSON
from pytest_scoring.db.diff_types import TableStatus

#: Pair by the rowid (a rowid table without a usable declared primary key).
ROWID: Final = "rowid"


def quote(identifier: str) -> str:
    """The one way an identifier (schema, table, column) enters SQL text."""
    return '"' + identifier.replace('"', '""') + '"'


@final
class Table(NamedTuple):
    """One table of one attached database."""

    #: The attached schema name (``b`` before, ``a`` after).
    schema: str
    name: str
    columns: tuple[ColumnJSON, ...]
    #: Declared primary key columns in key order (empty when none is declared).
    primary_key: tuple[str, ...]
    without_rowid: bool
    #: How a guarded table's rows are read by rowid, for values too large to read whole
    #: (:mod:`pytest_scoring.db.large_values`); None: the table's values are read as they are.
    large_by: str | None = None

    @property
    def ref(self) -> str:
        """The table as SQL text: ``"b"."users"``."""
        return f"{quote(self.schema)}.{quote(self.name)}"

    def column_names(self) -> list[str]:
        return [column["name"] for column in self.columns]

    def affinity(self, column: str) -> str:
        """SQLite's type affinity of a column (datatypes doc, section 3.1)."""
        declared = next(c["type"] for c in self.columns if c["name"] == column).upper()
        if "INT" in declared:
            return "INTEGER"
        if any(word in declared for word in ("CHAR", "CLOB", "TEXT")):
            return "TEXT"
        if "BLOB" in declared or not declared:
            return "BLOB"
        if any(word in declared for word in ("REAL", "FLOA", "DOUB")):
            return "REAL"
        return "NUMERIC"


def read_tables(connection: sqlite3.Connection, schema: str) -> dict[str, Table]:
    """The ordinary tables of an attached database; views, virtual and ``sqlite_*`` ignored."""
    rows = connection.execute(
        "SELECT name, wr FROM pragma_table_list WHERE schema = ? AND type = 'table' "
        "AND name NOT LIKE 'sqlite\\_%' ESCAPE '\\' ORDER BY name",
        (schema,),
    ).fetchall()
    return {name: _read_table(connection, schema, name, bool(wr)) for name, wr in rows}


def _read_table(
    connection: sqlite3.Connection, schema: str, name: str, without_rowid: bool
) -> Table:
    info = connection.execute(
        'SELECT name, type, "notnull", pk FROM pragma_table_info(?, ?) ORDER BY cid',
        (name, schema),
    ).fetchall()
    columns = tuple(
        ColumnJSON(name=col, type=kind, nullable=not notnull, primary_key=pk > 0)
        for col, kind, notnull, pk in info
    )
    key = tuple(col for col, _kind, _notnull, pk in sorted(info, key=lambda row: row[3]) if pk)
    return Table(schema, name, columns, key, without_rowid)


def _key_has_null(connection: sqlite3.Connection, table: Table) -> bool:
    """Whether a rowid table's declared key holds a NULL (SQLite allows it; it cannot pair)."""
    condition = " OR ".join(f"{quote(col)} IS NULL" for col in table.primary_key)
    sql = f"SELECT 1 FROM {table.ref} WHERE {condition} LIMIT 1"
    return connection.execute(sql).fetchone() is not None


def pairing_key(connection: sqlite3.Connection, before: Table, after: Table) -> Sequence[str]:
    """The columns rows pair by: the declared key, else ``[ROWID]``, else ``[]`` (multiset).

    The declared key is used when both sides declare the same one and it holds no NULL;
    a rowid table falls back to its rowid; anything else pairs rows by full content.
    """
    same_key = bool(after.primary_key) and before.primary_key == after.primary_key
    both_rowid = not (before.without_rowid or after.without_rowid)
    if same_key and not (both_rowid and any(_key_has_null(connection, t) for t in (before, after))):
        return after.primary_key
    return [ROWID] if both_rowid and ROWID not in _all_names(before, after) else []


#: Collations every connection knows; an index under another cannot be compared here.
_BUILTIN_COLLATIONS: Final = frozenset({"BINARY", "NOCASE", "RTRIM"})


@final
class UniqueIndex(NamedTuple):
    """A UNIQUE constraint or index of the before side that rows may pair by."""

    name: str
    columns: tuple[str, ...]
    #: The collation each column compares under in the index.
    collations: tuple[str, ...]


def unique_indexes(
    connection: sqlite3.Connection, before: Table, after: Table, key: Sequence[str]
) -> list[UniqueIndex]:
    """The before side's UNIQUE indexes that removed and added rows may pair by.

    Left out: partial and expression indexes, indexes under a collation this connection
    does not know, indexes on a column the after side lacks, and the pairing key itself.
    One index per column list, fewest columns first, then by name (docs/databases.md).
    """
    names = connection.execute(
        'SELECT name FROM pragma_index_list(?, ?) WHERE "unique" AND NOT partial',
        (before.name, before.schema),
    ).fetchall()
    after_names = {name.lower() for name in after.column_names()}
    found: dict[tuple[str, ...], UniqueIndex] = {}
    for (name,) in sorted(names):
        info = connection.execute(
            "SELECT cid, name, coll FROM pragma_index_xinfo(?, ?) WHERE key ORDER BY seqno",
            (name, before.schema),
        ).fetchall()
        columns = tuple(str(column) for cid, column, _ in info if cid >= 0)
        collations = tuple(str(coll).upper() for _, _, coll in info)
        usable = len(columns) == len(info) and set(collations) <= _BUILTIN_COLLATIONS
        folded = tuple(column.lower() for column in columns)
        if not usable or not set(folded) <= after_names:
            continue
        if set(folded) == {column.lower() for column in key}:
            continue
        found.setdefault(folded, UniqueIndex(name, columns, collations))
    return sorted(found.values(), key=lambda index: (len(index.columns), index.name))


def _all_names(*tables: Table) -> set[str]:
    return {name.lower() for table in tables for name in table.column_names()}


def union_columns(before: Table | None, after: Table | None) -> list[str]:
    """Columns of either side, before's order first; a missing column reads as NULL."""
    names = [*(before.column_names() if before else []), *(after.column_names() if after else [])]
    return list(dict.fromkeys(names))


def schema_changes(before: Table | None, after: Table | None) -> SchemaTableJSON:
    """The schema-plane entry of a table: status and column changes (docs/databases.md)."""
    old = {c["name"]: c for c in (before.columns if before else ())}
    new = {c["name"]: c for c in (after.columns if after else ())}
    added = [new[name] for name in new if name not in old]
    removed = [old[name] for name in old if name not in new]
    changed: list[ColumnChange] = [
        {"name": name, "from": old[name], "to": new[name]}
        for name in new
        if name in old and old[name] != new[name]
    ]
    status: TableStatus = (
        "added"
        if before is None
        else "removed"
        if after is None
        else "changed"
        if added or removed or changed
        else "unchanged"
    )
    return {
        "status": status,
        "columns_added": added,
        "columns_removed": removed,
        "columns_changed": changed,
    }


@final
class Pairing(NamedTuple):
    """How the rows of a table present on both sides pair (the table's ``pairing`` entry)."""

    #: The key columns (``["rowid"]`` for the rowid; empty: rows pair by content).
    key: tuple[str, ...]
    #: The UNIQUE indexes removed and added rows then pair through, in the order tried.
    unique: tuple[UniqueIndex, ...]

    def to_json(self) -> PairingJSON:
        return {"key": list(self.key), "unique": [list(index.columns) for index in self.unique]}


def pairing(connection: sqlite3.Connection, before: Table, after: Table) -> Pairing:
    """How rows of ``before`` and ``after`` pair: by key, then through UNIQUE indexes."""
    key = pairing_key(connection, before, after)
    return Pairing(tuple(key), tuple(unique_indexes(connection, before, after, key)))
