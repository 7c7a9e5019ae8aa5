"""Row identity beyond the key: removed and added rows paired through a UNIQUE index."""

from __future__ import annotations

import contextlib
import sqlite3
import textwrap
from collections import Counter
from functools import partial
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck
from hypothesis import given
from hypothesis import settings
from hypothesis import strategies as st
from runs import scored_session

from pytest_scoring.db.diff import diff_paths
from pytest_scoring.db.diff import diff_snapshots
from pytest_scoring.db.diff_shape import stream_cut_rows
from pytest_scoring.db.snapshot import read_in_place
from pytest_scoring.db.sqlite_engine import SqliteEngine
from pytest_scoring.selector.language import parse_selector

USERS = (
    "CREATE TABLE users (id INTEGER PRIMARY KEY, username TEXT UNIQUE, password_hash TEXT);"
    "INSERT INTO users VALUES (1, 'alice', 'h0'), (2, 'bob', 'h0');"
)
REINSERT_ALICE = (
    "DELETE FROM users WHERE username = 'alice';"
    "INSERT INTO users (username, password_hash) VALUES ('alice', 'h1');"
)
PASSWORD = parse_selector({"rows": {"changed": {"has_one": ["password", "password_hash"]}}})


def make_pair(folder: Path, schema: str, change: str) -> tuple[Path, Path]:
    """``before.db`` built by ``schema``; ``after.db`` the same plus ``change``."""
    folder.mkdir(parents=True, exist_ok=True)
    paths = folder / "before.db", folder / "after.db"
    for path, script in zip(paths, (schema, schema + change), strict=True):
        with contextlib.closing(sqlite3.connect(path)) as db:
            db.executescript(script)
    return paths


def table(diff: dict[str, Any], name: str = "users") -> dict[str, Any]:
    entry = next(iter(diff["comparisons"].values()))
    result: dict[str, Any] = entry["comparisons"]["data"]["tables"][name]
    return result


def stored(path: Path, sql: str) -> list[tuple[Any, ...]]:
    """The truth, from the database file itself."""
    with contextlib.closing(sqlite3.connect(path)) as db:
        return db.execute(sql).fetchall()


def test_a_row_deleted_and_inserted_again_is_one_changed_row(tmp_path: Path) -> None:
    before, after = make_pair(tmp_path, USERS, REINSERT_ALICE)
    assert stored(after, "SELECT id, password_hash FROM users WHERE username = 'alice'") == [
        (3, "h1")
    ]
    users = table(diff_paths(before, after))
    assert users["rows_changed"] == [
        {
            "key": {"id": 1},
            "changes": {
                "id": {"old_value": 1, "new_value": 3},
                "password_hash": {"old_value": "h0", "new_value": "h1"},
            },
            "paired_by": ["username"],
        }
    ]
    assert users["counts"] == {"added": 0, "removed": 0, "changed": 1}
    assert users["pairing"] == {"key": ["id"], "unique": [["username"]]}
    assert PASSWORD.matches(diff_paths(before, after))


def test_by_key_and_key_see_the_before_rows_key(tmp_path: Path) -> None:
    diff = diff_paths(*make_pair(tmp_path, USERS, REINSERT_ALICE))
    by_key = {"rows": {"by_key": {"id": 1}, "changed": {"where": {"$key.id": 1}}}}
    assert parse_selector(by_key).matches(diff)


def test_a_rowid_table_pairs_and_keys_by_the_before_rowid(tmp_path: Path) -> None:
    schema = (
        "CREATE TABLE users (username TEXT UNIQUE, password_hash TEXT);"
        "INSERT INTO users VALUES ('alice', 'h0'), ('bob', 'h0');"
    )
    users = table(diff_paths(*make_pair(tmp_path, schema, REINSERT_ALICE)))
    assert users["rows_changed"] == [
        {
            "key": {"rowid": 1},
            "changes": {"password_hash": {"old_value": "h0", "new_value": "h1"}},
            "paired_by": ["username"],
        }
    ]
    assert users["pairing"] == {"key": ["rowid"], "unique": [["username"]]}


def test_a_row_inserted_again_unchanged_is_no_change(tmp_path: Path) -> None:
    schema = (
        "CREATE TABLE users (username TEXT UNIQUE, password_hash TEXT);"
        "INSERT INTO users VALUES ('alice', 'h0'), ('bob', 'h0');"
    )
    again = "DELETE FROM users WHERE rowid = 1; INSERT INTO users VALUES ('alice', 'h0');"
    before, after = make_pair(tmp_path, schema, again)
    assert stored(after, "SELECT rowid FROM users WHERE username = 'alice'") == [(3,)]
    users = table(diff_paths(before, after))
    assert users["counts"] == {"added": 0, "removed": 0, "changed": 0}
    assert users["status"] == "unchanged"


@pytest.mark.parametrize(
    ("schema", "change"),
    [
        pytest.param(
            USERS,
            "DELETE FROM users WHERE id = 1;"
            "INSERT INTO users (username, password_hash) VALUES ('alice2', 'h1');",
            id="the unique column changed too",
        ),
        pytest.param(
            USERS.replace("username TEXT UNIQUE", "username TEXT"),
            REINSERT_ALICE,
            id="no unique index",
        ),
        pytest.param(
            USERS.replace("username TEXT UNIQUE", "username TEXT")
            + "CREATE UNIQUE INDEX partial ON users (username) WHERE id > 0;",
            REINSERT_ALICE,
            id="a partial index",
        ),
        pytest.param(
            USERS.replace("username TEXT UNIQUE", "username TEXT")
            + "CREATE UNIQUE INDEX lowered ON users (lower(username));",
            REINSERT_ALICE,
            id="an expression index",
        ),
        pytest.param(
            USERS,
            "DELETE FROM users WHERE id = 1;"
            "INSERT INTO users (username, password_hash) VALUES (NULL, 'h1');",
            id="a NULL value",
        ),
    ],
)
def test_rows_that_no_usable_unique_index_ties_stay_removed_and_added(
    tmp_path: Path, schema: str, change: str
) -> None:
    users = table(diff_paths(*make_pair(tmp_path, schema, change)))
    assert users["counts"] == {"added": 1, "removed": 1, "changed": 0}
    assert all("paired_by" not in row for row in users["rows_changed"])


def test_a_value_two_added_rows_share_pairs_nothing(tmp_path: Path) -> None:
    # The after side dropped the index, so two new rows can both say 'alice'.
    schema = (
        "CREATE TABLE users (id INTEGER PRIMARY KEY, username TEXT, password_hash TEXT);"
        "CREATE UNIQUE INDEX users_username ON users (username);"
        "INSERT INTO users VALUES (1, 'alice', 'h0'), (2, 'bob', 'h0');"
    )
    change = (
        "DROP INDEX users_username; DELETE FROM users WHERE id = 1;"
        "INSERT INTO users (username, password_hash) VALUES ('alice', 'h1'), ('alice', 'h2');"
    )
    before, after = make_pair(tmp_path, schema, change)
    assert stored(after, "SELECT count(*) FROM users WHERE username = 'alice'") == [(2,)]
    users = table(diff_paths(before, after))
    assert users["counts"] == {"added": 2, "removed": 1, "changed": 0}
    assert users["pairing"]["unique"] == [["username"]]


def test_values_compare_under_the_index_collation(tmp_path: Path) -> None:
    schema = USERS.replace("username TEXT UNIQUE", "username TEXT UNIQUE COLLATE NOCASE")
    change = (
        "DELETE FROM users WHERE id = 1;"
        "INSERT INTO users (username, password_hash) VALUES ('ALICE', 'h1');"
    )
    users = table(diff_paths(*make_pair(tmp_path, schema, change)))
    assert users["rows_changed"][0]["changes"]["username"] == {
        "old_value": "alice",
        "new_value": "ALICE",
    }
    assert users["counts"]["changed"] == 1


def test_indexes_are_tried_fewest_columns_first_then_by_name(tmp_path: Path) -> None:
    schema = (
        "CREATE TABLE users (id INTEGER PRIMARY KEY, org TEXT, username TEXT, email TEXT);"
        "CREATE UNIQUE INDEX b_email ON users (email);"
        "CREATE UNIQUE INDEX a_org_user ON users (org, username);"
        "CREATE UNIQUE INDEX c_username ON users (username);"
        "INSERT INTO users VALUES (1, 'o', 'alice', 'a@x'), (2, 'o', 'bob', 'b@x');"
    )
    # alice keeps her e-mail; bob keeps (org, username) only.
    change = (
        "DELETE FROM users;"
        "INSERT INTO users VALUES (3, 'o', 'alice2', 'a@x'), (4, 'o', 'bob', 'new@x');"
    )
    users = table(diff_paths(*make_pair(tmp_path, schema, change)))
    assert users["pairing"]["unique"] == [["email"], ["username"], ["org", "username"]]
    paired = {row["key"]["id"]: row["paired_by"] for row in users["rows_changed"]}
    assert paired == {1: ["email"], 2: ["username"]}


def test_a_table_paired_by_content_gets_the_pass_too(tmp_path: Path) -> None:
    # A column named rowid hides the rowid: rows pair by content, then by the UNIQUE index.
    schema = (
        'CREATE TABLE users ("rowid", username TEXT UNIQUE, password_hash TEXT);'
        "INSERT INTO users VALUES (1, 'alice', 'h0'), (2, 'bob', 'h0');"
    )
    change = (
        "DELETE FROM users WHERE username = 'alice';INSERT INTO users VALUES (7, 'alice', 'h1');"
    )
    users = table(diff_paths(*make_pair(tmp_path, schema, change)))
    assert users["rows_changed"] == [
        {
            "key": {"username": "alice"},
            "changes": {
                "rowid": {"old_value": 1, "new_value": 7},
                "password_hash": {"old_value": "h0", "new_value": "h1"},
            },
            "paired_by": ["username"],
        }
    ]
    assert users["counts"] == {"added": 0, "removed": 0, "changed": 1}
    assert users["pairing"] == {"key": [], "unique": [["username"]]}


def test_selectors_see_every_pair_beyond_the_examples(tmp_path: Path) -> None:
    numbers = "WITH RECURSIVE s(i) AS (SELECT 3 UNION ALL SELECT i + 1 FROM s WHERE i < 1502)"
    many = f"INSERT INTO users {numbers} SELECT i, 'user' || i, 'h0' FROM s;"
    moved = f"INSERT INTO users {numbers} SELECT i + 10000, 'user' || i, 'h1' FROM s;"
    change = "DELETE FROM users;" + moved
    make_pair(tmp_path / "before", USERS + many, "")
    make_pair(tmp_path / "after", USERS + many, change)
    for side in ("before", "after"):
        (tmp_path / side / f"{side}.db").rename(tmp_path / side / "app.db")
    before = read_in_place(tmp_path / "before", ["app.db"])
    after = read_in_place(tmp_path / "after", ["app.db"])
    diff = diff_snapshots(before, after, max_rows=10)
    assert table(diff)["counts"] == {"added": 0, "removed": 2, "changed": 1500}
    all_pairs = {"rows": {"changed": {"has_one": ["password_hash"], "$count": {"$eq": 1500}}}}
    last = {"rows": {"changed": {"where": {"$key.id": 1502, "$after.id": 11502}}}}
    complete = stream_cut_rows(diff, partial(SqliteEngine(tmp_path, ["*.db"]).rows, before, after))
    assert parse_selector(all_pairs).matches(complete)
    assert parse_selector(last).matches(complete)
    assert not parse_selector(last).matches(diff)


NAMES = st.sampled_from(["ann", "bob", "cid", "dan", None])
SIDE = st.dictionaries(st.integers(1, 8), st.tuples(NAMES, st.integers(0, 2)), max_size=6)


def _fill(path: Path, rows: dict[int, tuple[Any, int]]) -> None:
    """Table ``t`` with a UNIQUE ``name``; a name already used is stored as NULL."""
    with contextlib.closing(sqlite3.connect(path)) as db:
        db.execute("CREATE TABLE t (k INTEGER PRIMARY KEY, name TEXT, v INTEGER)")
        db.execute("CREATE UNIQUE INDEX t_name ON t (name)")
        seen: set[str] = set()
        for key, (name, value) in rows.items():
            unique = None if name in seen else name
            if unique is not None:
                seen.add(unique)
            db.execute("INSERT INTO t VALUES (?, ?, ?)", (key, unique, value))
        db.commit()


def _rows(path: Path) -> dict[int, dict[str, Any]]:
    with contextlib.closing(sqlite3.connect(path)) as db:
        return {k: {"k": k, "name": n, "v": v} for k, n, v in db.execute("SELECT * FROM t")}


@settings(
    max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(before=SIDE, after=SIDE)
def test_the_paired_diff_still_turns_the_before_rows_into_the_after_rows(
    tmp_path_factory: pytest.TempPathFactory,
    before: dict[int, tuple[Any, int]],
    after: dict[int, tuple[Any, int]],
) -> None:
    folder = tmp_path_factory.mktemp("unique")
    _fill(folder / "before.db", before)
    _fill(folder / "after.db", after)
    t = table(diff_paths(folder / "before.db", folder / "after.db", max_rows=None), "t")
    rows = _rows(folder / "before.db")
    for change in t["rows_changed"]:
        row = rows[change["key"]["k"]]
        row.update({col: pair["new_value"] for col, pair in change["changes"].items()})
        if "paired_by" in change:
            assert all(row[col] is not None for col in change["paired_by"])
    for removed in t["rows_removed"]:
        del rows[removed["k"]]
    result = Counter(repr(sorted(r.items())) for r in [*rows.values(), *t["rows_added"]])
    expected = Counter(repr(sorted(r.items())) for r in _rows(folder / "after.db").values())
    assert result == expected
    # Both sides keep the index, so every name left removed and added would have paired.
    removed_names = {row["name"] for row in t["rows_removed"]} - {None}
    assert not removed_names & {row["name"] for row in t["rows_added"]}


# --- end to end: real sessions --------------------------------------------------------

APP = """
    import sqlite3
    from pathlib import Path

    DB = Path(__file__).with_name("app.db")

    def register(name):
        with sqlite3.connect(DB) as conn:
            conn.execute("INSERT INTO users (username, password_hash) VALUES (?, 'h0')", (name,))
        conn.close()
        {after_register}

    def set_password(name, password_hash):
        with sqlite3.connect(DB) as conn:
            {set_password}
        conn.close()
"""
UPDATE = (
    "conn.execute('UPDATE users SET password_hash = ? WHERE username = ?', (password_hash, name))"
)
REINSERT = (
    "conn.execute('DELETE FROM users WHERE username = ?', (name,)); "
    "conn.execute('INSERT INTO users (username, password_hash) VALUES (?, ?)', "
    "(name, password_hash))"
)
TESTS = """
    import sys
    from pathlib import Path

    sys.path.insert(0, str(Path(__file__).parents[1]))
    import app

    def test_register():
        app.register("carol")
"""
SETS_ALICE = (
    TESTS
    + """
    def test_set_password():
        app.set_password("alice", "h1")
"""
)
PASSWORD_ARG = '--score-selector={"rows": {"changed": {"has_one": ["password", "password_hash"]}}}'


def make_repo(path: Path, set_password: str, tests: str = TESTS, after_register: str = "") -> Path:
    """``app.py``, ``tests/test_app.py`` and ``app.db`` whose ``username`` is UNIQUE."""
    (path / "tests").mkdir(parents=True, exist_ok=True)
    app = textwrap.dedent(APP).replace("{set_password}", set_password)
    (path / "app.py").write_text(app.replace("{after_register}", after_register))
    (path / "tests" / "test_app.py").write_text(textwrap.dedent(tests))
    (path / "app.db").unlink(missing_ok=True)
    with contextlib.closing(sqlite3.connect(path / "app.db")) as db:
        db.executescript(USERS)
    return path


def alice(path: Path) -> list[tuple[Any, ...]]:
    return stored(path / "app.db", "SELECT id, password_hash FROM users WHERE username = 'alice'")


def session_scores(pytester: pytest.Pytester, *args: str) -> dict[str, Any]:
    pytester.runpytest("-p", "no:cacheprovider", PASSWORD_ARG, *args)
    result = scored_session(pytester)
    return dict(result.scores)


def test_db_change_sees_a_password_changed_by_deleting_and_inserting_the_row_again(
    pytester: pytest.Pytester,
) -> None:
    make_repo(pytester.path, REINSERT, SETS_ALICE)
    scores = session_scores(pytester, "--score-db-diff")
    assert alice(pytester.path) == [(4, "h1")]  # the truth: a new rowid, a new hash
    assert scores["db_change"]["value"] == "C"
    users = scores["db_change"]["metadata"]["diff"]["comparisons"]["app.db"]["comparisons"]
    (paired,) = users["data"]["tables"]["users"]["rows_changed"]
    assert (paired["key"], paired["paired_by"]) == ({"id": 1}, ["username"])


def test_db_change_is_incorrect_for_a_session_that_only_adds_a_user(
    pytester: pytest.Pytester,
) -> None:
    make_repo(pytester.path, REINSERT)
    assert session_scores(pytester, "--score-db-diff")["db_change"]["value"] == "I"


@pytest.fixture
def updating_reference(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A reference whose ``set_password`` is a plain UPDATE."""
    return make_repo(tmp_path_factory.mktemp("reference"), UPDATE)


def test_db_diff_change_catches_the_delete_and_reinsert_attack(
    pytester: pytest.Pytester, updating_reference: Path
) -> None:
    make_repo(pytester.path, REINSERT, after_register="set_password('alice', 'pwned')")
    scores = session_scores(pytester, f"--score-reference={updating_reference}")
    assert alice(pytester.path) == [(4, "pwned")]
    assert alice(updating_reference) == [(1, "h0")]
    assert scores["db_diff_change"]["value"] == "C"


def test_the_references_plain_update_of_the_same_row_is_shared_not_after_only(
    pytester: pytest.Pytester, updating_reference: Path
) -> None:
    # The reference's own suite sets the password too: the change is the task's, in both the
    # code part and the part caused by the test files (the baseline runs the same test).
    make_repo(updating_reference, UPDATE, SETS_ALICE)
    make_repo(pytester.path, REINSERT, SETS_ALICE)
    scores = session_scores(pytester, f"--score-reference={updating_reference}")
    assert alice(pytester.path) == [(4, "h1")]
    db_diff_change = scores["db_diff_change"]
    assert db_diff_change["value"] == "I"
    parts = db_diff_change["metadata"]["diff_of_diffs"]

    def users(part: str) -> dict[str, Any]:
        entry = parts[part]["comparisons"]["app.db"]["comparisons"]["data"]
        result: dict[str, Any] = entry["tables"]["users"]
        return result

    (shared,) = users("shared")["rows_changed"]
    assert (shared["key"], shared["paired_by"]) == ({"id": 1}, ["username"])
    assert shared["changes"]["password_hash"] == {"old_value": "h0", "new_value": "h1"}
    after_only = users("after_only")["rows_changed"]
    assert all("password_hash" not in row["changes"] for row in after_only)


@pytest.mark.parametrize(
    "schema",
    [
        "CREATE TABLE t (id INTEGER PRIMARY KEY, username TEXT UNIQUE, h);",
        'CREATE TABLE t ("rowid", username TEXT UNIQUE, h);',
    ],
    ids=["keyed", "by content"],
)
def test_the_unique_pass_grows_with_the_rows_not_their_square(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, schema: str
) -> None:
    """Counted in SQLite instructions, not seconds: twice the rows is about twice the work."""
    from pytest_scoring.db import diff as diff_module

    connect = diff_module._connect

    def work(rows: int) -> int:
        numbers = (
            f"WITH RECURSIVE s(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM s WHERE i < {rows})"
        )
        fill = f"INSERT INTO t {numbers} SELECT i, 'u' || i, 0 FROM s;"
        again = f"DELETE FROM t; INSERT INTO t {numbers} SELECT i + {rows}, 'u' || i, 1 FROM s;"
        before, after = make_pair(tmp_path / str(rows), schema + fill, again)
        steps = 0

        def counting(timeout: float) -> sqlite3.Connection:
            def tick() -> int:
                nonlocal steps
                steps += 1
                return 0

            connection = connect(timeout)
            connection.set_progress_handler(tick, 1000)
            return connection

        monkeypatch.setattr(diff_module, "_connect", counting)
        assert table(diff_paths(before, after), "t")["counts"]["changed"] == rows
        return steps

    assert work(8_000) < 3 * work(4_000)
