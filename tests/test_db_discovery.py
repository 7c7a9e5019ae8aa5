"""Finding database files: globs at any depth, almost nothing skipped, symlinks found."""

from __future__ import annotations

import contextlib
import sqlite3
from pathlib import Path

import pytest

from pytest_scoring.db.discovery import discover
from pytest_scoring.db.discovery import find_databases
from pytest_scoring.db.discovery import matches_pattern
from pytest_scoring.db.discovery import sqlite_header_error
from pytest_scoring.db.discovery import unsearched_folders

DEFAULT = ("*.db", "*.sqlite", "*.sqlite3")


def touch(root: Path, *relpaths: str) -> None:
    for relpath in relpaths:
        (root / relpath).parent.mkdir(parents=True, exist_ok=True)
        (root / relpath).write_bytes(b"")


def test_databases_are_found_at_any_depth_in_sorted_order(tmp_path: Path) -> None:
    touch(tmp_path, "app.db", "data/deep/er/x.sqlite3", "data/y.sqlite", "notes.txt", "a.db-wal")
    assert find_databases(tmp_path, DEFAULT) == [
        "app.db",
        "data/deep/er/x.sqlite3",
        "data/y.sqlite",
    ]


def test_only_git_and_the_excluded_folders_are_skipped(tmp_path: Path) -> None:
    # Every folder skipped by name is a place where a solution could keep its database unseen:
    # virtual environments, node_modules and tool caches are searched like any other folder.
    touch(
        tmp_path,
        ".git/objects/x.db",
        "node_modules/pkg/y.db",
        ".venv/z.db",
        ".tox/py/t.db",
        "__pycache__/c.db",
        "data/pyvenv.cfg",
        "data/app.db",
        "scores/.db-snapshots-1/before/app.db",
        "private/p.db",
    )
    found = discover(tmp_path, DEFAULT, exclude=[tmp_path / "scores", tmp_path / "private"])
    assert found.databases == [
        ".tox/py/t.db",
        ".venv/z.db",
        "__pycache__/c.db",
        "data/app.db",
        "node_modules/pkg/y.db",
    ]
    assert found.skipped == [".git", "private", "scores"]


def test_skipped_folders_holding_databases_are_named(tmp_path: Path) -> None:
    touch(tmp_path, ".git/hidden.db", "private/notes.txt", "scores/deep/er/s.sqlite")
    found = discover(tmp_path, DEFAULT, exclude=[tmp_path / "scores", tmp_path / "private"])
    assert unsearched_folders(tmp_path, found.skipped, DEFAULT) == [".git", "scores"]


def test_symlinked_databases_are_found_and_folders_never_entered(tmp_path: Path) -> None:
    outside = tmp_path / "outside"
    touch(outside, "secret.db")
    repo = tmp_path / "repo"
    touch(repo, "real.db")
    (repo / "link.db").symlink_to(outside / "secret.db")
    (repo / "inner.db").symlink_to(repo / "real.db")
    (repo / "linked_dir").symlink_to(outside, target_is_directory=True)
    # Links are found under their own path; the snapshot decides whether they may be read.
    assert find_databases(repo, DEFAULT) == ["inner.db", "link.db", "real.db"]


@pytest.mark.parametrize(
    ("relpath", "pattern", "matches"),
    [
        ("a/b/app.db", "*.db", True),
        ("app.db", "*.db", True),
        ("app.db.bak", "*.db", False),
        ("x/data/app.db", "data/*.db", True),
        ("data/app.db", "data/*.db", True),
        ("other/app.db", "data/*.db", False),
        ("data/app.db", "data/**/*.db", True),
        ("data/a/b/app.db", "data/**/*.db", True),
    ],
)
def test_patterns_match_file_names_or_path_tails(relpath: str, pattern: str, matches: bool) -> None:
    assert matches_pattern(relpath, pattern) is matches


def test_only_files_with_the_sqlite_header_count_as_databases(tmp_path: Path) -> None:
    with contextlib.closing(sqlite3.connect(tmp_path / "real.db")) as db:
        db.execute("CREATE TABLE t (x)")
    (tmp_path / "fake.db").write_text("hello, I am text")
    (tmp_path / "empty.db").write_bytes(b"")
    assert sqlite_header_error(tmp_path / "real.db") is None
    assert sqlite_header_error(tmp_path / "empty.db") is None
    assert sqlite_header_error(tmp_path / "fake.db") == (
        "fake.db is not a SQLite database (no SQLite header)"
    )
