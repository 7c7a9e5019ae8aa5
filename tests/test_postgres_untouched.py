"""The rows no session touched, found by where they lie and who wrote them
(docs/databases.md#postgresql): skipped only where that proves them the same, so that no
rewrite, catalog change or reuse of a row's place can hide or invent a change; each case
against its SQLite twin (the same changes in SQLite) or the value it must show."""

from __future__ import annotations

import random
from pathlib import Path

import pytest
from postgres_cluster import Cluster
from test_postgres_diff import REWRITE
from test_postgres_diff import both_diffs
from test_postgres_diff import diff_after

from pytest_scoring.db.postgres.untouched import unmatched

pytestmark = pytest.mark.slow

#: ``n`` from 1 to 3,000, for a seed's ``INSERT … SELECT``.
ROWS = "WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM n WHERE i < 3000) "
#: Accounts in both engines, all written by one transaction (so all of one ``xmin``).
ACCOUNTS = (
    "CREATE TABLE accounts (id INTEGER PRIMARY KEY, email TEXT, role TEXT);",
    "CREATE TABLE accounts (id int PRIMARY KEY, email text, role text);",
)
SEED = f"INSERT INTO accounts {ROWS}SELECT i, 'user' || i || '@example.com', 'user' FROM n;"


def _record(page: int, line: int, xmin: int) -> bytes:
    return page.to_bytes(4) + line.to_bytes(2) + xmin.to_bytes(4)


@pytest.mark.parametrize("seed", range(4))
def test_exactly_the_records_with_no_equal_record_on_the_other_side_are_unmatched(
    seed: int,
) -> None:
    """Rows removed, rewritten in place (a new ``xmin`` at the same ``ctid``) and added,
    among 5,000 in page order, at both ends too: each side's unmatched records are exactly
    those the other side lacks, in order."""
    shuffle = random.Random(seed)
    old = [_record(page, line, 100) for page in range(50) for line in range(1, 101)]
    new = list(old)
    for at in sorted(shuffle.sample(range(len(new)), 300), reverse=True):
        del new[at]
    for at in shuffle.sample(range(len(new)), 200):
        new[at] = new[at][:6] + (900).to_bytes(4)
    new = [_record(0, 0, 901), *new, *(_record(60, line, 902) for line in range(1, 40))]

    found = list(unmatched(b"".join(old), b"".join(new)))

    assert [record for side, record in found if side == 0] == sorted(set(old) - set(new))
    assert [record for side, record in found if side == 1] == sorted(set(new) - set(old))


def test_nothing_is_unmatched_between_equal_sides_or_missing_from_an_empty_one() -> None:
    records = [_record(page, 1, 7) for page in range(9)]
    assert list(unmatched(b"".join(records), b"".join(records))) == []
    assert list(unmatched(b"", b"".join(records))) == [(1, record) for record in records]


@pytest.mark.parametrize(
    "rewrite",
    ["VACUUM FULL accounts", "CLUSTER accounts USING accounts_pkey"],
    ids=["vacuum full", "cluster"],
)
def test_rows_moved_by_a_rewrite_diff_as_their_sqlite_twin(
    postgres: Cluster, tmp_path: Path, rewrite: str
) -> None:
    """A row removed and another changed, then the table rewritten: every later row moves to
    where an earlier one lay, written by the same transaction, yet the diff is exactly the
    removal and the change."""
    changes = "DELETE FROM accounts WHERE id = 5; UPDATE accounts SET role = 'admin' WHERE id = 9;"

    sqlite, entry = both_diffs(postgres, tmp_path, ACCOUNTS, SEED, changes, (rewrite,))

    assert entry["comparisons"] == sqlite
    assert entry["comparisons"]["data"]["tables"]["accounts"]["counts"] == {
        "added": 0, "removed": 1, "changed": 1,
    }  # fmt: skip


def test_places_freed_by_vacuum_and_written_again_diff_as_their_sqlite_twin(
    postgres: Cluster, tmp_path: Path
) -> None:
    """Rows removed from the middle and the end, the table vacuumed (its freed places then
    taken by new rows, its emptied last pages cut off), rows set to what they were: the
    diff of the same changes made without the ``VACUUM``, in SQLite."""
    changes = (
        "DELETE FROM accounts WHERE id BETWEEN 100 AND 400 OR id > 2500;"
        "UPDATE accounts SET role = role WHERE id < 50;"
    )
    insert = (
        "WITH RECURSIVE n(i) AS (SELECT 5000 UNION ALL SELECT i + 1 FROM n WHERE i < 5250) "
        "INSERT INTO accounts SELECT i, 'new' || i || '@example.com', 'admin' FROM n;"
    )
    for folder in ("twin", "vacuumed"):
        (tmp_path / folder).mkdir()
    twin, _ = both_diffs(postgres, tmp_path / "twin", ACCOUNTS, SEED, changes + insert)

    _, entry = both_diffs(
        postgres, tmp_path / "vacuumed", ACCOUNTS, SEED, changes, ("VACUUM accounts", insert)
    )

    assert entry["comparisons"] == twin
    assert twin["data"]["tables"]["accounts"]["counts"] == {
        "added": 251, "removed": 801, "changed": 0,
    }  # fmt: skip


def test_enum_labels_renamed_show_as_the_values_they_change(
    postgres: Cluster, tmp_path: Path
) -> None:
    """Two labels of an enum swapped by renames: no row is written, yet every row reads the
    other label; the diff is that of the rows updated."""
    tables = (
        ACCOUNTS[0],
        "CREATE TYPE kind AS ENUM ('user', 'admin');"
        "CREATE TABLE accounts (id int PRIMARY KEY, email text, role kind);",
    )
    seed = SEED + "UPDATE accounts SET role = 'admin' WHERE id % 1000 = 0;"
    renames = (
        "ALTER TYPE kind RENAME VALUE 'admin' TO 'swap';"
        "ALTER TYPE kind RENAME VALUE 'user' TO 'admin';"
        "ALTER TYPE kind RENAME VALUE 'swap' TO 'user';"
    )
    (tmp_path / "twin").mkdir()
    swap = "UPDATE accounts SET role = CASE role WHEN 'admin' THEN 'user' ELSE 'admin' END;"
    twin, _ = both_diffs(postgres, tmp_path / "twin", ACCOUNTS, seed, swap)

    _, entry = both_diffs(postgres, tmp_path, tables, seed, "", (renames,))

    assert entry["comparisons"]["data"] == twin["data"]
    assert twin["data"]["tables"]["accounts"]["counts"]["changed"] == 3000


def test_a_column_dropped_and_added_again_with_a_default_shows_every_row_changed(
    postgres: Cluster, tmp_path: Path
) -> None:
    """``role`` dropped and added again (same name, type, place) with the default ``admin``:
    no row is written, yet every row now reads ``admin``."""
    readd = (
        "ALTER TABLE accounts DROP COLUMN role;"
        "ALTER TABLE accounts ADD COLUMN role text DEFAULT 'admin';"
    )
    seed = SEED + "UPDATE accounts SET role = 'admin' WHERE id % 1000 = 0;"

    sqlite, entry = both_diffs(
        postgres, tmp_path, ACCOUNTS, seed, "UPDATE accounts SET role = 'admin';", ()
    )
    (tmp_path / "readded").mkdir()
    _, readded = both_diffs(postgres, tmp_path / "readded", ACCOUNTS, seed, "", (readd,))

    assert readded["comparisons"]["data"] == sqlite["data"] == entry["comparisons"]["data"]
    assert sqlite["data"]["tables"]["accounts"]["counts"]["changed"] == 2997


def test_tables_that_swap_names_diff_by_their_contents(postgres: Cluster, tmp_path: Path) -> None:
    """Two tables of the same columns swap names: each name now holds the other's rows."""
    tables = "CREATE TABLE {0} (id {1} PRIMARY KEY, role {2});"
    schemas = tuple(
        "".join(tables.format(name, *types) for name in ("staff", "admins"))
        for types in (("INTEGER", "TEXT"), ("int", "text"))
    )
    seed = (
        f"INSERT INTO staff {ROWS}SELECT i, 'staff' FROM n;"
        f"INSERT INTO admins {ROWS}SELECT i, CASE WHEN i = 7 THEN 'admin' ELSE 'staff' END FROM n;"
    )
    swap = (
        "ALTER TABLE staff RENAME TO swap; ALTER TABLE admins RENAME TO staff;"
        "ALTER TABLE swap RENAME TO admins;"
    )

    sqlite, entry = both_diffs(postgres, tmp_path, schemas, seed, swap)  # type: ignore[arg-type]

    assert entry["comparisons"]["data"] == sqlite["data"]
    assert sqlite["data"]["tables"]["staff"]["counts"]["changed"] == 1


def test_a_regclass_value_shows_the_rename_of_the_table_it_names(postgres: Cluster) -> None:
    """A ``regclass`` column's text is a table's name: renaming that table changes it."""
    entry = diff_after(
        postgres,
        "CREATE TABLE ledger (id int PRIMARY KEY);"
        "CREATE TABLE refs (id int PRIMARY KEY, target regclass);"
        "INSERT INTO refs VALUES (1, 'ledger'), (2, 'refs');",
        "ALTER TABLE ledger RENAME TO journal",
    )

    refs = entry["comparisons"]["data"]["tables"]["refs"]
    assert refs["rows_changed"] == [
        {
            "key": {"id": 1},
            "changes": {"target": {"old_value": "public.ledger", "new_value": "public.journal"}},
        }
    ]


def test_a_table_of_many_page_ranges_diffs_as_its_sqlite_twin(
    postgres: Cluster, tmp_path: Path
) -> None:
    """30,000 rows ten to a page (over 3,000 pages: ranges of 64 pages doubling to 2,048,
    then the last one open ended), changed on both sides of ranges' ends and at the table's
    end: the twin's diff."""
    rows = "WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM n WHERE i < 30000) "
    tables = (ACCOUNTS[0], ACCOUNTS[1].replace(");", ") WITH (fillfactor = 10);"))
    seed = f"INSERT INTO accounts {rows}SELECT i, 'user' || i || '@example.com', 'user' FROM n;"
    changes = (
        "DELETE FROM accounts WHERE id % 997 = 1 OR id BETWEEN 20000 AND 21000;"
        "UPDATE accounts SET role = 'admin' WHERE id % 1009 = 2 OR id = 30000;"
        "INSERT INTO accounts VALUES (40000, 'late@example.com', 'admin');"
    )

    sqlite, entry = both_diffs(postgres, tmp_path, tables, seed, changes)

    assert entry["comparisons"] == sqlite
    assert sqlite["data"]["tables"]["accounts"]["counts"]["removed"] == 1031


def test_a_table_without_a_key_diffs_as_the_same_multiset_read_in_part_or_whole(
    postgres: Cluster, tmp_path: Path
) -> None:
    """Rows without a key (no rowid either, unlike SQLite's: they pair as a multiset), each
    six times over: a group removed, a group changed (each a row removed and one added), one
    more of an existing row added. Only the rows that differ are read, or (the table
    rewritten) every row: the same diff."""
    tables = ("CREATE TABLE events (kind TEXT, note TEXT);",
              "CREATE TABLE events (kind text, note text);")  # fmt: skip
    seed = f"INSERT INTO events {ROWS}SELECT 'kind' || (i % 5), 'note' || (i % 500) FROM n;"
    changes = (
        "DELETE FROM events WHERE note = 'note7';"
        "UPDATE events SET kind = 'admin' WHERE note = 'note9';"
        "INSERT INTO events VALUES ('kind1', 'note1');"
    )
    diffs = []
    for afterwards in ((), REWRITE):
        folder = tmp_path / str(len(diffs))
        folder.mkdir()
        _, entry = both_diffs(postgres, folder, tables, seed, changes, afterwards)
        diffs.append(entry["comparisons"]["data"]["tables"]["events"])

    part, whole = diffs
    assert part["counts"] == whole["counts"] == {"added": 7, "removed": 12, "changed": 0}
    for rows in ("rows_added", "rows_removed"):
        assert sorted(map(str, part[rows])) == sorted(map(str, whole[rows]))
    assert {"kind": "admin", "note": "note9"} in part["rows_added"]
    assert (part["before_rows"], part["after_rows"]) == (3000, 2995)
