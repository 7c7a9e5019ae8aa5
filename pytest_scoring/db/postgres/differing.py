"""Which rows of a keyed table differ between two databases, found before any row is copied.

Both sides stream a line per row of the server's text (``COPY … TO STDOUT``) in one order
they share, each read ahead by a thread of its own: for a key of one integer column, in key
order (a scan of its index: no sort, no aggregate on the server); else ordered by a hash of
the key under a seed of this diff, each line ending with the row's ``ctid``. The lines both
sides have in common are skipped a stretch at a time, compared as bytes in C; only where
they differ does Python look at single lines. The keys (or ctids) of the lines with no equal
line on the other side are kept, in a file, and only those rows are then read as diff
values. Memory stays flat: a chunk of lines a side at a time, however many rows differ.
"""

from __future__ import annotations

import contextlib
import itertools
import queue
import secrets
import threading
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
from pytest_scoring.db.postgres.copy_out import copy_out

#: Key kinds whose diff values tell apart every two keys the server tells apart.
_EXACT_KEYS: Final = frozenset({"integer", "text", "bytea", "boolean"})


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
#: Lines a side has read before :class:`MostlyDifferent` may be raised.
SETTLED: Final = 8192
#: Rows read by one query of :func:`fetches` (at most, but for a key range).
_FETCH: Final = 16384


def by_key(table: PgTable) -> bool:
    """Whether the table's key is one integer column: its rows stream in key order, and those
    that differ are read by their keys (its index); else in the order of a hash of the key,
    and read by their ``ctid``."""
    key = table.primary_key
    return len(key) == 1 and table.oids[table.column_names().index(key[0])] in _INTEGER_TYPES


def copy_sql(table: PgTable, seed: int) -> sql.Composed:
    """The lines one side is compared by, a line per row, in the order of an integer sort key
    (the field :func:`_sort_field` says).

    A :func:`by_key` table: its columns, ordered by its key. Else ``sort key, its columns,
    ctid``, where the sort key is a 64-bit hash of the key's text. Only built-in functions
    run (``hashtextextended``, ``record_out``), none of the application's.
    """
    key = [sql.Identifier(column) for column in table.primary_key]
    ref = sql.SQL("ONLY {}.{}").format(sql.Identifier(table.schema), sql.Identifier(table.relname))
    columns = sql.SQL(", ").join(sql.Identifier(name) for name in table.column_names())
    if by_key(table):
        return sql.SQL("COPY (SELECT {columns} FROM {ref} ORDER BY {key}) TO STDOUT").format(
            columns=columns, ref=ref, key=key[0]
        )
    sort = sql.SQL("hashtextextended(textin(record_out(ROW({}))), {})").format(
        sql.SQL(", ").join(key), sql.Literal(seed)
    )
    return sql.SQL("COPY (SELECT {sort}, {columns}, ctid FROM {ref} ORDER BY 1) TO STDOUT").format(
        sort=sort, columns=columns, ref=ref
    )


def _sort_field(table: PgTable) -> int:
    """Which field of a :func:`copy_sql` line is its sort key: the key's, or the hash's."""
    return table.column_names().index(table.primary_key[0]) if by_key(table) else 0


def fetches(table: PgTable, side: DifferingRows) -> Iterator[tuple[sql.Composable, list[Any]]]:
    """The conditions (and their parameters) that read the rows a side's handles name:
    ctids, or keys (ascending), in batches; a long run of consecutive keys as one key range
    (an index range scan, not a lookup a key)."""
    side.handles.seek(0)
    lines = (line.rstrip("\n") for line in side.handles)
    if not side.keyed:
        while batch := list(itertools.islice(lines, _FETCH)):
            yield sql.SQL("ctid = ANY(%s::tid[])"), [batch]
        return
    key = sql.Identifier(table.primary_key[0])
    keys: list[int] = []
    for first, last in _ranges(int(line) for line in lines):
        if last - first >= _FETCH:
            yield sql.SQL("{} BETWEEN %s AND %s").format(key), [first, last]
            continue
        keys.extend(range(first, last + 1))
        if len(keys) >= _FETCH:
            yield sql.SQL("{} = ANY(%s::int8[])").format(key), [keys]
            keys = []
    if keys:
        yield sql.SQL("{} = ANY(%s::int8[])").format(key), [keys]


def _ranges(numbers: Iterator[int]) -> Iterator[tuple[int, int]]:
    """Ascending numbers as runs of consecutive ones: ``(first, last)``."""
    first = last = next(numbers, None)
    if first is None or last is None:
        return
    for number in numbers:
        if number != last + 1:
            yield first, last
            first = number
        last = number
    yield first, last


def new_seed() -> int:
    """A hash seed the database's contents cannot have been chosen against."""
    return secrets.randbits(63)


def ahead(chunks: Generator[bytes]) -> Generator[bytes]:
    """``chunks`` read by a thread of their own, one chunk ahead: both sides' servers work
    at once while this process compares. Closing this generator stops the thread."""
    ready: queue.Queue[bytes | BaseException | None] = queue.Queue(maxsize=1)
    stop = threading.Event()

    def hand(item: bytes | BaseException | None) -> bool:
        """Put ``item`` in the queue, unless the reader stops meanwhile."""
        while not stop.is_set():
            with contextlib.suppress(queue.Full):
                ready.put(item, timeout=0.1)
                return True
        return False

    def read() -> None:
        try:
            with contextlib.closing(chunks):
                for chunk in chunks:
                    if not hand(chunk):
                        return
            hand(None)
        except BaseException as error:  # handed to the reader
            hand(error)

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


@final
class DifferingRows(NamedTuple):
    """What one side's stream left: its row count, and where the differing rows are."""

    rows: int
    handles: IO[str]
    #: The handles are keys (else ctids): :func:`fetches` reads the rows by them.
    keyed: bool


@final
class _Lines:
    """One side's lines, read from the front of a chunk of whole lines."""

    def __init__(
        self,
        copy: Generator[bytes],
        handles: IO[str],
        table: PgTable,
        check: Callable[[], None] | None,
    ):
        self._chunks: Generator[bytes] = ahead(copy)
        self._check = check
        self._field = _sort_field(table)
        #: The sort key is the table's key (else a hash of it, and lines end with a ctid,
        #: the handle of their row).
        self._by_key = by_key(table)
        self.buffer, self.start = b"", 0
        #: Lines read, and lines with no equal line on the other side.
        self.rows = self.differing = 0
        self.handles = handles

    def ready(self) -> bool:
        """Whether a line is at the front (the next chunk read in when none is)."""
        while self.start == len(self.buffer):
            if self._check is not None:
                self._check()
            chunk = next(self._chunks, None)
            if chunk is None:
                return False
            self.rows += chunk.count(b"\n")
            self.buffer, self.start = chunk, 0
        return True

    def front(self) -> tuple[int, int]:
        """The sort key of the line at the front (:meth:`ready` first), and where it ends."""
        end = self.buffer.index(b"\n", self.start)
        field = self.buffer[self.start : end].split(b"\t", self._field + 1)[self._field]
        return int(field), end

    def take(self, key: int) -> dict[bytes, bytes]:
        """The lines at the front whose sort key (a hash) is ``key``, taken off the front:
        each line's content (without its ctid) to the line."""
        taken = {}
        while self.ready() and (front := self.front())[0] == key:
            line = self.buffer[self.start : front[1]]
            self.start = front[1] + 1
            taken[line[: line.rindex(b"\t")]] = line
        return taken

    def differ(self, line: bytes, key: int) -> None:
        """Write the handle of ``line``, whose sort key is ``key`` (the row's key, else its
        ctid), one a line.

        :raises MostlyDifferent: once more than a quarter of the lines read differ.
        """
        self.differing += 1
        handle = str(key) if self._by_key else line[line.rindex(b"\t") + 1 :].decode()
        self.handles.write(handle + "\n")
        if self.rows >= SETTLED and self.differing * 4 > self.rows:
            raise MostlyDifferent

    def differ_front(self, key: int, end: int) -> None:
        """The line at the front, of sort key ``key``, ending at ``end``, has no equal line
        on the other side."""
        self.differ(self.buffer[self.start : end], key)
        self.start = end + 1

    def close(self) -> None:
        self._chunks.close()


def _skip_common(a: _Lines, b: _Lines) -> bool:
    """Move both fronts past the whole lines they have in common, compared in C.

    :returns: whether both fronts are lines then, and differ (else a side's chunk ran out).
    """
    common = common_length(a.buffer, a.start, b.buffer, b.start)
    cut = a.buffer.rfind(b"\n", a.start, a.start + common) + 1
    if cut:
        b.start += cut - a.start
        a.start = cut
    return a.start < len(a.buffer) and b.start < len(b.buffer)


#: Bytes compared at first, and the width a differing span is narrowed to.
_SPAN: Final = 256


def common_length(x: bytes, i: int, y: bytes, j: int) -> int:
    """The length of the common prefix of ``x[i:]`` and ``y[j:]``: spans of doubling width
    compared while they are equal, the first unequal one halved down to :data:`_SPAN`
    bytes, whose first differing byte the highest bit of their XOR gives."""
    length = min(len(x) - i, len(y) - j)
    done, width = 0, _SPAN
    while done < length:
        width = min(width, length - done)
        left, right = x[i + done : i + done + width], y[j + done : j + done + width]
        if left == right:
            done, width = done + width, width * 2
        elif width > _SPAN:
            width //= 2
        else:
            differ = int.from_bytes(left) ^ int.from_bytes(right)
            return done + width - (differ.bit_length() + 7) // 8
    return length


class MostlyDifferent(Exception):
    """More than a quarter of a side's lines differ so far: reading the differing rows one
    by one would cost more than reading the table whole."""


def compare_streams(
    old: Generator[bytes],
    new: Generator[bytes],
    old_handles: IO[str],
    new_handles: IO[str],
    table: PgTable,
    check: Callable[[], None] | None = None,
) -> tuple[DifferingRows, DifferingRows]:
    """Stream both sides' COPY output (:func:`copy_sql`), writing the handles (keys or
    ctids) of the rows that have no equal row on the other side, one a line.

    Both sides run in one order: lines they have in common are skipped in C, a stretch at a
    time. Of the first lines that differ, the one with the smaller sort key has no equal
    line on the other side; lines of one sort key pair by content (a hash's collisions).

    :param check: called before each chunk of lines is read (a time budget's check).
    :raises MostlyDifferent: early, when most lines differ.
    """
    a, b = (
        _Lines(side, handles, table, check)
        for side, handles in ((old, old_handles), (new, new_handles))
    )
    unique = by_key(table)
    try:
        while a.ready() and b.ready():
            if not _skip_common(a, b):
                continue  # a side's chunk ran out
            (old_key, old_end), (new_key, new_end) = a.front(), b.front()
            if old_key != new_key or unique:
                if old_key <= new_key:
                    a.differ_front(old_key, old_end)
                if new_key <= old_key:
                    b.differ_front(new_key, new_end)
            else:
                _match(a, b, old_key)
        for side in (a, b):
            while side.ready():
                side.differ_front(*side.front())
    finally:  # the reading threads end before their connections are used again
        a.close()
        b.close()
    return DifferingRows(a.rows, old_handles, unique), DifferingRows(b.rows, new_handles, unique)


def _match(a: _Lines, b: _Lines, key: int) -> None:
    """The lines of one sort key at both fronts: those with no equal line on the other side
    differ."""
    left, right = a.take(key), b.take(key)
    for content in left.keys() - right.keys():
        a.differ(left[content], key)
    for content in right.keys() - left.keys():
        b.differ(right[content], key)


def stream(connection: psycopg.Connection[Any], table: PgTable, seed: int) -> Generator[bytes]:
    """One side's COPY output of ``table`` (:func:`copy_sql`), in chunks of whole lines,
    read by libpq's own calls (:mod:`~pytest_scoring.db.postgres.copy_out`).

    Inside a savepoint: a stream left early (its COPY cancelled) leaves the side's
    transaction, and its snapshot, usable.
    """
    with connection.transaction():
        yield from copy_out(connection, copy_sql(table, seed).as_bytes(connection))
