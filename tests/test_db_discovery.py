"""Finding database files: globs at any depth, skipped folders, no symlinks."""

from __future__ import annotations

import contextlib
import sqlite3
from pathlib import Path

import pytest

from pytest_scoring.db.discovery import find_databases
from pytest_scoring.db.discovery import matches_pattern
from pytest_scoring.db.discovery import sqlite_header_error

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


def test_git_virtualenvs_node_modules_and_the_report_root_are_skipped(tmp_path: Path) -> None:
    touch(
        tmp_path,
        ".git/objects/x.db",
        "node_modules/pkg/y.db",
        ".venv/z.db",
        "venv/z.db",
        "env3/lib/site.db",
        "scores/.db-snapshots-1/before/app.db",
        "kept/app.db",
    )
    touch(tmp_path, "env3/pyvenv.cfg")
    assert find_databases(tmp_path, DEFAULT, exclude=[tmp_path / "scores"]) == ["kept/app.db"]


def test_symlinked_databases_and_folders_are_never_followed(tmp_path: Path) -> None:
    outside = tmp_path / "outside"
    touch(outside, "secret.db")
    repo = tmp_path / "repo"
    touch(repo, "real.db")
    (repo / "link.db").symlink_to(outside / "secret.db")
    (repo / "linked_dir").symlink_to(outside, target_is_directory=True)
    assert find_databases(repo, DEFAULT) == ["real.db"]


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
