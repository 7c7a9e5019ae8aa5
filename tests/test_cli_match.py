"""`pytest-scoring match`: exit 0 on a match, 1 without, 2 on bad input."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner
from click.testing import Result
from diff_samples import change
from diff_samples import data_table
from diff_samples import database
from diff_samples import diff

from pytest_scoring.cli.main import main
from pytest_scoring.db.diff_of_diffs import diff_of_diffs

PASSWORD = {"rows": {"changed": {"has_one": "password"}}}
ROLE = {"rows": {"changed": {"where": {"role": "admin"}}}}
REFERENCE = diff(
    {
        "app.db": database(
            data={"users": data_table(changed=[change({"id": 1}, password=("a", "b"))])}
        )
    }
)
SOLUTION = diff(
    {
        "app.db": database(
            data={
                "users": data_table(
                    changed=[change({"id": 1}, password=("a", "b"), role=("user", "admin"))]
                )
            }
        )
    }
)


def write(path: Path, document: Any) -> str:
    path.write_text(document if isinstance(document, str) else json.dumps(document))
    return str(path)


def match(*args: str, stdin: str | None = None) -> Result:
    return CliRunner().invoke(main, ["match", *args], input=stdin)


@pytest.mark.parametrize(("selector", "code"), [(PASSWORD, 0), ({"tables": {"name": "x"}}, 1)])
def test_match_exits_0_on_a_match_and_1_without(tmp_path: Path, selector: Any, code: int) -> None:
    result = match(write(tmp_path / "diff.json", SOLUTION), write(tmp_path / "s.json", selector))
    assert result.exit_code == code
    assert result.output.strip() == ("match" if code == 0 else "no match")


def test_a_diff_of_diffs_file_is_matched_on_its_after_only_part(tmp_path: Path) -> None:
    dod = write(tmp_path / "diff_of_diffs.json", diff_of_diffs(REFERENCE, SOLUTION))
    assert match(dod, write(tmp_path / "role.json", ROLE)).exit_code == 0
    assert match(dod, write(tmp_path / "password.json", PASSWORD)).exit_code == 1


def test_a_diff_of_diffs_file_with_from_tests_is_matched_as_db_diff_change_sees_it(
    tmp_path: Path,
) -> None:
    """The row's password change came from the tests, its role change from the code: the
    selector sees one changed row with both, as ``db_diff_change`` does."""
    baseline = diff({"app.db": database(data={"users": data_table()})})
    parts = diff_of_diffs(REFERENCE, SOLUTION, baseline)
    dod = write(tmp_path / "diff_of_diffs.json", {k: v for k, v in parts.items() if k != "scored"})
    both = {"rows": {"changed": {"has_all": ["password", "role"], "$count": {"$eq": 1}}}}
    for selector in (PASSWORD, ROLE, both):
        assert match(dod, write(tmp_path / "s.json", selector)).exit_code == 0, selector
    assert match(dod, write(tmp_path / "s.json", {"rows": {"added": {}}})).exit_code == 1


def test_either_file_can_come_from_standard_input(tmp_path: Path) -> None:
    diff_file = write(tmp_path / "diff.json", SOLUTION)
    assert match(diff_file, "-", stdin=json.dumps(ROLE)).exit_code == 0
    assert match("-", write(tmp_path / "s.json", ROLE), stdin=json.dumps(SOLUTION)).exit_code == 0


BAD_INPUT: list[tuple[str, Any, Any, str]] = [
    ("selector not JSON", SOLUTION, "{rows", "s.json: not valid JSON (Expecting property name"),
    (
        "invalid selector",
        SOLUTION,
        {"rows": {"changed": {"where": [{"role": {"$foo": 1}}]}}},
        "s.json: selector.rows.changed.where[0].role: unknown operator '$foo'",
    ),
    ("diff not JSON", "[1,", PASSWORD, "d.json: not valid JSON"),
    ("diff of the wrong shape", {"tables": {}}, PASSWORD, 'd.json: expected a diff {"comparisons"'),
    (
        "comparisons not an object",
        {"comparisons": []},
        PASSWORD,
        "d.json: comparisons: expected an object of databases",
    ),
    (
        "database entry not an object",
        {"comparisons": {"app.db": 3}},
        PASSWORD,
        "d.json: comparisons.app.db: expected an object",
    ),
    (
        "after_only of the wrong shape",
        {"after_only": []},
        PASSWORD,
        "d.json: after_only: expected a diff",
    ),
]


@pytest.mark.parametrize(
    ("diff_document", "selector", "message"),
    [case[1:] for case in BAD_INPUT],
    ids=[case[0] for case in BAD_INPUT],
)
def test_bad_input_exits_2_with_a_message_naming_file_and_path(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, diff_document: Any, selector: Any, message: str
) -> None:
    monkeypatch.chdir(tmp_path)
    result = match(write(Path("d.json"), diff_document), write(Path("s.json"), selector))
    assert result.exit_code == 2
    assert f"pytest-scoring: error: {message}" in result.output
    assert "Traceback" not in result.output


def test_a_missing_file_exits_2(tmp_path: Path) -> None:
    result = match(str(tmp_path / "nope.json"), write(tmp_path / "s.json", PASSWORD))
    assert result.exit_code == 2
    assert "nope.json: cannot read: No such file or directory" in result.output


def test_both_files_from_standard_input_is_refused() -> None:
    result = match("-", "-", stdin="{}")
    assert result.exit_code == 2
    assert "only one of DIFF_FILE and SELECTOR_FILE can be '-'" in result.output


def test_a_diff_of_diffs_file_is_recognised_by_its_after_only_part_alone(tmp_path: Path) -> None:
    document = {**diff_of_diffs(REFERENCE, SOLUTION), "comparisons": {}}
    dod = write(tmp_path / "diff_of_diffs.json", document)
    assert match(dod, write(tmp_path / "role.json", ROLE)).exit_code == 0


def test_a_database_given_as_the_diff_says_how_to_make_a_diff(tmp_path: Path) -> None:
    import contextlib
    import sqlite3

    with contextlib.closing(sqlite3.connect(tmp_path / "before.db")) as db, db:
        db.execute("CREATE TABLE t (x)")
    result = match(str(tmp_path / "before.db"), write(tmp_path / "sel.json", PASSWORD))
    assert result.exit_code == 2
    assert result.output.count("\n") == 1
    assert "before.db: a SQLite database, not a diff; make a diff with" in result.output
    assert "pytest-scoring diff --json" in result.output


def test_match_prints_the_selectors_warnings_on_stderr(tmp_path: Path) -> None:
    selector = {"target": "schema", "rows": {"changed": {"has_one": "password"}}}
    result = match(write(tmp_path / "d.json", SOLUTION), write(tmp_path / "s.json", selector))
    assert result.exit_code == 1
    assert result.stdout == "no match\n"
    assert result.stderr.startswith("pytest-scoring: warning: selector.rows: the target excludes")


# --- hostile inputs: devices, FIFOs, huge files (issue 12) ------------------------------


def run_match(*args: str, stdin: bytes | None = None) -> subprocess.CompletedProcess[bytes]:
    """The real command in a child process: a regression that blocks fails, never hangs."""
    command = [sys.executable, "-m", "pytest_scoring", "match", *args]
    return subprocess.run(command, input=stdin, capture_output=True, timeout=120, check=False)


def test_a_device_is_refused_before_anything_is_read(tmp_path: Path) -> None:
    result = run_match("/dev/zero", write(tmp_path / "s.json", ROLE))
    assert result.returncode == 2
    assert result.stderr.decode().splitlines() == [
        "pytest-scoring: error: /dev/zero: cannot read a device: give a JSON file or '-'"
    ]


def test_a_fifo_nobody_writes_to_is_refused_without_blocking(tmp_path: Path) -> None:
    fifo = tmp_path / "diff.json"
    os.mkfifo(fifo)
    result = run_match(str(fifo), write(tmp_path / "s.json", ROLE))
    assert result.returncode == 2
    assert b"cannot read a FIFO" in result.stderr
    assert len(result.stderr.splitlines()) == 1


def test_standard_input_from_a_pipe_is_still_read(tmp_path: Path) -> None:
    result = run_match("-", write(tmp_path / "s.json", ROLE), stdin=json.dumps(SOLUTION).encode())
    assert (result.returncode, result.stdout.strip()) == (0, b"match")
