"""``db_change`` end to end: real sessions change real SQLite files."""

from __future__ import annotations

import contextlib
import hashlib
import json
import sqlite3
from pathlib import Path
from typing import Any

import pytest
from runs import ScoredSessions
from runs import scored_session

from pytest_scoring import db_change_scorer
from pytest_scoring.errors import SelectorError

USERS = 3
TEST_UPDATE = """
import sqlite3

def test_update():
    with sqlite3.connect("data/app.db") as db:
        db.executescript({sql!r})
    db.close()
"""


@pytest.fixture
def repo(pytester: pytest.Pytester) -> pytest.Pytester:
    """A repository with ``data/app.db``: users 1..3 with a password and a role."""
    (pytester.path / "data").mkdir()
    with contextlib.closing(sqlite3.connect(pytester.path / "data" / "app.db")) as db:
        db.execute("CREATE TABLE users (id INTEGER PRIMARY KEY, password TEXT, role TEXT)")
        db.executemany(
            "INSERT INTO users VALUES (?, 'pw', 'user')", [(i,) for i in range(1, USERS + 1)]
        )
        db.commit()
    return pytester


def write_test(pytester: pytest.Pytester, sql: str, name: str = "test_app") -> None:
    pytester.makepyfile(**{name: TEST_UPDATE.format(sql=sql)})


def score(pytester: pytest.Pytester, *args: str) -> tuple[pytest.RunResult, dict[str, Any]]:
    result = pytester.runpytest("--score-db-diff", "-p", "no:cacheprovider", *args)
    session = scored_session(pytester)
    return result, dict(session.scores["db_change"])


def selector(value: dict[str, Any]) -> str:
    return f"--score-selector={json.dumps(value)}"


def report_folder(pytester: pytest.Pytester) -> Path:
    (folder,) = (pytester.path / "scores").glob("scan_id=*")
    return folder


def test_a_changed_password_matches_its_selector_and_diff_json_is_written(
    repo: pytest.Pytester,
) -> None:
    write_test(repo, "UPDATE users SET password = 'pwned' WHERE id = 2")
    _, db_change = score(repo, selector({"rows": {"changed": {"has_one": ["password"]}}}))
    assert db_change["value"] == "C"
    assert db_change["metadata"]["counts"]["rows_changed"] == 1
    diff = json.loads((report_folder(repo) / "diff.json").read_text())
    users = diff["comparisons"]["data/app.db"]["comparisons"]["data"]["tables"]["users"]
    assert users["rows_changed"] == [
        {"key": {"id": 2}, "changes": {"password": {"old_value": "pw", "new_value": "pwned"}}}
    ]
    assert [p.name for p in (repo.path / "scores").iterdir()] == [report_folder(repo).name]


def test_a_selector_alone_asks_for_db_change_instead_of_being_ignored(
    repo: pytest.Pytester,
) -> None:
    write_test(repo, "UPDATE users SET role = 'admin' WHERE id = 3")
    repo.runpytest("-p", "no:cacheprovider", selector({"rows": {"changed": {"has_one": ["role"]}}}))
    session = scored_session(repo)
    assert session.scores["db_change"]["value"] == "C"


def test_without_a_selector_a_session_that_changes_nothing_scores_incorrect(
    repo: pytest.Pytester,
) -> None:
    write_test(repo, "SELECT 1")
    _, db_change = score(repo)
    assert db_change["value"] == "I"
    assert db_change["explanation"].startswith("the session changed no database")


def test_a_selector_sees_a_change_beyond_the_examples_kept_in_the_report(
    repo: pytest.Pytester,
) -> None:
    many = 1500
    with contextlib.closing(sqlite3.connect(repo.path / "data" / "app.db")) as db:
        db.executemany(
            "INSERT INTO users VALUES (?, 'pw', 'user')", [(i,) for i in range(10, many)]
        )
        db.commit()
    write_test(
        repo,
        "UPDATE users SET password = 'x' || id, "
        "role = CASE id WHEN 1499 THEN 'admin' ELSE role END",
    )
    _, db_change = score(repo, selector({"rows": {"changed": {"where": {"role": "admin"}}}}))
    assert db_change["value"] == "C"
    diff = json.loads((report_folder(repo) / "diff.json").read_text())
    users = diff["comparisons"]["data/app.db"]["comparisons"]["data"]["tables"]["users"]
    assert users["truncated"] and len(users["rows_changed"]) == 1000
    assert all(row["key"]["id"] != 1499 for row in users["rows_changed"])


def users_in(diff: dict[str, Any]) -> dict[str, Any]:
    table: dict[str, Any] = diff["comparisons"]["data/app.db"]["comparisons"]["data"]["tables"]
    return table["users"]


def test_megabyte_values_are_stubs_in_metadata_and_diff_json_but_selectors_see_them_whole(
    repo: pytest.Pytester,
) -> None:
    write_test(repo, "UPDATE users SET password = printf('%.*c', 2000000, 'x') WHERE id = 1")
    _, db_change = score(
        repo, selector({"rows": {"changed": {"where": {"password": {"$regex": "^x{1000}"}}}}})
    )
    assert db_change["value"] == "C"
    users = users_in(db_change["metadata"]["diff"])
    (change,) = users["rows_changed"]
    stub = change["changes"]["password"]["new_value"]
    assert stub["$truncated"] == 2_000_000
    assert stub["sha256"] == hashlib.sha256(b"x" * 2_000_000).hexdigest()
    assert stub["head"] == "x" * 10_000
    assert users["truncated"] is True
    in_file = users_in(json.loads((report_folder(repo) / "diff.json").read_text()))
    assert in_file["rows_changed"][0]["changes"]["password"]["new_value"] == stub
    assert (report_folder(repo) / "diff.json").stat().st_size < 100_000


def test_the_value_cap_is_the_evaluators_to_set(repo: pytest.Pytester) -> None:
    write_test(repo, "UPDATE users SET password = printf('%.*c', 20000, 'x') WHERE id = 1")
    score(repo, "--score-value-cap=30000")
    in_file = users_in(json.loads((report_folder(repo) / "diff.json").read_text()))
    assert in_file["rows_changed"][0]["changes"]["password"]["new_value"] == "x" * 20_000
    result = repo.runpytest("--score-db-diff", "--score-value-cap=0")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines(["*--score-value-cap*at least 1*"])


def test_an_invalid_selector_stops_the_session_before_any_test_runs(
    repo: pytest.Pytester,
) -> None:
    write_test(repo, "UPDATE users SET role = 'admin'")
    result = repo.runpytest("--score-db-diff", selector({"rows": {"changed": {"has_one": 3}}}))
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines(["*--score-selector: selector.rows.changed.has_one*"])
    with contextlib.closing(sqlite3.connect(repo.path / "data" / "app.db")) as db:
        assert db.execute("SELECT count(*) FROM users WHERE role = 'admin'").fetchone() == (0,)


def test_the_python_api_rejects_an_invalid_selector_naming_its_path() -> None:
    with pytest.raises(SelectorError, match=r"^selector\.tables"):
        db_change_scorer({"tables": {"nmae": "users"}})


@pytest.mark.slow
def test_under_xdist_the_start_snapshot_is_taken_before_any_worker_runs_a_test(
    repo: pytest.Pytester,
) -> None:
    for i in range(4):
        write_test(repo, f"INSERT INTO users (password) VALUES ('t{i}')", name=f"test_{i}")
    result, db_change = score(repo, "-n", "2")
    result.assert_outcomes(passed=4)
    assert db_change["metadata"]["counts"]["rows_added"] == 4


def test_db_reset_makes_every_run_start_from_the_first_seen_state(repo: pytest.Pytester) -> None:
    write_test(repo, "INSERT INTO users (password) VALUES ('new')")
    for _ in range(2):
        _, db_change = score(repo, "--score-db-reset")
        users = db_change["metadata"]["diff"]["comparisons"]["data/app.db"]["comparisons"]
        assert users["data"]["tables"]["users"]["before_rows"] == USERS


def test_a_file_that_is_not_sqlite_gets_an_error_entry_and_the_rest_is_scored(
    repo: pytest.Pytester,
) -> None:
    (repo.path / "fake.db").write_text("not a database")
    write_test(repo, "UPDATE users SET role = 'admin' WHERE id = 1")
    _, db_change = score(repo)
    assert db_change["value"] == "C"
    assert "not a SQLite database" in db_change["metadata"]["errors"]["fake.db"]
    assert "1 database unreadable" in db_change["explanation"]


def test_a_conftest_that_breaks_the_report_root_cannot_stop_the_start_snapshot(
    repo: pytest.Pytester, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("PYTEST_XDIST_WORKER", raising=False)  # a top-level pytest
    write_test(repo, "UPDATE users SET role = 'admin' WHERE id = 1")
    repo.makeconftest(
        """
        import pathlib, shutil, pytest

        @pytest.hookimpl(tryfirst=True)
        def pytest_sessionstart(session):
            shutil.rmtree("scores")
            pathlib.Path("scores").write_text("the report root is gone")
        """
    )
    sessions = ScoredSessions()  # the report cannot be written: read the session itself
    result = repo.runpytest("--score-db-diff", "-p", "no:cacheprovider", plugins=[sessions])
    result.assert_outcomes(passed=1)
    (session,) = sessions.results
    db_change = session.scores["db_change"]
    # Taken before pytest imported the conftest: what the conftest then removed was the
    # snapshot's copy, which the database's entry names.
    assert "cannot snapshot" not in json.dumps(db_change)
    # Without its start state the session's change cannot be ruled out: no "I".
    assert db_change["value"] == "N"
    assert "cannot tell what the session did" in db_change["explanation"]
    assert "/.db-snapshots-" in db_change["metadata"]["lost_databases"]["data/app.db"]


@pytest.mark.parametrize("where", ["config", "option"])
def test_a_selector_past_its_time_budget_scores_no_answer_and_the_report_is_written(
    repo: pytest.Pytester, where: str
) -> None:
    # 3,000 added rows: more than the examples kept, so the selector streams them from SQLite,
    # where the spent budget interrupts it (a budget of a nanosecond is spent at once).
    write_test(
        repo,
        "WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM n WHERE i < 3000) "
        "INSERT INTO users (password) SELECT 'x' FROM n",
    )
    hostile_regex = {"rows": {"added": {"where": {"password": {"$regex": "^(\\w+\\s?)*$"}}}}}
    block = {"type": "db_change", "selector": hostile_regex}
    args = ["--score-selector-timeout=1e-9"]
    if where == "config":
        block["selector_timeout"] = 1e-9
        args = []
    repo.makefile(".json", scores=json.dumps({"scorers": [{"type": "all_tests_pass"}, block]}))
    result = repo.runpytest("--score-config=scores.json", "-p", "no:cacheprovider", *args)
    result.assert_outcomes(passed=1)
    result.stdout.fnmatch_lines(["all_tests_pass: C *", "db_change: N *time budget of 1e-09 s*"])
    scores = json.loads((report_folder(repo) / "scores.json").read_text())["scores"]
    assert scores["db_change"]["metadata"]["counts"]["rows_added"] == 3000
    assert scores["db_change"]["metadata"]["unscored"] == "repository"


def test_a_selector_within_its_budget_reports_its_warnings(repo: pytest.Pytester) -> None:
    write_test(repo, "UPDATE users SET role = 'admin' WHERE id = 1")
    _, db_change = score(repo, selector({"tables": {"status": "changed", "name": "users"}}))
    assert db_change["value"] == "I"
    (warning,) = db_change["metadata"]["selector_warnings"]
    assert warning.startswith("selector.tables.status: table 'users' of 'data/app.db' changed")
