"""SQL fragments and JSON builders that every pass of the diff shares.

The passes alias the before side ``o`` and the after side ``n``; a row reaches Python only
when it differs, streamed from the cursor, and its JSON form is built only when it is kept.
"""

from __future__ import annotations

import base64
import json
import secrets
import sqlite3
from collections.abc import Callable
from collections.abc import Iterator
from collections.abc import Sequence
from functools import partial
from typing import Any
from typing import Final

from pytest_scoring.db.large_values import guarded
from pytest_scoring.db.large_values import stub_of
from pytest_scoring.db.schema import Table
from pytest_scoring.db.schema import quote

#: Rows fetched from SQLite per round trip while streaming.
BATCH: Final = 500

#: One differing row: its list (``added``, ``removed``, ``changed``), a builder of its JSON
#: form (called only when the row is kept), and how many equal rows it stands for.
RowEvent = tuple[str, Callable[[], dict[str, Any]], int]
#: Starts a stored text that stands for a JSON value (PostgreSQL's arrays, ``json`` and
#: ``jsonb``, issue 31): random per process, so no stored text can pass for one.
_JSON_MARK: Final = f"json-{secrets.token_hex(16)}:"


def json_text(text: str) -> str:
    """JSON text as a diff stores it: shown as the JSON value it holds, compared as text."""
    return _JSON_MARK + text


def json_value(value: Any) -> Any:
    """A SQLite value as JSON: BLOBs become ``{"$blob": base64}``, a large value its stub,
    a :func:`json_text` the value it holds."""
    if isinstance(value, bytes):
        return {"$blob": base64.b64encode(value).decode("ascii")}
    if isinstance(value, str):
        if value.startswith(_JSON_MARK):
            return json.loads(value[len(_JSON_MARK) :])
        return stub_of(value) or value
    return value


def stream(cursor: sqlite3.Cursor) -> Iterator[tuple[Any, ...]]:
    """The cursor's rows in batches; the statement is reset even when the reader stops early.

    A stopped reader must not leave a statement running: the temporary tables a pass made
    could not be dropped under it.
    """
    try:
        while batch := cursor.fetchmany(BATCH):
            yield from batch
    finally:
        cursor.close()


def side(table: Table | None, alias: str, column: str) -> str:
    """A column of one side as SQL, ``NULL`` where that side lacks it."""
    if table is None or column not in table.column_names():
        return "NULL"
    if table.large_by is not None:
        return guarded(table, alias, column)
    return f"{alias}.{quote(column)}"


def differs(before: Table, after: Table, column: str) -> str:
    """SQL that is true when a paired row's column differs by value or SQLite type.

    ``IS NOT`` makes NULL equal NULL; ``COLLATE BINARY`` ignores a column's NOCASE; ``typeof``
    separates ``1`` from ``1.0`` or ``'1'`` where affinity lets both be stored.

    Between two columns without affinity nothing is converted, so only an integer and a real
    can compare equal with different types: ``typeof`` (two function calls, a third of a
    pass's time) is asked only when the old value is a number, i.e. sorts before any text
    (``+`` drops the column's affinity, which would turn a stored number into text first).
    """
    old, new = side(before, "o", column), side(after, "n", column)
    if "NULL" in (old, new):
        return f"{new if old == 'NULL' else old} IS NOT NULL"
    condition = f"{old} IS NOT {new} COLLATE BINARY"
    affinities = {before.affinity(column), after.affinity(column)}
    if len(affinities) == 1 and affinities != {"BLOB"}:
        return condition
    types = f"typeof({old}) <> typeof({new})"
    if affinities == {"BLOB"}:
        types = f"+{old} < '' AND {types}"
    return f"({condition} OR {types})"


def join(key: Sequence[str], left: str = "n", right: str = "o") -> str:
    """Equality of the key columns of two aliases (the pairing join)."""
    return " AND ".join(f"{left}.{quote(col)} = {right}.{quote(col)}" for col in key)


def json_row(columns: Sequence[str], values: Sequence[Any], present: set[str]) -> dict[str, Any]:
    """A row as JSON, keeping only the columns its side has."""
    return {c: json_value(v) for c, v in zip(columns, values, strict=True) if c in present}


def changes(
    columns: Sequence[str], old: Sequence[Any], new: Sequence[Any], differ: Sequence[Any]
) -> dict[str, dict[str, Any]]:
    """``{column: {"old_value", "new_value"}}`` for the columns flagged as differing."""
    return {
        col: {"old_value": json_value(before), "new_value": json_value(after)}
        for col, before, after, flag in zip(columns, old, new, differ, strict=True)
        if flag
    }


def changed_row(key: Sequence[str], columns: Sequence[str], row: Sequence[Any]) -> dict[str, Any]:
    """A changed row from ``key values…, flag, (new, old, differs) per column``."""
    values = row[len(key) + 1 :]
    return {
        "key": {col: json_value(v) for col, v in zip(key, row, strict=False)},
        "changes": changes(columns, values[1::3], values[0::3], values[2::3]),
    }


def one_list(
    connection: sqlite3.Connection, sql: str, columns: Sequence[str], kind: str
) -> Iterator[RowEvent]:
    """Every row ``sql`` selects (``columns`` in order) as a row of list ``kind``."""
    present = set(columns)
    for row in stream(connection.execute(sql)):
        yield kind, partial(json_row, columns, row, present), 1


def exists(connection: sqlite3.Connection, sql: str) -> bool:
    """Whether ``sql`` selects any row."""
    return bool(connection.execute(f"SELECT EXISTS ({sql})").fetchone()[0])
