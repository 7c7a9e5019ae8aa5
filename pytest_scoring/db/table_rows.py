"""Every differing row of one table, streamed from SQLite by set-based passes.

A table with a key (primary key or rowid): a LEFT JOIN of after onto before by key gives the
rows added and changed, an anti-join the other way the rows removed. A table without a usable
key: one GROUP BY over both sides with signed counts (multiset pairing). Then removed and
added rows pair through the before side's UNIQUE indexes (:mod:`pytest_scoring.db.unique_pairs`).
"""

from __future__ import annotations

import sqlite3
from collections.abc import Generator
from collections.abc import Iterator
from collections.abc import Sequence
from functools import partial

from pytest_scoring.db.key_order import merges
from pytest_scoring.db.key_order import rows_lacking
from pytest_scoring.db.row_sql import RowEvent
from pytest_scoring.db.row_sql import changed_row
from pytest_scoring.db.row_sql import differs
from pytest_scoring.db.row_sql import join
from pytest_scoring.db.row_sql import json_row
from pytest_scoring.db.row_sql import one_list
from pytest_scoring.db.row_sql import side
from pytest_scoring.db.row_sql import stream
from pytest_scoring.db.schema import Pairing
from pytest_scoring.db.schema import Table
from pytest_scoring.db.schema import pairing
from pytest_scoring.db.schema import quote
from pytest_scoring.db.schema import union_columns
from pytest_scoring.db.unique_pairs import ContentPairs
from pytest_scoring.db.unique_pairs import KeyedPairs


def _added_and_changed(
    connection: sqlite3.Connection,
    before: Table,
    after: Table,
    key: Sequence[str],
    unpaired: str = "1",
    rows: str = "",
) -> Iterator[RowEvent]:
    """One LEFT JOIN of after onto before: unpaired rows are added, differing ones changed.

    :param unpaired: SQL true for an after row ``n`` that may be listed as added (false for
        one the UNIQUE pass paired with a removed row).
    :param rows: SQL of the only after rows that may differ, in key order (default: all).
    """
    columns = union_columns(before, after)
    flags = [differs(before, after, col) for col in columns]
    select = [
        *(f"n.{quote(col)}" for col in key),
        f"o.{quote(key[0])} IS NULL",
        *(
            f"{side(after, 'n', c)}, {side(before, 'o', c)}, {flag}"
            for c, flag in zip(columns, flags, strict=True)
        ),
    ]
    missing = f"o.{quote(key[0])} IS NULL"
    changed = " OR ".join(flags) or "0"
    wanted = (
        f"{missing} OR {changed}"
        if unpaired == "1"
        else f"CASE WHEN {missing} THEN {unpaired} ELSE {changed} END"
    )
    sql = (
        f"SELECT {', '.join(select)} FROM {f'({rows})' if rows else after.ref} AS n "
        f"LEFT JOIN {before.ref} AS o ON {join(key)} WHERE {wanted}{_in_order(rows, 'n', key)}"
    )
    present = set(after.column_names())
    for row in stream(connection.execute(sql)):
        if row[len(key)]:
            yield "added", partial(json_row, columns, row[len(key) + 1 :: 3], present), 1
        else:
            yield "changed", partial(changed_row, key, columns, row), 1


def _removed(
    connection: sqlite3.Connection,
    before: Table,
    after: Table,
    key: Sequence[str],
    keys: str = "",
) -> Iterator[RowEvent]:
    """Rows of before whose key has no row after (a LEFT JOIN: 3x faster than NOT EXISTS).

    :param keys: SQL of the only before keys that may lack a row after, in key order, as
        ``r`` (default: every row of before).
    """
    columns = before.column_names()
    source = f"({keys}) AS r JOIN {before.ref} AS o ON {join(key, 'o', 'r')}" if keys else ""
    sql = (
        f"SELECT {', '.join(side(before, 'o', c) for c in columns)} "
        f"FROM {source or f'{before.ref} AS o'} LEFT JOIN {after.ref} AS n ON {join(key)} "
        f"WHERE n.{quote(key[0])} IS NULL{_in_order(keys, 'r', key)}"
    )
    yield from one_list(connection, sql, columns, "removed")


def _in_order(rows: str, alias: str, key: Sequence[str]) -> str:
    """``ORDER BY`` the key when the rows come from a merge (a table's own scan is in order)."""
    return f" ORDER BY {', '.join(f'{alias}.{quote(c)}' for c in key)}" if rows else ""


def _keyed(
    connection: sqlite3.Connection, before: Table, after: Table, plan: Pairing
) -> Iterator[RowEvent]:
    """Rows paired by key, then removed and added rows paired through UNIQUE indexes."""
    if not plan.unique:
        merged = merges(connection, before, after, plan.key)
        rows = rows_lacking(after, before, plan.key, whole=True) if merged else ""
        keys = rows_lacking(before, after, plan.key, whole=False) if merged else ""
        yield from _added_and_changed(connection, before, after, plan.key, rows=rows)
        yield from _removed(connection, before, after, plan.key, keys)
        return
    with KeyedPairs(connection, before, after, plan.key, plan.unique) as pairs:
        yield from _added_and_changed(connection, before, after, plan.key, pairs.added_filter())
        yield from one_list(connection, pairs.removed_sql(), before.column_names(), "removed")
        yield from pairs.changed()


def _multiset(
    connection: sqlite3.Connection, before: Table, after: Table, plan: Pairing
) -> Iterator[RowEvent]:
    """Rows with no key pair by full content: signed counts per distinct (value, type) row.

    Then removed and added rows pair through UNIQUE indexes, when the table has any.
    """
    columns = union_columns(before, after)

    def arm(table: Table, alias: str, sign: int) -> str:
        values = [side(table, alias, col) for col in columns]
        select = [f"{v} COLLATE BINARY AS v{i}, typeof({v}) AS t{i}" for i, v in enumerate(values)]
        return f"SELECT {', '.join(select)}, {sign} AS s FROM {table.ref} AS {alias}"

    groups = [f"v{i}, t{i}" for i in range(len(columns))]
    grouped = (
        f"SELECT {', '.join(groups)}, sum(s) FROM ({arm(after, 'n', 1)} UNION ALL "
        f"{arm(before, 'o', -1)}) GROUP BY {', '.join(groups)} HAVING sum(s) <> 0"
    )
    if not plan.unique:
        yield from _content_rows(connection, grouped, before, after)
        return
    with ContentPairs(connection, before, after, plan.unique, grouped) as pairs:
        yield from _content_rows(connection, pairs.unpaired_sql(), before, after)
        yield from pairs.changed()


def _content_rows(
    connection: sqlite3.Connection, sql: str, before: Table, after: Table
) -> Iterator[RowEvent]:
    """Added and removed rows from ``v0, t0, …, net`` rows of signed counts."""
    columns = union_columns(before, after)
    present = {"added": set(after.column_names()), "removed": set(before.column_names())}
    for row in stream(connection.execute(sql)):
        values, net = row[0 : 2 * len(columns) : 2], row[-1]
        kind = "added" if net > 0 else "removed"
        yield kind, partial(json_row, columns, values, present[kind]), abs(net)


def _one_side(connection: sqlite3.Connection, table: Table, kind: str) -> Iterator[RowEvent]:
    """Every row of a table that exists on one side only."""
    columns = table.column_names()
    sql = f"SELECT {', '.join(side(table, 't', c) for c in columns)} FROM {table.ref} AS t"
    yield from one_list(connection, sql, columns, kind)


def row_events(
    connection: sqlite3.Connection,
    before: Table | None,
    after: Table | None,
    plan: Pairing | None = None,
) -> Generator[RowEvent]:
    """Every differing row of one table, streamed from SQLite.

    :param plan: how rows pair when the table is on both sides (default: worked out here).
    """
    if before is not None and after is not None:
        plan = plan or pairing(connection, before, after)
        if plan.key:
            yield from _keyed(connection, before, after, plan)
        else:
            yield from _multiset(connection, before, after, plan)
    elif after is not None:
        yield from _one_side(connection, after, "added")
    elif before is not None:
        yield from _one_side(connection, before, "removed")
