"""Snapshots hold the committed state: WAL, open connections, locks, reset."""

from __future__ import annotations

import contextlib
import shutil
import sqlite3
from collections.abc import Iterator
from pathlib import Path

import pytest

from pytest_scoring.db.snapshot import read_in_place
from pytest_scoring.db.snapshot import reset_databases
from pytest_scoring.db.snapshot import take_snapshot


@pytest.fixture
def repo(tmp_path: Path) -> Path:
    folder = tmp_path / "repo"
    folder.mkdir()
    return folder


@contextlib.contextmanager
def connect(path: Path) -> Iterator[sqlite3.Connection]:
    connection = sqlite3.connect(path, isolation_level=None)
    try:
        yield connection
    finally:
        connection.close()


def count(path: Path) -> int:
    with connect(path) as db:
        return int(db.execute("SELECT count(*) FROM t").fetchone()[0])


def create(path: Path, rows: int = 1, wal: bool = False) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    with connect(path) as db:
        if wal:
            db.execute("PRAGMA journal_mode = WAL")
        db.execute("CREATE TABLE t (x)")
        db.executemany("INSERT INTO t VALUES (?)", [(i,) for i in range(rows)])


def test_wal_commits_still_in_the_wal_file_are_captured(repo: Path, tmp_path: Path) -> None:
    create(repo / "app.db", rows=1, wal=True)
    with connect(repo / "app.db") as writer:
        writer.execute("PRAGMA wal_autocheckpoint = 0")
        writer.executemany("INSERT INTO t VALUES (?)", [(i,) for i in range(50)])
        shutil.copyfile(repo / "app.db", tmp_path / "plain-copy.db")
        snapshot = take_snapshot(repo, ["app.db"], tmp_path / "snap")
    assert snapshot.errors == {}
    assert count(snapshot.files["app.db"]) == 51
    assert count(tmp_path / "plain-copy.db") < 51  # what a plain copy of the main file loses


def test_a_database_with_an_open_write_transaction_gives_its_committed_state(
    repo: Path, tmp_path: Path
) -> None:
    create(repo / "app.db", rows=3)
    with connect(repo / "app.db") as writer:
        writer.execute("BEGIN IMMEDIATE")
        writer.execute("INSERT INTO t VALUES ('uncommitted')")
        snapshot = take_snapshot(repo, ["app.db"], tmp_path / "snap")
        writer.execute("ROLLBACK")
    assert count(snapshot.files["app.db"]) == 3


def test_a_database_locked_exclusively_gets_an_error_and_others_are_still_copied(
    repo: Path, tmp_path: Path
) -> None:
    create(repo / "locked.db")
    create(repo / "fine.db")
    with connect(repo / "locked.db") as writer:
        writer.execute("PRAGMA locking_mode = EXCLUSIVE")
        writer.execute("BEGIN EXCLUSIVE")
        snapshot = take_snapshot(repo, ["fine.db", "locked.db"], tmp_path / "snap", timeout=0.05)
        writer.execute("ROLLBACK")
    assert "database is locked by another connection" in snapshot.errors["locked.db"]
    assert list(snapshot.files) == ["fine.db"]


def test_non_sqlite_files_and_symlinks_get_errors_and_missing_files_are_absent(
    repo: Path, tmp_path: Path
) -> None:
    (repo / "fake.db").write_text("no database here")
    create(tmp_path / "outside.db")
    (repo / "link.db").symlink_to(tmp_path / "outside.db")
    snapshot = take_snapshot(repo, ["fake.db", "link.db", "gone.db"], tmp_path / "snap")
    assert "not a SQLite database" in snapshot.errors["fake.db"]
    assert "symlink" in snapshot.errors["link.db"]
    assert snapshot.names() == {"fake.db", "link.db"}
    assert read_in_place(repo, ["link.db"]).errors.keys() == {"link.db"}


def test_reset_restores_the_first_seen_state_on_every_later_run(repo: Path, tmp_path: Path) -> None:
    store = tmp_path / "scores" / ".db-reset"
    create(repo / "data" / "app.db", rows=1, wal=True)
    with connect(repo / "data" / "app.db") as writer:  # the second row only in -wal
        writer.execute("PRAGMA wal_autocheckpoint = 0")
        writer.execute("INSERT INTO t VALUES ('in wal')")
        assert reset_databases(repo, ["data/app.db"], store) == []
        writer.execute("DELETE FROM t")
    (repo / "data" / "app.db").unlink()  # even a deleted database comes back
    assert reset_databases(repo, [], store) == ["data/app.db"]
    assert count(repo / "data" / "app.db") == 2


def test_reset_removes_a_leftover_wal_file_so_its_commits_are_not_replayed(
    repo: Path, tmp_path: Path
) -> None:
    store = tmp_path / "scores" / ".db-reset"
    create(repo / "app.db", rows=1, wal=True)
    reset_databases(repo, ["app.db"], store)
    with connect(repo / "app.db") as writer:
        writer.execute("PRAGMA wal_autocheckpoint = 0")
        writer.executemany("INSERT INTO t VALUES (?)", [(i,) for i in range(50)])
        shutil.copyfile(repo / "app.db-wal", tmp_path / "leftover-wal")
    shutil.copyfile(tmp_path / "leftover-wal", repo / "app.db-wal")  # as a killed test leaves it
    assert reset_databases(repo, [], store) == ["app.db"]
    assert count(repo / "app.db") == 1


def test_reset_never_writes_through_a_symlink_out_of_the_repository(
    repo: Path, tmp_path: Path
) -> None:
    store = tmp_path / "store"
    create(repo / "data" / "app.db")
    reset_databases(repo, ["data/app.db"], store)
    shutil.rmtree(repo / "data")
    outside = tmp_path / "outside"
    outside.mkdir()
    (repo / "data").symlink_to(outside, target_is_directory=True)
    assert reset_databases(repo, [], store) == []
    assert list(outside.iterdir()) == []
