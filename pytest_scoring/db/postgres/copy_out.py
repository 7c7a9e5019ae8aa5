"""``COPY … TO STDOUT`` read through libpq's own calls, not psycopg's ``Copy``.

PostgreSQL sends a message per row; psycopg's ``Copy`` hands each through a few Python
generators, which cost about three times what libpq's ``PQgetCopyData`` does, and made up
most of the diff's time on a table of a million rows (docs/benchmarks.md). The query runs
on the connection's libpq handle, between psycopg's statements: it leaves the connection
idle, its COPY read to the end or cancelled, as psycopg's ``Copy`` does.
"""

from __future__ import annotations

import contextlib
import select
from collections.abc import Generator
from typing import Any
from typing import Final

import psycopg
from psycopg import pq

#: Lines joined into one chunk: Python then works per chunk, not per line.
_CHUNK_LINES: Final = 4096
#: Bytes after which a chunk ends sooner (rows holding large values).
_CHUNK_BYTES: Final = 8 << 20
#: Messages joined into one piece of a chunk.
_PIECE: Final = 64


def copy_out(connection: psycopg.Connection[Any], query: bytes) -> Generator[bytes]:
    """The lines of a ``COPY … TO STDOUT``, in chunks of whole lines (PostgreSQL sends a
    line a message); closed early, its COPY is cancelled and the connection left idle, its
    transaction aborted.

    :raises psycopg.Error: the server's error (its class by SQLSTATE), or the connection's.
    """
    pgconn = connection.pgconn
    pgconn.send_query(query)
    while pgconn.flush():
        select.select([], [pgconn.socket], [])
    _expect(pgconn, _next_result(pgconn), pq.ExecStatus.COPY_OUT)
    ended = False
    try:
        yield from _chunks(pgconn)
        ended = True
    finally:
        if not ended:
            with contextlib.suppress(psycopg.Error):  # a connection lost meanwhile
                pgconn.get_cancel().cancel()
            for _ in _chunks(pgconn, cancelled=True):
                pass
        while (result := _next_result(pgconn)) is not None:
            if ended:  # once cancelled, its error (QueryCanceled) is the expected end
                _expect(pgconn, result, pq.ExecStatus.COMMAND_OK)


def _chunks(pgconn: pq.abc.PGconn, cancelled: bool = False) -> Generator[bytes]:
    """The COPY's messages joined, about :data:`_CHUNK_LINES` or :data:`_CHUNK_BYTES` at a
    time, up to its end (its result still to be read).

    One tight loop a message, this call being what the diff of a large table spends most
    of its time in; messages are joined :data:`_PIECE` at a time first (a message held
    longer costs more).
    """
    get = pgconn.get_copy_data
    blocks: list[memoryview] = []
    pieces: list[bytes] = []
    size = 0
    while True:
        got, block = get(1)
        if got > 0:
            blocks.append(block)
            size += got
            if len(blocks) == _PIECE:
                pieces.append(b"".join(blocks))
                blocks = []
                if len(pieces) * _PIECE >= _CHUNK_LINES or size >= _CHUNK_BYTES:
                    yield b"".join(pieces)
                    pieces, size = [], 0
        elif got == 0:
            _wait(pgconn)
        elif got == -1 or cancelled:
            break
        else:
            raise psycopg.OperationalError(_message(pgconn.error_message))
    if pieces or blocks:
        yield b"".join([*pieces, *blocks])


def _next_result(pgconn: pq.abc.PGconn) -> pq.abc.PGresult | None:
    while pgconn.is_busy():
        _wait(pgconn)
    return pgconn.get_result()


def _wait(pgconn: pq.abc.PGconn) -> None:
    """Until the server sends more (the GIL released meanwhile: the other side reads on)."""
    select.select([pgconn.socket], [], [])
    pgconn.consume_input()


def _expect(pgconn: pq.abc.PGconn, result: pq.abc.PGresult | None, status: int) -> None:
    if result is None or result.status != status:
        if result is None:
            raise psycopg.OperationalError(_message(pgconn.error_message))
        sqlstate = result.error_field(pq.DiagnosticField.SQLSTATE)
        error = psycopg.errors.lookup(sqlstate.decode()) if sqlstate else psycopg.DatabaseError
        while _next_result(pgconn) is not None:  # the connection left idle
            pass
        primary = result.error_field(pq.DiagnosticField.MESSAGE_PRIMARY)  # as psycopg words it
        raise error(_message(primary or result.error_message))


def _message(raw: bytes) -> str:
    return raw.decode(errors="replace").strip() or "the COPY failed"
