"""Row identity beyond the key: removed and added rows paired through a UNIQUE index.

After rows pair by key (or by content), a removed row and an added row of one table are one
changed row when they hold equal non-NULL values in the columns of a UNIQUE index the table
has on the before side, compared under the index's collations, and the match is one to one:
a value that several removed or several added rows share pairs nothing (docs/databases.md).
A row deleted and inserted again under a new rowid (issue 11) is then the change it is.

Everything happens in SQLite, over every row: the removed rows, the candidate pairs and the
pairs are temporary tables (on disk: the diff's connection sets ``temp_store = FILE``),
dropped when the table's rows have been read. Indexes are tried fewest columns first, then
by name, and a row pairs at most once.
"""

from __future__ import annotations

import itertools
import sqlite3
from collections.abc import Iterator
from collections.abc import Sequence
from functools import partial
from types import TracebackType
from typing import Any
from typing import Final

from pytest_scoring.db.row_sql import RowEvent
from pytest_scoring.db.row_sql import changed_row
from pytest_scoring.db.row_sql import changes
from pytest_scoring.db.row_sql import differs
from pytest_scoring.db.row_sql import exists
from pytest_scoring.db.row_sql import join
from pytest_scoring.db.row_sql import json_value
from pytest_scoring.db.row_sql import side
from pytest_scoring.db.row_sql import stream
from pytest_scoring.db.schema import ROWID
from pytest_scoring.db.schema import Table
from pytest_scoring.db.schema import UniqueIndex
from pytest_scoring.db.schema import quote
from pytest_scoring.db.schema import union_columns

#: Numbers the temporary tables, so that nested passes never share one.
_NAMES: Final = itertools.count()


def _equal(left: str, left_columns: Sequence[str], right: str, right_columns: Sequence[str]) -> str:
    return " AND ".join(
        f"{left}.{a} = {right}.{b}" for a, b in zip(left_columns, right_columns, strict=True)
    )


class _TempTables:
    """The temporary tables of one pass, dropped together when the pass ends."""

    def __init__(self, connection: sqlite3.Connection):
        self.connection = connection
        self.names: list[str] = []

    def create(self, columns: Sequence[str], *indexed: Sequence[str]) -> str:
        """A new table and indexes on it.

        :param columns: column definitions: a name (untyped: values keep their SQLite type)
            or ``name AFFINITY`` for a column compared with a typed one, whose index SQLite
            uses only when both sides have the same affinity.
        :param indexed: column names of each index.
        """
        name = f"pytest_scoring_pairs_{next(_NAMES)}"
        self.connection.execute(f"CREATE TEMP TABLE {quote(name)} ({', '.join(columns)})")
        self.names.append(name)
        for number, index_columns in enumerate(indexed):
            index = quote(f"{name}_{number}")
            self.connection.execute(
                f"CREATE INDEX temp.{index} ON {quote(name)} ({', '.join(index_columns)})"
            )
        return f"temp.{quote(name)}"

    def drop(self) -> None:
        for name in reversed(self.names):
            self.connection.execute(f"DROP TABLE IF EXISTS temp.{quote(name)}")
        self.names.clear()


class _Pass:
    """What both kinds of pass share: the temporary tables and the pairs table."""

    def __init__(self, connection: sqlite3.Connection, uniques: Sequence[UniqueIndex]):
        self.connection = connection
        self.uniques = list(uniques)
        self.temp = _TempTables(connection)
        self.pairs = ""
        #: How many pairs the pass found.
        self.count = 0

    def __enter__(self) -> _Pass:
        return self

    def __exit__(
        self,
        kind: type[BaseException] | None,
        error: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        self.temp.drop()

    def _insert_one_to_one(
        self,
        candidates: str,
        removed: Sequence[str],
        added: Sequence[str],
        number: int,
        condition: str = "1",
    ) -> None:
        """Keep the candidate pairs in which each side occurs once and ``condition`` holds.

        :param candidates: a SELECT of the removed side's and the added side's identities.
        :param number: the index's position, stored with each pair (its ``paired_by``).
        """
        r, a = ", ".join(removed), ", ".join(added)
        self.connection.execute(
            f"WITH candidates AS MATERIALIZED ({candidates}), counted AS (SELECT *, "
            f"count(*) OVER (PARTITION BY {r}) AS nr, count(*) OVER (PARTITION BY {a}) AS na "
            f"FROM candidates) INSERT INTO {self.pairs} SELECT {r}, {a}, {number} "
            f"FROM counted WHERE nr = 1 AND na = 1 AND {condition}"
        )

    def _paired_by(self, number: int) -> list[str]:
        return list(self.uniques[number].columns)


class KeyedPairs(_Pass):
    """The UNIQUE pass of a table whose rows pair by a key (declared or the rowid).

    Its removed rows are read once into a temporary table, which then also serves the
    removed list: a table with a UNIQUE index costs no more scans than one without.
    """

    def __init__(
        self,
        connection: sqlite3.Connection,
        before: Table,
        after: Table,
        key: Sequence[str],
        uniques: Sequence[UniqueIndex],
    ):
        super().__init__(connection, uniques)
        self.before, self.after, self.key = before, after, list(key)
        self._keys = [f"k{i}" for i in range(len(key))]
        self._removed_keys = [f"r{i}" for i in range(len(key))]
        self._added_keys = [f"a{i}" for i in range(len(key))]
        names = dict.fromkeys(column for index in uniques for column in index.columns)
        self._value_of = {column: f"c{i}" for i, column in enumerate(names)}
        self.removed = ""

    def _typed(self, names: Sequence[str]) -> list[str]:
        """Key column definitions with the key's affinities (the rowid's: INTEGER)."""
        affinities = ["INTEGER" if col == ROWID else self.before.affinity(col) for col in self.key]
        return [f"{name} {affinity}" for name, affinity in zip(names, affinities, strict=True)]

    def __enter__(self) -> KeyedPairs:
        self.removed = self.temp.create(
            [*self._typed(self._keys), *self._value_of.values()], self._keys
        )
        self.pairs = self.temp.create(
            [*self._typed(self._removed_keys), *self._typed(self._added_keys), "idx"],
            self._removed_keys,
            self._added_keys,
        )
        old_keys = [f"o.{quote(col)}" for col in self.key]
        values = [f"o.{quote(col)}" for col in self._value_of]
        self.connection.execute(
            f"INSERT INTO {self.removed} SELECT {', '.join([*old_keys, *values])} "
            f"FROM {self.before.ref} AS o LEFT JOIN {self.after.ref} AS n ON {join(self.key)} "
            f"WHERE n.{quote(self.key[0])} IS NULL"
        )
        if exists(self.connection, f"SELECT 1 FROM {self.removed}"):
            for number, index in enumerate(self.uniques):
                self._pair(number, index)
        self.count = self.connection.execute(f"SELECT count(*) FROM {self.pairs}").fetchone()[0]
        return self

    def _pair(self, number: int, index: UniqueIndex) -> None:
        """Pair the removed and added rows still free whose values of ``index`` are equal."""
        on = " AND ".join(
            f"n.{quote(column)} = r.{self._value_of[column]} COLLATE {collation}"
            for column, collation in zip(index.columns, index.collations, strict=True)
        )
        new_keys = [f"n.{quote(col)}" for col in self.key]
        removed_ids = [f"r.{k} AS {r}" for k, r in zip(self._keys, self._removed_keys, strict=True)]
        added_ids = [f"{n} AS {a}" for n, a in zip(new_keys, self._added_keys, strict=True)]
        removed_free = _equal("p", self._removed_keys, "r", self._keys)
        added_free = _equal("p", self._added_keys, "n", [quote(col) for col in self.key])
        candidates = (
            f"SELECT {', '.join([*removed_ids, *added_ids])} "
            f"FROM {self.removed} AS r JOIN {self.after.ref} AS n ON {on} "
            f"WHERE NOT EXISTS (SELECT 1 FROM {self.before.ref} AS o WHERE {join(self.key)}) "
            f"AND NOT EXISTS (SELECT 1 FROM {self.pairs} AS p WHERE {removed_free}) "
            f"AND NOT EXISTS (SELECT 1 FROM {self.pairs} AS p WHERE {added_free})"
        )
        self._insert_one_to_one(candidates, self._removed_keys, self._added_keys, number)

    def added_filter(self) -> str:
        """SQL true for an after row ``n`` that no pair took (``1`` when nothing paired)."""
        if not self.count:
            return "1"
        condition = _equal("p", self._added_keys, "n", [quote(col) for col in self.key])
        return f"NOT EXISTS (SELECT 1 FROM {self.pairs} AS p WHERE {condition})"

    def removed_sql(self) -> str:
        """The removed rows no pair took, every before column, in the before table's order."""
        columns = ", ".join(side(self.before, "o", c) for c in self.before.column_names())
        on = _equal("o", [quote(col) for col in self.key], "r", self._keys)
        return (
            f"SELECT {columns} FROM {self.removed} AS r JOIN {self.before.ref} AS o ON {on} "
            f"WHERE NOT EXISTS (SELECT 1 FROM {self.pairs} AS p "
            f"WHERE {_equal('p', self._removed_keys, 'r', self._keys)}) ORDER BY r.rowid"
        )

    def changed(self) -> Iterator[RowEvent]:
        """Each pair as a changed row keyed by the before row's key (pairs of equal rows: none)."""
        if not self.count:
            return
        columns = union_columns(self.before, self.after)
        flags = [differs(self.before, self.after, col) for col in columns]
        select = [
            *(f"o.{quote(col)}" for col in self.key),
            "0",
            *(
                f"{side(self.after, 'n', c)}, {side(self.before, 'o', c)}, {flag}"
                for c, flag in zip(columns, flags, strict=True)
            ),
            "p.idx",
        ]
        quoted = [quote(col) for col in self.key]
        on_old = _equal("o", quoted, "p", self._removed_keys)
        on_new = _equal("n", quoted, "p", self._added_keys)
        sql = (
            f"SELECT {', '.join(select)} FROM {self.pairs} AS p JOIN {self.before.ref} AS o "
            f"ON {on_old} JOIN {self.after.ref} AS n ON {on_new} "
            f"WHERE {' OR '.join(flags) or '0'} ORDER BY p.rowid"
        )
        for row in stream(self.connection.execute(sql)):
            yield "changed", partial(self._changed_row, columns, row), 1

    def _changed_row(self, columns: Sequence[str], row: tuple[Any, ...]) -> dict[str, Any]:
        return {**changed_row(self.key, columns, row[:-1]), "paired_by": self._paired_by(row[-1])}


class ContentPairs(_Pass):
    """The UNIQUE pass of a table whose rows pair by content (no usable key).

    The signed counts per distinct row (``grouped``: ``v0, t0, …, net``) are read once into a
    temporary table; rows of it with net ``-1`` and ``+1`` pair through the indexes.
    """

    def __init__(
        self,
        connection: sqlite3.Connection,
        before: Table,
        after: Table,
        uniques: Sequence[UniqueIndex],
        grouped: str,
    ):
        super().__init__(connection, uniques)
        self.before, self.after, self.grouped = before, after, grouped
        self.columns = union_columns(before, after)
        self._values = [f"v{i}" for i in range(len(self.columns))]
        self._types = [f"t{i}" for i in range(len(self.columns))]
        self.rows = ""

    def __enter__(self) -> ContentPairs:
        pairs = [f"{v}, {t}" for v, t in zip(self._values, self._types, strict=True)]
        self.rows = self.temp.create([*pairs, "net"])
        self.pairs = self.temp.create(["r0 INTEGER", "a0 INTEGER", "idx"], ["r0"], ["a0"])
        self.connection.execute(f"INSERT INTO {self.rows} {self.grouped}")
        for number, index in enumerate(self.uniques):
            self._pair(number, index)
        self.count = self.connection.execute(f"SELECT count(*) FROM {self.pairs}").fetchone()[0]
        return self

    def _value(self, column: str) -> str:
        return self._values[self.columns.index(column)]

    def _pair(self, number: int, index: UniqueIndex) -> None:
        on = " AND ".join(
            f"n.{self._value(column)} = r.{self._value(column)} COLLATE {collation}"
            for column, collation in zip(index.columns, index.collations, strict=True)
        )
        candidates = (
            f"SELECT r.rowid AS r0, n.rowid AS a0, r.net = -1 AND n.net = 1 AS single "
            f"FROM {self.rows} AS r JOIN {self.rows} AS n "
            f"ON {on} WHERE r.net < 0 AND n.net > 0 "
            f"AND NOT EXISTS (SELECT 1 FROM {self.pairs} AS p WHERE p.r0 = r.rowid) "
            f"AND NOT EXISTS (SELECT 1 FROM {self.pairs} AS p WHERE p.a0 = n.rowid)"
        )
        # A group of several equal rows shares its value with them: it pairs nothing.
        self._insert_one_to_one(candidates, ["r0"], ["a0"], number, "single")

    def unpaired_sql(self) -> str:
        """The distinct rows no pair took, as ``v0, t0, …, net``."""
        pairs = [f"{v}, {t}" for v, t in zip(self._values, self._types, strict=True)]
        return (
            f"SELECT {', '.join(pairs)}, net FROM {self.rows} AS g "
            f"WHERE NOT EXISTS (SELECT 1 FROM {self.pairs} AS p WHERE p.r0 = g.rowid) "
            f"AND NOT EXISTS (SELECT 1 FROM {self.pairs} AS p WHERE p.a0 = g.rowid) "
            "ORDER BY g.rowid"
        )

    def changed(self) -> Iterator[RowEvent]:
        """Each pair as a changed row keyed by the before row's primary key (else its index)."""
        if not self.count:
            return
        old = [f"r.{v}" for v in self._values]
        new = [f"n.{v}" for v in self._values]
        flags = [
            f"(r.{v} IS NOT n.{v} OR r.{t} IS NOT n.{t})"
            for v, t in zip(self._values, self._types, strict=True)
        ]
        sql = (
            f"SELECT {', '.join([*old, *new, *flags])}, p.idx FROM {self.pairs} AS p "
            f"JOIN {self.rows} AS r ON r.rowid = p.r0 JOIN {self.rows} AS n ON n.rowid = p.a0 "
            "ORDER BY p.rowid"
        )
        for row in stream(self.connection.execute(sql)):
            yield "changed", partial(self._changed_row, row), 1

    def _changed_row(self, row: tuple[Any, ...]) -> dict[str, Any]:
        width = len(self.columns)
        old, new, flags = row[:width], row[width : 2 * width], row[2 * width : 3 * width]
        paired_by = self._paired_by(row[-1])
        key_columns = list(self.before.primary_key) or paired_by
        key = {col: json_value(old[self.columns.index(col)]) for col in key_columns}
        return {
            "key": key,
            "changes": changes(self.columns, old, new, flags),
            "paired_by": paired_by,
        }
