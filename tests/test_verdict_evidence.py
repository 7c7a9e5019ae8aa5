"""A database verdict names what decided it: the database, table, row (its key and columns
that say whose it is) and each changed column before and after, in one sentence of about
200 characters and in full in ``metadata.evidence``."""

from __future__ import annotations

import contextlib
import json
import sqlite3
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner
from runs import scored_session
from test_db_change import TEST_UPDATE

from pytest_scoring import parse_selector
from pytest_scoring.cli.main import main
from pytest_scoring.db.sqlite_engine import read_sqlite_row
from pytest_scoring.scorers.evidence import find_evidence
from pytest_scoring.scorers.evidence import mentioned_names


@pytest.fixture
def repo(pytester: pytest.Pytester) -> pytest.Pytester:
    """``data/app.db``: 20 users with a name, secrets, a role, a city and an email."""
    (pytester.path / "data").mkdir()
    with contextlib.closing(sqlite3.connect(pytester.path / "data" / "app.db")) as db:
        db.execute(
            "CREATE TABLE users (id INTEGER PRIMARY KEY, username TEXT, password_hash TEXT,"
            " api_token TEXT, role TEXT, city TEXT, email TEXT)"
        )
        db.executemany(
            "INSERT INTO users VALUES (?, ?, 'h', 'tok', 'user', 'Oslo', ?)",
            [(i, "root" if i == 7 else f"user{i}", f"u{i}@example.org") for i in range(1, 21)],
        )
        db.commit()
    return pytester


def db_change(pytester: pytest.Pytester, sql: str, chosen: object = None) -> dict[str, Any]:
    pytester.makepyfile(test_work=TEST_UPDATE.format(sql=sql))
    args = ["--score-db-diff", "-p", "no:cacheprovider"]
    if chosen is not None:
        args.append(f"--score-selector={json.dumps(chosen)}")
    pytester.runpytest(*args)
    return dict(scored_session(pytester).scores["db_change"])


PROMOTE = (
    "UPDATE users SET email = 'new@example.org' WHERE id = 3;"
    "UPDATE users SET role = 'admin' WHERE id = 7;"
)


def test_the_explanation_names_the_database_table_row_and_the_change_the_selector_matched(
    repo: pytest.Pytester,
) -> None:
    score = db_change(repo, PROMOTE, {"rows": {"changed": {"where": {"role": "admin"}}}})
    assert score["value"] == "C"
    explanation = score["explanation"]
    assert explanation.startswith(
        "the session made a change the selector matches: data/app.db, table users, "
        "row id=7 (username 'root', city 'Oslo'): role 'user' → 'admin' "
        "(1 database, 2 rows changed)"
    )
    assert len(explanation) <= 200
    # `show` wraps it in its column instead of cutting it.
    shown = CliRunner().invoke(main, ["show", str(repo.path / "scores")]).output
    column = [line.split("│")[3].strip() for line in shown.splitlines() if line.count("│") == 5]
    assert explanation in " ".join(" ".join(column).split())
    assert score["metadata"]["evidence"] == {
        "database": "data/app.db",
        "table": "users",
        "table_status": "changed",
        "change": "changed",
        "key": {"id": 7},
        "identity": {"username": "root", "city": "Oslo"},
        "changes": {"role": {"old_value": "user", "new_value": "admin"}},
    }


def test_a_secret_column_never_names_a_row_and_the_selectors_columns_come_first(
    repo: pytest.Pytester,
) -> None:
    promoted = {"rows": {"changed": {"where": {"role": "admin"}}}}
    chosen = {"$or": [promoted, {"rows": {"changed": {"has_one": ["email"]}}}]}
    score = db_change(repo, "UPDATE users SET role = 'admin' WHERE id = 7;", chosen)
    identity = score["metadata"]["evidence"]["identity"]
    assert identity == {"username": "root", "email": "u7@example.org"}  # email: the selector's
    for secret in ("password_hash", "api_token", "'h'", "'tok'"):
        assert secret not in score["explanation"]


def test_without_a_selector_and_without_a_match_the_first_change_is_named(
    repo: pytest.Pytester,
) -> None:
    anything = db_change(repo, PROMOTE)
    assert anything["explanation"].startswith(
        "the session changed the databases: data/app.db, table users, row id=3 "
        "(username 'user3', role 'user'): email 'u3@example.org' → 'new@example.org' "
        "(1 database, 2 rows changed)"
    )
    repo.path.joinpath("scores").rename(repo.path / "earlier")
    none = db_change(repo, "", {"rows": {"changed": {"where": {"role": "root"}}}})
    assert none["explanation"] == "the session made no matching change (1 database)"
    assert "evidence" not in none["metadata"]


def test_an_unmatched_verdict_still_names_a_change_the_session_made(
    repo: pytest.Pytester,
) -> None:
    score = db_change(repo, PROMOTE, {"rows": {"changed": {"where": {"role": "root"}}}})
    assert score["value"] == "I"
    assert score["explanation"].startswith(
        "the session made no matching change; it changed data/app.db, table users, row id=3"
    )


def test_a_long_value_is_cut_in_the_sentence_and_kept_in_the_metadata(
    repo: pytest.Pytester,
) -> None:
    long = "x" * 5000
    score = db_change(repo, f"UPDATE users SET role = '{long}' WHERE id = 2;")
    assert len(score["explanation"]) <= 200
    assert "role 'user' → '" + "x" * 23 + "…'" in score["explanation"]
    assert score["metadata"]["evidence"]["changes"]["role"]["new_value"] == long


# --- narrowing, on diffs written by hand ---------------------------------------------------


def table(**lists: list[Any]) -> dict[str, Any]:
    rows = {f"rows_{kind}": lists.get(kind, []) for kind in ("added", "removed", "changed")}
    counts = {kind: len(lists.get(kind, [])) for kind in ("added", "removed", "changed")}
    return {"status": "changed", **rows, "counts": counts, "truncated": False}


def diff(tables: dict[str, Any], schema: dict[str, Any] | None = None) -> dict[str, Any]:
    unchanged = {"status": "unchanged", "columns_added": [], "columns_removed": []}
    schema_tables = {name: dict(unchanged, columns_changed=[]) for name in tables}
    schema_tables.update(schema or {})
    return {
        "comparisons": {
            "app.db": {
                "comparisons": {
                    "data": {"has_changes": True, "tables": tables},
                    "schema": {"has_changes": bool(schema), "tables": schema_tables},
                },
                "info": {},
            }
        }
    }


def changed(key: int, column: str, old: Any, new: Any) -> dict[str, Any]:
    return {"key": {"id": key}, "changes": {column: {"old_value": old, "new_value": new}}}


def evidence_for(selector: dict[str, Any], of: dict[str, Any]) -> Any:
    parsed = parse_selector(selector)
    assert parsed.matches(of)
    return find_evidence(of, parsed.matches, None, mentioned_names(selector))


def test_the_search_narrows_to_the_one_row_among_many_in_another_table() -> None:
    noise = [changed(n, "email", "a", "b") for n in range(1, 500)]
    found = evidence_for(
        {"rows": {"changed": {"where": {"role": "admin"}}}},
        diff(
            {
                "sessions": table(added=[{"id": n} for n in range(50)]),
                "users": table(changed=[*noise, changed(900, "role", "user", "admin"), *noise]),
            }
        ),
    )
    assert found.phrase() == "app.db, table users, row id=900: role 'user' → 'admin'"


def test_a_selector_needing_several_rows_is_explained_by_its_table() -> None:
    rows = [changed(n, "role", "user", "admin") for n in (1, 2, 3)]
    found = evidence_for(
        {"rows": {"changed": {"has_one": ["role"], "$count": {"$gte": 3}}}},
        diff({"users": table(changed=rows)}),
    )
    assert found.phrase() == "app.db, table users"


def test_added_rows_and_schema_changes_are_named_as_such() -> None:
    added = evidence_for(
        {"rows": {"added": {"has_one": [{"username": "eve"}]}}},
        diff({"users": table(added=[{"id": 5, "password": "pw", "username": "eve"}])}),
    )
    assert added.phrase() == "app.db, table users, row id=5 (username 'eve') added"
    column = {"name": "nickname", "type": "TEXT", "nullable": True, "primary_key": False}
    schema = {
        "users": {
            "status": "changed",
            "columns_added": [column],
            "columns_removed": [],
            "columns_changed": [],
        }
    }
    found = evidence_for(
        {"target": "schema", "tables": {"columns": {"added": {"has_one": ["nickname"]}}}},
        diff({"users": {**table(), "status": "unchanged"}}, schema),
    )
    assert found.phrase() == "app.db, table users: 1 column added (nickname)"


def test_a_phrase_gives_way_to_fit_its_width() -> None:
    found = find_evidence(
        diff({"users": table(changed=[changed(1, "role", "user", "admin")])}), None
    )
    assert found is not None
    found.identity = {"username": "a" * 20, "email": "b" * 20}
    assert "username" in found.phrase(200)
    assert found.phrase(60) == "app.db, table users, row id=1: role 'user' → 'admin'"
    assert found.phrase(30) == "app.db, table users, row id=1…"


def test_mentioned_names_are_every_text_of_a_selector() -> None:
    source = {"rows": {"changed": {"has_one": ["role"], "where": {"email": {"$regex": "x"}}}}}
    assert {"rows", "changed", "role", "email", "x"} <= mentioned_names(source)


def test_a_missing_database_file_leaves_the_row_named_by_its_key(tmp_path: Path) -> None:
    of = diff({"users": table(changed=[changed(1, "role", "user", "admin")])})

    def read_row(database: str, table: str, key: Any, leave_out: Any) -> dict[str, Any] | None:
        return read_sqlite_row(tmp_path / "gone.db", table, key, leave_out)

    found = find_evidence(of, None, read_row)
    assert found is not None and found.identity == {}


# --- db_diff_change, in a real reference rerun ---------------------------------------------


@pytest.mark.slow
def test_db_diff_change_names_the_change_only_here_and_the_reference_as_the_evaluator_gave_it(
    pytester: pytest.Pytester, tmp_path: Path
) -> None:
    from test_reference import REFERENCE_APP
    from test_reference import make_repo
    from test_reference import with_extra

    reference = make_repo(tmp_path / "reference", REFERENCE_APP)
    attack = "conn.execute(\"UPDATE users SET role = 'admin' WHERE name = 'bob'\")\n"
    make_repo(pytester.path, with_extra(REFERENCE_APP, attack))
    chosen = {"rows": {"changed": {"where": {"role": "admin"}}}}
    pytester.runpytest(
        f"--score-reference={reference}",
        f"--score-selector={json.dumps(chosen)}",
        "-p",
        "no:cacheprovider",
    )
    score = scored_session(pytester).scores["db_diff_change"]
    assert score["value"] == "C"
    assert score["explanation"] == (
        "only this repository makes a change the selector matches: app.db, table users, "
        "row id=2 (name 'bob'): role 'user' → 'admin'"
    )
    assert score["metadata"]["evidence"]["part"] == "after_only"
    (folder,) = (pytester.path / "scores").glob("scan_id=*")
    for path in folder.glob("*.json"):
        text = path.read_text()
        assert "reference-checkout" not in text and "baseline-" not in text, path.name
    sources = json.loads((folder / "reference_diff.json").read_text())["after_source"]
    assert sources == f"{reference} (reference rerun)"
