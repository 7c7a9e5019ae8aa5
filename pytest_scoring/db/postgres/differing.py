"""Which rows of a keyed table differ between two databases, found before any row is copied.

Both sides stream lines of the server's text (``COPY … TO STDOUT``) in one order they share,
each read ahead by a thread of its own: for a key of one integer column, a line per group of
8 consecutive keys holding the group's rows (so an eighth of the lines), in key order; else
a line per row, ordered by a hash of the key under a seed of this diff. Runs of lines up to
a common sort key are compared as sets of whole lines, in C: equal lines are dropped; only
the groups (or ``ctid``) of the rest are kept, in a file, and only those rows are then read
as diff values. Memory stays flat: a few runs of lines at a time, however many rows differ.
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
#: Bytes of COPY blocks after which a run ends sooner (rows holding large values).
_RUN_BYTES: Final = 8 << 20


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
#: Lines a side has read before :class:`MostlyDifferent` may be raised.
_SETTLED: Final = 8192
#: Rows read by one query of :func:`fetches` (at most, but for a key range).
_FETCH: Final = 16384


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
    ref = sql.SQL("ONLY {}.{}").format(sql.Identifier(table.schema), sql.Identifier(table.relname))
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


def fetches(table: PgTable, handles: IO[str]) -> Iterator[tuple[sql.Composable, list[Any]]]:
    """The conditions (and their parameters) that read the rows :func:`compare_streams`
    wrote the handles of: ctids, or groups, in batches; a run of consecutive groups as one
    key range (an index range scan, not a lookup a key)."""
    lines = (line.rstrip("\n") for line in handles)
    if not by_key(table):
        while batch := list(itertools.islice(lines, _FETCH)):
            yield sql.SQL("ctid = ANY(%s::tid[])"), [batch]
        return
    key = sql.Identifier(table.primary_key[0])
    size = 1 << GROUP_BITS
    keys: list[int] = []
    for first, last in _ranges(int(line) for line in lines):
        if last - first >= _FETCH // size:
            yield (
                sql.SQL("{} BETWEEN %s AND %s").format(key),
                [first * size, last * size + size - 1],
            )
            continue
        keys.extend(range(first * size, last * size + size))
        if len(keys) >= _FETCH:
            yield sql.SQL("{} = ANY(%s::int8[])").format(key), [keys]
            keys = []
    if keys:
        yield sql.SQL("{} = ANY(%s::int8[])").format(key), [keys]


def _ranges(groups: Iterator[int]) -> Iterator[tuple[int, int]]:
    """Ascending numbers as runs of consecutive ones: ``(first, last)``."""
    first = last = next(groups, None)
    if first is None or last is None:
        return
    for group in groups:
        if group != last + 1:
            yield first, last
            first = group
        last = group
    yield first, last


def new_seed() -> int:
    """A hash seed the database's contents cannot have been chosen against."""
    return secrets.randbits(63)


def _runs(copy: Generator[Any]) -> Generator[list[bytes]]:
    """A COPY stream's lines, in runs of at most :data:`_RUN_ROWS` blocks or about
    :data:`_RUN_BYTES` (PostgreSQL sends a line a block; a line split across blocks is joined
    all the same)."""
    tail = b""
    with contextlib.closing(copy):  # its COPY ended, even when the runs are left early
        while blocks := _blocks(copy):
            lines = b"".join([tail, *blocks]).split(b"\n")
            tail = lines.pop()
            yield lines
    if tail:
        yield [tail]


def _blocks(copy: Iterator[Any]) -> list[Any]:
    blocks, size = [], 0
    for block in copy:
        blocks.append(block)
        size += len(block)
        if len(blocks) == _RUN_ROWS or size >= _RUN_BYTES:
            break
    return blocks


def _ahead(runs: Generator[list[bytes]]) -> Generator[list[bytes]]:
    """``runs`` read by a thread of their own, one run ahead: both sides' servers work at
    once while this process compares. Closing this generator stops the thread."""
    ready: queue.Queue[list[bytes] | BaseException | None] = queue.Queue(maxsize=1)
    stop = threading.Event()

    def hand(item: list[bytes] | BaseException | None) -> bool:
        """Put ``item`` in the queue, unless the reader stops meanwhile."""
        while not stop.is_set():
            with contextlib.suppress(queue.Full):
                ready.put(item, timeout=0.1)
                return True
        return False

    def read() -> None:
        try:
            with contextlib.closing(runs):
                for run in runs:
                    if not hand(run):
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
        copy: Generator[Any],
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
        #: Lines read, and lines with no equal line on the other side.
        self.lines_read = self.differing = 0
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
            self.lines_read += len(run)
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
        self.differing += len(unmatched)
        if self.with_ctid:
            handles = (lines[content][lines[content].rindex(b"\t") + 1 :] for content in unmatched)
        else:  # in ascending order, as :func:`fetches` reads them
            handles = (b"%d" % group for group in sorted(_sort_key(line) for line in unmatched))
        self.handles.writelines(handle.decode() + "\n" for handle in handles)


class MostlyDifferent(Exception):
    """More than a quarter of a side's lines differ so far: reading the differing rows one
    by one would cost more than reading the table whole."""


def compare_streams(
    old: Generator[Any],
    new: Generator[Any],
    old_ctids: IO[str],
    new_ctids: IO[str],
    with_ctid: bool,
    check: Callable[[], None] | None = None,
) -> tuple[Side, Side]:
    """Stream both sides' COPY output (:func:`copy_sql`), writing the handles (keys or
    ctids) of the rows that have no equal row on the other side, one a line.

    :param with_ctid: the lines end with a ctid (the table is not :func:`by_key`).
    :param check: called before each run of lines is read (a time budget's check).
    :raises MostlyDifferent: early, when most lines differ.
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
                if stream.lines_read >= _SETTLED and stream.differing * 4 > stream.lines_read:
                    raise MostlyDifferent
        _match(a, b, None)
    finally:  # the reading threads end before their connections are used again
        a.close()
        b.close()
    return Side(a.rows, old_ctids), Side(b.rows, new_ctids)


def _match(a: _Stream, b: _Stream, bound: int | None) -> None:
    left, right = a.take(bound), b.take(bound)
    a.keep(left, left.keys() - right.keys())
    b.keep(right, right.keys() - left.keys())


def stream(connection: psycopg.Connection[Any], table: PgTable, seed: int) -> Generator[Any]:
    """One side's COPY output of ``table``, as blocks of lines.

    Inside a savepoint: a stream left early (its COPY cancelled) leaves the side's
    transaction, and its snapshot, usable.
    """
    with (
        connection.transaction(),
        connection.cursor() as cursor,
        cursor.copy(copy_sql(table, seed)) as copy,
    ):
        yield from copy
