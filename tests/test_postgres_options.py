"""PostgreSQL databases named by URL (issue 31 item 2): the options, the configuration's
``databases:``, what is refused and what is ignored, and the diff's key."""

from __future__ import annotations

import sqlite3
import textwrap
from pathlib import Path

import psycopg
import pytest
from postgres_cluster import Cluster
from psycopg.conninfo import conninfo_to_dict
from runs import only_report
from runs import scored_session

pytestmark = pytest.mark.slow

ACCOUNTS = (
    "CREATE TABLE users (id serial PRIMARY KEY, username text UNIQUE, role text);"
    "INSERT INTO users (username, role) VALUES ('alice', 'admin'), ('bob', 'user')"
)
#: A test that makes bob an admin, through the URL the session gives it.
PROMOTES_BOB = """
    import os
    import psycopg

    def test_promote():
        with psycopg.connect(os.environ["APP_DATABASE"], autocommit=True) as connection:
            connection.execute("UPDATE users SET role = 'admin' WHERE username = 'bob'")
"""


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--score-db-url=mysql://app@db/app"], "--score-db-url: 'mysql://app@db/app' is not a "
         "postgresql:// URL"),
        (["--score-db-url=postgresql://app@/app"], "--score-db-url: the evaluator's own URL is "
         "missing (--score-db-admin-url=URL, *"),
        (["--score-db-url=postgresql://app@/app", "--score-db-admin-url=admin"],
         "--score-db-url: the admin URL is not a postgresql:// URL"),
        (["--score-db-url=postgresql://app@/${NOT_SET_ANYWHERE}", "--score-db-admin-url="
          "postgresql://a@/b"], "--score-db-url: ${NOT_SET_ANYWHERE} is not set in the "
         "evaluator's environment"),
        (["--score-db-url=postgresql://app@/app", "--score-db-url=postgresql://x@/app",
          "--score-db-admin-url=postgresql://a@/b"], "two databases are named 'app'; give one "
         "a name of its own"),
    ],
)  # fmt: skip
def test_a_url_that_cannot_be_used_is_a_one_line_usage_error(
    pytester: pytest.Pytester, args: list[str], message: str
) -> None:
    pytester.makepyfile("def test_one(): pass")
    result = pytester.runpytest_subprocess(*args)
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines([f"*{message}"])
    assert "Traceback" not in result.stderr.str()


@pytest.mark.parametrize(
    ("databases", "message"),
    [
        ("databases: {url: x}", "scores.yaml: databases: expected a list of tables *"),
        ("databases: [{name: a}]", "scores.yaml: databases[0]: url: missing"),
        ("databases: [{url: 1}]", "scores.yaml: databases[0].url: expected text, got 1"),
        ("databases: [{url: x, user: a}]", "scores.yaml: databases[0]: unknown key 'user' *"),
        (
            "databases: [{url: 'postgresql://a@/b', admin_url: 'postgresql://a@/b', env: '1X'}]",
            "scores.yaml: databases[0]: env: '1X' is not a variable name",
        ),
    ],
)
def test_a_databases_entry_that_cannot_be_used_names_its_place(
    pytester: pytest.Pytester, databases: str, message: str
) -> None:
    pytester.makepyfile("def test_one(): pass")
    pytester.path.joinpath("scores.yaml").write_text(
        f"{databases}\nscorers: [{{type: db_change}}]\n"
    )
    result = pytester.runpytest_subprocess("--score-config=scores.yaml")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines(["*" + message.replace("[", "[[]")])


def test_a_url_database_sits_beside_the_sqlite_files_under_its_name(
    pytester: pytest.Pytester, postgres: Cluster, monkeypatch: pytest.MonkeyPatch
) -> None:
    app = postgres.application(ACCOUNTS)
    monkeypatch.setenv("APP_DATABASE", app)
    with sqlite3.connect(pytester.path / "local.db") as local:
        local.execute("CREATE TABLE t (x)")
    pytester.makepyfile(PROMOTES_BOB)
    pytester.path.joinpath("scores.yaml").write_text(
        textwrap.dedent(
            """
            databases:
              - {url: "${APP_DATABASE}", name: accounts, admin_url: "${ADMIN_DATABASE}"}
            scorers:
              - type: db_change
                selector: {databases: {name: accounts}, rows: {changed: {has_one: [role]}}}
            """
        )
    )
    monkeypatch.setenv("ADMIN_DATABASE", postgres.admin_url)
    pytester.runpytest_subprocess("--score-config=scores.yaml").assert_outcomes(passed=1)
    session = scored_session(pytester)
    score = session.scores["db_change"]
    assert score["value"] == "C", score["explanation"]
    entries = session.files["diff.json"]["comparisons"]
    assert sorted(entries) == ["accounts", "local.db"]
    assert entries["accounts"]["info"]["engine"] == "postgresql"
    changed = entries["accounts"]["comparisons"]["data"]["tables"]["users"]["rows_changed"]
    assert [(row["key"], row["changes"]["role"]) for row in changed] == [
        ({"id": 2}, {"old_value": "user", "new_value": "admin"})
    ]


def test_a_url_database_is_named_by_its_database_by_default(
    pytester: pytest.Pytester, postgres: Cluster, monkeypatch: pytest.MonkeyPatch
) -> None:
    app = postgres.application(ACCOUNTS)
    monkeypatch.setenv("APP_DATABASE", app)
    pytester.makepyfile(PROMOTES_BOB)
    pytester.runpytest_subprocess(
        "--score-db-url=${APP_DATABASE}", f"--score-db-admin-url={postgres.admin_url}"
    ).assert_outcomes(passed=1)
    database = conninfo_to_dict(app)["dbname"]
    assert list(scored_session(pytester).files["diff.json"]["comparisons"]) == [database]


def test_an_admin_url_in_the_repositorys_ini_is_ignored_with_a_signal(
    pytester: pytest.Pytester, postgres: Cluster, monkeypatch: pytest.MonkeyPatch
) -> None:
    app = postgres.application(ACCOUNTS)
    monkeypatch.setenv("APP_DATABASE", app)
    pytester.makeini(
        f"[pytest]\nscore_db_urls = {app}\nscore_db_admin_url = {postgres.admin_url}\n"
    )
    pytester.makepyfile(PROMOTES_BOB)
    result = pytester.runpytest_subprocess(f"--score-db-admin-url={postgres.admin_url}")
    result.assert_outcomes(passed=1)
    assert postgres.password not in result.stdout.str()
    report = only_report(pytester.path / "scores")
    assert report["scores"]["db_change"]["value"] == "C"
    assert {
        "kind": "selection",
        "detail": "score_db_admin_url = (a URL): ignored, only the command line sets it",
        "file": "tox.ini",
    } in report["integrity"]


def test_without_the_command_lines_admin_url_the_inis_is_not_used(
    pytester: pytest.Pytester, postgres: Cluster
) -> None:
    app = postgres.application(ACCOUNTS)
    pytester.makeini(
        f"[pytest]\nscore_db_urls = {app}\nscore_db_admin_url = {postgres.admin_url}\n"
    )
    pytester.makepyfile("def test_one(): pass")
    result = pytester.runpytest_subprocess()
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines(["*score_db_urls (ini): the evaluator's own URL is missing*"])


def test_an_admin_url_in_a_configuration_the_ini_names_is_ignored(
    pytester: pytest.Pytester, postgres: Cluster, tmp_path: Path
) -> None:
    app = postgres.application(ACCOUNTS)
    pytester.path.joinpath("scores.yaml").write_text(
        f"databases: [{{url: '{app}', admin_url: '{postgres.admin_url}'}}]\n"
        "scorers: [{type: db_change}]\n"
    )
    pytester.makeini("[pytest]\nscore_config = scores.yaml\n")
    pytester.makepyfile("def test_one(): pass")
    result = pytester.runpytest_subprocess()
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines(
        ["*scores.yaml: databases[[]0[]]: the evaluator's own URL is missing*"]
    )


def test_db_reset_starts_every_session_from_the_first_seen_state(
    pytester: pytest.Pytester, postgres: Cluster, monkeypatch: pytest.MonkeyPatch
) -> None:
    app = postgres.application(ACCOUNTS)
    monkeypatch.setenv("APP_DATABASE", app)
    pytester.makepyfile(PROMOTES_BOB)
    options = [
        "--score-db-reset",
        f"--score-db-url={app}",
        f"--score-db-admin-url={postgres.admin_url}",
    ]
    for _ in range(2):
        pytester.runpytest_subprocess(*options).assert_outcomes(passed=1)
        score = scored_session(pytester).scores["db_change"]
        assert score["value"] == "C", score["explanation"]  # bob was a user again at start
    with psycopg.connect(app) as connection:
        role = connection.execute("SELECT role FROM users WHERE username = 'bob'").fetchone()
    assert role == ("admin",)
