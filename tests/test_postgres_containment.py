"""PostgreSQL: what the evaluator's admin role does that the application's role cannot undo
(issue 31 item 3), against the session's throwaway cluster."""

from __future__ import annotations

import secrets
import threading
from typing import Any

import psycopg
import pytest
from postgres_cluster import ADMIN
from postgres_cluster import Cluster
from postgres_cluster import query as run

from pytest_scoring.db.postgres import admin
from pytest_scoring.db.postgres import claims
from pytest_scoring.db.postgres.diff import Side
from pytest_scoring.db.postgres.diff import diff_databases
from pytest_scoring.db.postgres.engine import PostgresEngine

pytestmark = pytest.mark.slow

ACCOUNTS = (
    "CREATE TABLE accounts (id serial PRIMARY KEY, username text UNIQUE, password text);"
    "INSERT INTO accounts (username, password) VALUES ('alice', 'h0'), ('bob', 'h0')"
)


def passwords(postgres: Cluster, database: str) -> list[tuple[Any, ...]]:
    with admin.opened(postgres.admin_url, database) as connection:
        return connection.execute(
            "SELECT username, password FROM public.accounts ORDER BY id"
        ).fetchall()


def role_of(app_url: str) -> str:
    return str(psycopg.conninfo.conninfo_to_dict(app_url)["user"])


def test_an_ordinary_application_role_is_accepted(postgres: Cluster) -> None:
    app = postgres.application(ACCOUNTS)
    assert admin.refusals(postgres.admin_url, app) == []


@pytest.mark.parametrize(
    ("grant", "reason"),
    [
        ("ALTER ROLE {role} SUPERUSER", "is a superuser"),
        ("ALTER ROLE {role} CREATEROLE", "has CREATEROLE"),
        ("ALTER ROLE {role} BYPASSRLS", "has BYPASSRLS"),
        ("GRANT pg_read_all_data TO {role}", "is a member of 'pg_read_all_data'"),
        ("GRANT pg_write_all_data TO {role}", "is a member of 'pg_write_all_data'"),
        ("GRANT pg_signal_backend TO {role}", "is a member of 'pg_signal_backend'"),
        (f"GRANT {ADMIN} TO {{role}}", f"is a member of '{ADMIN}'"),
    ],
)
def test_a_role_that_reaches_beyond_its_own_data_is_refused(
    postgres: Cluster, grant: str, reason: str
) -> None:
    app = postgres.application()
    run(postgres.admin_url, grant.format(role=role_of(app)))
    assert admin.refusals(postgres.admin_url, app) == [f"role {role_of(app)!r} {reason}"]


def test_the_application_cannot_log_in_as_the_admin_without_its_password(
    postgres: Cluster,
) -> None:
    app = postgres.application()
    as_admin = psycopg.conninfo.make_conninfo(app, user=ADMIN, password="")
    with pytest.raises(psycopg.OperationalError, match="password"):
        psycopg.connect(as_admin)


def test_an_admin_role_reachable_without_its_password_is_refused(postgres: Cluster) -> None:
    """A ``trust`` line for the admin role: anyone on the machine logs in as it."""
    run(postgres.admin_url, "CREATE ROLE trusted_admin SUPERUSER LOGIN PASSWORD 'secret'")
    hba = postgres.data / "pg_hba.conf"
    original = hba.read_text()
    hba.write_text("local all trusted_admin trust\n" + original)
    run(postgres.admin_url, "SELECT pg_reload_conf()")
    try:
        trusted = postgres.url("trusted_admin", "secret", "postgres")
        reasons = admin.refusals(trusted, postgres.application())
    finally:
        hba.write_text(original)
        run(postgres.admin_url, "SELECT pg_reload_conf()")
    assert reasons == [
        "pg_hba.conf line 1 lets local logins as 'trusted_admin' in without a password",
        "the admin role 'trusted_admin' logs in without a password where the application connects",
    ]


def test_the_application_cannot_read_change_or_drop_a_snapshot(postgres: Cluster) -> None:
    app = postgres.application(ACCOUNTS)
    snap = admin.snapshot(postgres.admin_url, admin.database_of(app))
    into_snapshot = psycopg.conninfo.make_conninfo(app, dbname=snap.name)
    with pytest.raises(psycopg.OperationalError, match="not currently accepting connections"):
        psycopg.connect(into_snapshot)
    attacks = [
        f"DROP DATABASE {snap.name}",
        f"ALTER DATABASE {snap.name} ALLOW_CONNECTIONS true",
        f"ALTER DATABASE {snap.name} RENAME TO stolen",
        f"GRANT CONNECT ON DATABASE {snap.name} TO PUBLIC",
        f"ALTER DATABASE {snap.name} OWNER TO {role_of(app)}",
    ]
    for attack in attacks:
        with pytest.raises(psycopg.errors.InsufficientPrivilege):
            run(app, attack)
    # Even with connections allowed again, the application's role has no CONNECT there.
    run(postgres.admin_url, f"ALTER DATABASE {snap.name} ALLOW_CONNECTIONS true")
    with pytest.raises(psycopg.OperationalError, match="permission denied"):
        psycopg.connect(into_snapshot)
    run(postgres.admin_url, f"ALTER DATABASE {snap.name} ALLOW_CONNECTIONS false")
    run(app, "UPDATE accounts SET password = 'stolen'")
    assert passwords(postgres, snap.name) == [("alice", "h0"), ("bob", "h0")]
    admin.drop(postgres.admin_url, snap.name)


def _wait_for_active(postgres: Cluster, database: str) -> None:
    """Until the abandoned ``DO`` block is running on the server (no deadline: it will)."""
    while not run(
        postgres.admin_url,
        "SELECT 1 FROM pg_stat_activity WHERE datname = %s AND state = 'active' "
        "AND query LIKE 'DO%%'",
        database,
    ):
        threading.Event().wait(0.05)


def test_a_pool_a_running_update_and_a_prepared_transaction_are_ended_and_recorded(
    postgres: Cluster,
) -> None:
    app = postgres.application(ACCOUNTS)
    database = admin.database_of(app)
    pool = psycopg.connect(app, autocommit=True)
    pool.execute("SELECT 1")  # a pool's idle connection, open at snapshot time
    sleeper = psycopg.connect(app, autocommit=True)
    sleeper.pgconn.send_query(
        b"DO $$ BEGIN PERFORM pg_sleep(600); "
        b"UPDATE accounts SET password = 'late' WHERE username = 'alice'; END $$"
    )
    sleeper.pgconn.finish()  # its client is gone; the block keeps running on the server
    with psycopg.connect(app) as preparer:
        preparer.execute("UPDATE accounts SET password = 'prepared' WHERE username = 'bob'")
        preparer.execute("PREPARE TRANSACTION 'left_over'")
    _wait_for_active(postgres, database)

    snap = admin.snapshot(postgres.admin_url, database)

    # A set: a connection closed just before (the setup's, the preparer's) may still have an
    # idle backend on its way out, which is ended and recorded too.
    kinds = {(record["kind"], record["state"]) for record in snap.terminated}
    assert kinds == {("backend", "active"), ("backend", "idle"), ("prepared", None)}
    assert any((record["query"] or "").startswith("DO $$") for record in snap.terminated)
    assert {record["query"] for record in snap.terminated if record["kind"] == "prepared"} == {
        "left_over"
    }
    assert passwords(postgres, snap.name) == [("alice", "h0"), ("bob", "h0")]
    assert run(app, "SELECT count(*) FROM pg_prepared_xacts") == [(0,)]
    assert _is_dead(pool)
    admin.drop(postgres.admin_url, snap.name)


def _is_dead(connection: psycopg.Connection[Any]) -> bool:
    try:
        connection.execute("SELECT 1")
    except psycopg.OperationalError:
        return True
    return False


def test_a_clone_has_a_role_of_its_own_and_the_application_keeps_its_database(
    postgres: Cluster,
) -> None:
    app = postgres.application(ACCOUNTS)
    database, role = admin.database_of(app), role_of(app)
    snap = admin.snapshot(postgres.admin_url, database)
    copy = admin.clone(postgres.admin_url, app, snap)

    run(copy.url, "UPDATE accounts SET password = 'clone' WHERE username = 'alice'")
    run(copy.url, "CREATE TABLE made_by_the_run (x int)")
    assert run(app, "SELECT password FROM accounts WHERE username = 'alice'") == [("h0",)]
    owners = run(
        postgres.admin_url,
        "SELECT datname, pg_get_userbyid(datdba) FROM pg_database WHERE datname IN (%s, %s) "
        "ORDER BY datname",
        database,
        copy.name,
    )
    assert sorted(owners) == sorted([(database, role), (copy.name, copy.role)])
    with pytest.raises(psycopg.OperationalError, match="permission denied"):
        psycopg.connect(psycopg.conninfo.make_conninfo(app, dbname=copy.name))
    with pytest.raises(psycopg.OperationalError, match="not currently accepting"):
        psycopg.connect(psycopg.conninfo.make_conninfo(copy.url, dbname=snap.name))

    admin.drop(postgres.admin_url, copy.name, copy.role)
    admin.drop(postgres.admin_url, snap.name)
    left = run(
        postgres.admin_url,
        "SELECT 1 FROM pg_database WHERE datname = %s UNION ALL "
        "SELECT 1 FROM pg_roles WHERE rolname = %s",
        copy.name,
        copy.role,
    )
    assert left == []


def test_reset_puts_the_data_back_and_keeps_owner_and_privileges(postgres: Cluster) -> None:
    app = postgres.application(ACCOUNTS)
    database = admin.database_of(app)
    run(postgres.admin_url, f"REVOKE CONNECT ON DATABASE {database} FROM PUBLIC")
    run(postgres.admin_url, f"GRANT CONNECT ON DATABASE {database} TO {role_of(app)}")
    acl = run(
        postgres.admin_url, "SELECT datacl::text FROM pg_database WHERE datname = %s", database
    )
    snap = admin.snapshot(postgres.admin_url, database)
    run(app, "DELETE FROM accounts; DROP TABLE accounts")
    lingering = psycopg.connect(app, autocommit=True)

    admin.reset(postgres.admin_url, database, snap)

    assert run(app, "SELECT username, password FROM accounts ORDER BY id") == [
        ("alice", "h0"),
        ("bob", "h0"),
    ]
    assert _is_dead(lingering)
    after = run(
        postgres.admin_url, "SELECT datacl::text FROM pg_database WHERE datname = %s", database
    )
    assert after == acl
    admin.drop(postgres.admin_url, snap.name)


def test_a_sweep_drops_only_unclaimed_databases_of_ours_that_name_its_prefix(
    postgres: Cluster,
) -> None:
    """Under its prefix, a snapshot nobody claims is dropped; one a live session claims, and
    one the application made, are kept; so is every database of another prefix."""
    app = postgres.application(ACCOUNTS)
    database = admin.database_of(app)
    kind = f"sweeptest{secrets.token_hex(3)}"
    prefix = f"{admin.PREFIX}{kind}_"
    snap = admin.snapshot(postgres.admin_url, database)
    run(postgres.admin_url, f"ALTER DATABASE {snap.name} RENAME TO {prefix}snap")
    run(postgres.admin_url, f"ALTER ROLE {role_of(app)} CREATEDB")
    run(app, f"CREATE DATABASE {prefix}made_by_the_application")
    kept = admin.snapshot(postgres.admin_url, database)
    live, session = claims.claimed(
        postgres.admin_url,
        kind,
        lambda name: admin.snapshot(postgres.admin_url, database, name=name),
    )

    assert claims.sweep(postgres.admin_url, prefix) == [f"{prefix}snap"]
    assert passwords(postgres, kept.name) == [("alice", "h0"), ("bob", "h0")]
    assert passwords(postgres, live.name) == [("alice", "h0"), ("bob", "h0")]
    made = "SELECT datname FROM pg_database WHERE datname LIKE %s"
    assert run(postgres.admin_url, made, f"{prefix}made%") == [
        (f"{prefix}made_by_the_application",)
    ]
    with pytest.raises(ValueError, match="a sweep drops only names starting with"):
        claims.sweep(postgres.admin_url, "app_")
    session.close()
    for name in (live.name, kept.name):
        admin.drop(postgres.admin_url, name)


def test_a_snapshot_diffs_against_the_state_read_in_place(postgres: Cluster) -> None:
    app = postgres.application(ACCOUNTS)
    database = admin.database_of(app)
    snap = admin.snapshot(postgres.admin_url, database)
    run(app, "UPDATE accounts SET password = 'h1' WHERE username = 'bob'")

    entry = diff_databases(postgres.admin_url, Side(snap.name), Side(database, closed=False), "app")

    changed = entry["comparisons"]["data"]["tables"]["accounts"]["rows_changed"]
    assert changed == [
        {"key": {"id": 2}, "changes": {"password": {"old_value": "h0", "new_value": "h1"}}}
    ]
    admin.drop(postgres.admin_url, snap.name)


def test_reading_the_database_runs_none_of_the_applications_functions(postgres: Cluster) -> None:
    """The admin role is a superuser: a cast from a type the application owns, or a function
    shadowing a system one, would run as it while the evaluator reads."""
    trap = "BEGIN INSERT INTO public.ran VALUES (current_user); RETURN {}; END"
    app = postgres.application(
        "CREATE TABLE ran (who text); CREATE TYPE mood AS ENUM ('sad', 'happy');"
        f"CREATE FUNCTION to_text(mood) RETURNS text LANGUAGE plpgsql AS $$"
        f"{trap.format(repr('x'))}$$;"
        "CREATE CAST (mood AS text) WITH FUNCTION to_text(mood);"
        f"CREATE FUNCTION to_json(mood) RETURNS json LANGUAGE plpgsql AS $$"
        f"{trap.format(repr('1') + '::json')}$$;"
        "CREATE CAST (mood AS json) WITH FUNCTION to_json(mood);"
        f"CREATE FUNCTION public.array_to_json(anyarray) RETURNS json LANGUAGE plpgsql AS $$"
        f"{trap.format(repr('1') + '::json')}$$;"
        f"CREATE FUNCTION public.format(text, mood) RETURNS text LANGUAGE plpgsql AS $$"
        f"{trap.format(repr('x'))}$$;"
        f"CREATE FUNCTION public.set_config(text, text, boolean) RETURNS text "
        f"LANGUAGE plpgsql AS $${trap.format(repr('x'))}$$;"
        "CREATE TABLE feelings (id mood PRIMARY KEY, many mood[], counts int[]);"
        "INSERT INTO feelings VALUES ('happy', '{sad,happy}', '{1}')"
    )
    database = admin.database_of(app)
    run(postgres.admin_url, f"ALTER DATABASE {database} SET search_path = public, pg_catalog")
    snap = admin.snapshot(postgres.admin_url, database)
    run(app, "UPDATE feelings SET many = '{happy}', counts = '{2}'")
    engine = PostgresEngine(postgres.admin_url, {"app": app})
    final = engine.read_final(["app"], "finish")

    entry = diff_databases(postgres.admin_url, Side(snap.name), Side(database, False), "app")
    row = engine.read_row(final, "app", "feelings", {"id": "happy"})

    assert entry["comparisons"]["data"]["tables"]["feelings"]["rows_changed"] == [
        {
            "key": {"id": "happy"},
            "changes": {
                "many": {"old_value": ["sad", "happy"], "new_value": ["happy"]},
                "counts": {"old_value": [1], "new_value": [2]},
            },
        }
    ]
    assert row == {"many": ["happy"], "counts": [2]}
    assert run(app, "SELECT who FROM ran") == []
    admin.drop(postgres.admin_url, snap.name)
