"""Two WITHOUT ROWID tables read side by side in key order, so that only differing rows are
looked up by key.

A lookup by key in a WITHOUT ROWID table starts from the root of its B-tree every time: two
passes that look up every row of the other side spent about half the diff's time on such a
table. Both sides are stored in key order, so SQLite's ``EXCEPT … ORDER BY key`` merges them
page by page, without a sort, and gives the rows of one side that the other lacks: the only
rows the passes of :mod:`pytest_scoring.db.table_rows` then need to look at, with the same
joins and the same conditions, so the rows found are the same.

``EXCEPT`` compares stored values, where the joins and the conditions first convert a value to
its column's affinity: ``EXCEPT`` may call ``1`` and ``1.0`` equal where a condition would not,
or one key equal to itself where the lookup converts it away. So the merge is used only when
neither side holds such a value: every key as its column's affinity stores it, and no number
in a column whose condition tells an integer from a real (a TEXT or untyped column). Asking
that costs one scan per side, stopped at the first such value, which sends the table back to
the lookups. With it, ``EXCEPT`` is at least as strict as the conditions, which decide.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Sequence

from pytest_scoring.db.schema import Table
from pytest_scoring.db.schema import quote

#: The keys' values that a lookup would convert (``+`` drops the column's affinity, so the
#: comparison sees the value as stored; numbers sort before text, text before BLOBs).
_CONVERTED_KEY = {"TEXT": "+{c} < ''", "INTEGER": "+{c} >= ''", "REAL": "+{c} >= ''"}
_CONVERTED_KEY["NUMERIC"] = _CONVERTED_KEY["INTEGER"]


def _key_in_order(connection: sqlite3.Connection, table: Table, key: Sequence[str]) -> bool:
    """Whether ``table``'s primary key B-tree is ``key``, ascending, under BINARY."""
    found = connection.execute(
        "SELECT name FROM pragma_index_list(?, ?) WHERE origin = 'pk'", (table.name, table.schema)
    ).fetchone()
    if found is None:
        return False
    columns = connection.execute(
        'SELECT name, "desc", coll FROM pragma_index_xinfo(?, ?) WHERE key ORDER BY seqno',
        (found[0], table.schema),
    ).fetchall()
    return [(name, desc, coll.upper()) for name, desc, coll in columns] == [
        (column, 0, "BINARY") for column in key
    ]


def _converted(table: Table, key: Sequence[str]) -> list[str]:
    """SQL conditions, one per column that needs one, true for a value ``EXCEPT`` would
    compare otherwise than the passes' joins and conditions."""
    conditions = []
    for column in table.column_names():
        affinity, name = table.affinity(column), quote(column)
        if column in key:
            template = _CONVERTED_KEY.get(affinity)
        else:
            template = "+{c} < ''" if affinity in ("TEXT", "BLOB") else None
        if template is not None:
            conditions.append(template.format(c=name))
    return conditions


def merges(connection: sqlite3.Connection, before: Table, after: Table, key: Sequence[str]) -> bool:
    """Whether rows of ``before`` and ``after`` paired by ``key`` may be found by a merge."""
    if not (before.without_rowid and after.without_rowid) or before.columns != after.columns:
        return False
    if list(key) != list(before.primary_key) or before.large_by or after.large_by:
        return False
    if not all(_key_in_order(connection, table, key) for table in (before, after)):
        return False
    conditions = _converted(before, key)
    if not conditions:
        return True
    return not any(
        connection.execute(
            f"SELECT EXISTS (SELECT 1 FROM {table.ref} WHERE {' OR '.join(conditions)})"
        ).fetchone()[0]
        for table in (before, after)
    )


def rows_lacking(first: Table, second: Table, key: Sequence[str], whole: bool) -> str:
    """SQL of ``first``'s rows that ``second`` lacks, in key order (every column when
    ``whole``, else only the key: the rows whose key ``second`` lacks)."""
    names = first.column_names() if whole else list(key)
    columns = ", ".join(
        quote(name) if name in key else f"{quote(name)} COLLATE BINARY AS {quote(name)}"
        for name in names
    )
    order = ", ".join(str(names.index(column) + 1) for column in key)
    # LIMIT keeps the ORDER BY that makes SQLite merge instead of building a temporary index.
    return (
        f"SELECT {columns} FROM {first.ref} EXCEPT SELECT {columns} FROM {second.ref} "
        f"ORDER BY {order} LIMIT -1"
    )
