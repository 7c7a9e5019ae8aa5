"""What every database engine must do (pytest_scoring/db/engine.py), run on each engine's real
databases (tests/db_engines.py): find, snapshot, the diff in the one JSON shape, streamed rows,
a row by key, reset, and a session of them."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from db_engines import PLACES
from db_engines import Place
from db_engines import SqlitePlace

from pytest_scoring.core.settings import ScoringSettings
from pytest_scoring.db.diff_shape import has_changes
from pytest_scoring.db.session import SessionDatabases
from pytest_scoring.db.session import engine_diff
from pytest_scoring.db.session import final_state
from pytest_scoring.db.session import snapshot_now
from pytest_scoring.errors import DatabaseError

USERS = "CREATE TABLE users (id INTEGER PRIMARY KEY, name TEXT NOT NULL, role TEXT)"
ROWS = (
    "INSERT INTO users VALUES (1, 'alice', 'user')",
    "INSERT INTO users VALUES (2, 'bob', 'user')",
    "INSERT INTO users VALUES (3, 'carol', 'user')",
)
#: One row changed, one removed, one added.
CHANGE = (
    "UPDATE users SET role = 'admin' WHERE id = 1",
    "DELETE FROM users WHERE id = 2",
    "INSERT INTO users VALUES (4, 'dave', 'user')",
)


@pytest.fixture(params=sorted(PLACES))
def place(request: pytest.FixtureRequest, tmp_path: Path) -> Place:
    root = tmp_path / "place"
    root.mkdir()
    return PLACES[request.param](root, request)


def _users(place: Place) -> str:
    name = place.name("app")
    place.execute(name, USERS, *ROWS)
    return name


def _before(place: Place, tmp_path: Path) -> Any:
    return snapshot_now(place.engine, tmp_path / "before", "start")


def _diff(place: Place, before: Any, after: Any, max_rows: int | None = 1000) -> dict[str, Any]:
    return dict(place.engine.diff(before, after, max_rows))


def test_find_names_the_databases_there_sorted(place: Place) -> None:
    names = [place.name("b"), place.name("a")]
    for name in names:
        place.execute(name, USERS)
    assert place.engine.find() == sorted(names)


def test_the_diff_shows_each_change_in_the_shape_of_the_docs(place: Place, tmp_path: Path) -> None:
    name = _users(place)
    before = _before(place, tmp_path)
    place.execute(name, *CHANGE)
    entry = _diff(place, before, final_state(place.engine, "finish", before))[name]
    table = entry["comparisons"]["data"]["tables"]["users"]
    assert table["status"] == "changed"
    assert table["counts"] == {"added": 1, "removed": 1, "changed": 1}
    assert table["rows_added"] == [{"id": 4, "name": "dave", "role": "user"}]
    assert table["rows_removed"] == [{"id": 2, "name": "bob", "role": "user"}]
    assert table["rows_changed"] == [
        {"key": {"id": 1}, "changes": {"role": {"old_value": "user", "new_value": "admin"}}}
    ]
    assert (table["before_rows"], table["after_rows"]) == (3, 3)
    assert table["pairing"]["key"] == ["id"]
    schema = entry["comparisons"]["schema"]
    assert schema == {"has_changes": False, "tables": {"users": _unchanged_columns()}}
    assert entry["info"]["exists_before"] and entry["info"]["exists_after"]
    engine = place.engine.name
    assert entry["info"].get("engine") == (None if engine == "sqlite" else engine)
    assert "error" not in entry
    assert json.loads(json.dumps(entry)) == entry  # JSON as it is


def _unchanged_columns() -> dict[str, Any]:
    return {
        "status": "unchanged",
        "columns_added": [],
        "columns_removed": [],
        "columns_changed": [],
    }


def test_a_snapshot_keeps_the_state_it_copied(place: Place, tmp_path: Path) -> None:
    name = _users(place)
    before = _before(place, tmp_path)
    place.execute(name, *CHANGE)
    again = snapshot_now(place.engine, tmp_path / "again", "again")
    place.execute(name, "DELETE FROM users")
    counts = _diff(place, before, again)[name]["comparisons"]["data"]["tables"]["users"]["counts"]
    assert counts == {"added": 1, "removed": 1, "changed": 1}


def test_no_change_is_no_change(place: Place, tmp_path: Path) -> None:
    _users(place)
    before = _before(place, tmp_path)
    diff = engine_diff(place.engine, before, final_state(place.engine, "finish", before), ["*"])
    assert not has_changes(diff)


def test_examples_are_capped_counts_exact_and_rows_stream_whole_again_and_again(
    place: Place, tmp_path: Path
) -> None:
    name = _users(place)
    before = _before(place, tmp_path)
    place.execute(name, *(f"INSERT INTO users VALUES ({n}, 'u{n}', NULL)" for n in range(10, 60)))
    after = final_state(place.engine, "finish", before)
    received: list[tuple[str, str, str, int]] = []

    def sink(database: str, table: str, kind: str, row: dict[str, Any], times: int) -> None:
        received.append((database, table, kind, times))

    table = dict(place.engine.diff(before, after, 5, sink))[name]["comparisons"]["data"]
    users = table["tables"]["users"]
    assert len(users["rows_added"]) == 5 and users["counts"]["added"] == 50
    assert users["truncated"]
    assert sum(times for *_, times in received) == 50
    assert {(database, table, kind) for database, table, kind, _ in received} == {
        (name, "users", "added")
    }
    stream = place.engine.rows(before, after, name, "users", "added")
    assert len(list(stream)) == 50
    assert sorted(row["id"] for row in stream) == list(range(10, 60))


def test_a_database_made_or_dropped_has_every_table_added_or_removed(
    place: Place, tmp_path: Path
) -> None:
    old = _users(place)
    before = _before(place, tmp_path)
    new = place.name("new")
    place.execute(new, USERS, ROWS[0])
    place.drop(old)
    diff = _diff(place, before, final_state(place.engine, "finish", before))
    gone, made = diff[old], diff[new]
    assert (gone["info"]["exists_before"], gone["info"]["exists_after"]) == (True, False)
    assert gone["comparisons"]["data"]["tables"]["users"]["status"] == "removed"
    assert gone["comparisons"]["data"]["tables"]["users"]["counts"]["removed"] == 3
    assert (made["info"]["exists_before"], made["info"]["exists_after"]) == (False, True)
    assert made["comparisons"]["schema"]["tables"]["users"]["status"] == "added"
    assert made["comparisons"]["data"]["tables"]["users"]["rows_added"] == [
        {"id": 1, "name": "alice", "role": "user"}
    ]


def test_a_row_is_read_by_its_key(place: Place, tmp_path: Path) -> None:
    name = _users(place)
    state = final_state(place.engine, "finish")
    engine = place.engine
    assert engine.read_row(state, name, "users", {"id": 3}) == {"name": "carol", "role": "user"}
    assert engine.read_row(state, name, "users", {"id": 3}, ["role"]) == {"name": "carol"}
    assert engine.read_row(state, name, "users", {"id": 99}) is None
    assert engine.read_row(state, name, "nothing", {"id": 3}) is None


def test_reset_restores_the_first_seen_state_and_recreates_a_dropped_database(
    place: Place, tmp_path: Path
) -> None:
    name = _users(place)
    store = tmp_path / "store"
    assert place.engine.reset(place.engine.find(), store, tmp_path) == []
    place.execute(name, *CHANGE)
    assert place.engine.reset(place.engine.find(), store, tmp_path) == [name]
    before = _before(place, tmp_path)
    place.drop(name)
    assert place.engine.reset(place.engine.find(), store, tmp_path) == [name]
    diff = _diff(place, before, final_state(place.engine, "finish", before))
    assert not diff[name]["comparisons"]["data"]["has_changes"]


def test_a_session_diffs_start_and_finish_once_and_frees_its_snapshots(
    place: Place, tmp_path: Path
) -> None:
    name = _users(place)
    settings = ScoringSettings(root=tmp_path / "repo", report_root=tmp_path / "report")
    session = SessionDatabases(settings, engines=[place.engine])
    assert session.problem() is not None
    session.start()
    place.execute(name, *CHANGE)
    diff = session.diff()
    assert diff is session.diff()
    assert (diff["before_source"], diff["after_source"]) == ("session start", "session finish")
    assert diff["comparisons"][name]["comparisons"]["data"]["tables"]["users"]["counts"] == {
        "added": 1,
        "removed": 1,
        "changed": 1,
    }
    assert session.read_row(name, "users", {"id": 4}, ()) == {"name": "dave", "role": "user"}
    session.close()
    assert not list((tmp_path / "report").rglob("*.db"))


def test_two_engines_naming_one_database_alike_are_refused(tmp_path: Path) -> None:
    places = [SqlitePlace(tmp_path / side) for side in ("one", "two")]
    for place in places:
        place.execute(place.name("app"), USERS)
    settings = ScoringSettings(root=tmp_path / "one", report_root=tmp_path / "report")
    session = SessionDatabases(settings, engines=[place.engine for place in places])
    session.start()
    with pytest.raises(DatabaseError, match=r"two databases are named 'data/app\.db'"):
        session.diff()
    session.close()
