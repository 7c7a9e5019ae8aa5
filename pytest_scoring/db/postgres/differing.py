"""Which rows of a keyed table differ between two databases, found before any row is copied.

Both sides stream their rows as the server writes them (``COPY … TO STDOUT``, text form), in
one order both sides share: by the key when it is one integer column (its index gives the
order), else by a hash of the key under a seed of this diff. Runs of lines up to a common
sort key are compared as sets of whole lines, in C: equal lines are equal rows and are
dropped; only the physical row addresses (``ctid``) of the rest are kept, in a file, and
only those rows are then read as diff values. Memory stays flat: a few runs of lines at a
time, however many rows differ.
"""

from __future__ import annotations

import itertools
import secrets
from bisect import bisect_left
from collections.abc import Callable
from collections.abc import Iterator
from typing import IO
from typing import Any
from typing import Final
from typing import NamedTuple
from typing import final

import psycopg
from psycopg import sql

from pytest_scoring.db.postgres.catalog import PgTable

#: Key kinds whose diff values tell apart every two keys the server tells apart.
_EXACT_KEYS: Final = frozenset({"integer", "text", "bytea", "boolean"})
#: COPY blocks (lines) read from one side before they are compared.
_RUN_ROWS: Final = 16384


def fast(old: PgTable, new: PgTable) -> bool:
    """Whether a table's two sides can be compared line by line: the same columns, read the
    same way, and a primary key whose values pair exactly."""
    return (
        bool(old.primary_key)
        and old.columns == new.columns
        and old.kinds == new.kinds
        and old.primary_key == new.primary_key
        and all(old.kind(column) in _EXACT_KEYS for column in old.primary_key)
    )


def copy_sql(table: PgTable, seed: int) -> sql.Composed:
    """``sort key, every column as its output function writes it, ctid``, in sort key order.

    The sort key is the key itself when it is one integer column, else a 64-bit hash of the
    key's text (``hashtextextended``: built in, no function of the application's runs).
    """
    key = table.primary_key
    ref = sql.SQL("{}.{}").format(sql.Identifier(table.schema), sql.Identifier(table.relname))
    sort: sql.Composable
    if len(key) == 1 and table.kind(key[0]) == "integer":
        sort = sql.Identifier(key[0])
    else:
        sort = sql.SQL("hashtextextended(textin(record_out(ROW({}))), {})").format(
            sql.SQL(", ").join(sql.Identifier(column) for column in key), sql.Literal(seed)
        )
    columns = sql.SQL(", ").join(sql.Identifier(name) for name in table.column_names())
    return sql.SQL("COPY (SELECT {sort}, {columns}, ctid FROM {ref} ORDER BY 1) TO STDOUT").format(
        sort=sort, columns=columns, ref=ref
    )


def new_seed() -> int:
    """A hash seed the database's contents cannot have been chosen against."""
    return secrets.randbits(63)


def _runs(copy: Iterator[Any]) -> Iterator[list[bytes]]:
    """A COPY stream's lines, :data:`_RUN_ROWS` blocks at a time (PostgreSQL sends a line a
    block; a line split across blocks is joined all the same)."""
    tail = b""
    while blocks := list(itertools.islice(copy, _RUN_ROWS)):
        lines = b"".join([tail, *blocks]).split(b"\n")
        tail = lines.pop()
        yield lines
    if tail:
        yield [tail]


def _sort_key(line: bytes) -> int:
    return int(line[: line.index(b"\t")])


@final
class Side(NamedTuple):
    """What one side's stream left: its row count, and where the differing rows are."""

    rows: int
    ctids: IO[str]


@final
class _Stream:
    """One side's lines, taken from the front up to a sort key."""

    def __init__(self, copy: Iterator[Any], ctids: IO[str], check: Callable[[], None] | None):
        self._runs = _runs(copy)
        self._check = check
        self.lines: list[bytes] = []
        self.done = False
        self.rows = 0
        self.ctids = ctids
        self.more()

    def more(self) -> None:
        """Append the next run (``done`` once there is none)."""
        if self._check is not None:
            self._check()
        run = next(self._runs, None)
        if run is None:
            self.done = True
        else:
            self.rows += len(run)
            self.lines += run  # a stream not done always has a line

    def last(self) -> int:
        return _sort_key(self.lines[-1])

    def take(self, below: int | None) -> dict[bytes, bytes]:
        """The lines whose sort key is below ``below`` (``None``: all), by content."""
        end = len(self.lines) if below is None else bisect_left(self.lines, below, key=_sort_key)
        taken, self.lines = self.lines[:end], self.lines[end:]
        return {line[: line.rindex(b"\t")]: line for line in taken}

    def keep(self, lines: dict[bytes, bytes], unmatched: Any) -> None:
        """Write the ctids of ``lines``' entries in ``unmatched``."""
        self.ctids.writelines(
            lines[content][lines[content].rindex(b"\t") + 1 :].decode() + "\n"
            for content in unmatched
        )


def compare_streams(
    old: Iterator[Any],
    new: Iterator[Any],
    old_ctids: IO[str],
    new_ctids: IO[str],
    check: Callable[[], None] | None = None,
) -> tuple[Side, Side]:
    """Stream both sides' COPY output (:func:`copy_sql`), writing the ctids of the rows that
    have no equal row on the other side, one a line.

    :param check: called before each run of lines is read (a time budget's check).
    """
    a, b = _Stream(old, old_ctids, check), _Stream(new, new_ctids, check)
    while not (a.done and b.done):
        # Lines below the smallest last sort key of a side still streaming are all there.
        bound = min(stream.last() for stream in (a, b) if not stream.done)
        _match(a, b, bound)
        for stream in (a, b):
            if not stream.done and stream.last() == bound:
                stream.more()
    _match(a, b, None)
    return Side(a.rows, old_ctids), Side(b.rows, new_ctids)


def _match(a: _Stream, b: _Stream, bound: int | None) -> None:
    left, right = a.take(bound), b.take(bound)
    a.keep(left, left.keys() - right.keys())
    b.keep(right, right.keys() - left.keys())


def stream(connection: psycopg.Connection[Any], table: PgTable, seed: int) -> Iterator[Any]:
    """One side's COPY output of ``table``, as blocks of lines."""
    with connection.cursor() as cursor, cursor.copy(copy_sql(table, seed)) as copy:
        yield from copy
