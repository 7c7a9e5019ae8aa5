"""PostgreSQL against a hostile repository (issue 31): each test is a repository whose code,
connected with the application's credentials, tries to hide a change in its database from
the evaluator, or to make the evaluator drop or read the wrong thing. Each asserts what a
user would see: the change is found, or the score says it cannot tell (never "no change").

What no test here can make the diff see is listed in docs/security.md ("What the diff of a
PostgreSQL database does not hold"); the tests marked ``xfail`` show it.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import psycopg
import pytest
from postgres_cluster import Cluster
from postgres_cluster import query
from runs import AS_EVALUATOR
from runs import only_report
from runs import repository
from runs import run_cli

from pytest_scoring.db.diff_types import DiffJSON
from pytest_scoring.db.ending_engine import EndingEngine
from pytest_scoring.db.engine import CreatedJSON
from pytest_scoring.db.postgres import admin
from pytest_scoring.db.session import engine_diff
from pytest_scoring.db.session import final_state
from pytest_scoring.db.session import snapshot_now
from pytest_scoring.selector.language import parse_selector
from pytest_scoring.selector.language import selector_matches

pytestmark = pytest.mark.slow

ACCOUNTS = (
    "CREATE TABLE users (id serial PRIMARY KEY, username text UNIQUE, password text);"
    "INSERT INTO users (username, password) VALUES ('alice', 'h0'), ('bob', 'h0')"
)
#: The change every attack hides: alice's password.
PASSWORD_CHANGE = "UPDATE users SET password = 'pwned' WHERE username = 'alice'"
#: The selector of docs/selectors.md for it.
PASSWORD_SELECTOR = {"rows": {"changed": {"has_one": ["password", "password_hash"]}}}
#: The test of a hostile repository: its statements on the application's URL, in order.
HOSTILE_TEST = """
import os
import psycopg

STATEMENTS = {statements!r}

def test_the_feature():
    with psycopg.connect(os.environ["DATABASE_URL"], autocommit=True) as connection:
        for statement in STATEMENTS:
            connection.execute(statement)
"""


def role_of(url: str) -> str:
    return str(psycopg.conninfo.conninfo_to_dict(url)["user"])


def session_diff(postgres: Cluster, setup: str, statements: list[str]) -> DiffJSON:
    """The diff ``run`` takes of a database (``setup`` made as the application), around
    ``statements`` run by the application's role: snapshot, the statements, then what is
    still connected ended and the finish state read, as under ``run``."""
    app = postgres.application(setup)
    engine = EndingEngine(postgres.admin_url, {"app": app})
    before = snapshot_now(engine, Path("."), "session start")
    try:
        for statement in statements:
            query(app, statement)
        return engine_diff(engine, before, final_state(engine, "session finish", before), [])
    finally:
        engine.release(before)


def tables(diff: DiffJSON) -> dict[str, Any]:
    return dict(diff["comparisons"]["app"]["comparisons"]["data"]["tables"])


def score_run(
    tmp_path: Path, app_url: str, admin_url: str, statements: list[str], *extra: str
) -> dict[str, Any]:
    """``run`` on a repository whose one test runs ``statements``; the report's scores."""
    repo = repository(tmp_path / "repo", HOSTILE_TEST.format(statements=statements))
    report = tmp_path / "scores"
    result = run_cli(
        repo,
        f"--db-url={app_url}",
        f"--db-admin-url={admin_url}",
        f"--selector={json.dumps(PASSWORD_SELECTOR)}",
        f"--report={report}",
        *AS_EVALUATOR,
        *extra,
    )
    assert result.exit_code == 0, result.output
    scores: dict[str, Any] = only_report(report)["scores"]
    return scores


def alter_database(setting: str) -> str:
    """``ALTER DATABASE <the current one> SET setting``, as its owner may."""
    return (
        "DO $$ BEGIN EXECUTE format('ALTER DATABASE %I SET "
        + setting.replace("'", "''")
        + "', current_database()); END $$"
    )


# (b) Settings of the database and of the role, made to change how the evaluator reads.


def test_the_databases_own_settings_do_not_change_whom_the_evaluator_reads_as(
    tmp_path: Path, postgres: Cluster
) -> None:
    """``ALTER DATABASE app SET role = app`` would make the evaluator's own sessions read as
    the application, so that a forced row level security policy hides alice's new password
    from the evaluator alone (her row read as removed, no password changed); the other
    settings would fail or bend the read."""
    app_url = postgres.application(ACCOUNTS)
    role = role_of(app_url)
    statements = [
        PASSWORD_CHANGE,
        "ALTER TABLE users ENABLE ROW LEVEL SECURITY",
        "ALTER TABLE users FORCE ROW LEVEL SECURITY",
        "CREATE POLICY hide ON users USING (session_user = current_user OR username <> 'alice')",
        "CREATE SCHEMA decoy",
        "CREATE TABLE decoy.users (id int PRIMARY KEY, username text, password text)",
        "ALTER ROLE CURRENT_USER SET search_path = decoy",
        "ALTER ROLE CURRENT_USER SET default_transaction_read_only = on",
        alter_database(f"role = '{role}'"),
        "INSERT INTO users (username, password) VALUES ('zoë', '€')",
        alter_database("client_encoding = 'SQL_ASCII'"),
        alter_database("quote_all_identifiers = on"),
        alter_database("search_path = decoy"),
        alter_database("default_transaction_isolation = 'read uncommitted'"),
        alter_database("default_transaction_read_only = on"),
        alter_database("idle_in_transaction_session_timeout = 1"),
        alter_database("idle_session_timeout = 1"),
        alter_database("lock_timeout = 1"),
        alter_database("statement_timeout = 1"),
    ]

    score = score_run(tmp_path, app_url, postgres.admin_url, statements)["db_change"]

    assert score["value"] == "C", score["explanation"]
    assert "users, row id=1" in score["explanation"]
    assert score["metadata"]["errors"] == {}
    (entry,) = score["metadata"]["diff"]["comparisons"].values()
    assert entry["comparisons"]["schema"]["tables"]["users"]["status"] == "unchanged"


# (a) Names like the evaluator's own.


def test_databases_and_schemas_named_like_ours_are_neither_dropped_nor_read(
    tmp_path: Path, postgres: Cluster
) -> None:
    """A role allowed to create databases makes ``pytest_scoring_clone_…`` and
    ``pytest_scoring_snap_…`` ones (and a schema so named in its own database) during the
    session: the sweep of leftover clones that ``db_diff_change`` runs leaves them (the
    application owns them), the diff reads the application's database, and the change is
    found by both scorers."""
    app_url = postgres.application(ACCOUNTS)
    query(postgres.admin_url, f"ALTER ROLE {role_of(app_url)} CREATEDB")
    decoys = [admin.new_name("clone"), admin.new_name("snap")]
    statements = [
        *(f"CREATE DATABASE {name}" for name in decoys),
        f"CREATE SCHEMA {decoys[1]}",
        f"CREATE TABLE {decoys[1]}.users (id int PRIMARY KEY, password text)",
        PASSWORD_CHANGE,
    ]
    reference = repository(tmp_path / "reference", "def test_the_feature():\n    pass\n")
    config = tmp_path / "scorers.yaml"
    config.write_text(json.dumps({"scorers": [{"type": "db_change"}, {"type": "db_diff_change"}]}))

    listed = "SELECT datname, pg_get_userbyid(datdba) FROM pg_database WHERE datname = ANY(%s)"
    try:
        scores = score_run(
            tmp_path,
            app_url,
            postgres.admin_url,
            statements,
            f"--reference={reference}",
            f"--config={config}",
        )
        owners = dict(query(postgres.admin_url, listed, decoys))
    finally:  # the other tests count the clones on the server
        for name in decoys:
            query(postgres.admin_url, f"DROP DATABASE IF EXISTS {name}")

    assert scores["db_change"]["value"] == "C", scores["db_change"]["explanation"]
    assert scores["db_diff_change"]["value"] == "C", scores["db_diff_change"]["explanation"]
    assert owners == dict.fromkeys(decoys, role_of(app_url))


def test_a_lock_held_on_the_admins_database_does_not_stop_the_reference_rerun(
    tmp_path: Path, postgres: Cluster
) -> None:
    """The session leaves a backend on the admin URL's database (any role may connect to
    ``postgres``) holding the advisory lock clones used to be made under, for an hour: the
    reference's clone, and so ``db_diff_change``, would fail (``N``, blamed on the
    evaluator) in this evaluation and every later one on the server. Clones take no lock."""
    app_url = postgres.application(ACCOUNTS)
    elsewhere = psycopg.conninfo.make_conninfo(app_url, dbname="postgres")
    hold = (
        f"DO $$ BEGIN PERFORM pg_advisory_lock({0x7079_7363_6C6E}); PERFORM pg_sleep(3600); END $$"
    )
    test = f"""
        import os
        import psycopg

        def test_the_feature():
            with psycopg.connect(os.environ["DATABASE_URL"], autocommit=True) as connection:
                connection.execute({PASSWORD_CHANGE!r})
            held = psycopg.connect({elsewhere!r}, autocommit=True)
            held.pgconn.send_query({hold.encode()!r})
            held.pgconn.flush()
            with psycopg.connect({elsewhere!r}, autocommit=True) as watcher:
                while not watcher.execute(
                    "SELECT 1 FROM pg_locks WHERE locktype = 'advisory' AND granted"
                ).fetchall():
                    pass
        """
    reference = repository(tmp_path / "reference", "def test_the_feature():\n    pass\n")
    report = tmp_path / "scores"
    result = run_cli(
        repository(tmp_path / "repo", test),
        f"--db-url={app_url}",
        f"--db-admin-url={postgres.admin_url}",
        f"--selector={json.dumps(PASSWORD_SELECTOR)}",
        f"--reference={reference}",
        f"--report={report}",
        *AS_EVALUATOR,
    )
    assert result.exit_code == 0, result.output
    score = only_report(report)["scores"]["db_diff_change"]
    assert score["value"] == "C", score["explanation"]
    query(postgres.admin_url, "SELECT pg_terminate_backend(pid) FROM pg_locks "
          "WHERE locktype = 'advisory' AND pid <> pg_backend_pid()")  # fmt: skip


# (e), (g) What is left at the finish: a prepared transaction, a lock, a running statement.


def test_a_prepared_transaction_holding_a_lock_at_the_finish_is_rolled_back_and_recorded(
    tmp_path: Path, postgres: Cluster
) -> None:
    """The session changes alice's password, then leaves a prepared transaction that holds
    the table locked (the finish read would fail, giving no score) and carries a change
    meant to land later; the evaluator rolls it back before reading, and says so."""
    app_url = postgres.application(ACCOUNTS)
    statements = [
        PASSWORD_CHANGE,
        "BEGIN",
        "UPDATE users SET password = 'later' WHERE username = 'bob'",
        "LOCK TABLE users IN ACCESS EXCLUSIVE MODE",
        "PREPARE TRANSACTION 'held_for_later'",
    ]

    score = score_run(tmp_path, app_url, postgres.admin_url, statements)["db_change"]

    assert score["value"] == "C", score["explanation"]
    (ended,) = score["metadata"]["ended"].values()
    assert {"kind": "prepared", "query": "held_for_later"}.items() <= ended["finish"][-1].items()
    assert query(app_url, "SELECT password FROM users ORDER BY id") == [("pwned",), ("h0",)]


def test_the_application_cannot_start_work_that_outlives_its_connections(
    postgres: Cluster,
) -> None:
    """No background worker of its own (``dblink``, ``pg_background``), no base type with
    output functions of its choosing and no event trigger: what the application leaves
    behind is a backend, which the evaluator ends, and what the evaluator reads or copies
    runs none of its code."""
    app_url = postgres.application(ACCOUNTS)
    for statement in (
        "CREATE EXTENSION dblink",
        "CREATE TYPE hostile (INPUT = textin, OUTPUT = textout)",
        "CREATE EXTENSION adminpack",
        "CREATE FUNCTION on_ddl() RETURNS event_trigger LANGUAGE plpgsql AS $$BEGIN END$$;"
        "CREATE EVENT TRIGGER on_ddl ON ddl_command_start EXECUTE FUNCTION on_ddl()",
    ):
        with pytest.raises(psycopg.errors.InsufficientPrivilege):
            query(app_url, statement)


# (f) A finish state that cannot be read.


@pytest.mark.parametrize(
    ("statements", "why"),
    [
        pytest.param(
            [
                "CREATE TABLE blob (rowid int, _rowid_ int, oid int, body text)",
                "INSERT INTO blob VALUES (1, 1, 1, repeat('x', 17 * 1024 * 1024))",
            ],
            "larger than 16 MiB",
            id="a value with nothing to read it by",
        ),
        pytest.param(
            ['ALTER TABLE users ADD COLUMN "Password" text'],
            "duplicate column name: Password",
            id="two columns named alike but for case",
        ),
    ],
)
def test_a_finish_state_that_cannot_be_diffed_gives_no_score_never_no_change(
    tmp_path: Path, postgres: Cluster, statements: list[str], why: str
) -> None:
    """The database gets an ``error`` entry, and the score is ``N`` blamed on the
    repository, not ``I``: a value over 16 MiB in a table whose columns take every name of
    SQLite's rowid leaves the diff nothing to compare it by, and the SQLite copy of a table
    cannot hold two columns whose names differ only in case (docs/databases.md)."""
    app_url = postgres.application(ACCOUNTS)

    scores = score_run(tmp_path, app_url, postgres.admin_url, [PASSWORD_CHANGE, *statements])
    score = scores["db_change"]

    assert score["value"] == "N", score["explanation"]
    assert score["metadata"]["unscored"] == "repository"
    assert why in score["explanation"]


# (c), (d) Tables that read differently, or names that collide once copied.


@pytest.mark.parametrize(
    ("setup", "statements"),
    [
        pytest.param("", ['CREATE TABLE "Users" (id int)', PASSWORD_CHANGE], id="case of a name"),
        pytest.param(
            "CREATE SCHEMA x; CREATE TABLE x.t (a int)",
            ['CREATE SCHEMA "X"', 'CREATE TABLE "X".t (a int)', PASSWORD_CHANGE],
            id="case of a schema",
        ),
        pytest.param(
            "", ["CREATE TABLE sqlite_master (id int)", PASSWORD_CHANGE], id="sqlite's name"
        ),
        pytest.param(
            "", ['CREATE TABLE "public.users" (id int)', PASSWORD_CHANGE], id="a dotted name"
        ),
        pytest.param(
            "",
            [
                PASSWORD_CHANGE,
                "ALTER TABLE users ENABLE ROW LEVEL SECURITY",
                "ALTER TABLE users FORCE ROW LEVEL SECURITY",
                "CREATE POLICY hide ON users USING (username <> 'alice')",
            ],
            id="row level security",
        ),
        pytest.param(
            "CREATE UNLOGGED TABLE log (id int PRIMARY KEY, v text)",
            ["ALTER TABLE users SET UNLOGGED", PASSWORD_CHANGE],
            id="unlogged",
        ),
    ],
)
def test_a_password_change_is_seen_whatever_else_the_session_makes(
    postgres: Cluster, setup: str, statements: list[str]
) -> None:
    """Before the fix, a table whose name SQLite folds onto another's (``Users`` beside
    ``users``) or keeps for itself (``sqlite_master``) made the copy, and so the whole
    database's diff, fail; row level security hides nothing from the evaluator's role."""
    diff = session_diff(postgres, ACCOUNTS + (f";{setup}" if setup else ""), statements)

    assert "error" not in diff["comparisons"]["app"], diff["comparisons"]["app"]["error"]
    assert selector_matches(parse_selector(PASSWORD_SELECTOR), diff)
    changed = tables(diff)["users"]["rows_changed"]
    assert changed == [
        {"key": {"id": 1}, "changes": {"password": {"old_value": "h0", "new_value": "pwned"}}}
    ]


def test_an_inheriting_tables_rows_are_its_own_not_its_parents(postgres: Cluster) -> None:
    """``SELECT … FROM users`` also reads the rows of a table that ``INHERITS (users)``: the
    parent read so would show a row the session put in the child as added to ``users``
    (and pair the parent's rows against a copy of the child's). Each table is read alone."""
    diff = session_diff(
        postgres,
        ACCOUNTS + "; CREATE TABLE admins () INHERITS (users)",
        ["INSERT INTO admins VALUES (1, 'alice', 'pwned')"],
    )

    found = tables(diff)
    assert found["users"]["status"] == "unchanged"
    assert found["admins"]["rows_added"] == [{"id": 1, "username": "alice", "password": "pwned"}]


def test_a_table_turned_into_a_view_or_a_row_moved_between_partitions_is_seen(
    postgres: Cluster,
) -> None:
    setup = (
        ACCOUNTS + "; CREATE TABLE roles (username text, role text);"
        "CREATE TABLE grants (id int, role text, PRIMARY KEY (id, role)) PARTITION BY LIST (role);"
        "CREATE TABLE grants_user PARTITION OF grants FOR VALUES IN ('user');"
        "CREATE TABLE grants_admin PARTITION OF grants FOR VALUES IN ('admin');"
        "INSERT INTO grants VALUES (2, 'user')"
    )
    diff = session_diff(
        postgres,
        setup,
        [
            'CREATE RULE "_RETURN" AS ON SELECT TO roles DO INSTEAD '
            "SELECT username, 'admin'::text AS role FROM users",
            "UPDATE grants SET role = 'admin' WHERE id = 2",
        ],
    )

    found = tables(diff)
    assert found["roles"]["status"] == "removed"
    assert found["grants_user"]["rows_removed"] == [{"id": 2, "role": "user"}]
    assert found["grants_admin"]["rows_added"] == [{"id": 2, "role": "admin"}]
    assert "grants" not in found


def test_a_change_to_a_sequence_alone_is_shown_but_is_not_a_row_change(
    postgres: Cluster,
) -> None:
    """A sequence advances with every insert, also one rolled back: ``info.sequences`` shows
    it, and the diff's ``has_changes`` (``db_change`` without a selector) leaves it out."""
    diff = session_diff(
        postgres, ACCOUNTS + "; CREATE SEQUENCE tokens", ["SELECT setval('tokens', 42)"]
    )

    entry = diff["comparisons"]["app"]
    assert entry["info"]["sequences"]["tokens"] == 42
    assert not entry["comparisons"]["data"]["has_changes"]


# What the diff does not hold (docs/security.md): each xfail is a change it cannot see.


@pytest.mark.xfail(
    strict=True,
    reason="large objects (pg_largeobject) are not diffed: a table's oid stays while the "
    "object's bytes change (docs/security.md)",
)
def test_a_change_inside_a_large_object_is_seen(postgres: Cluster) -> None:
    diff = session_diff(
        postgres,
        "CREATE TABLE keys (id int PRIMARY KEY, body oid);"
        "INSERT INTO keys VALUES (1, lo_from_bytea(0, 'old key'))",
        ["SELECT lo_put(body, 0, 'new key') FROM keys"],
    )

    assert diff["comparisons"]["app"]["comparisons"]["data"]["has_changes"]


@pytest.mark.xfail(
    strict=True,
    reason="functions, triggers, policies, rules and privileges are not diffed: a trigger "
    "that rewrites the next password set, or a GRANT to PUBLIC, changes no row "
    "(docs/security.md)",
)
def test_a_trigger_or_a_grant_left_for_later_is_seen(postgres: Cluster) -> None:
    diff = session_diff(
        postgres,
        ACCOUNTS,
        [
            "CREATE FUNCTION backdoor() RETURNS trigger LANGUAGE plpgsql AS "
            "$$BEGIN NEW.password := 'backdoor'; RETURN NEW; END$$",
            "CREATE TRIGGER backdoor BEFORE UPDATE ON users FOR EACH ROW "
            "EXECUTE FUNCTION backdoor()",
            "GRANT ALL ON users TO PUBLIC",
        ],
    )

    entry = diff["comparisons"]["app"]["comparisons"]
    assert entry["data"]["has_changes"] or entry["schema"]["has_changes"]


@pytest.mark.xfail(
    strict=True,
    reason="roles are not diffed: a plain role changes its own password (docs/security.md)",
)
def test_a_role_password_changed_by_the_session_is_seen(postgres: Cluster) -> None:
    app_url = postgres.application(ACCOUNTS)
    engine = EndingEngine(postgres.admin_url, {"app": app_url})
    before = snapshot_now(engine, Path("."), "session start")
    try:
        query(app_url, "ALTER ROLE CURRENT_USER PASSWORD 'changed by the session'")
        diff = engine_diff(engine, before, final_state(engine, "session finish", before), [])
    finally:
        engine.release(before)

    assert diff["comparisons"]["app"]["comparisons"]["data"]["has_changes"]


def _renamed_session(
    postgres: Cluster, steps: Callable[[str, str, str], None]
) -> tuple[str, dict[str, Any], list[CreatedJSON]]:
    """A session whose application role (with CREATEDB) runs ``steps(database, app_url,
    another database's URL)``, watched from the start snapshot: its database's name, the diff
    and the databases the watch saw created."""
    app_url = postgres.application(ACCOUNTS)
    query(postgres.admin_url, f"ALTER ROLE {role_of(app_url)} CREATEDB")
    database = admin.database_of(app_url)
    engine = EndingEngine(postgres.admin_url, {"app": app_url})
    before = snapshot_now(engine, Path("."), "session start")
    watch = engine.watch()
    try:
        steps(database, app_url, psycopg.conninfo.make_conninfo(app_url, dbname="postgres"))
        after = final_state(engine, "session finish", before)
        created = engine.read_created(after, watch, [])
        diff = engine_diff(engine, before, after, [])
    finally:
        watch.stop()
        engine.release(before)
        query(postgres.admin_url, f"DROP DATABASE IF EXISTS {database}_changed")
    return database, diff, created


def test_a_named_database_swapped_for_a_copy_of_its_start_is_seen(postgres: Cluster) -> None:
    def swap(database: str, app_url: str, elsewhere: str) -> None:
        query(elsewhere, f"CREATE DATABASE {database}_start TEMPLATE {database}")
        query(app_url, PASSWORD_CHANGE)
        query(elsewhere, f"ALTER DATABASE {database} RENAME TO {database}_changed")
        query(elsewhere, f"ALTER DATABASE {database}_start RENAME TO {database}")

    database, diff, created = _renamed_session(postgres, swap)

    assert selector_matches(parse_selector(PASSWORD_SELECTOR), diff)
    assert diff["comparisons"]["app"]["info"]["path_after"] == f"{database}_changed"
    # The copy renamed in is a database the session made, diffed against nothing.
    assert [(entry["name"], entry["present_at_finish"]) for entry in created] == [(database, True)]
    assert diff["comparisons"][database]["info"]["exists_before"] is False


def test_a_named_database_dropped_for_a_changed_copy_is_seen(postgres: Cluster) -> None:
    def replace(database: str, app_url: str, elsewhere: str) -> None:
        query(elsewhere, f"CREATE DATABASE {database}_copy TEMPLATE {database}")
        query(psycopg.conninfo.make_conninfo(app_url, dbname=f"{database}_copy"), PASSWORD_CHANGE)
        query(elsewhere, f"DROP DATABASE {database}")
        query(elsewhere, f"ALTER DATABASE {database}_copy RENAME TO {database}")

    database, diff, created = _renamed_session(postgres, replace)

    assert selector_matches(parse_selector(PASSWORD_SELECTOR), diff)
    assert diff["comparisons"]["app"]["info"]["path_after"] == database
    # The copy now stands for the named database: read under its key, not a second time.
    assert [entry.get("key") for entry in created] == ["app"]
    assert set(diff["comparisons"]) == {"app"}


@pytest.mark.xfail(
    strict=True,
    reason="only the backends on the named database are ended: one the session leaves on "
    "another database keeps running, and its connection slot (docs/security.md)",
)
def test_a_backend_left_on_another_database_is_ended_at_the_finish(postgres: Cluster) -> None:
    app_url = postgres.application(ACCOUNTS)
    elsewhere = psycopg.connect(
        psycopg.conninfo.make_conninfo(app_url, dbname="postgres"), autocommit=True
    )
    elsewhere.pgconn.send_query(b"DO $$ BEGIN PERFORM pg_sleep(3600); END $$")
    elsewhere.pgconn.flush()
    mine = "SELECT pid FROM pg_stat_activity WHERE usename = %s AND query LIKE 'DO %%'"
    while not query(postgres.admin_url, mine, role_of(app_url)):
        pass
    engine = EndingEngine(postgres.admin_url, {"app": app_url})
    before = snapshot_now(engine, Path("."), "session start")
    try:
        final_state(engine, "session finish", before)
        left = query(postgres.admin_url, mine, role_of(app_url))
    finally:
        engine.release(before)
        query(postgres.admin_url, f"SELECT pg_terminate_backend(pid) FROM ({mine}) AS mine",
              role_of(app_url))  # fmt: skip
        elsewhere.pgconn.finish()

    assert left == []
