"""Which rows of a table no session touched between two copies of one database, found by
where each row lies (its ``ctid``) and which transaction wrote it (its ``xmin``), without
reading a value.

A snapshot is a file copy of its database, so a row nobody changed lies at the same place,
written by the same transaction, on both sides. The server assigns a row's ``xmin``; every
statement that writes a row writes a new version of it, with the writer's ``xmin``, and a
transaction that ended before a snapshot can write nothing after it. So two rows of one
table file with the same ``ctid`` and ``xmin`` are one row version: the same bytes. What
could still make them read differently is checked first, and any difference sends the table
to the comparison of its text (:mod:`~pytest_scoring.db.postgres.differing`):

* the table file (``relfilenode``): ``VACUUM FULL``, ``CLUSTER``, ``TRUNCATE`` or a rewrite
  by ``ALTER TABLE`` write a new file, where rows keep their ``xmin`` but move;
* the columns as stored (number, name, type, dropped, generated, the value a column added
  later reads as in older rows): dropping a column and adding it again with a default
  changes every row's value without writing one;
* the labels of the enums the columns hold (``ALTER TYPE … RENAME VALUE``); a column of any
  other type whose text the catalog writes (``regclass`` and the like, composite types, a
  range or base type of the application's), or a virtual generated one (its expression
  can change: PostgreSQL 18), is never compared this way;
* the file the rows are read from: the table is locked before its layout is read, and a
  rewrite that committed after the read's snapshot (a session still running, where the
  finish state is read in place) shows as a file other than the one the snapshot names.

Both sides send a record per row (``ctid`` and ``xmin``, 10 bytes, as the server's binary
form gives them) aggregated by the server into one value per range of pages: a few messages
a table instead of one a row. Records both sides share are skipped a stretch at a time,
compared as bytes in C; the ``ctid`` of each other record is written to a file, and only
those rows are then read as diff values.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from collections.abc import Generator
from collections.abc import Iterator
from typing import IO
from typing import Any
from typing import Final

import psycopg
from psycopg import sql

from pytest_scoring.db.postgres.catalog import PgTable
from pytest_scoring.db.postgres.differing import SETTLED
from pytest_scoring.db.postgres.differing import DifferingRows
from pytest_scoring.db.postgres.differing import MostlyDifferent
from pytest_scoring.db.postgres.differing import ahead
from pytest_scoring.db.postgres.differing import common_length

#: The first version with TID range scans: a range of pages read without a full scan.
_TID_RANGES: Final = 140000
#: Pages the first record query covers; each next one twice as many, up to :data:`_PAGES`
#: (a table most of whose rows differ is told early).
_FIRST_PAGES: Final = 64
#: Pages a record query covers at most: at most 291 rows a page, so at most 6 MB of records.
_PAGES: Final = 2048
#: A record: ``ctid`` (page, 4 bytes, then line, 2 bytes, both big-endian), ``xmin`` (4).
_RECORD: Final = 10
_CTID: Final = 6
#: Past the last page a table can have: the end of the last range.
_NO_PAGE: Final = 2**32 - 1

#: The table file; its columns as stored; each column's type, through domains and array
#: elements, and what its text depends on: ``NULL`` for a type whose text the catalog could
#: change otherwise than through the labels of an enum (every type of the application's but
#: domains, arrays and enums; built-in composite types; the ``reg…`` types, whose text is a
#: catalog name); whether a column is a virtual generated one.
_LAYOUT_SQL: Final = """
WITH RECURSIVE rel AS (
    SELECT c.oid, c.relfilenode FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace
    WHERE n.nspname = %s AND c.relname = %s
), chain(type) AS (
    SELECT a.atttypid FROM pg_attribute a JOIN rel ON a.attrelid = rel.oid WHERE a.attnum > 0
  UNION
    SELECT CASE WHEN t.typtype = 'd' THEN t.typbasetype ELSE t.typelem END
    FROM chain JOIN pg_type t ON t.oid = chain.type
    WHERE t.typtype = 'd' OR (t.typcategory = 'A' AND t.typelem <> 0)
)
SELECT rel.relfilenode, pg_relation_filenode(rel.oid),
  (SELECT json_agg(json_build_array(a.attnum, a.attname, a.atttypid, a.atttypmod,
          a.attisdropped, a.attgenerated, a.atthasmissing, a.attmissingval::text)
          ORDER BY a.attnum)
     FROM pg_attribute a WHERE a.attrelid = rel.oid AND a.attnum > 0),
  (SELECT json_agg(json_build_array(t.oid, CASE
          WHEN t.typtype = 'e' THEN (SELECT json_agg(json_build_array(e.oid, e.enumlabel)
                                     ORDER BY e.oid) FROM pg_enum e WHERE e.enumtypid = t.oid)
          WHEN t.typtype = 'd' OR (t.typcategory = 'A' AND t.typelem <> 0) THEN '[]'::json
          WHEN t.oid < 16384 AND t.typtype IN ('b', 'r', 'm') AND t.typname NOT LIKE 'reg%%'
            THEN '[]'::json
          END) ORDER BY t.oid)
     FROM chain JOIN pg_type t ON t.oid = chain.type),
  EXISTS (SELECT FROM pg_attribute a WHERE a.attrelid = rel.oid AND a.attgenerated = 'v')
FROM rel
"""


def layout(connection: psycopg.Connection[Any], table: PgTable) -> str | None:
    """What a row's text depends on besides the row's own bytes (the table file, its
    columns, its enums' labels); ``None`` when a column's type is one whose text the catalog
    could change otherwise, a column is computed as it is read, the table's file is not the
    one the transaction's snapshot names, or the server has no TID range scans.

    The table is locked first (``ACCESS SHARE``, to the transaction's end): no rewrite can
    commit between this and the reading of its records. One that committed after the
    snapshot was taken (a session still running, where the finish state is read in place)
    would have the rows read from its new file, where they moved, while the snapshot's
    catalog names the old one: the file the server reads (``pg_relation_filenode``, from the
    current catalog) must then be the snapshot's.
    """
    if connection.info.server_version < _TID_RANGES:
        return None
    connection.execute(sql.SQL("LOCK TABLE ONLY {} IN ACCESS SHARE MODE").format(_ref(table)))
    found = connection.execute(_LAYOUT_SQL, (table.schema, table.relname)).fetchone()
    if found is None:
        return None
    filenode, reading, columns, types, virtual = found
    if filenode != reading or virtual or any(state is None for _oid, state in types or ()):
        return None
    return json.dumps([filenode, columns, types])


def _ref(table: PgTable) -> sql.Composable:
    return sql.Identifier(table.schema, table.relname)


def pages(connection: psycopg.Connection[Any], table: PgTable) -> int:
    """The pages of the table's file (both sides' records are read up to the larger)."""
    query = sql.SQL("SELECT pg_relation_size({}) / current_setting('block_size')::int").format(
        sql.Literal(_qualified(table))
    )
    found = connection.execute(query).fetchone()
    return int(found[0]) if found else 0


def _qualified(table: PgTable) -> str:
    return sql.Identifier(table.schema, table.relname).as_string()


def records(connection: psycopg.Connection[Any], table: PgTable, pages: int) -> Generator[bytes]:
    """The table's records, a range of pages at a time (:func:`_ranges`), in page and line
    order; each range's even when it holds none (both sides' ranges are compared one with
    the other)."""
    query = sql.SQL(
        "SELECT string_agg(tidsend(ctid) || xidsend(xmin), ''::bytea) FROM ONLY {} "
        "WHERE ctid >= %s::tid AND ctid < %s::tid"
    ).format(_ref(table))
    for first, end in _ranges(pages):
        found = connection.execute(query, (f"({first},0)", f"({end},0)"), binary=True).fetchone()
        yield b"" if found is None or found[0] is None else bytes(found[0])


def _ranges(pages: int) -> Iterator[tuple[int, int]]:
    """Ranges of pages, ``[first, end)``, covering ``pages`` and all after (the last one
    open ended): :data:`_FIRST_PAGES` first, each next twice as long, up to :data:`_PAGES`."""
    first, size = 0, _FIRST_PAGES
    while first + size <= pages:
        yield first, first + size
        first, size = first + size, min(2 * size, _PAGES)
    yield first, _NO_PAGE


def compare(
    old: Generator[bytes],
    new: Generator[bytes],
    old_handles: IO[str],
    new_handles: IO[str],
    check: Callable[[], None] | None = None,
) -> tuple[DifferingRows, DifferingRows]:
    """Write the ``ctid`` of each row of either side that has no row of the same ``ctid``
    and ``xmin`` on the other, one a line.

    :param old: the before side's :func:`records`; ``new``: the after side's, of the same
        table (its :func:`layout` the same on both sides), up to the same page. Both are
        read at once, each by a thread of its own.
    :param check: called before each range of pages is compared (a time budget's check).
    :raises MostlyDifferent: early, when most rows differ.
    """
    sides = ahead(old), ahead(new)
    handles = old_handles, new_handles
    rows, differing = [0, 0], [0, 0]
    try:
        for ranges in zip(*sides, strict=True):
            if check is not None:
                check()
            for side, found in enumerate(ranges):
                rows[side] += len(found) // _RECORD
            for side, record in unmatched(*ranges):
                differing[side] += 1
                handles[side].write(_ctid(record) + "\n")
            if any(_mostly(rows[side], differing[side]) for side in (0, 1)):
                raise MostlyDifferent
    finally:  # the reading threads end before their connections are used again
        for reader in sides:
            reader.close()
    return (
        DifferingRows(rows[0], old_handles, keyed=False),
        DifferingRows(rows[1], new_handles, keyed=False),
    )


def _mostly(rows: int, differing: int) -> bool:
    """Whether more than a quarter of a side's rows differ, once enough are read to tell."""
    return rows >= SETTLED and 4 * differing > rows


def unmatched(old: bytes, new: bytes) -> Iterator[tuple[int, bytes]]:
    """The records of each side (0: ``old``, 1: ``new``; each in ``ctid`` order) that have
    no equal record on the other: of two records that differ, the one of the smaller
    ``ctid`` (both, for one ``ctid``, its ``xmin`` differing)."""
    i = j = 0
    while i < len(old) and j < len(new):
        common = common_length(old, i, new, j)
        common -= common % _RECORD
        i, j = i + common, j + common
        if i == len(old) or j == len(new):
            break
        left, right = old[i : i + _RECORD], new[j : j + _RECORD]
        if left[:_CTID] <= right[:_CTID]:
            yield 0, left
            i += _RECORD
        if right[:_CTID] <= left[:_CTID]:
            yield 1, right
            j += _RECORD
    for side, records, start in ((0, old, i), (1, new, j)):
        for at in range(start, len(records), _RECORD):
            yield side, records[at : at + _RECORD]


def _ctid(record: bytes) -> str:
    """A record's ``ctid`` as the server writes one: ``(page,line)``."""
    return f"({int.from_bytes(record[:4])},{int.from_bytes(record[4:_CTID])})"
