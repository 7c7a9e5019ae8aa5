"""``pytest-scoring diff BEFORE AFTER``: exit 0 equal, 1 different, 2 bad input."""

from __future__ import annotations

import contextlib
import json
import sqlite3
from pathlib import Path

import pytest
from click.testing import CliRunner

from pytest_scoring.cli.main import main

SCHEMA = "CREATE TABLE users (id INTEGER PRIMARY KEY, role TEXT);"


def make_db(path: Path, *roles: str) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    with contextlib.closing(sqlite3.connect(path)) as db:
        db.executescript(SCHEMA)
        db.executemany("INSERT INTO users (role) VALUES (?)", [(role,) for role in roles])
        db.commit()
    return path


def run(*args: str | Path) -> tuple[int, str, str]:
    result = CliRunner().invoke(main, ["diff", *map(str, args)])
    return result.exit_code, result.stdout, result.stderr


def test_equal_databases_exit_zero(tmp_path: Path) -> None:
    code, out, _ = run(make_db(tmp_path / "a.db", "user"), make_db(tmp_path / "b.db", "user"))
    assert code == 0
    assert "unchanged" in out


def test_different_databases_exit_one_with_a_table_of_counts(tmp_path: Path) -> None:
    before = make_db(tmp_path / "before.db", "user", "user")
    after = make_db(tmp_path / "after.db", "admin", "user", "user")
    code, out, _ = run(before, after)
    assert code == 1
    line = next(line for line in out.splitlines() if "users" in line)
    cells = [cell.strip() for cell in line.split("│")]
    assert cells[3:10] == ["changed", "unchanged", "2", "3", "1", "0", "1"]


def test_json_output_is_the_spec_diff_with_examples_capped_by_max_rows(tmp_path: Path) -> None:
    before = make_db(tmp_path / "before.db")
    after = make_db(tmp_path / "after.db", "a", "b", "c")
    code, out, _ = run(before, after, "--json", "--max-rows", "2")
    users = json.loads(out)["comparisons"]["after.db"]["comparisons"]["data"]["tables"]["users"]
    assert code == 1
    assert (len(users["rows_added"]), users["counts"]["added"], users["truncated"]) == (2, 3, True)


def test_two_folders_are_diffed_database_by_database(tmp_path: Path) -> None:
    make_db(tmp_path / "v1" / "data" / "app.db", "user")
    make_db(tmp_path / "v2" / "data" / "app.db", "user")
    make_db(tmp_path / "v2" / "new.sqlite", "admin")
    code, out, _ = run(tmp_path / "v1", tmp_path / "v2", "--json")
    diff = json.loads(out)
    assert code == 1
    assert sorted(diff["comparisons"]) == ["data/app.db", "new.sqlite"]
    assert diff["comparisons"]["new.sqlite"]["info"]["exists_before"] is False


def bad_after(folder: Path, case: str) -> Path:
    """An AFTER argument that cannot be diffed against a database file."""
    if case == "not SQLite":
        (folder / "text.db").write_text("hi")
        return folder / "text.db"
    return folder / "missing.db" if case == "missing" else folder


@pytest.mark.parametrize(
    ("case", "message"),
    [
        ("missing", "missing.db: no such file or folder"),
        ("a folder", "give two database files or two folders"),
        ("not SQLite", "text.db is not a SQLite database"),
    ],
)
def test_bad_input_exits_two_with_a_one_line_message(
    tmp_path: Path, case: str, message: str
) -> None:
    code, _, err = run(make_db(tmp_path / "before.db"), bad_after(tmp_path, case))
    assert code == 2
    assert message in err
    assert "Traceback" not in err


def test_the_command_is_documented_with_an_example() -> None:
    result = CliRunner().invoke(main, ["diff", "--help"])
    assert result.exit_code == 0
    assert "Example: pytest-scoring diff" in result.stdout


def test_a_file_that_is_no_database_is_named_in_its_row_not_the_other_files_name(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    Path("notes.db").write_text("not a database\n")
    make_db(tmp_path / "app.db", "user")
    code, out, _ = run("notes.db", "app.db")
    assert code == 2
    (row,) = [line for line in out.splitlines() if "error" in line]
    assert row.split("│")[1].strip() == "notes.db"
    assert "before: " in row and "is not a SQLite database" in row
