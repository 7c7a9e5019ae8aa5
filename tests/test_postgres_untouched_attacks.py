"""Attacks on the rows the diff skips as untouched (same ``ctid`` and ``xmin`` on both sides,
tests/test_postgres_untouched.py): the application's role trying to change what a row reads
as while leaving its place and writer as they were, or the diff reading another file than
the one it checked. Each asserts the diff a user must see."""

from __future__ import annotations

from typing import Any

import psycopg
import pytest
from postgres_cluster import Cluster
from postgres_cluster import query as run

from pytest_scoring.db.postgres import admin
from pytest_scoring.db.postgres import untouched
from pytest_scoring.db.postgres.diff import Side
from pytest_scoring.db.postgres.diff import diff_databases

pytestmark = pytest.mark.slow

ACCOUNTS = (
    "CREATE TABLE accounts (id int PRIMARY KEY, email text, role text);"
    "INSERT INTO accounts SELECT i, 'user' || i || '@example.com', 'user' "
    "FROM generate_series(1, 3000) i;"
)


def _diff(postgres: Cluster, app: str, snap: admin.Snapshot, table: str) -> Any:
    database = admin.database_of(app)
    entry = diff_databases(postgres.admin_url, Side(snap.name), Side(database, False), "app")
    admin.drop(postgres.admin_url, snap.name)
    return entry["comparisons"]["data"]["tables"][table]


def _filenode(app: str, table: str) -> int:
    return int(run(app, "SELECT relfilenode FROM pg_class WHERE relname = %s", table)[0][0])


def test_a_frozen_row_replaced_in_its_freed_place_and_frozen_again_shows(
    postgres: Cluster,
) -> None:
    """Freezing keeps a row's ``xmin`` (since 9.4 only a flag says it is frozen): rows frozen
    before the snapshot, one deleted, its place freed by ``VACUUM`` and taken by a new row
    of the same key, that row frozen too. Were a frozen row's ``xmin`` read as the frozen
    xid (2), the new row would pass for the old one."""
    app = postgres.application(ACCOUNTS.replace("3000", "10"))
    run(app, "VACUUM FREEZE accounts")
    snap = admin.snapshot(postgres.admin_url, admin.database_of(app))
    place = run(app, "SELECT ctid::text FROM accounts WHERE id = 2")[0][0]
    for statement in (
        "DELETE FROM accounts WHERE id = 2",
        "VACUUM accounts",
        "INSERT INTO accounts VALUES (2, 'user2@example.com', 'admin')",
        "VACUUM FREEZE accounts",
    ):
        run(app, statement)
    assert run(app, "SELECT ctid::text FROM accounts WHERE id = 2")[0][0] == place

    accounts = _diff(postgres, app, snap, "accounts")

    assert accounts["rows_changed"] == [
        {"key": {"id": 2}, "changes": {"role": {"old_value": "user", "new_value": "admin"}}}
    ]


def test_a_column_retyped_without_a_rewrite_shows_every_rows_new_text(postgres: Cluster) -> None:
    """``timestamp`` to ``timestamptz`` under ``TimeZone=UTC`` rewrites nothing (the table
    keeps its file and every row its place and writer), yet each value's text changes."""
    app = postgres.application(
        "CREATE TABLE events (id int PRIMARY KEY, at timestamp);"
        "INSERT INTO events SELECT i, '2024-01-01 10:00' FROM generate_series(1, 50) i;"
    )
    snap = admin.snapshot(postgres.admin_url, admin.database_of(app))
    filenode = _filenode(app, "events")
    run(app, "SET TimeZone = 'UTC'; ALTER TABLE events ALTER COLUMN at TYPE timestamptz")
    assert _filenode(app, "events") == filenode

    events = _diff(postgres, app, snap, "events")

    assert events["counts"]["changed"] == 50
    assert events["rows_changed"][0]["changes"] == {
        "at": {"old_value": "2024-01-01 10:00:00", "new_value": "2024-01-01 10:00:00+00"}
    }


def test_an_enum_label_renamed_under_a_domain_over_its_array_shows(postgres: Cluster) -> None:
    """The enum is reached through a domain and an array: a label renamed changes what the
    row reads as, though no row is written."""
    app = postgres.application(
        "CREATE TYPE kind AS ENUM ('user', 'admin'); CREATE DOMAIN kinds AS kind[];"
        "CREATE TABLE grants (id int PRIMARY KEY, roles kinds);"
        "INSERT INTO grants SELECT i, '{user}' FROM generate_series(1, 20) i;"
        "UPDATE grants SET roles = '{admin}' WHERE id = 1;"
    )
    snap = admin.snapshot(postgres.admin_url, admin.database_of(app))
    run(
        app,
        "ALTER TYPE kind RENAME VALUE 'admin' TO 'swap';"
        "ALTER TYPE kind RENAME VALUE 'user' TO 'admin';"
        "ALTER TYPE kind RENAME VALUE 'swap' TO 'user';",
    )

    grants = _diff(postgres, app, snap, "grants")

    assert grants["counts"]["changed"] == 20
    swapped = {"roles": {"old_value": ["user"], "new_value": ["admin"]}}
    assert {"key": {"id": 2}, "changes": swapped} in grants["rows_changed"]


def test_rows_a_forced_policy_hides_from_the_application_are_read(postgres: Cluster) -> None:
    """Row level security forced on the owner, hiding the admins: the evaluator (a
    superuser, its ``role`` pinned) still reads every row's place and value."""
    app = postgres.application(ACCOUNTS)
    snap = admin.snapshot(postgres.admin_url, admin.database_of(app))
    run(
        app,
        "UPDATE accounts SET role = 'admin' WHERE id = 9;"
        "ALTER TABLE accounts ENABLE ROW LEVEL SECURITY;"
        "ALTER TABLE accounts FORCE ROW LEVEL SECURITY;"
        "CREATE POLICY visible ON accounts USING (role <> 'admin');",
    )
    assert run(app, "SELECT count(*) FROM accounts")[0][0] == 2999

    accounts = _diff(postgres, app, snap, "accounts")

    assert accounts["rows_changed"] == [
        {"key": {"id": 9}, "changes": {"role": {"old_value": "user", "new_value": "admin"}}}
    ]


@pytest.mark.parametrize("locked", [False, True], ids=["before the lock", "after it"])
def test_a_rewrite_committed_while_the_finish_state_is_read_in_place_hides_nothing(
    postgres: Cluster, monkeypatch: pytest.MonkeyPatch, locked: bool
) -> None:
    """The finish state read in place (``pytest --score``): a process of the application's
    still running rewrites the table (``VACUUM FULL``, MVCC-safe: a read under an earlier
    snapshot still finds its rows) once the read's snapshot is taken. Before the table is
    locked, the rewrite commits, and the snapshot's catalog still names the old file (the
    start's) while the rows are read from the new one, where they moved; after, it waits
    for the read to end. Either way the diff is the removal and the change, not rows moved
    taken for others (id 9 added, ids 2999 and 3000 removed)."""
    app = postgres.application(ACCOUNTS)
    snap = admin.snapshot(postgres.admin_url, admin.database_of(app))
    run(app, "DELETE FROM accounts WHERE id = 5; UPDATE accounts SET role = 'admin' WHERE id = 9")
    layout, calls = untouched.layout, []

    def rewrite() -> None:
        """``VACUUM FULL``, given up after 5 s waiting for its lock (an autoanalyze of the
        table may hold one a moment; the diff's read holds one to its end)."""
        with psycopg.connect(app, autocommit=True, options="-c lock_timeout=5s") as other:
            other.execute("VACUUM FULL accounts")

    def racing(connection: psycopg.Connection[Any], table: Any) -> str | None:
        calls.append(table.name)
        if len(calls) == 2 and not locked:  # the finish side, its read's snapshot taken
            rewrite()
        found = layout(connection, table)
        if len(calls) == 2 and locked:
            with pytest.raises(psycopg.errors.LockNotAvailable):
                rewrite()
        return found

    monkeypatch.setattr(untouched, "layout", racing)

    accounts = _diff(postgres, app, snap, "accounts")

    assert calls == ["accounts", "accounts"]
    assert accounts["counts"] == {"added": 0, "removed": 1, "changed": 1}
    assert accounts["rows_removed"] == [{"id": 5, "email": "user5@example.com", "role": "user"}]
    assert accounts["rows_changed"] == [
        {"key": {"id": 9}, "changes": {"role": {"old_value": "user", "new_value": "admin"}}}
    ]
