"""Diff-of-diffs: what only the reference, only the solution, or both changed."""

from __future__ import annotations

import sqlite3
from pathlib import Path
from typing import Any

import pytest
from diff_samples import change
from diff_samples import column
from diff_samples import data_table
from diff_samples import database
from diff_samples import diff
from diff_samples import schema_table

from pytest_scoring.db.diff import diff_paths
from pytest_scoring.db.diff_of_diffs import SplitDiffs
from pytest_scoring.db.diff_of_diffs import diff_of_diffs
from pytest_scoring.db.diff_store import LISTS
from pytest_scoring.db.diff_store import PARTS
from pytest_scoring.db.diff_store import REFERENCE
from pytest_scoring.db.diff_store import SOLUTION
from pytest_scoring.db.diff_store import DiffStore
from pytest_scoring.selector.language import parse_selector


def users(parts: dict[str, Any], part: str, plane: str = "data") -> dict[str, Any]:
    """The ``users`` table entry of one part for database ``app.db``."""
    table: dict[str, Any] = parts[part]["comparisons"]["app.db"]["comparisons"][plane]["tables"][
        "users"
    ]
    return table


def one_table(status: str = "changed", **rows: Any) -> dict[str, Any]:
    return diff({"app.db": database(data={"users": data_table(status, **rows)})})


def test_added_rows_compare_as_multisets() -> None:
    ann, bob, cid = {"id": 1, "n": "ann"}, {"id": 2, "n": "bob"}, {"id": 3, "n": "cid"}
    parts = diff_of_diffs(one_table(added=[ann, bob]), one_table(added=[ann, ann, cid]))
    assert users(parts, "before_only")["rows_added"] == [bob]
    assert users(parts, "after_only")["rows_added"] == [ann, cid]
    assert users(parts, "shared")["rows_added"] == [ann]
    assert users(parts, "after_only")["counts"] == {"added": 2, "removed": 0, "changed": 0}


def test_removed_rows_compare_by_full_content() -> None:
    parts = diff_of_diffs(
        one_table(removed=[{"id": 1, "n": "ann"}]), one_table(removed=[{"id": 1, "n": "Ann"}])
    )
    assert users(parts, "before_only")["rows_removed"] == [{"id": 1, "n": "ann"}]
    assert users(parts, "after_only")["rows_removed"] == [{"id": 1, "n": "Ann"}]
    assert users(parts, "shared")["status"] == "unchanged"


def test_values_compare_as_sqlite_stores_json() -> None:
    parts = diff_of_diffs(
        one_table(added=[{"id": 1, "ok": True, "x": None}]), one_table(added=[{"id": 1.0, "ok": 1}])
    )
    assert users(parts, "shared")["rows_added"] == [{"id": 1.0, "ok": 1}]
    assert users(parts, "after_only")["status"] == "unchanged"


def test_changed_rows_pair_by_key_and_split_per_column() -> None:
    reference = one_table(changed=[change({"id": 3}, password=("x", "h1"), role=("user", "staff"))])
    solution = one_table(
        changed=[
            change({"id": 3}, password=("x", "h1"), role=("user", "admin")),
            change({"id": 4}, email=("a", "b")),
        ]
    )
    parts = diff_of_diffs(reference, solution)
    assert users(parts, "shared")["rows_changed"] == [change({"id": 3}, password=("x", "h1"))]
    assert users(parts, "before_only")["rows_changed"] == [
        change({"id": 3}, role=("user", "staff"))
    ]
    assert users(parts, "after_only")["rows_changed"] == [
        change({"id": 3}, role=("user", "admin")),
        change({"id": 4}, email=("a", "b")),
    ]
    assert users(parts, "after_only")["counts"]["changed"] == 2


def test_a_table_added_by_both_is_shared_and_extra_rows_are_a_change() -> None:
    row = {"id": 1}
    parts = diff_of_diffs(
        one_table("added", added=[row]), one_table("added", added=[row, {"id": 2}])
    )
    assert users(parts, "shared")["status"] == "added"
    assert users(parts, "after_only")["status"] == "changed"
    assert users(parts, "before_only")["status"] == "unchanged"


def test_a_table_added_only_by_the_solution_is_added_after_only() -> None:
    reference = diff({"app.db": database(data={})})
    parts = diff_of_diffs(reference, one_table("added", added=[{"id": 1}]))
    assert users(parts, "after_only")["status"] == "added"
    assert users(parts, "shared")["status"] == "unchanged"
    assert users(parts, "before_only")["status"] == "unchanged"
    assert parts["after_only"]["comparisons"]["app.db"]["comparisons"]["data"]["has_changes"]
    assert not parts["before_only"]["comparisons"]["app.db"]["comparisons"]["data"]["has_changes"]


def test_schema_columns_compare_by_name_and_content() -> None:
    def with_columns(*columns: dict[str, Any]) -> dict[str, Any]:
        users_schema = schema_table("changed", added=list(columns))
        return diff({"app.db": database(data={}, schema={"users": users_schema})})

    parts = diff_of_diffs(
        with_columns(column("a"), column("b", "TEXT")),
        with_columns(column("a"), column("b", "INTEGER")),
    )
    assert users(parts, "shared", "schema")["columns_added"] == [column("a")]
    assert users(parts, "before_only", "schema")["columns_added"] == [column("b", "TEXT")]
    assert users(parts, "after_only", "schema")["columns_added"] == [column("b", "INTEGER")]
    assert users(parts, "after_only", "schema")["status"] == "changed"


def test_identical_diffs_leave_nothing_for_either_side() -> None:
    same = one_table(changed=[change({"id": 3}, password=("x", "y"))], added=[{"id": 9}])
    parts = diff_of_diffs(same, same)
    anything = parse_selector({})
    assert not anything.matches(parts["after_only"])
    assert not anything.matches(parts["before_only"])
    assert anything.matches(parts["shared"])


def test_every_database_of_either_diff_appears_in_every_part() -> None:
    reference = diff({"a.db": database(data={"t": data_table(added=[{"x": 1}])})})
    solution = diff(
        {"b.db": database(data={"t": data_table(added=[{"x": 1}])}, exists_before=False)}
    )
    parts = diff_of_diffs(reference, solution)
    for part in parts.values():
        assert sorted(part["comparisons"]) == ["a.db", "b.db"]
    assert parts["after_only"]["comparisons"]["b.db"]["info"]["exists_before"] is False
    assert parse_selector({"databases": {"name": "b.db"}}).matches(parts["after_only"])
    # Database facts alone ask for no change: a.db is in the part, with nothing after only.
    assert parse_selector({"databases": {"name": "a.db"}}).matches(parts["after_only"])
    assert not parse_selector({"databases": {"name": "a.db"}, "rows": {}}).matches(
        parts["after_only"]
    )


def test_an_error_entry_stays_with_the_diff_it_came_from() -> None:
    broken = diff({"app.db": {"comparisons": {}, "info": {}, "error": "not a SQLite database"}})
    parts = diff_of_diffs(broken, one_table(added=[{"id": 1}]))
    assert parts["before_only"]["comparisons"]["app.db"]["error"] == "not a SQLite database"
    assert "error" not in parts["after_only"]["comparisons"]["app.db"]
    assert users(parts, "after_only")["rows_added"] == [{"id": 1}]


def test_a_truncated_input_marks_every_part_truncated() -> None:
    reference = one_table(added=[{"id": 1}])
    parts = diff_of_diffs(truncated(reference), one_table(added=[{"id": 2}]))
    assert [users(parts, part)["truncated"] for part in PARTS] == [True, True, True]


def test_the_before_only_part_keeps_the_reference_row_totals() -> None:
    reference = one_table(added=[{"id": 1}, {"id": 2}])
    parts = diff_of_diffs(reference, one_table(added=[{"id": 3}]))
    assert users(parts, "before_only")["after_rows"] == 12
    assert users(parts, "after_only")["after_rows"] == 11


def truncated(one: dict[str, Any]) -> dict[str, Any]:
    """``one_table``'s diff with its ``users`` table marked as cut."""
    one["comparisons"]["app.db"]["comparisons"]["data"]["tables"]["users"]["truncated"] = True
    return one


def make_db(path: Path, *statements: str) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    connection = sqlite3.connect(path)
    try:
        connection.executescript(";".join(statements))
    finally:
        connection.close()
    return path


USERS = (
    "CREATE TABLE users (id INTEGER PRIMARY KEY, email TEXT, password TEXT, role TEXT)",
    "INSERT INTO users VALUES (1, 'ann@x', 'p1', 'user'), (2, 'bob@x', 'p2', 'user')",
)


def test_a_change_only_the_solution_makes_is_after_only_on_real_databases(
    tmp_path: Path,
) -> None:
    initial = make_db(tmp_path / "initial" / "app.db", *USERS)
    hashed = "UPDATE users SET password = 'h-' || password"
    reference = make_db(tmp_path / "reference" / "app.db", *USERS, hashed)
    solution = make_db(
        tmp_path / "solution" / "app.db",
        *USERS,
        hashed,
        "UPDATE users SET role = 'admin' WHERE id = 2",
        "INSERT INTO users VALUES (3, 'eve@x', 'h-p3', 'user')",
    )
    parts = diff_of_diffs(
        diff_paths(initial, reference, max_rows=None), diff_paths(initial, solution, max_rows=None)
    )
    role = parse_selector({"rows": {"changed": {"where": {"role": "admin", "$key.id": 2}}}})
    password = parse_selector({"rows": {"changed": {"has_one": "password"}}})
    added = parse_selector({"rows": {"added": {"has_one": [{"email": "eve@x"}]}}})
    assert role.matches(parts["after_only"]) and added.matches(parts["after_only"])
    assert not password.matches(parts["after_only"])
    assert password.matches(parts["shared"]) and not role.matches(parts["shared"])
    assert not parse_selector({}).matches(parts["before_only"])


@pytest.mark.parametrize(
    ("old", "new", "shared"),
    [
        (1, 1.0, True),
        (True, 1, True),
        ("1", 1, False),
        (None, None, True),
        ({"$blob": "AAE="}, {"$blob": "AAE="}, True),
        ({"$blob": "AAE="}, {"$blob": "AAI="}, False),
        ({"$blob": "AAE="}, "AAE=", False),
        (2**70, 2**70, True),
        (
            {"$truncated": 9, "sha256": "ab", "head": "x"},
            {"head": "x", "sha256": "ab", "$truncated": 9},
            True,
        ),
        ([1, 2], [1, 2.0], True),
    ],
)
def test_changed_values_are_shared_exactly_when_selectors_find_them_equal(
    old: Any, new: Any, shared: bool
) -> None:
    reference = one_table(changed=[change({"id": 3}, password=("x", old))])
    solution = one_table(changed=[change({"id": 3}, password=("x", new))])
    parts = diff_of_diffs(reference, solution)
    assert bool(users(parts, "shared")["rows_changed"]) is shared
    if not shared:
        (row,) = users(parts, "after_only")["rows_changed"]
        assert row["changes"]["password"]["new_value"] == new


# --- with a baseline: what this repository's test files change (issue 11) ------------------


def test_a_change_the_rerun_shares_and_the_baseline_lacks_is_from_tests() -> None:
    password = change({"id": 1}, password=("h0", "pwned"))
    role = change({"id": 2}, role=("user", "admin"))
    parts = diff_of_diffs(
        one_table(changed=[password]),  # the reference's code, this repository's tests
        one_table(changed=[password, role]),  # this repository
        one_table(changed=[]),  # the reference's code and tests
    )
    assert users(parts, "after_only")["rows_changed"] == [role]
    assert users(parts, "from_tests")["rows_changed"] == [password]
    assert users(parts, "scored")["rows_changed"] == [password, role]
    assert users(parts, "scored")["counts"]["changed"] == 2


def test_a_change_the_baseline_makes_too_is_not_from_tests() -> None:
    password = change({"id": 1}, password=("h0", "h1"))
    parts = diff_of_diffs(
        one_table(changed=[password]), one_table(changed=[password]), one_table(changed=[password])
    )
    assert users(parts, "from_tests")["status"] == "unchanged"
    assert users(parts, "scored")["status"] == "unchanged"


def test_a_change_only_the_baseline_makes_is_in_no_part_of_the_solution() -> None:
    """Both parts are sub-diffs of the solution's own diff: nothing it did not do is flagged."""
    password = change({"id": 1}, password=("h0", "h1"))
    parts = diff_of_diffs(one_table(), one_table(), one_table(changed=[password]))
    assert users(parts, "from_tests")["rows_changed"] == []
    assert users(parts, "scored")["rows_changed"] == []


@pytest.mark.parametrize(
    ("rerun", "solution", "baseline", "from_tests", "scored"),
    [
        (1, 2, 0, 1, 2),  # one row from the tests, one from the code
        (2, 2, 1, 1, 1),
        (3, 2, 0, 2, 2),  # never more than the solution added
        (0, 2, 2, 0, 2),  # the code's rows only
        (2, 2, 2, 0, 0),
    ],
)
def test_added_rows_from_tests_compare_as_multisets(
    rerun: int, solution: int, baseline: int, from_tests: int, scored: int
) -> None:
    ann = {"id": 1, "n": "ann"}
    parts = diff_of_diffs(
        one_table(added=[ann] * rerun),
        one_table(added=[ann] * solution),
        one_table(added=[ann] * baseline),
    )
    assert users(parts, "from_tests")["counts"]["added"] == from_tests
    assert users(parts, "scored")["counts"]["added"] == scored
    assert users(parts, "after_only")["counts"]["added"] == max(0, solution - rerun)


def test_a_table_the_tests_add_is_added_in_from_tests() -> None:
    row = {"id": 1}
    without = diff({"app.db": database(data={})})
    parts = diff_of_diffs(one_table("added", added=[row]), one_table("added", added=[row]), without)
    assert users(parts, "from_tests")["status"] == "added"
    assert users(parts, "scored")["status"] == "added"
    assert users(parts, "after_only")["status"] == "unchanged"


def test_a_database_only_the_tests_create_is_from_tests() -> None:
    row = {"id": 1}
    created = one_table("added", added=[row])
    parts = diff_of_diffs(created, created, diff({}))
    assert users(parts, "from_tests")["status"] == "added"
    assert users(parts, "from_tests")["rows_added"] == [row]


def test_without_a_baseline_there_is_no_from_tests_part() -> None:
    assert set(diff_of_diffs(one_table(), one_table())) == set(PARTS)


def test_without_a_baseline_selectors_score_after_only(tmp_path: Path) -> None:
    role = change({"id": 2}, role=("user", "admin"))
    reference, solution = one_table(), one_table(changed=[role])
    store = DiffStore(tmp_path / "rows.db")
    try:
        store.add_lists(REFERENCE, reference, LISTS)
        store.add_lists(SOLUTION, solution, LISTS)
        split = SplitDiffs(reference, solution, store, complete=False)
        scored = users({"scored": split.part_for_selectors("scored")}, "scored")
        assert list(scored["rows_changed"]) == [role]
        assert scored["counts"]["changed"] == 1
        assert "from_tests" not in split.parts()
    finally:
        store.close()
