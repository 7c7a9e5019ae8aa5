"""Databases a session creates on the server (issue 31 item 3): listed under
``databases.created``, those still there at finish diffed against nothing, the evaluator's own
never listed."""

from __future__ import annotations

import json
import textwrap
import time
from pathlib import Path

import pytest
from postgres_cluster import Cluster
from psycopg.conninfo import conninfo_to_dict
from psycopg.conninfo import make_conninfo
from runs import AS_EVALUATOR
from runs import only_report
from runs import run_cli
from runs import scored_session
from test_postgres_containment import run

from pytest_scoring.db.postgres import admin
from pytest_scoring.db.postgres.engine import PostgresEngine

pytestmark = pytest.mark.slow

ACCOUNTS = (
    "CREATE TABLE users (id serial PRIMARY KEY, username text UNIQUE, role text);"
    "INSERT INTO users (username, role) VALUES ('alice', 'admin')"
)
#: Makes a database of its own (as Django's test runner does), writes a password there and
#: keeps it, with a statement left running there after the session.
KEEPS = """
    import os
    import threading
    import psycopg
    from psycopg.conninfo import make_conninfo

    URL = os.environ["DATABASE_URL"]

    def test_makes_a_database_and_keeps_it():
        with psycopg.connect(URL, autocommit=True) as connection:
            connection.execute('CREATE DATABASE "{made}"')
        inside = make_conninfo(URL, dbname="{made}")
        with psycopg.connect(inside, autocommit=True) as connection:
            connection.execute(
                "CREATE TABLE accounts (id serial PRIMARY KEY, username text, password text);"
                "INSERT INTO accounts (username, password) VALUES ('root', 'hunter2')"
            )
        left = psycopg.connect(inside, autocommit=True)
        threading.Thread(
            target=left.execute, args=("SELECT pg_sleep(3600)",), daemon=True
        ).start()
"""
#: Makes a database, long enough for a look to see it (the watch looks every 0.2 s), then
#: drops it; makes another and closes it to every connection.
DROPS = """
    import os
    import time
    import psycopg
    from psycopg.conninfo import make_conninfo

    URL = os.environ["DATABASE_URL"]

    def test_makes_a_database_and_drops_it():
        with psycopg.connect(URL, autocommit=True) as connection:
            connection.execute('CREATE DATABASE "{dropped}"')
            time.sleep(3)
            connection.execute('DROP DATABASE "{dropped}"')

    def test_makes_a_database_and_closes_it():
        with psycopg.connect(URL, autocommit=True) as connection:
            connection.execute('CREATE DATABASE "{closed}"')
        inside = make_conninfo(URL, dbname="{closed}")
        with psycopg.connect(inside, autocommit=True) as connection:
            connection.execute("CREATE TABLE t (secret text); INSERT INTO t VALUES ('hidden')")
        with psycopg.connect(URL, autocommit=True) as connection:
            connection.execute('ALTER DATABASE "{closed}" ALLOW_CONNECTIONS false')
"""


def creating_application(postgres: Cluster) -> tuple[str, str, str]:
    """An application whose role may create databases: its URL, role and database."""
    url = postgres.application(ACCOUNTS)
    params = conninfo_to_dict(url)
    role, database = str(params["user"]), str(params["dbname"])
    run(postgres.admin_url, f"ALTER ROLE {role} CREATEDB")
    return url, role, database


def repository(folder: Path, test: str, **names: str) -> Path:
    (folder / "tests").mkdir(parents=True)
    (folder / "tests" / "test_app.py").write_text(textwrap.dedent(test).format(**names))
    return folder


def databases(postgres: Cluster) -> set[str]:
    return {name for (name,) in run(postgres.admin_url, "SELECT datname FROM pg_database")}


def test_a_database_the_session_makes_and_keeps_is_listed_and_diffed_against_nothing(
    tmp_path: Path, postgres: Cluster
) -> None:
    app_url, role, database = creating_application(postgres)
    made = f"{database}_made"
    repo = repository(tmp_path / "repo", KEEPS, made=made)
    reference = repository(tmp_path / "reference", "def test_nothing():\n    pass\n")
    selector = {"databases": {"exists_before": False}, "rows": {"added": {"has_one": ["password"]}}}
    config = tmp_path / "scores.yaml"
    config.write_text(
        f"scorers: [{{type: db_change, selector: {json.dumps(selector)}}},"
        f" {{type: db_diff_change, selector: {json.dumps(selector)}}}]\n"
    )
    report = tmp_path / "scores"
    result = run_cli(
        repo,
        f"--reference={reference}",  # its clones are made while the session runs
        f"--config={config}",
        f"--db-url={app_url}",
        f"--db-admin-url={postgres.admin_url}",
        f"--report={report}",
        *AS_EVALUATOR,
    )
    assert result.exit_code == 0, result.output
    scores = only_report(report)["scores"]
    score = scores["db_change"]
    assert score["value"] == "C", score["explanation"]
    assert scores["db_diff_change"]["value"] == "C", "the reference made no such database"
    assert score["metadata"]["databases"] == {
        "created": [{"name": made, "owner": role, "present_at_finish": True}]
    }
    entry = score["metadata"]["diff"]["comparisons"][made]
    assert entry["info"] | {"sequences": None} == {
        "engine": "postgresql",
        "path_before": made,
        "path_after": made,
        "exists_before": False,
        "exists_after": True,
        "sequences": None,
    }
    assert entry["comparisons"]["data"]["tables"]["accounts"]["rows_added"] == [
        {"id": 1, "username": "root", "password": "hunter2"}
    ]
    finish = score["metadata"]["ended"][made]["finish"]
    assert any("pg_sleep" in (ended["query"] or "") for ended in finish), finish
    assert made in databases(postgres)  # the application's: left as it is
    run(postgres.admin_url, f'DROP DATABASE "{made}"')


def test_in_process_a_database_made_and_dropped_is_listed_as_gone_and_a_closed_one_is_read(
    pytester: pytest.Pytester, postgres: Cluster, monkeypatch: pytest.MonkeyPatch
) -> None:
    app_url, role, database = creating_application(postgres)
    dropped, closed = f"{database}_dropped", f"{database}_closed"
    monkeypatch.setenv("DATABASE_URL", app_url)
    pytester.makepyfile(textwrap.dedent(DROPS).format(dropped=dropped, closed=closed))
    pytester.makeconftest(
        """
        import threading

        def pytest_unconfigure(config):  # after scoring: the watch has stopped
            names = sorted(thread.name for thread in threading.enumerate())
            config.rootpath.joinpath("threads.txt").write_text("\\n".join(names))
        """
    )
    pytester.runpytest_subprocess(
        "--score-db-url=${DATABASE_URL}",
        f"--score-db-admin-url={postgres.admin_url}",
        '--score-selector={"rows": {"added": {"has_one": [{"secret": "hidden"}]}}}',
    ).assert_outcomes(passed=2)
    session = scored_session(pytester)
    score = session.scores["db_change"]
    assert score["value"] == "C", score["explanation"]
    assert score["metadata"]["databases"]["created"] == [
        {"name": closed, "owner": role, "present_at_finish": True},
        {"name": dropped, "owner": role, "present_at_finish": False},
    ]
    assert sorted(session.files["diff.json"]["comparisons"]) == [database, closed]
    (allows,) = run(
        postgres.admin_url, f"SELECT datallowconn FROM pg_database WHERE datname = '{closed}'"
    )
    assert allows == (False,)  # read, and closed again
    assert "created databases" not in pytester.path.joinpath("threads.txt").read_text()
    run(postgres.admin_url, f'DROP DATABASE "{closed}"')


def test_a_made_database_is_keyed_apart_from_other_entries_followed_when_renamed_never_ours(
    postgres: Cluster,
) -> None:
    app_url, role, database = creating_application(postgres)
    engine = PostgresEngine(postgres.admin_url, {"accounts": app_url})
    before = engine.snapshot(engine.find(), Path("."), "start")
    watch = engine.watch()
    ours = admin.snapshot(postgres.admin_url, database)  # the evaluator's, made meanwhile
    for name in ("accounts", "data/app.db"):
        run(app_url, f'CREATE DATABASE "{name}"')
        run(make_conninfo(app_url, dbname=name), "CREATE TABLE t (x int); INSERT INTO t VALUES (1)")
    renamed = f"{database}_renamed"
    run(app_url, f'CREATE DATABASE "{database}_first"')
    time.sleep(3)  # a look sees it (every 0.2 s), then it takes another name
    run(app_url, f'ALTER DATABASE "{database}_first" RENAME TO "{renamed}"')
    after = engine.read_final(engine.find(), "finish")
    created = engine.read_created(after, watch, {"data/app.db"})
    try:
        assert created == [
            {"name": "accounts", "owner": role, "present_at_finish": True,
             "key": "accounts (created)"},
            {"name": renamed, "owner": role, "present_at_finish": True},
            {"name": "data/app.db", "owner": role, "present_at_finish": True,
             "key": "data/app.db (created)"},
        ]  # fmt: skip
        entries = engine.diff(before, after)
        assert sorted(entries) == [
            "accounts", "accounts (created)", renamed, "data/app.db (created)"
        ]  # fmt: skip
        made = entries["accounts (created)"]
        assert made["info"]["path_after"] == "accounts"
        assert made["comparisons"]["data"]["tables"]["t"]["rows_added"] == [{"x": 1}]
    finally:
        for name in ("accounts", "data/app.db", renamed, ours.name):
            admin.drop(postgres.admin_url, name)
        engine.release(before)


def test_a_watch_that_cannot_reach_the_server_fails_nothing(postgres: Cluster) -> None:
    app_url = postgres.application(ACCOUNTS)
    engine = PostgresEngine(
        make_conninfo(postgres.admin_url, password="wrong"), {"accounts": app_url}
    )
    watch = engine.watch()
    assert watch.finish() == []
    assert watch.error is not None, "the first look failed"
    assert watch.error.startswith("watching for created databases: ")
    assert "wrong" not in watch.error
