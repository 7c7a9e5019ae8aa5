"""PostgreSQL's diff (issue 31 item 3): the SQLite diff's shape, values under pinned settings,
pairing by key, UNIQUE and content, tables per partition, sequences in ``info``."""

from __future__ import annotations

import contextlib
import sqlite3
from pathlib import Path
from typing import Any

import psycopg
import pytest
from postgres_cluster import Cluster
from test_postgres_containment import run

from pytest_scoring.core.budget import SelectorTimeout
from pytest_scoring.core.budget import TimeBudget
from pytest_scoring.db.diff import diff_paths
from pytest_scoring.db.diff_types import DatabaseEntryJSON
from pytest_scoring.db.diff_types import PlanesJSON
from pytest_scoring.db.postgres import admin
from pytest_scoring.db.postgres.diff import Side
from pytest_scoring.db.postgres.diff import diff_databases
from pytest_scoring.db.postgres.engine import PostgresEngine

pytestmark = pytest.mark.slow

#: Column, type, a value (SQL), the JSON it reads as, another value, its JSON.
TYPES: list[tuple[str, str, str, Any, str, Any]] = [
    ("small", "smallint", "7", 7, "-7", -7),
    ("big", "bigint", "9007199254740993", 9007199254740993, "1", 1),
    ("single", "real", "0.1", 0.1, "2.5", 2.5),
    ("double", "double precision", "1e300", 1e300, "'NaN'", "NaN"),
    ("amount", "numeric(30,9)", "12345678901234567890.123456789",
     "12345678901234567890.123456789", "1.5", "1.500000000"),
    ("flag", "boolean", "true", 1, "false", 0),
    ("words", "text", "'héllo'", "héllo", "''", ""),
    ("short", "varchar(5)", "'abc'", "abc", "'abd'", "abd"),
    ("padded", "char(3)", "'a'", "a  ", "'b'", "b  "),
    ("at", "timestamptz", "'2024-01-02 03:04:05.5+02'", "2024-01-02 01:04:05.5+00",
     "'2024-01-02 03:04:05.5+03'", "2024-01-02 00:04:05.5+00"),
    ("local_at", "timestamp", "'2024-01-02 03:04:05'", "2024-01-02 03:04:05",
     "'1999-12-31 23:59:59'", "1999-12-31 23:59:59"),
    ("day", "date", "'2024-01-02'", "2024-01-02", "'2024-01-03'", "2024-01-03"),
    ("clock", "time", "'13:14:15'", "13:14:15", "'00:00:00'", "00:00:00"),
    ("span", "interval", "'1 day 2 hours'", "P1DT2H", "'3 minutes'", "PT3M"),
    ("raw", "bytea", "'\\x00ff'", {"$blob": "AP8="}, "'\\x'", {"$blob": ""}),
    ("ints", "integer[]", "'{1,2}'", [1, 2], "'{}'", []),
    ("texts", "text[]", "'{a,\"b c\",NULL}'", ["a", "b c", None], "'{a}'", ["a"]),
    ("stamps", "timestamptz[]", "'{\"2024-01-02 00:00:00+05\"}'", ["2024-01-01 19:00:00+00"],
     "'{}'", []),
    ("grid", "numeric[]", "'{{1.0,2},{3,4}}'", [["1.0", "2"], ["3", "4"]], "'{{1}}'", [["1"]]),
    ("doc", "jsonb", "'{\"b\": 1, \"a\": [1, 2.5]}'", {"a": [1, 2.5], "b": 1}, "'[]'", []),
    ("plain", "json", "'{\"z\": null}'", {"z": None}, "'0'", 0),
    ("feeling", "mood", "'happy'", "happy", "'sad'", "sad"),
    ("ident", "uuid", "'123e4567-e89b-12d3-a456-426614174000'",
     "123e4567-e89b-12d3-a456-426614174000", "'00000000-0000-0000-0000-000000000000'",
     "00000000-0000-0000-0000-000000000000"),
    ("address", "inet", "'10.1.2.3'", "10.1.2.3", "'::1'", "::1"),
    ("point_", "point", "'(1,2)'", "(1,2)", "'(0,0)'", "(0,0)"),
]  # fmt: skip


#: Every table written anew (rows keep who wrote them, not where they lie): the sides are
#: then compared on their text, not by where rows lie (docs/databases.md#postgresql).
REWRITE = ("VACUUM FULL",)


def _values(which: int) -> str:
    return ", ".join(row[2 if which == 0 else 4] for row in TYPES)


def test_every_column_type_reads_as_the_docs_say_whatever_the_server_settings(
    postgres: Cluster,
) -> None:
    columns = ", ".join(f"{name} {kind}" for name, kind, *_ in TYPES)
    app = postgres.application(
        "CREATE TYPE mood AS ENUM ('sad', 'happy');"
        f"CREATE TABLE everything (id int PRIMARY KEY, {columns});"
        f"INSERT INTO everything VALUES (1, {_values(0)})"
    )
    database = admin.database_of(app)
    snap = admin.snapshot(postgres.admin_url, database)
    run(app, f"UPDATE everything SET ({', '.join(r[0] for r in TYPES)}) = ({_values(1)})")
    run(app, f"INSERT INTO everything VALUES (2, {_values(0)})")
    # Settings the application (owning its database) gives every later session there: the
    # evaluator's reads of the state in place pin their own.
    for setting in (
        "TimeZone = 'Asia/Tokyo'",
        "DateStyle = 'German, DMY'",
        "IntervalStyle = 'postgres_verbose'",
        "extra_float_digits = -10",
        "bytea_output = 'escape'",
        "statement_timeout = 1",
        "search_path = nowhere",
    ):
        run(app, f"ALTER DATABASE {database} SET {setting}")

    entry = diff_databases(postgres.admin_url, Side(snap.name), Side(database, False), "app")

    table = entry["comparisons"]["data"]["tables"]["everything"]
    assert table["rows_added"] == [{"id": 2, **{row[0]: row[3] for row in TYPES}}]
    assert table["rows_changed"] == [
        {
            "key": {"id": 1},
            "changes": {
                name: {"old_value": old, "new_value": new} for name, _, _, old, _, new in TYPES
            },
        }
    ]
    admin.drop(postgres.admin_url, snap.name)


def diff_after(postgres: Cluster, setup: str, changes: str) -> DatabaseEntryJSON:
    """The entry of an application's database made by ``setup``, its snapshot against its
    state in place after ``changes``."""
    app = postgres.application(setup)
    database = admin.database_of(app)
    snap = admin.snapshot(postgres.admin_url, database)
    run(app, changes)
    entry = diff_databases(postgres.admin_url, Side(snap.name), Side(database, False), "app")
    admin.drop(postgres.admin_url, snap.name)
    return entry


def _sqlite_twin(path: Path, statements: str) -> None:
    with contextlib.closing(sqlite3.connect(path)) as db:
        db.executescript(statements)


def both_diffs(
    postgres: Cluster,
    folder: Path,
    tables: tuple[str, str],
    seed: str,
    changes: str,
    postgres_only: tuple[str, ...] = (),
) -> tuple[PlanesJSON, DatabaseEntryJSON]:
    """The same ``changes`` made after the same ``seed`` in SQLite and in PostgreSQL
    (``tables``: each engine's schema): SQLite's comparisons, and PostgreSQL's entry.

    :param postgres_only: statements then run in PostgreSQL alone, each on its own (outside
        a transaction, as ``VACUUM`` must be): the SQLite twin's diff is what they must
        leave.
    """
    _sqlite_twin(folder / "a.db", tables[0] + seed)
    (folder / "b.db").write_bytes((folder / "a.db").read_bytes())
    _sqlite_twin(folder / "b.db", changes)
    app = postgres.application(tables[1] + seed)
    database = admin.database_of(app)
    snap = admin.snapshot(postgres.admin_url, database)
    run(app, changes)
    for statement in postgres_only:
        run(app, statement)
    sqlite = diff_paths(folder / "a.db", folder / "b.db")["comparisons"]["b.db"]["comparisons"]
    entry = diff_databases(postgres.admin_url, Side(snap.name), Side(database, False), "app")
    admin.drop(postgres.admin_url, snap.name)
    return sqlite, entry


def test_a_password_change_has_the_shape_its_sqlite_twin_has(
    postgres: Cluster, tmp_path: Path
) -> None:
    """The docs' example (a password changed, an account added), plus a delete and insert
    again that pairs through the UNIQUE email, in both engines: one diff."""
    changes = (
        "UPDATE users SET password = 'z' WHERE id = 2;"
        "INSERT INTO users (email, password) VALUES ('cy@example.com', 'w');"
        "DELETE FROM users WHERE id = 1;"
        "INSERT INTO users (email, password) VALUES ('al@example.com', 'x2');"
    )
    seed = (
        "INSERT INTO users (email, password) "
        "VALUES ('al@example.com', 'x'), ('bo@example.com', 'y');"
    )
    tables = (
        "CREATE TABLE users (id INTEGER PRIMARY KEY, email TEXT UNIQUE, password TEXT);",
        "CREATE TABLE users (id serial PRIMARY KEY, email text UNIQUE, password text);",
    )

    sqlite, entry = both_diffs(postgres, tmp_path, tables, seed, changes)

    assert entry["comparisons"] == sqlite
    assert entry["comparisons"]["data"]["tables"]["users"]["rows_changed"][1]["paired_by"] == [
        "email"
    ]
    assert entry["info"]["engine"] == "postgresql"
    assert entry["info"]["sequences"] == {"users_id_seq": 4}


def test_sequences_show_their_last_value_at_finish_and_never_rows(postgres: Cluster) -> None:
    app = postgres.application(
        "CREATE SEQUENCE used; CREATE SEQUENCE unused; CREATE SEQUENCE dropped;"
        "SELECT nextval('used'); SELECT nextval('dropped')"
    )
    database = admin.database_of(app)
    snap = admin.snapshot(postgres.admin_url, database)
    run(app, "SELECT nextval('used'); SELECT nextval('used'); DROP SEQUENCE dropped")

    entry = diff_databases(postgres.admin_url, Side(snap.name), Side(database, False), "app")

    assert entry["info"]["sequences"] == {"unused": None, "used": 3}
    assert entry["comparisons"]["data"]["tables"] == {}
    admin.drop(postgres.admin_url, snap.name)


@pytest.mark.parametrize("afterwards", [(), REWRITE], ids=["in place", "rewritten"])
def test_tables_longer_than_a_run_with_text_and_composite_keys_diff_as_their_sqlite_twin(
    postgres: Cluster, tmp_path: Path, afterwards: tuple[str, ...]
) -> None:
    """Only the rows that differ are copied (found by where rows lie and who wrote them, or, every
    table rewritten, on the server's text): 40,000 rows ordered by a hash of a text key or of a
    two-column key, a value holding a tab, a newline and a backslash, a row set to what it was,
    groups of integer keys at both ends of ``bigint``, and a table most of whose rows changed
    (read whole) give the SQLite twin's diff, row counts included."""
    rows = "WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM n WHERE i < 40000) "
    seed = (
        f"INSERT INTO accounts {rows}SELECT 'user ' || i, 'note ' || i FROM n;"
        f"INSERT INTO pairs {rows}SELECT i % 200, i / 200, 'v' || i FROM n;"
        "INSERT INTO edges VALUES (-9223372036854775808, 'a'), (-9, 'b'), (-1, 'c'), (0, 'd'),"
        " (7, 'e'), (8, 'f'), (9223372036854775807, 'g');"
    )
    changes = (
        "UPDATE accounts SET note = 'a\tb\nc\\d' WHERE name = 'user 7';"
        "UPDATE accounts SET note = note WHERE name = 'user 9';"
        "DELETE FROM accounts WHERE name IN ('user 8', 'user 30000');"
        "INSERT INTO accounts VALUES ('zed', 'new');"
        "UPDATE pairs SET v = v || '!' WHERE a >= 50 OR (a = 3 AND b = 4);"
        "UPDATE edges SET v = 'z' WHERE id IN (-9223372036854775808, -1, 9223372036854775807);"
        "DELETE FROM edges WHERE id = 8;"
        "INSERT INTO edges VALUES (9, 'h');"
    )
    tables = "CREATE TABLE accounts (name {0} PRIMARY KEY, note {0});" \
        "CREATE TABLE pairs (a int, b int, v {0}, PRIMARY KEY (a, b));" \
        "CREATE TABLE edges (id bigint PRIMARY KEY, v {0});"  # fmt: skip
    schemas = (tables.format("TEXT"), tables.format("text"))

    sqlite, entry = both_diffs(postgres, tmp_path, schemas, seed, changes, afterwards)

    assert entry["comparisons"] == sqlite
    accounts = entry["comparisons"]["data"]["tables"]["accounts"]
    assert accounts["counts"] == {"added": 1, "removed": 2, "changed": 1}
    assert (accounts["before_rows"], accounts["after_rows"]) == (40000, 39999)
    assert accounts["rows_changed"][0]["changes"]["note"]["new_value"] == "a\tb\nc\\d"
    assert entry["comparisons"]["data"]["tables"]["pairs"]["counts"]["changed"] == 30001
    edges = entry["comparisons"]["data"]["tables"]["edges"]
    assert edges["counts"] == {"added": 1, "removed": 1, "changed": 3}


@pytest.mark.parametrize("afterwards", [(), REWRITE], ids=["in place", "rewritten"])
def test_integer_keys_out_of_physical_order_and_values_escaped_across_pieces_diff_as_the_twin(
    postgres: Cluster, tmp_path: Path, afterwards: tuple[str, ...]
) -> None:
    """A table keyed by one integer column (its text compared: every table rewritten) streams in
    key order, whatever order its rows lie in: 50,000 rows inserted in descending key order
    (the key not the first column), rows moved by updates, every value holding a tab, a newline
    and a backslash (so lines and COPY escapes run across pieces and runs of lines), ``NULL``
    against the text ``\\N``, and a table of its key alone give the SQLite twin's diff."""
    rows = "WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM n WHERE i < 50000) "
    seed = (
        f"INSERT INTO items {rows}SELECT 'v' || i || '\t\n\\' || substr('xxxxxxxx', 1, i % 9),"
        " 50001 - i, CASE WHEN i % 2 = 0 THEN '\\N' ELSE 't' || i END FROM n;"
        f"INSERT INTO bare {rows}SELECT i FROM n WHERE i <= 5000;"
    )
    changes = (
        "UPDATE items SET note = note || '\\\n' WHERE id % 997 = 3;"
        "UPDATE items SET tag = tag WHERE id % 1009 = 5;"
        "UPDATE items SET tag = NULL WHERE id = 11;"
        "DELETE FROM items WHERE id % 1013 = 7;"
        "INSERT INTO items VALUES ('new\t', 60000, NULL), ('new', 0, 'x');"
        "DELETE FROM bare WHERE id IN (1, 4096, 4097);"
        "INSERT INTO bare VALUES (32767), (-5);"
    )
    # SQLite's twin keys its rowid (its rows listed in key order, as the PostgreSQL diff's).
    tables = "CREATE TABLE items (note {0}, id {1} PRIMARY KEY, tag {0});" \
        "CREATE TABLE bare (id {2} PRIMARY KEY);"  # fmt: skip
    schemas = (
        tables.format("TEXT", "INTEGER", "INTEGER"),
        tables.format("text", "int", "smallint"),
    )

    sqlite, entry = both_diffs(postgres, tmp_path, schemas, seed, changes, afterwards)

    assert entry["comparisons"] == sqlite
    items = entry["comparisons"]["data"]["tables"]["items"]
    assert items["counts"] == {"added": 2, "removed": 50, "changed": 52}
    assert (items["before_rows"], items["after_rows"]) == (50000, 49952)
    bare = entry["comparisons"]["data"]["tables"]["bare"]
    assert bare["counts"] == {"added": 2, "removed": 3, "changed": 0}


def test_partitions_are_diffed_one_by_one_views_never(postgres: Cluster) -> None:
    entry = diff_after(
        postgres,
        "CREATE SCHEMA billing;"
        "CREATE TABLE billing.events (day date, note text) PARTITION BY RANGE (day);"
        "CREATE TABLE billing.events_2023 PARTITION OF billing.events "
        "FOR VALUES FROM ('2023-01-01') TO ('2024-01-01');"
        "CREATE TABLE billing.events_2024 PARTITION OF billing.events "
        "FOR VALUES FROM ('2024-01-01') TO ('2025-01-01');"
        "CREATE VIEW recent AS SELECT * FROM billing.events;"
        "CREATE MATERIALIZED VIEW frozen AS SELECT * FROM billing.events;"
        "INSERT INTO billing.events VALUES ('2023-05-01', 'old')",
        "INSERT INTO billing.events VALUES ('2024-05-01', 'new'), ('2023-05-01', 'old')",
    )

    tables = entry["comparisons"]["data"]["tables"]
    assert sorted(tables) == ["billing.events_2023", "billing.events_2024"]
    assert tables["billing.events_2024"]["rows_added"] == [{"day": "2024-05-01", "note": "new"}]
    # No key: the rows pair as a multiset, so the second 'old' row is one row added.
    assert tables["billing.events_2023"]["counts"] == {"added": 1, "removed": 0, "changed": 0}
    assert tables["billing.events_2023"]["pairing"] == {"key": [], "unique": []}


def test_schema_changes_show_postgresql_types(postgres: Cluster) -> None:
    app = postgres.application("CREATE TABLE t (id bigint PRIMARY KEY, price numeric(8,2))")
    database = admin.database_of(app)
    snap = admin.snapshot(postgres.admin_url, database)
    run(
        app,
        "ALTER TABLE t ADD COLUMN tags text[] NOT NULL DEFAULT '{}';"
        "ALTER TABLE t ALTER COLUMN price TYPE numeric(10,2); CREATE TABLE extra (x int)",
    )

    entry = diff_databases(postgres.admin_url, Side(snap.name), Side(database, False), "app")

    schema = entry["comparisons"]["schema"]["tables"]
    price = {"name": "price", "nullable": True, "primary_key": False}
    assert schema["t"] == {
        "status": "changed",
        "columns_added": [
            {"name": "tags", "type": "text[]", "nullable": False, "primary_key": False}
        ],
        "columns_removed": [],
        "columns_changed": [
            {
                "name": "price",
                "from": {**price, "type": "numeric(8,2)"},
                "to": {**price, "type": "numeric(10,2)"},
            }
        ],
    }
    assert schema["extra"]["status"] == "added"
    admin.drop(postgres.admin_url, snap.name)


def test_the_engine_snapshots_diffs_streams_reads_resets_and_releases(
    postgres: Cluster, tmp_path: Path
) -> None:
    app = postgres.application(
        "CREATE TABLE users (id serial PRIMARY KEY, name text, password text);"
        "INSERT INTO users (name, password) SELECT 'user' || n, 'h0' FROM generate_series(1, 50) n"
    )
    database = admin.database_of(app)
    gone = psycopg.conninfo.make_conninfo(app, dbname="no_such_database")
    engine = PostgresEngine(postgres.admin_url, {"accounts": app, "gone": gone})
    assert engine.find() == ["accounts"]
    assert engine.reset(["accounts"], tmp_path / "store", tmp_path) == []
    before = engine.snapshot(["accounts"], tmp_path, "session start")
    run(app, "UPDATE users SET password = 'h1'")

    after = engine.read_final(["accounts"], "session finish")
    entry = engine.diff(before, after, max_rows=3)["accounts"]

    users = entry["comparisons"]["data"]["tables"]["users"]
    assert (users["counts"]["changed"], len(users["rows_changed"]), users["truncated"]) == (
        50,
        3,
        True,
    )
    assert entry["info"]["path_before"] == entry["info"]["path_after"] == database
    streamed = list(engine.rows(before, after, "accounts", "users", "changed"))
    assert len(streamed) == 50
    spent = TimeBudget(0)
    spent.expired = True  # as after a selector used up its time
    with pytest.raises(SelectorTimeout, match="time budget"):
        list(engine.rows(before, after, "accounts", "users", "changed", spent))
    assert streamed[0]["changes"] == {"password": {"old_value": "h0", "new_value": "h1"}}
    assert engine.read_row(after, "accounts", "users", {"id": 7}, leave_out={"password"}) == {
        "name": "user7"
    }
    assert engine.read_row(before, "accounts", "users", {"id": 7})["password"] == "h0"  # type: ignore[index]
    assert engine.read_row(after, "accounts", "nothing", {"id": 7}) is None

    engine.release(before)
    assert (
        run(
            postgres.admin_url,
            "SELECT 1 FROM pg_database WHERE datname = %s",
            before.states["accounts"],
        )
        == []
    )
    assert engine.reset(["accounts"], tmp_path / "store", tmp_path) == ["accounts"]
    assert run(app, "SELECT DISTINCT password FROM users") == [("h0",)]


def test_a_table_named_like_another_schemas_table_cannot_stand_in_for_it(
    postgres: Cluster,
) -> None:
    app = postgres.application(
        "CREATE SCHEMA billing; CREATE TABLE billing.events (id int PRIMARY KEY, note text);"
        'CREATE TABLE "billing.events" (id int PRIMARY KEY, note text);'
        'CREATE TABLE "users#kkk" (id int PRIMARY KEY);'
        "INSERT INTO billing.events VALUES (1, 'a'); INSERT INTO \"billing.events\" VALUES (1, 'a')"
    )
    database = admin.database_of(app)
    snap = admin.snapshot(postgres.admin_url, database)
    run(app, "UPDATE billing.events SET note = 'b'")

    entry = diff_databases(postgres.admin_url, Side(snap.name), Side(database, False), "app")

    tables = entry["comparisons"]["data"]["tables"]
    assert {name: table["counts"]["changed"] for name, table in tables.items()} == {
        "billing.events": 1,
        '"public"."billing.events"': 0,
        "users#kkk": 0,
    }
    admin.drop(postgres.admin_url, snap.name)


def test_a_value_past_16_mib_is_compared_and_shown_by_its_stub(postgres: Cluster) -> None:
    app = postgres.application(
        "CREATE TABLE files (id int PRIMARY KEY, body bytea);"
        "INSERT INTO files VALUES (1, convert_to(repeat('a', 17 * 1024 * 1024), 'UTF8'))"
    )
    database = admin.database_of(app)
    snap = admin.snapshot(postgres.admin_url, database)
    run(app, "UPDATE files SET body = body || '\\x62'::bytea")

    entry = diff_databases(postgres.admin_url, Side(snap.name), Side(database, False), "app")

    change = entry["comparisons"]["data"]["tables"]["files"]["rows_changed"][0]["changes"]["body"]
    assert (change["old_value"]["$truncated"], change["new_value"]["$truncated"]) == (
        17 * 1024 * 1024,
        17 * 1024 * 1024 + 1,
    )
    assert change["old_value"]["sha256"] != change["new_value"]["sha256"]
    admin.drop(postgres.admin_url, snap.name)


def test_a_database_dropped_during_the_session_has_its_tables_removed(
    postgres: Cluster, tmp_path: Path
) -> None:
    app = postgres.application(
        "CREATE TABLE users (id int PRIMARY KEY, name text); INSERT INTO users VALUES (1, 'a')"
    )
    gone = psycopg.conninfo.make_conninfo(app, dbname="never_there")
    engine = PostgresEngine(postgres.admin_url, {"app": app, "gone": gone})
    before = engine.snapshot(["app", "gone"], tmp_path, "session start")
    run(
        psycopg.conninfo.make_conninfo(app, dbname="postgres"),
        f"DROP DATABASE {admin.database_of(app)}",
    )

    diff = engine.diff(before, engine.read_final(["app", "gone"], "session finish"))

    users = diff["app"]["comparisons"]["data"]["tables"]["users"]
    assert (users["status"], users["rows_removed"]) == ("removed", [{"id": 1, "name": "a"}])
    assert (diff["app"]["info"]["exists_before"], diff["app"]["info"]["exists_after"]) == (
        True,
        False,
    )
    assert diff["gone"]["info"]["unreadable"] == ["before"]
    assert diff["gone"]["error"].startswith('before: template database "never_there" does not')
    engine.release(before)


def test_reset_gives_a_database_dropped_since_back_to_the_application(
    postgres: Cluster, tmp_path: Path
) -> None:
    app = postgres.application("CREATE TABLE t (id int PRIMARY KEY); INSERT INTO t VALUES (1)")
    database, role = admin.database_of(app), psycopg.conninfo.conninfo_to_dict(app)["user"]
    engine = PostgresEngine(postgres.admin_url, {"app": app})
    engine.reset(["app"], tmp_path / "store", tmp_path)
    run(psycopg.conninfo.make_conninfo(app, dbname="postgres"), f"DROP DATABASE {database}")

    assert engine.reset(["app"], tmp_path / "store", tmp_path) == ["app"]

    owner = "SELECT pg_get_userbyid(datdba) FROM pg_database WHERE datname = %s"
    assert run(postgres.admin_url, owner, database) == [(role,)]
    run(app, "INSERT INTO t VALUES (2)")
    assert run(app, "SELECT id FROM t ORDER BY id") == [(1,), (2,)]


def test_a_table_the_application_keeps_locked_makes_the_database_an_error_not_a_hang(
    postgres: Cluster,
) -> None:
    app = postgres.application("CREATE TABLE t (id int PRIMARY KEY); INSERT INTO t VALUES (1)")
    database = admin.database_of(app)
    snap = admin.snapshot(postgres.admin_url, database)
    with psycopg.connect(app) as holder:
        holder.execute("LOCK TABLE t IN ACCESS EXCLUSIVE MODE")

        entry = diff_databases(postgres.admin_url, Side(snap.name), Side(database, False), "app")

    assert entry["info"]["unreadable"] == ["after"]
    assert entry["error"] == "after: canceling statement due to lock timeout"
    assert not entry["comparisons"]["data"]["has_changes"]
    admin.drop(postgres.admin_url, snap.name)


def test_a_value_past_16_mib_with_no_rowid_to_read_it_by_is_an_error_entry(
    postgres: Cluster,
) -> None:
    """Columns named as SQLite's every rowid leave the copy no rowid: the value cannot be
    read in chunks, so the database gets an error entry, as a SQLite file would."""
    app = postgres.application(
        'CREATE TABLE blobs (rowid int, _rowid_ int, "oid" int, body text);'
        "INSERT INTO blobs VALUES (1, 1, 1, 'small')"
    )
    database = admin.database_of(app)
    snap = admin.snapshot(postgres.admin_url, database)
    run(app, "UPDATE blobs SET body = repeat('a', 17 * 1024 * 1024)")

    entry = diff_databases(postgres.admin_url, Side(snap.name), Side(database, False), "app")

    assert entry["error"].startswith("app: a value larger than 16 MiB in a key")
    assert not entry["comparisons"]["data"]["has_changes"]
    admin.drop(postgres.admin_url, snap.name)
