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

import psycopg
from psycopg import pq


def copy_out(connection: psycopg.Connection[Any], query: bytes) -> Generator[memoryview]:
    """The blocks (a line each) of a ``COPY … TO STDOUT``; closed early, its COPY is
    cancelled and the connection left idle, its transaction aborted.

    :raises psycopg.Error: the server's error (its class by SQLSTATE), or the connection's.
    """
    pgconn = connection.pgconn
    pgconn.send_query(query)
    while pgconn.flush():
        select.select([], [pgconn.socket], [])
    _expect(pgconn, _next_result(pgconn), pq.ExecStatus.COPY_OUT)
    ended = False
    try:
        while (block := _block(pgconn)) is not None:
            yield block
        ended = True
    finally:
        if not ended:
            with contextlib.suppress(psycopg.Error):  # a connection lost meanwhile
                pgconn.get_cancel().cancel()
            while _block(pgconn, cancelled=True) is not None:
                pass
        while (result := _next_result(pgconn)) is not None:
            if ended:  # once cancelled, its error (QueryCanceled) is the expected end
                _expect(pgconn, result, pq.ExecStatus.COMMAND_OK)


def _block(pgconn: pq.abc.PGconn, cancelled: bool = False) -> memoryview | None:
    """The next block; ``None`` at the COPY's end (its result still to be read)."""
    while True:
        size, block = pgconn.get_copy_data(1)
        if size > 0:
            return block
        if size == -1:
            return None
        if size < -1:
            if cancelled:
                return None
            raise psycopg.OperationalError(_message(pgconn.error_message))
        _wait(pgconn)


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
