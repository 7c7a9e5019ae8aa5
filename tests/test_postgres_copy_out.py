"""``COPY … TO STDOUT`` read by libpq's own calls: a stream left early, or failing midway,
leaves its connection usable (the diff then reads the same side again on it)."""

from __future__ import annotations

import psycopg
import pytest
from postgres_cluster import Cluster

from pytest_scoring.db.postgres.catalog import tables
from pytest_scoring.db.postgres.copy_out import copy_out
from pytest_scoring.db.postgres.differing import new_seed
from pytest_scoring.db.postgres.differing import stream

pytestmark = pytest.mark.slow

SETUP = "CREATE TABLE t (v text, id int PRIMARY KEY); " \
    "INSERT INTO t SELECT 'v' || n, 200001 - n FROM generate_series(1, 200000) n"  # fmt: skip


def test_a_stream_left_early_is_cancelled_and_its_transaction_goes_on(postgres: Cluster) -> None:
    with psycopg.connect(postgres.application(SETUP)) as connection, connection.transaction():
        table = tables(connection)["t"]
        pieces = stream(connection, table, new_seed())
        assert next(pieces).startswith(b"v200000\t1\nv199999\t2\n")  # in key order

        pieces.close()

        assert connection.execute("SELECT count(*) FROM t").fetchone() == (200000,)


def test_an_error_midway_is_the_servers_and_the_connection_stays_usable(
    postgres: Cluster,
) -> None:
    query = b"COPY (SELECT 1 / (n - 150000) FROM generate_series(1, 200000) n) TO STDOUT"
    chunks = []
    with psycopg.connect(postgres.application()) as connection:
        with (
            pytest.raises(psycopg.errors.DivisionByZero, match=r"^division by zero$"),
            connection.transaction(),
        ):
            for chunk in copy_out(connection, query):
                chunks.append(chunk)

        assert connection.execute("SELECT 1").fetchone() == (1,)
    assert chunks[0].startswith(b"0\n0\n")  # the error came midway
