"""Which rows of a keyed table differ between two databases, found before any row is copied.

Both sides stream a line per row of the server's text (``COPY … TO STDOUT``) in one order
they share, each read ahead by a thread of its own: for a key of one integer column, in key
order (a scan of its index: no sort, no aggregate on the server); else ordered by a hash of
the key under a seed of this diff, each line ending with the row's ``ctid``. Runs of lines up
to a common sort key are compared as sets of whole lines, in C: equal lines are dropped; only
the keys (or ctids) of the rest are kept, in a file, and only those rows are then read as
diff values. Memory stays flat: a few runs of lines at a time, however many rows differ.
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
from pytest_scoring.db.postgres.copy_out import copy_out

#: Key kinds whose diff values tell apart every two keys the server tells apart.
_EXACT_KEYS: Final = frozenset({"integer", "text", "bytea", "boolean"})
#: COPY blocks (lines) joined at once, in C: Python then works per piece, not per line.
_PIECE_ROWS: Final = 64
#: Pieces read from one side before they are compared.
_RUN_PIECES: Final = 64
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
#: Lines a side has read before :class:`MostlyDifferent` may be raised.
_SETTLED: Final = 8192
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


def fetches(table: PgTable, handles: IO[str]) -> Iterator[tuple[sql.Composable, list[Any]]]:
    """The conditions (and their parameters) that read the rows :func:`compare_streams`
    wrote the handles of: ctids, or keys (ascending), in batches; a long run of consecutive
    keys as one key range (an index range scan, not a lookup a key)."""
    lines = (line.rstrip("\n") for line in handles)
    if not by_key(table):
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


def _runs(copy: Generator[Any]) -> Generator[list[bytes]]:
    """A COPY stream's lines (:func:`stream`'s pieces), in runs of at most
    :data:`_RUN_PIECES` pieces or about :data:`_RUN_BYTES` (PostgreSQL sends a line a block;
    a line split across blocks is joined all the same)."""
    tail = b""
    with contextlib.closing(copy):  # its COPY ended, even when the runs are left early
        while pieces := _pieces(copy):
            lines = b"".join([tail, *pieces]).split(b"\n")
            tail = lines.pop()
            yield lines
    if tail:
        yield [tail]


def _pieces(copy: Iterator[bytes]) -> list[bytes]:
    pieces, size = [], 0
    for piece in copy:
        pieces.append(piece)
        size += len(piece)
        if len(pieces) == _RUN_PIECES or size >= _RUN_BYTES:
            break
    return pieces


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
        table: PgTable,
        check: Callable[[], None] | None,
    ):
        self._runs: Generator[list[bytes]] = _ahead(_runs(copy))
        self._check = check
        self._field = _sort_field(table)
        #: Lines end with a ctid, the handle of their row (else the sort key, its key, is).
        self._with_ctid = not by_key(table)
        self.lines: list[bytes] = []
        self.done = False
        #: Lines read, and lines with no equal line on the other side.
        self.rows = self.differing = 0
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
            self.rows += len(run)
            self.lines += run  # a stream not done always has a line

    def sort_key(self, line: bytes) -> int:
        return int(line.split(b"\t", self._field + 1)[self._field])

    def last(self) -> int:
        return self.sort_key(self.lines[-1])

    def close(self) -> None:
        self._runs.close()

    def take(self, below: int | None) -> dict[bytes, bytes]:
        """The lines whose sort key is below ``below`` (``None``: all), by content (a line
        without its ctid)."""
        end = len(self.lines)
        if below is not None:
            end = bisect_left(self.lines, below, key=self.sort_key)
        taken, self.lines = self.lines[:end], self.lines[end:]
        if not self._with_ctid:
            return dict.fromkeys(taken, b"")
        return {line[: line.rindex(b"\t")]: line for line in taken}

    def keep(self, lines: dict[bytes, bytes], unmatched: Any) -> None:
        """Write the handles (key or ctid) of ``lines``' entries in ``unmatched``, one a
        line."""
        self.differing += len(unmatched)
        if self._with_ctid:
            handles = (lines[content][lines[content].rindex(b"\t") + 1 :] for content in unmatched)
        else:  # in ascending order, as :func:`fetches` reads them
            handles = (b"%d" % key for key in sorted(self.sort_key(line) for line in unmatched))
        self.handles.writelines(handle.decode() + "\n" for handle in handles)


class MostlyDifferent(Exception):
    """More than a quarter of a side's lines differ so far: reading the differing rows one
    by one would cost more than reading the table whole."""


def compare_streams(
    old: Generator[Any],
    new: Generator[Any],
    old_ctids: IO[str],
    new_ctids: IO[str],
    table: PgTable,
    check: Callable[[], None] | None = None,
) -> tuple[Side, Side]:
    """Stream both sides' COPY output (:func:`copy_sql`), writing the handles (keys or
    ctids) of the rows that have no equal row on the other side, one a line.

    :param check: called before each run of lines is read (a time budget's check).
    :raises MostlyDifferent: early, when most lines differ.
    """
    a, b = (
        _Stream(side, ctids, table, check) for side, ctids in ((old, old_ctids), (new, new_ctids))
    )
    try:
        while not (a.done and b.done):
            # Lines below the smallest last sort key of a side still streaming are all there.
            bound = min(stream.last() for stream in (a, b) if not stream.done)
            _match(a, b, bound)
            for stream in (a, b):
                if not stream.done and stream.last() == bound:
                    stream.more()
                if stream.rows >= _SETTLED and stream.differing * 4 > stream.rows:
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


def stream(connection: psycopg.Connection[Any], table: PgTable, seed: int) -> Generator[bytes]:
    """One side's COPY output of ``table``, in pieces of :data:`_PIECE_ROWS` blocks (lines),
    read by libpq's own calls (:mod:`~pytest_scoring.db.postgres.copy_out`).

    Inside a savepoint: a stream left early (its COPY cancelled) leaves the side's
    transaction, and its snapshot, usable.
    """
    with connection.transaction():
        blocks = copy_out(connection, copy_sql(table, seed).as_bytes(connection))
        with contextlib.closing(blocks):
            while piece := b"".join(itertools.islice(blocks, _PIECE_ROWS)):
                yield piece
