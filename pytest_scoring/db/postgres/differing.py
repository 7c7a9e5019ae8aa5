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

import contextlib
import itertools
import queue
import secrets
import threading
from bisect import bisect_left
from collections.abc import Callable
from collections.abc import Generator
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
_RUN_ROWS: Final = 4096


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


#: Base types of an integer key the rows that differ are fetched by (``int8[]`` holds them).
_INTEGER_TYPES: Final = frozenset({20, 21, 23})  # int8, int2, int4
#: A :func:`by_key` table's rows are compared in groups of ``2 ** GROUP_BITS`` keys.
GROUP_BITS: Final = 3


def by_key(table: PgTable) -> bool:
    """Whether the table's key is one integer column: its rows go in groups of
    ``2 ** GROUP_BITS`` consecutive keys, and those of a group that differs are read by
    their keys (its index); else row by row, read by their ``ctid``."""
    key = table.primary_key
    return len(key) == 1 and table.oids[table.column_names().index(key[0])] in _INTEGER_TYPES


def copy_sql(table: PgTable, seed: int) -> sql.Composed:
    """The lines one side is compared by, in sort key order (the sort key first).

    A :func:`by_key` table: ``group, its row count, its rows`` (each row as ``record_out``
    writes it, which quotes any value holding a newline: the group's text tells its rows
    apart).
    Else ``sort key, every column as its output function writes it, ctid``, where the sort
    key is a 64-bit hash of the key's text. Only built-in functions run (``hashtextextended``,
    ``record_out``), none of the application's.
    """
    key = table.primary_key
    ref = sql.SQL("{}.{}").format(sql.Identifier(table.schema), sql.Identifier(table.relname))
    if by_key(table):
        return sql.SQL(
            "COPY (SELECT {key} >> {bits}, count(*), string_agg(textin(record_out(t)), E'\\n' "
            "ORDER BY {key}) FROM {ref} AS t GROUP BY 1 ORDER BY 1) TO STDOUT"
        ).format(key=sql.Identifier(key[0]), bits=sql.Literal(GROUP_BITS), ref=ref)
    columns = sql.SQL(", ").join(sql.Identifier(name) for name in table.column_names())
    sort = sql.SQL("hashtextextended(textin(record_out(ROW({}))), {})").format(
        sql.SQL(", ").join(sql.Identifier(column) for column in key), sql.Literal(seed)
    )
    return sql.SQL("COPY (SELECT {sort}, {columns}, ctid FROM {ref} ORDER BY 1) TO STDOUT").format(
        sort=sort, columns=columns, ref=ref
    )


def fetch_filter(table: PgTable) -> sql.Composed:
    """The condition the rows that differ are read by, given the handles written for them
    (as a list parameter): their groups' numbers, or their ctids."""
    if by_key(table):
        return sql.SQL(
            "{key} = ANY(ARRAY(SELECT g * {size} + o FROM unnest(%s::int8[]) AS g, "
            "generate_series(0, {last}) AS o))"
        ).format(
            key=sql.Identifier(table.primary_key[0]),
            size=sql.Literal(1 << GROUP_BITS),
            last=sql.Literal((1 << GROUP_BITS) - 1),
        )
    return sql.SQL("ctid = ANY(%s::tid[])").format()


def new_seed() -> int:
    """A hash seed the database's contents cannot have been chosen against."""
    return secrets.randbits(63)


def _runs(copy: Iterator[Any]) -> Generator[list[bytes]]:
    """A COPY stream's lines, :data:`_RUN_ROWS` blocks at a time (PostgreSQL sends a line a
    block; a line split across blocks is joined all the same)."""
    tail = b""
    while blocks := list(itertools.islice(copy, _RUN_ROWS)):
        lines = b"".join([tail, *blocks]).split(b"\n")
        tail = lines.pop()
        yield lines
    if tail:
        yield [tail]


def _ahead(runs: Generator[list[bytes]]) -> Generator[list[bytes]]:
    """``runs`` read by a thread of their own, one run ahead: both sides' servers work at
    once while this process compares. Closing this generator stops the thread."""
    ready: queue.Queue[list[bytes] | BaseException | None] = queue.Queue(maxsize=1)
    stop = threading.Event()

    def read() -> None:
        try:
            with contextlib.closing(runs):
                for run in runs:
                    while not stop.is_set():
                        with contextlib.suppress(queue.Full):
                            ready.put(run, timeout=0.1)
                            break
                    if stop.is_set():
                        return
            ready.put(None)
        except BaseException as error:  # handed to the reader
            ready.put(error)

    reader = threading.Thread(target=read, daemon=True)
    reader.start()
    try:
        while (item := ready.get()) is not None:
            if isinstance(item, BaseException):
                raise item
            yield item
    finally:
        stop.set()
        reader.join()


def _count(line: bytes) -> int:
    """A group's row count (its line's second field)."""
    start = line.index(b"\t") + 1
    return int(line[start : line.index(b"\t", start)])


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

    def __init__(
        self,
        copy: Iterator[Any],
        handles: IO[str],
        with_ctid: bool,
        check: Callable[[], None] | None,
    ):
        self._runs: Generator[list[bytes]] = _ahead(_runs(copy))
        self._check = check
        self.with_ctid = with_ctid
        self.grouped = not with_ctid
        self.lines: list[bytes] = []
        self.done = False
        self.rows = 0
        self.handles = handles
        self.more()

    def more(self) -> None:
        """Append the next run (``done`` once there is none)."""
        if self._check is not None:
            self._check()
        run = next(self._runs, None)
        if run is None:
            self.done = True
        else:
            self.rows += sum(_count(line) for line in run) if self.grouped else len(run)
            self.lines += run  # a stream not done always has a line

    def last(self) -> int:
        return _sort_key(self.lines[-1])

    def close(self) -> None:
        self._runs.close()

    def take(self, below: int | None) -> dict[bytes, bytes]:
        """The lines whose sort key is below ``below`` (``None``: all), by content (a line
        without its ctid)."""
        end = len(self.lines) if below is None else bisect_left(self.lines, below, key=_sort_key)
        taken, self.lines = self.lines[:end], self.lines[end:]
        if not self.with_ctid:
            return dict.fromkeys(taken, b"")
        return {line[: line.rindex(b"\t")]: line for line in taken}

    def keep(self, lines: dict[bytes, bytes], unmatched: Any) -> None:
        """Write the handles (group or ctid) of ``lines``' entries in ``unmatched``, one a
        line."""
        if self.with_ctid:
            handles = (lines[content][lines[content].rindex(b"\t") + 1 :] for content in unmatched)
        else:
            handles = (content[: content.index(b"\t")] for content in unmatched)
        self.handles.writelines(handle.decode() + "\n" for handle in handles)


def compare_streams(
    old: Iterator[Any],
    new: Iterator[Any],
    old_ctids: IO[str],
    new_ctids: IO[str],
    with_ctid: bool,
    check: Callable[[], None] | None = None,
) -> tuple[Side, Side]:
    """Stream both sides' COPY output (:func:`copy_sql`), writing the handles (keys or
    ctids) of the rows that have no equal row on the other side, one a line.

    :param with_ctid: the lines end with a ctid (the table is not :func:`by_key`).
    :param check: called before each run of lines is read (a time budget's check).
    """
    a, b = (
        _Stream(side, ctids, with_ctid, check)
        for side, ctids in ((old, old_ctids), (new, new_ctids))
    )
    try:
        while not (a.done and b.done):
            # Lines below the smallest last sort key of a side still streaming are all there.
            bound = min(stream.last() for stream in (a, b) if not stream.done)
            _match(a, b, bound)
            for stream in (a, b):
                if not stream.done and stream.last() == bound:
                    stream.more()
        _match(a, b, None)
    finally:  # the reading threads end before their connections are used again
        a.close()
        b.close()
    return Side(a.rows, old_ctids), Side(b.rows, new_ctids)


def _match(a: _Stream, b: _Stream, bound: int | None) -> None:
    left, right = a.take(bound), b.take(bound)
    a.keep(left, left.keys() - right.keys())
    b.keep(right, right.keys() - left.keys())


def stream(connection: psycopg.Connection[Any], table: PgTable, seed: int) -> Iterator[Any]:
    """One side's COPY output of ``table``, as blocks of lines."""
    with connection.cursor() as cursor, cursor.copy(copy_sql(table, seed)) as copy:
        yield from copy
