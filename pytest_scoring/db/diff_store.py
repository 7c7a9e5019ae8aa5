"""The rows of two diffs kept in a SQLite file, and split there into the diff-of-diffs parts.

``db_diff_change`` compares two diffs whose row lists may each hold millions of rows
(issue 12). Held as Python objects they cost gigabytes; here every row is written once to
a SQLite file on disk as JSON with a digest of its canonical form, the split into
``before_only`` / ``after_only`` / ``shared`` is two window-function statements, and each
part's rows are read back on demand, streamed. Memory stays flat however many rows changed.

A third diff may join them (issue 11): the *baseline*, what the reference's own tests do. The
same statements then also give two parts of the solution's entries: ``from_tests``, the
entries the reference diff shares but the baseline lacks (changes that this repository's test
files make), and ``scored``, those together with ``after_only`` (what ``db_diff_change``'s
selector sees). Without a baseline, ``scored`` is ``after_only`` and ``from_tests`` is empty.

* Added and removed rows and schema column entries compare by the digest of their canonical
  form, as multisets: of ``n`` equal rows on one side and ``m`` on the other, ``min(n, m)``
  are shared and the rest stay with their side.
* Changed rows are stored one line per changed column, with the canonical form of the row's
  key and the old and new values as SQLite values: a column whose key, old and new value
  the other diff also has is shared. SQLite's own equality is the selectors' here (``1``
  equals ``1.0``, ``'1'`` differs from ``1``, NULL equals NULL in a partition), so values
  need no encoding on the way in, and the common case, millions of changed rows, costs
  little more than writing them.
"""

from __future__ import annotations

import base64
import binascii
import contextlib
import dataclasses
import hashlib
import itertools
import json
import sqlite3
from collections.abc import Iterable
from collections.abc import Iterator
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from typing import Final
from typing import Literal
from typing import cast

from pytest_scoring.db.diff_types import DiffJSON
from pytest_scoring.db.engine import RowSink

#: The diffs: A, from the reference run, and B, from the scored repository's; with a
#: baseline, also the diff of the reference's own tests.
REFERENCE: Final = 0
SOLUTION: Final = 1
BASELINE: Final = 2
#: The parts of the diff-of-diffs of A and B; a stored entry's part is its position here.
PARTS: Final = ("before_only", "after_only", "shared")
#: The parts a baseline adds, numbered after :data:`PARTS` (see the module docstring).
TEST_PARTS: Final = ("from_tests", "scored")
ALL_PARTS: Final = PARTS + TEST_PARTS
AFTER_ONLY: Final = ALL_PARTS.index("after_only")
SCORED: Final = ALL_PARTS.index("scored")
#: The lists of a table entry, by plane (``rows_changed`` pairs by key; the rest are
#: compared as multisets of whole entries).
LISTS: Final = {
    "data": ("rows_added", "rows_removed", "rows_changed"),
    "schema": ("columns_added", "columns_removed", "columns_changed"),
}
_BATCH: Final = 2000
#: The store's page cache: what it may hold in memory (SQLite spills the rest to the file).
_CACHE_KIB: Final = 16_000

_SCHEMA: Final = """
CREATE TABLE tables (id INTEGER PRIMARY KEY, db TEXT NOT NULL, name TEXT NOT NULL);
CREATE TABLE items (side INTEGER, t INTEGER, list TEXT, digest BLOB, body TEXT);
CREATE TABLE changed_rows (id INTEGER PRIMARY KEY, key TEXT, extra TEXT);
CREATE TABLE changes (side INTEGER, t INTEGER, row INTEGER, key TEXT, col TEXT, old, new);
"""
#: When an entry belongs to a part, for added/removed rows and schema column entries: ``n`` is
#: its rank among the equal entries of its own diff, ``in_*`` how many equal entries each
#: diff has (a multiset: of ``n`` equal rows on one side and ``m`` on the other, ``min(n, m)``
#: are shared). ``shared`` keeps the solution's entries.
_ITEM_MEMBERSHIP: Final = (
    "side = 0 AND n > in_solution",
    "side = 1 AND n > in_reference",
    "side = 1 AND n <= in_reference",
    "side = 1 AND n <= in_reference AND n > in_baseline",
    "side = 1 AND (n > in_reference OR n > in_baseline)",
)
#: The same for one changed column: ``in_*`` says whether that diff has the same key, column
#: and (old, new) pair.
_CHANGE_MEMBERSHIP: Final = (
    "side = 0 AND NOT in_solution",
    "side = 1 AND NOT in_reference",
    "side = 1 AND in_reference",
    "side = 1 AND in_reference AND NOT in_baseline",
    "side = 1 AND NOT (in_reference AND in_baseline)",
)
_SPLIT_ITEMS: Final = """
CREATE TABLE item_parts AS SELECT k.part, r.t, r.list, r.id FROM (
    SELECT rowid AS id, side, t, list,
        row_number() OVER (PARTITION BY t, list, digest, side ORDER BY rowid) AS n,
        sum(side = 0) OVER same AS in_reference, sum(side = 1) OVER same AS in_solution,
        sum(side = 2) OVER same AS in_baseline
    FROM items WINDOW same AS (PARTITION BY t, list, digest)
) AS r JOIN ({parts}) AS k ON {membership};
CREATE INDEX item_parts_order ON item_parts (part, t, list, id);
"""
_SPLIT_CHANGES: Final = """
CREATE TABLE change_parts AS SELECT k.part, r.t, r.row, r.id, r.col FROM (
    SELECT rowid AS id, side, t, row, col,
        max(side = 0) OVER same AS in_reference, max(side = 1) OVER same AS in_solution,
        max(side = 2) OVER same AS in_baseline
    FROM changes WINDOW same AS (PARTITION BY t, key, col, old, new)
) AS r JOIN ({parts}) AS k ON {membership};
CREATE INDEX change_parts_order ON change_parts (part, t, row, id);
CREATE INDEX change_parts_columns ON change_parts (part, t, col, row);
"""


def _split_statement(template: str, membership: tuple[str, ...], parts: int) -> str:
    """One split statement giving every entry each of the first ``parts`` parts it is in."""
    numbers = " UNION ALL ".join(f"SELECT {part} AS part" for part in range(parts))
    cases = " ".join(f"WHEN {part} THEN {membership[part]}" for part in range(parts))
    return template.format(parts=numbers, membership=f"CASE k.part {cases} END")


Json = dict[str, Any]


@dataclass(frozen=True, slots=True)
class ChangeTest:
    """A change a changed row must have: ``column`` changed and, when ``side`` is given, its
    ``old`` or ``new`` value among ``values`` (compared as selectors compare values)."""

    column: str
    side: Literal["old", "new"] | None = None
    values: tuple[Any, ...] = ()


#: Tests of which a changed row must pass one (none: every row passes).
ChangeFilter = tuple[ChangeTest, ...]


#: The canonical text digested: sorted keys, no spaces (one encoder, built once).
_CANONICAL: Final = json.JSONEncoder(sort_keys=True, separators=(",", ":"), check_circular=False)
#: A stored entry as JSON (diffs hold no cycles: no need to look for them).
_BODY: Final = json.JSONEncoder(check_circular=False)


def _normal(value: Any) -> Any:
    """``value`` with equal values made identical: ``true`` → 1, ``1.0`` → 1, null members gone.

    Two values compare equal as selectors compare them (docs/selectors.md) exactly when their
    normal forms are identical. (Exact type tests: this runs for every stored value.)
    """
    kind = type(value)
    if kind is dict:
        return {key: _normal(item) for key, item in value.items() if item is not None}
    if kind is float:
        return int(value) if value.is_integer() else value
    if kind is bool:
        return int(value)
    if kind is list:
        return [_normal(item) for item in value]
    return value


def digest(value: Any) -> bytes:
    """16 bytes that two values share exactly when they are equal as selectors compare them."""
    text = _CANONICAL.encode(_normal(value))
    return hashlib.blake2b(text.encode("utf-8", "surrogatepass"), digest_size=16).digest()


#: Starts a BLOB that stands for a JSON value SQLite cannot hold (an object, a list, an
#: integer past 64 bits). Diffs computed by SQLite never have one; diffs read from files may.
_JSON_MARK: Final = b"\x00pytest-scoring-json:"
_INT64: Final = range(-(2**63), 2**63)


def _stored(value: Any) -> Any:
    """A changed column's value as SQLite holds it: equal values stay equal, ``{"$blob"}``
    becomes the BLOB it stands for."""
    kind = type(value)
    if value is None or kind is str or kind is float or (kind is int and value in _INT64):
        return value
    if kind is bool:
        return int(value)
    if kind is dict and list(value) == ["$blob"] and isinstance(value["$blob"], str):
        with contextlib.suppress(binascii.Error):
            return base64.b64decode(value["$blob"], validate=True)
    return _JSON_MARK + _CANONICAL.encode(_normal(value)).encode("utf-8", "surrogatepass")


def _loaded(value: Any) -> Any:
    """A stored value as JSON again (the inverse of :func:`_stored`, up to equality)."""
    if not isinstance(value, bytes):
        return value
    if value.startswith(_JSON_MARK):
        return json.loads(value[len(_JSON_MARK) :].decode("utf-8", "surrogatepass"))
    return {"$blob": base64.b64encode(value).decode("ascii")}


def _mapping(value: object) -> Mapping[str, Any]:
    if type(value) is dict:  # the common case, without the ABC check (once per stored row)
        return value
    return value if isinstance(value, Mapping) else {}


def _iterable(value: object) -> Iterable[Any]:
    if isinstance(value, str | bytes | Mapping) or not isinstance(value, Iterable):
        return ()
    return value


def _tables_of(diff: Mapping[str, Any], plane: str) -> Iterator[tuple[str, str, Mapping[str, Any]]]:
    """``(database, table, entry)`` for every table of one plane of a diff."""
    for relpath, entry in _mapping(diff.get("comparisons")).items():
        planes = _mapping(_mapping(entry).get("comparisons"))
        for name, table in _mapping(_mapping(planes.get(plane)).get("tables")).items():
            yield str(relpath), str(name), _mapping(table)


class DiffStore:
    """Two diffs' rows in a SQLite file (:meth:`add`…), then split (:meth:`split`), then read.

    :param path: the file; its folder must be private to the caller (it is created anew).
    :param baseline: a baseline diff is stored too (side :data:`BASELINE`), so that the split
        gives ``from_tests`` and ``scored`` of their own; :attr:`baseline` may be set later,
        before :meth:`split` (a diff may be stored before it is known whether the baseline
        gave a result).
    """

    def __init__(self, path: Path, baseline: bool = False):
        self.baseline = baseline
        # Used by one thread at a time, not always the same one: an Inspect sample's scorers
        # run in worker threads (pytest_scoring.inspect).
        self.connection = sqlite3.connect(path, isolation_level=None, check_same_thread=False)
        for pragma in ("journal_mode = OFF", "synchronous = OFF", "temp_store = FILE"):
            self.connection.execute(f"PRAGMA {pragma}")
        self.connection.execute(f"PRAGMA cache_size = -{_CACHE_KIB}")
        self.connection.executescript(_SCHEMA)
        self.connection.execute("BEGIN")
        self._table_ids: dict[tuple[str, str], int] = {}
        self._items: list[tuple[Any, ...]] = []
        self._changed_rows: list[tuple[int, str, str | None]] = []
        self._changes: list[tuple[Any, ...]] = []
        self._row_numbers = itertools.count(1)
        self._split = False
        self._counts: dict[tuple[int, str, str, str], int] | None = None

    # --- writing ------------------------------------------------------------------------

    def _table_id(self, relpath: str, table: str) -> int:
        key = (relpath, table)
        if key not in self._table_ids:
            cursor = self.connection.execute(
                "INSERT INTO tables (db, name) VALUES (?, ?)", (relpath, table)
            )
            self._table_ids[key] = int(cursor.lastrowid or 0)
        return self._table_ids[key]

    def add(self, side: int, relpath: str, table: str, list_name: str, item: Any) -> None:
        """One entry of a list of one table: a row, a changed row or a schema column entry."""
        if self._split:
            raise RuntimeError("the store was already split")
        number = self._table_id(relpath, table)
        if list_name == "rows_changed":
            self._add_changed(side, number, _mapping(item))
        else:
            body = _BODY.encode(item)
            self._items.append((side, number, list_name, digest(item), body))
        if len(self._items) + len(self._changed_rows) >= _BATCH:
            self._flush()

    def _add_changed(self, side: int, table: int, row: Mapping[str, Any]) -> None:
        number = next(self._row_numbers)
        key = row.get("key")
        extra = {name: value for name, value in row.items() if name not in ("key", "changes")}
        self._changed_rows.append(
            (number, _BODY.encode(key), _BODY.encode(extra) if extra else None)
        )
        canonical = _CANONICAL.encode(_normal(key))
        for column, pair in _mapping(row.get("changes")).items():
            values = _mapping(pair)
            old, new = _stored(values.get("old_value")), _stored(values.get("new_value"))
            self._changes.append((side, table, number, canonical, column, old, new))

    def add_lists(self, side: int, diff: DiffJSON, planes: Iterable[str]) -> None:
        """Every list of every table of the given planes of a JSON diff."""
        for plane in planes:
            for relpath, table, entry in _tables_of(diff, plane):
                for list_name in LISTS[plane]:
                    for item in _iterable(entry.get(list_name)):
                        self.add(side, relpath, table, list_name, item)

    def sink(self, side: int) -> RowSink:
        """A receiver of one diff's rows as :func:`~pytest_scoring.db.diff.diff_snapshots`
        computes them, so that no row list is ever held whole."""

        def receive(relpath: str, table: str, kind: str, row: Json, times: int) -> None:
            for _ in range(times):
                self.add(side, relpath, table, f"rows_{kind}", row)

        return receive

    def _flush(self) -> None:
        self.connection.executemany("INSERT INTO items VALUES (?, ?, ?, ?, ?)", self._items)
        self.connection.executemany("INSERT INTO changed_rows VALUES (?, ?, ?)", self._changed_rows)
        self.connection.executemany(
            "INSERT INTO changes VALUES (?, ?, ?, ?, ?, ?, ?)", self._changes
        )
        self._items.clear()
        self._changed_rows.clear()
        self._changes.clear()

    def split(self) -> None:
        """Give every stored entry its part (once, after the last :meth:`add`)."""
        if self._split:
            return
        self._flush()
        self.connection.execute("COMMIT")
        parts = len(ALL_PARTS) if self.baseline else len(PARTS)
        self.connection.executescript(
            _split_statement(_SPLIT_ITEMS, _ITEM_MEMBERSHIP, parts)
            + _split_statement(_SPLIT_CHANGES, _CHANGE_MEMBERSHIP, parts)
        )
        self._split = True

    def _stored_part(self, part: int) -> int:
        """Where a part's entries are: without a baseline, ``scored`` is ``after_only``."""
        return AFTER_ONLY if part == SCORED and not self.baseline else part

    # --- reading ------------------------------------------------------------------------

    def counts(self) -> dict[tuple[int, str, str, str], int]:
        """``{(part, database, table, list): entries}`` for every non-empty list of a part."""
        self.split()
        if self._counts is not None:
            return self._counts
        sql = (
            "SELECT p.part, t.db, t.name, p.list, count(*) FROM item_parts AS p "
            "JOIN tables AS t ON t.id = p.t GROUP BY p.part, p.t, p.list "
            "UNION ALL SELECT p.part, t.db, t.name, 'rows_changed', count(DISTINCT p.row) "
            "FROM change_parts AS p JOIN tables AS t ON t.id = p.t GROUP BY p.part, p.t"
        )
        self._counts = {
            (part, relpath, table, list_name): count
            for part, relpath, table, list_name, count in self.connection.execute(sql)
        }
        if not self.baseline:
            for (part, relpath, table, list_name), count in list(self._counts.items()):
                if part == AFTER_ONLY:
                    self._counts[(SCORED, relpath, table, list_name)] = count
        return self._counts

    def rows(
        self,
        part: int,
        relpath: str,
        table: str,
        list_name: str,
        limit: int | None = None,
        having: ChangeFilter = (),
    ) -> Iterator[Any]:
        """The entries of one list of one table in one part, streamed in the order stored.

        :param having: for ``rows_changed``: only rows with a changed column that one of
            these tests accepts (none: every row).
        """
        self.split()
        number = self._table_ids.get((relpath, table))
        if number is None or limit == 0:
            return
        part = self._stored_part(part)
        if list_name == "rows_changed":
            yield from self._changed_part(part, number, limit, having)
            return
        cursor = self.connection.execute(
            "SELECT i.body FROM item_parts AS p JOIN items AS i ON i.rowid = p.id "
            "WHERE p.part = ? AND p.t = ? AND p.list = ? ORDER BY p.id LIMIT ?",
            (part, number, list_name, -1 if limit is None else limit),
        )
        with contextlib.closing(cursor):
            for (body,) in cursor:
                yield json.loads(body)

    def _changed_part(
        self, part: int, table: int, limit: int | None, having: ChangeFilter
    ) -> Iterator[Json]:
        where, parameters = _having_sql(having, part, table)
        cursor = self.connection.execute(
            "SELECT p.row, r.key, r.extra, c.col, c.old, c.new FROM change_parts AS p "
            "JOIN changes AS c ON c.rowid = p.id JOIN changed_rows AS r ON r.id = p.row "
            f"WHERE p.part = ? AND p.t = ? {where} ORDER BY p.row, p.id",
            (part, table, *parameters),
        )
        with contextlib.closing(cursor):
            grouped = itertools.groupby(cursor, key=lambda line: line[0])
            for count, (_row, lines) in enumerate(grouped):
                if limit is not None and count >= limit:
                    return
                yield _changed_row(list(lines))

    def whole(self, side: int, diff: DiffJSON) -> DiffJSON:
        """``diff`` (one side's, with examples only) with every entry the store holds for that
        side in its lists (:class:`SideRows`, read when iterated): the diff whole again, for a
        report's evidence (issue 28)."""
        self.split()
        comparisons = {}
        for relpath, entry in _mapping(diff.get("comparisons")).items():
            planes = dict(_mapping(_mapping(entry).get("comparisons")))
            for plane, lists in LISTS.items():
                tables = _mapping(_mapping(planes.get(plane)).get("tables"))
                if not tables:
                    continue
                whole = {
                    name: {
                        **table,
                        **{
                            kind: SideRows(self, side, relpath, name, kind)
                            for kind in lists
                            if kind in table
                        },
                    }
                    for name, table in tables.items()
                }
                planes[plane] = {**planes[plane], "tables": whole}
            comparisons[relpath] = {**entry, "comparisons": planes}
        return cast("DiffJSON", {**diff, "comparisons": comparisons})

    def side_rows(self, side: int, relpath: str, table: str, list_name: str) -> Iterator[Any]:
        """The entries one diff has in one list of one table, in the order stored."""
        number = self._table_ids.get((relpath, table))
        if number is None:
            return
        if list_name == "rows_changed":
            cursor = self.connection.execute(
                "SELECT c.row, r.key, r.extra, c.col, c.old, c.new FROM changes AS c "
                "JOIN changed_rows AS r ON r.id = c.row WHERE c.side = ? AND c.t = ? "
                "ORDER BY c.row, c.rowid",
                (side, number),
            )
            with contextlib.closing(cursor):
                for _row, lines in itertools.groupby(cursor, key=lambda line: line[0]):
                    yield _changed_row(list(lines))
            return
        cursor = self.connection.execute(
            "SELECT body FROM items WHERE side = ? AND t = ? AND list = ? ORDER BY rowid",
            (side, number, list_name),
        )
        with contextlib.closing(cursor):
            for (body,) in cursor:
                yield json.loads(body)

    def close(self) -> None:
        self.connection.close()


def _having_sql(having: ChangeFilter, part: int, table: int) -> tuple[str, list[Any]]:
    """The condition (and its parameters) keeping the changed rows :class:`ChangeTest`s accept.

    Each test is one range of the index of the part's changed columns, so rows that change
    other columns (noise, however many) are never read.
    """
    if not having:
        return "", []
    selects, parameters = [], []
    for test in having:
        select = (
            "SELECT p2.row FROM change_parts AS p2 JOIN changes AS c2 ON c2.rowid = p2.id "
            "WHERE p2.part = ? AND p2.t = ? AND p2.col = ?"
        )
        parameters += [part, table, test.column]
        if test.side is not None:
            select += f" AND c2.{test.side} IN ({', '.join('?' * len(test.values))})"
            parameters += [_stored(value) for value in test.values]
        selects.append(select)
    return f"AND p.row IN ({' UNION ALL '.join(selects)})", parameters


def _changed_row(lines: list[tuple[Any, ...]]) -> Json:
    """One changed row from its stored columns (``row, key, extra, column, old, new``)."""
    _row, key, extra, *_ = lines[0]
    changes = {
        column: {"old_value": _loaded(old), "new_value": _loaded(new)}
        for *_, column, old, new in lines
    }
    return {"key": json.loads(key), "changes": changes, **json.loads(extra or "{}")}


@dataclass(frozen=True)
class StoredRows:
    """Every entry of one list of one part, read afresh from the store on each iteration.

    What selectors see of a part: every row, with memory flat however many rows there are.
    """

    store: DiffStore
    part: int
    relpath: str
    table: str
    list_name: str
    #: Only the changed rows one of these tests accepts (see :meth:`having`).
    filter: ChangeFilter = ()

    def __iter__(self) -> Iterator[Any]:
        return self.store.rows(
            self.part, self.relpath, self.table, self.list_name, having=self.filter
        )

    def having(self, tests: ChangeFilter) -> StoredRows:
        """The changed rows with a change one of ``tests`` accepts, found by SQLite's index:
        a selector that needs such a change reads only them, not the rows around them."""
        if self.list_name != "rows_changed" or not tests:
            return self
        return dataclasses.replace(self, filter=tests)


@dataclass(frozen=True)
class SideRows:
    """Every entry one diff has in one list of one table, read afresh on each iteration."""

    store: DiffStore
    side: int
    relpath: str
    table: str
    list_name: str

    def __iter__(self) -> Iterator[Any]:
        return self.store.side_rows(self.side, self.relpath, self.table, self.list_name)
