"""The database diff: shape, pairing, type-aware values, checked against sqldiff."""

from __future__ import annotations

import base64
import contextlib
import hashlib
import re
import sqlite3
from collections import Counter
from collections.abc import Iterable
from collections.abc import Sequence
from functools import partial
from pathlib import Path
from typing import Any

import pytest
import sqldiff  # type: ignore[import-untyped]
from hypothesis import HealthCheck
from hypothesis import given
from hypothesis import settings
from hypothesis import strategies as st

from pytest_scoring.db.diff import diff_paths
from pytest_scoring.db.diff import diff_snapshots
from pytest_scoring.db.diff_shape import cap_diff
from pytest_scoring.db.diff_shape import stream_cut_rows
from pytest_scoring.db.row_sql import json_value
from pytest_scoring.db.snapshot import read_in_place
from pytest_scoring.db.sqlite_engine import SqliteEngine
from pytest_scoring.selector.language import parse_selector


def make_db(path: Path, script: str, *inserts: tuple[str, Sequence[Any]]) -> Path:
    """A database built by ``script`` plus parameterised inserts, closed again."""
    with contextlib.closing(sqlite3.connect(path)) as db:
        db.execute("PRAGMA synchronous = OFF")  # test speed; durability is not under test
        db.executescript(script)
        for sql, params in inserts:
            db.execute(sql, params)
        db.commit()
    return path


def table_diff(diff: dict[str, Any], table: str, db: str | None = None) -> dict[str, Any]:
    entry = diff["comparisons"][db or next(iter(diff["comparisons"]))]
    result: dict[str, Any] = entry["comparisons"]["data"]["tables"][table]
    return result


USERS = "CREATE TABLE users (id INTEGER PRIMARY KEY, email TEXT COLLATE NOCASE, role TEXT);"


def test_a_changed_password_is_reported_with_its_key_and_old_and_new_values(tmp_path: Path) -> None:
    script = "CREATE TABLE users (id INTEGER PRIMARY KEY, password TEXT);"
    before = make_db(tmp_path / "b.db", script, ("INSERT INTO users VALUES (3, 'x')", ()))
    after = make_db(tmp_path / "a.db", script, ("INSERT INTO users VALUES (3, 'y')", ()))
    users = table_diff(diff_paths(before, after), "users")
    assert users["status"] == "changed"
    assert users["rows_changed"] == [
        {"key": {"id": 3}, "changes": {"password": {"old_value": "x", "new_value": "y"}}}
    ]
    assert users["counts"] == {"added": 0, "removed": 0, "changed": 1}
    assert (users["before_rows"], users["after_rows"], users["truncated"]) == (1, 1, False)


def test_the_diff_has_exactly_the_spec_shape(tmp_path: Path) -> None:
    before = make_db(tmp_path / "b.db", USERS)
    after = make_db(tmp_path / "a.db", USERS, ("INSERT INTO users VALUES (1, 'a', 'r')", ()))
    diff = diff_paths(before, after)
    assert set(diff) == {"status", "before_source", "after_source", "db_patterns", "comparisons"}
    assert diff["status"] == "success"
    entry = diff["comparisons"]["a.db"]
    assert set(entry) == {"comparisons", "info"}
    assert set(entry["info"]) == {"path_before", "path_after", "exists_before", "exists_after"}
    assert set(table_diff(diff, "users")) == {
        "status",
        "rows_added",
        "rows_removed",
        "rows_changed",
        "before_rows",
        "after_rows",
        "counts",
        "truncated",
        "pairing",
    }
    assert entry["comparisons"]["schema"]["tables"]["users"] == {
        "status": "unchanged",
        "columns_added": [],
        "columns_removed": [],
        "columns_changed": [],
    }


def test_values_compare_by_type_so_one_is_not_the_text_one(tmp_path: Path) -> None:
    script = "CREATE TABLE t (k INTEGER PRIMARY KEY, v);"
    rows = [(1, 1), (2, 1), (3, None), (4, b"\x00\xff")]
    before = make_db(tmp_path / "b.db", script, *(("INSERT INTO t VALUES (?, ?)", r) for r in rows))
    changed = [(1, "1"), (2, 1.0), (3, None), (4, b"\x00\xff")]
    after = make_db(
        tmp_path / "a.db", script, *(("INSERT INTO t VALUES (?, ?)", r) for r in changed)
    )
    t = table_diff(diff_paths(before, after), "t")
    assert [row["key"]["k"] for row in t["rows_changed"]] == [1, 2]
    assert t["rows_changed"][0]["changes"]["v"] == {"old_value": 1, "new_value": "1"}


@pytest.mark.parametrize("declared", ["", "BLOB"])
def test_an_integer_and_the_equal_real_differ_either_way_in_a_column_without_affinity(
    tmp_path: Path, declared: str
) -> None:
    script = f"CREATE TABLE t (k INTEGER PRIMARY KEY, v {declared});"
    insert = "INSERT INTO t VALUES (?, ?)"
    old = [(1, 1.0), (2, 2), (3, "3"), (4, b"4"), (5, -0.0), (6, 7)]
    new = [(1, 1), (2, 2.0), (3, b"3"), (4, "4"), (5, 0), (6, 7)]
    before = make_db(tmp_path / "b.db", script, *((insert, row) for row in old))
    after = make_db(tmp_path / "a.db", script, *((insert, row) for row in new))
    t = table_diff(diff_paths(before, after), "t")
    assert [row["key"]["k"] for row in t["rows_changed"]] == [1, 2, 3, 4, 5]
    assert t["rows_changed"][0]["changes"]["v"] == {"old_value": 1.0, "new_value": 1}


SETTINGS = "CREATE TABLE s (k TEXT PRIMARY KEY, n INTEGER, t TEXT COLLATE NOCASE) WITHOUT ROWID;"


def test_a_without_rowid_table_gives_its_rows_in_key_order_and_sees_a_change_of_case(
    tmp_path: Path,
) -> None:
    insert = "INSERT INTO s VALUES (?, ?, ?)"
    old = [(f"k{i:02d}", i, "abc") for i in range(1, 11)]
    new = [row for row in old if row[0] not in ("k03", "k07")] + [("k11", 11, ""), ("k00", 0, "")]
    new = [
        ("k02", 20, "abc") if k == "k02" else ("k05", 5, "ABC") if k == "k05" else (k, n, t)
        for k, n, t in new
    ]
    before = make_db(tmp_path / "b.db", SETTINGS, *((insert, row) for row in old))
    after = make_db(tmp_path / "a.db", SETTINGS, *((insert, row) for row in reversed(new)))
    s = table_diff(diff_paths(before, after), "s")
    assert [row["k"] for row in s["rows_added"]] == ["k00", "k11"]
    assert [row["k"] for row in s["rows_removed"]] == ["k03", "k07"]
    assert s["rows_changed"] == [
        {"key": {"k": "k02"}, "changes": {"n": {"old_value": 2, "new_value": 20}}},
        {"key": {"k": "k05"}, "changes": {"t": {"old_value": "abc", "new_value": "ABC"}}},
    ]


def test_an_integer_that_became_the_equal_real_in_a_without_rowid_table_is_a_change(
    tmp_path: Path,
) -> None:
    script = "CREATE TABLE s (k TEXT PRIMARY KEY, v) WITHOUT ROWID;"
    insert = "INSERT INTO s VALUES (?, ?)"
    before = make_db(tmp_path / "b.db", script, (insert, ("a", 1)), (insert, ("b", "x")))
    after = make_db(tmp_path / "a.db", script, (insert, ("a", 1.0)), (insert, ("b", "x")))
    s = table_diff(diff_paths(before, after), "s")
    assert s["rows_changed"] == [
        {"key": {"k": "a"}, "changes": {"v": {"old_value": 1, "new_value": 1.0}}}
    ]


def test_a_nocase_column_still_reports_a_change_of_letter_case(tmp_path: Path) -> None:
    before = make_db(tmp_path / "b.db", USERS, ("INSERT INTO users VALUES (1, 'a@x', 'r')", ()))
    after = make_db(tmp_path / "a.db", USERS, ("INSERT INTO users VALUES (1, 'A@x', 'r')", ()))
    assert table_diff(diff_paths(before, after), "users")["counts"]["changed"] == 1


def test_a_table_without_a_key_sees_a_change_of_letter_case_in_a_nocase_column(
    tmp_path: Path,
) -> None:
    script = 'CREATE TABLE log ("rowid", msg TEXT COLLATE NOCASE);'  # no rowid: no key
    before = make_db(tmp_path / "b.db", script, ("INSERT INTO log VALUES (1, 'admin')", ()))
    after = make_db(tmp_path / "a.db", script, ("INSERT INTO log VALUES (1, 'ADMIN')", ()))
    log = table_diff(diff_paths(before, after), "log")
    assert log["rows_removed"] == [{"rowid": 1, "msg": "admin"}]
    assert log["rows_added"] == [{"rowid": 1, "msg": "ADMIN"}]


def test_text_that_is_not_utf8_is_diffed_with_replacement_characters(tmp_path: Path) -> None:
    script = "CREATE TABLE users (id INTEGER PRIMARY KEY, name TEXT);"
    before = make_db(tmp_path / "b.db", script, ("INSERT INTO users VALUES (1, 'ann')", ()))
    after = make_db(
        tmp_path / "a.db", script, ("INSERT INTO users VALUES (1, CAST(X'61FF' AS TEXT))", ())
    )
    diff = diff_paths(before, after)
    assert "error" not in diff["comparisons"]["a.db"]
    assert table_diff(diff, "users")["rows_changed"] == [
        {"key": {"id": 1}, "changes": {"name": {"old_value": "ann", "new_value": "a\ufffd"}}}
    ]


def test_blobs_appear_as_base64_objects(tmp_path: Path) -> None:
    script = "CREATE TABLE files (name TEXT PRIMARY KEY, data BLOB);"
    before = make_db(tmp_path / "b.db", script)
    after = make_db(tmp_path / "a.db", script, ("INSERT INTO files VALUES ('x', ?)", (b"hi",)))
    assert table_diff(diff_paths(before, after), "files")["rows_added"] == [
        {"name": "x", "data": {"$blob": "aGk="}}
    ]


def test_views_and_sqlite_internal_tables_are_ignored(tmp_path: Path) -> None:
    script = (
        "CREATE TABLE t (id INTEGER PRIMARY KEY AUTOINCREMENT, v); "
        "CREATE VIEW everything AS SELECT * FROM t;"
    )
    before = make_db(tmp_path / "b.db", script)
    after = make_db(tmp_path / "a.db", script, ("INSERT INTO t (v) VALUES (1)", ()))
    tables = diff_paths(before, after)["comparisons"]["a.db"]["comparisons"]["data"]["tables"]
    assert list(tables) == ["t"]


def test_a_table_without_rowid_pairs_by_its_primary_key(tmp_path: Path) -> None:
    script = "CREATE TABLE kv (k TEXT, n INTEGER, v, PRIMARY KEY (k, n)) WITHOUT ROWID;"
    before = make_db(tmp_path / "b.db", script, ("INSERT INTO kv VALUES ('a', 1, 'old')", ()))
    after = make_db(tmp_path / "a.db", script, ("INSERT INTO kv VALUES ('a', 1, 'new')", ()))
    kv = table_diff(diff_paths(before, after), "kv")
    assert kv["rows_changed"][0]["key"] == {"k": "a", "n": 1}


def test_a_table_without_a_key_pairs_rows_as_a_multiset(tmp_path: Path) -> None:
    # A column named rowid hides the rowid: no key at all, rows pair by content.
    script = 'CREATE TABLE log ("rowid", msg);'
    insert = "INSERT INTO log VALUES (?, ?)"
    before = make_db(tmp_path / "b.db", script, (insert, (1, "x")), (insert, (1, "y")))
    after = make_db(
        tmp_path / "a.db", script, (insert, (1, "x")), (insert, (1, "x")), (insert, (1, "x"))
    )
    log = table_diff(diff_paths(before, after), "log")
    assert log["counts"] == {"added": 2, "removed": 1, "changed": 0}
    assert log["rows_added"] == [{"rowid": 1, "msg": "x"}] * 2
    assert log["rows_removed"] == [{"rowid": 1, "msg": "y"}]


def test_a_declared_key_holding_null_falls_back_to_the_rowid(tmp_path: Path) -> None:
    script = "CREATE TABLE t (k TEXT PRIMARY KEY, v);"
    rows = (("INSERT INTO t VALUES (NULL, 1)", ()), ("INSERT INTO t VALUES (NULL, 2)", ()))
    before = make_db(tmp_path / "b.db", script, *rows)
    after = make_db(tmp_path / "a.db", script, rows[0], ("INSERT INTO t VALUES (NULL, 3)", ()))
    t = table_diff(diff_paths(before, after), "t")
    assert t["rows_changed"] == [
        {"key": {"rowid": 2}, "changes": {"v": {"old_value": 2, "new_value": 3}}}
    ]


def test_a_selector_counts_every_equal_row_of_a_cut_table_without_a_key(tmp_path: Path) -> None:
    script = 'CREATE TABLE log ("rowid", msg);'  # no rowid: equal rows pair as a multiset
    insert = ("INSERT INTO log VALUES (1, 'login')", ())
    for side in ("before", "after"):
        (tmp_path / side).mkdir()
    make_db(tmp_path / "before" / "app.db", script)
    make_db(tmp_path / "after" / "app.db", script, insert, insert, insert)
    before = read_in_place(tmp_path / "before", ["app.db"])
    after = read_in_place(tmp_path / "after", ["app.db"])
    diff = diff_snapshots(before, after, max_rows=1)
    assert len(table_diff(diff, "log")["rows_added"]) == 1
    three = parse_selector({"rows": {"added": {"$count": {"$eq": 3}}}})
    assert three.matches(
        stream_cut_rows(diff, partial(SqliteEngine(tmp_path, ["*.db"]).rows, before, after))
    )
    assert not three.matches(diff)


COUNTING = (
    "INSERT INTO t WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM n WHERE i < 30) "
    "SELECT i, 0 FROM n"
)


def test_counts_stay_exact_when_examples_are_cut_at_max_rows(tmp_path: Path) -> None:
    script = "CREATE TABLE t (id INTEGER PRIMARY KEY, v);"
    before = make_db(tmp_path / "b.db", script)
    after = make_db(tmp_path / "a.db", script, (COUNTING, ()))
    t = table_diff(diff_paths(before, after, max_rows=5), "t")
    assert (len(t["rows_added"]), t["counts"]["added"], t["truncated"]) == (5, 30, True)
    assert len(table_diff(diff_paths(before, after, max_rows=None), "t")["rows_added"]) == 30


def test_schema_changes_list_columns_added_removed_and_changed(tmp_path: Path) -> None:
    before = make_db(tmp_path / "b.db", "CREATE TABLE t (id INTEGER PRIMARY KEY, a TEXT, b);")
    after = make_db(tmp_path / "a.db", "CREATE TABLE t (id INTEGER PRIMARY KEY, a INTEGER, c);")
    schema = diff_paths(before, after)["comparisons"]["a.db"]["comparisons"]["schema"]
    t = schema["tables"]["t"]
    assert schema["has_changes"] and t["status"] == "changed"
    assert t["columns_added"] == [{"name": "c", "type": "", "nullable": True, "primary_key": False}]
    assert [c["name"] for c in t["columns_removed"]] == ["b"]
    assert t["columns_changed"] == [
        {
            "name": "a",
            "from": {"name": "a", "type": "TEXT", "nullable": True, "primary_key": False},
            "to": {"name": "a", "type": "INTEGER", "nullable": True, "primary_key": False},
        }
    ]


def test_a_table_created_by_the_session_has_all_its_rows_added(tmp_path: Path) -> None:
    before = make_db(tmp_path / "b.db", "")
    after = make_db(tmp_path / "a.db", USERS, ("INSERT INTO users VALUES (1, 'a', 'admin')", ()))
    entry = diff_paths(before, after)["comparisons"]["a.db"]["comparisons"]
    assert entry["data"]["tables"]["users"]["status"] == "added"
    assert entry["data"]["tables"]["users"]["rows_added"] == [
        {"id": 1, "email": "a", "role": "admin"}
    ]
    assert entry["schema"]["tables"]["users"]["status"] == "added"


def test_databases_on_one_side_only_have_every_table_added_or_removed(tmp_path: Path) -> None:
    (tmp_path / "before").mkdir()
    (tmp_path / "after").mkdir()
    make_db(tmp_path / "before" / "old.db", USERS, ("INSERT INTO users VALUES (1, 'a', 'r')", ()))
    make_db(tmp_path / "after" / "new.db", USERS)
    diff = diff_paths(tmp_path / "before", tmp_path / "after")
    old, new = diff["comparisons"]["old.db"], diff["comparisons"]["new.db"]
    assert (old["info"]["exists_before"], old["info"]["exists_after"]) == (True, False)
    assert old["comparisons"]["data"]["tables"]["users"]["status"] == "removed"
    assert old["comparisons"]["data"]["tables"]["users"]["counts"]["removed"] == 1
    assert new["comparisons"]["schema"]["tables"]["users"]["status"] == "added"


def test_a_corrupt_database_gets_an_error_entry_and_the_others_are_still_diffed(
    tmp_path: Path,
) -> None:
    for side in ("before", "after"):
        (tmp_path / side).mkdir()
        make_db(tmp_path / side / "good.db", USERS)
    (tmp_path / "before" / "fake.db").write_text("not a database")
    (tmp_path / "after" / "fake.db").write_text("not a database")
    good = make_db(tmp_path / "after" / "broken.db", USERS)
    data = good.read_bytes()
    (tmp_path / "before" / "broken.db").write_bytes(data[:100] + b"\x00" * 50 + data[150:4096])
    make_db(tmp_path / "after" / "good.db", "", ("INSERT INTO users VALUES (1, 'a', 'r')", ()))
    diff = diff_paths(tmp_path / "before", tmp_path / "after")
    assert "not a SQLite database" in diff["comparisons"]["fake.db"]["error"]
    assert "error" in diff["comparisons"]["broken.db"]
    assert diff["comparisons"]["good.db"]["comparisons"]["data"]["has_changes"]


def test_a_database_locked_while_read_in_place_gets_an_error_entry(tmp_path: Path) -> None:
    make_db(tmp_path / "locked.db", USERS)
    make_db(tmp_path / "fine.db", USERS)
    snapshot = read_in_place(tmp_path, ["fine.db", "locked.db"])
    with contextlib.closing(sqlite3.connect(tmp_path / "locked.db", isolation_level=None)) as db:
        db.execute("PRAGMA locking_mode = EXCLUSIVE")
        db.execute("BEGIN EXCLUSIVE")
        diff = diff_snapshots(snapshot, snapshot, timeout=0.05)
        db.execute("ROLLBACK")
    assert "locked" in diff["comparisons"]["locked.db"]["error"]
    assert "error" not in diff["comparisons"]["fine.db"]


def test_a_live_database_is_read_in_place_without_being_written(tmp_path: Path) -> None:
    db = make_db(tmp_path / "app.db", USERS)
    before_bytes = db.read_bytes()
    snapshot = read_in_place(tmp_path, ["app.db"])
    diff_snapshots(snapshot, snapshot)
    assert db.read_bytes() == before_bytes
    assert sorted(p.name for p in tmp_path.iterdir()) == ["app.db"]


# --- property-based: counts agree with sqldiff, examples reproduce the change -----------------

VALUES = st.one_of(
    st.none(),
    st.integers(-3, 3),
    st.sampled_from([0.5, -2.25, 1e100]),
    st.sampled_from(["", "1", "a", "A", "é"]),
    st.sampled_from([b"", b"1", b"\x00"]),
)
KEYS = st.integers(1, 12)
#: Every pairing kind sqldiff also knows: INTEGER PRIMARY KEY, rowid, WITHOUT ROWID, text key.
TABLES = {
    "ipk": "CREATE TABLE ipk (k INTEGER PRIMARY KEY, a, b);",
    "byrowid": "CREATE TABLE byrowid (a, b);",
    "wr": "CREATE TABLE wr (k TEXT PRIMARY KEY, a, b) WITHOUT ROWID;",
    "tpk": "CREATE TABLE tpk (k TEXT NOT NULL PRIMARY KEY, a, b);",
}
SIDE = st.dictionaries(KEYS, st.tuples(VALUES, VALUES), max_size=10)


def _fill(path: Path, content: dict[str, dict[int, tuple[Any, Any]]]) -> None:
    with contextlib.closing(sqlite3.connect(path)) as db:
        db.execute("PRAGMA synchronous = OFF")
        db.executescript("".join(TABLES.values()))
        for name, rows in content.items():
            key_column = "rowid" if name == "byrowid" else "k"
            for key, (a, b) in rows.items():
                stored_key = f"key{key}" if name in ("wr", "tpk") else key
                db.execute(
                    f"INSERT INTO {name} ({key_column}, a, b) VALUES (?, ?, ?)", (stored_key, a, b)
                )
        db.commit()


def sqldiff_counts(before: Path, after: Path) -> dict[str, Counter[str]]:
    """Statements per table in sqldiff's output: INSERT, DELETE, UPDATE."""
    counts: dict[str, Counter[str]] = {name: Counter() for name in TABLES}
    for line in sqldiff.diff(str(before), str(after), primary_key=True).splitlines():
        found = re.match(r"(INSERT INTO|DELETE FROM|UPDATE) (\w+)", line)
        if found:
            counts[found[2]][found[1].split()[0]] += 1
    return counts


def _rows_counter(rows: list[dict[str, Any]]) -> Counter[str]:
    return Counter(repr(sorted(row.items())) for row in rows)


def _reproduces(
    table: dict[str, Any], before: dict[Any, dict[str, Any]], after: dict[Any, dict[str, Any]]
) -> bool:
    """Applying the diff's rows to the before rows gives the after rows (as a multiset)."""
    rows = {key: dict(row) for key, row in before.items()}
    for change in table["rows_changed"]:
        row = rows[next(iter(change["key"].values()))]
        row.update({column: value["new_value"] for column, value in change["changes"].items()})
    result = _rows_counter(list(rows.values())) - _rows_counter(table["rows_removed"])
    return result + _rows_counter(table["rows_added"]) == _rows_counter(list(after.values()))


def _all_rows(path: Path, table: str) -> dict[Any, dict[str, Any]]:
    """Rows by key (the rowid for the rowid table), values as the diff shows them."""
    key = "rowid" if table == "byrowid" else "k"
    with contextlib.closing(sqlite3.connect(path)) as db:
        cursor = db.execute(f"SELECT {key}, * FROM {table}")
        names = [d[0] for d in cursor.description][1:]
        return {
            row[0]: {n: json_value(v) for n, v in zip(names, row[1:], strict=True)}
            for row in cursor
        }


@settings(
    max_examples=50, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(
    before=st.fixed_dictionaries(dict.fromkeys(TABLES, SIDE)),
    after=st.fixed_dictionaries(dict.fromkeys(TABLES, SIDE)),
)
@pytest.mark.slow
def test_counts_match_sqldiff_and_examples_reproduce_the_change(
    tmp_path_factory: pytest.TempPathFactory, before: dict[str, Any], after: dict[str, Any]
) -> None:
    folder = tmp_path_factory.mktemp("pair")
    _fill(folder / "before.db", before)
    _fill(folder / "after.db", after)
    diff = diff_paths(folder / "before.db", folder / "after.db", max_rows=None)
    expected = sqldiff_counts(folder / "before.db", folder / "after.db")
    for name in TABLES:
        table = table_diff(diff, name)
        counts = table["counts"]
        assert (counts["added"], counts["removed"], counts["changed"]) == (
            expected[name]["INSERT"],
            expected[name]["DELETE"],
            expected[name]["UPDATE"],
        ), name
        old, new = _all_rows(folder / "before.db", name), _all_rows(folder / "after.db", name)
        assert _reproduces(table, old, new), name


ROWS = st.lists(st.tuples(VALUES, VALUES), max_size=8)


@settings(max_examples=30, deadline=None)
@given(before=ROWS, after=ROWS)
def test_rows_without_a_key_pair_as_multisets_of_typed_values(
    tmp_path_factory: pytest.TempPathFactory,
    before: list[tuple[Any, Any]],
    after: list[tuple[Any, Any]],
) -> None:
    folder = tmp_path_factory.mktemp("multiset")
    insert = "INSERT INTO log VALUES (?, ?)"
    script = 'CREATE TABLE log ("rowid", msg);'
    make_db(folder / "b.db", script, *((insert, row) for row in before))
    make_db(folder / "a.db", script, *((insert, row) for row in after))
    log = table_diff(diff_paths(folder / "b.db", folder / "a.db", max_rows=None), "log")

    old, new = _typed(before), _typed(after)
    assert _typed((r["rowid"], r["msg"]) for r in log["rows_added"]) == new - old
    assert _typed((r["rowid"], r["msg"]) for r in log["rows_removed"]) == old - new
    assert log["counts"]["added"] == (new - old).total()


def _typed(rows: Iterable[Sequence[Any]]) -> Counter[str]:
    """Rows as comparable text of value and type, so ``1``, ``1.0`` and ``"1"`` differ."""
    return Counter(
        repr([(type(json_value(v)).__name__, json_value(v)) for v in row]) for row in rows
    )


def test_identifiers_with_quotes_and_spaces_are_quoted_safely(tmp_path: Path) -> None:
    script = 'CREATE TABLE "we""ird table" ("k ey" INTEGER PRIMARY KEY, "va""l" TEXT);'
    insert = 'INSERT INTO "we""ird table" VALUES (1, ?)'
    before = make_db(tmp_path / "b.db", script, (insert, ("x'); DROP TABLE t; --",)))
    after = make_db(tmp_path / "a.db", script, (insert, ("y",)))
    table = table_diff(diff_paths(before, after), 'we"ird table')
    assert table["rows_changed"] == [
        {
            "key": {"k ey": 1},
            "changes": {'va"l': {"old_value": "x'); DROP TABLE t; --", "new_value": "y"}},
        }
    ]


def test_a_column_added_with_a_value_shows_as_a_change_from_null(tmp_path: Path) -> None:
    before = make_db(tmp_path / "b.db", USERS, ("INSERT INTO users VALUES (1, 'a', 'r')", ()))
    after = make_db(
        tmp_path / "a.db",
        "CREATE TABLE users (id INTEGER PRIMARY KEY, email TEXT, role TEXT, admin INTEGER);",
        ("INSERT INTO users VALUES (1, 'a', 'r', 1)", ()),
    )
    users = table_diff(diff_paths(before, after), "users")
    assert users["rows_changed"] == [
        {"key": {"id": 1}, "changes": {"admin": {"old_value": None, "new_value": 1}}}
    ]


def test_a_capped_diff_keeps_a_huge_blob_as_a_stub_with_its_size_hash_and_head(
    tmp_path: Path,
) -> None:
    script = "CREATE TABLE files (id INTEGER PRIMARY KEY, body BLOB);"
    blob = b"\x01" * 1_000_000
    before = make_db(tmp_path / "b.db", script)
    after = make_db(tmp_path / "a.db", script, ("INSERT INTO files VALUES (1, ?)", (blob,)))
    files = table_diff(cap_diff(diff_paths(before, after), 10, value_cap=9_000), "files")
    stub = files["rows_added"][0]["body"]
    assert stub["$truncated"] == 1_000_000
    assert stub["sha256"] == hashlib.sha256(blob).hexdigest()
    assert base64.b64decode(stub["head"]["$blob"], validate=True) == blob[:9_000]
    assert files["truncated"] is True
