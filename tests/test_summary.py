"""What a user reads: one number format everywhere, counts that agree with their nouns, and a
score summary that ``-q`` and ``-qq`` shorten as they shorten pytest's own output."""

from __future__ import annotations

import json
import re
import sqlite3
import xml.etree.ElementTree as ET
from pathlib import Path
from typing import Any

import pandas  # noqa: F401  # imported before in-process runs (see test_report.py)
import pyarrow.parquet
import pytest
from click.testing import CliRunner

from pytest_scoring import file_contents_scorer
from pytest_scoring import results_df
from pytest_scoring.cli.main import main
from pytest_scoring.core.outcomes import OutcomeTally
from pytest_scoring.scorers.base import ScoringContext
from pytest_scoring.text import number_text
from pytest_scoring.text import outcome_counts
from pytest_scoring.text import plural
from pytest_scoring.text import report_tests_text
from pytest_scoring.text import value_text

THREE_OF_FOUR = """
    def test_a(): pass
    def test_b(): pass
    def test_c(): pass
    def test_d(): assert False
"""
TWO_OF_THREE = """
    def test_a(): pass
    def test_b(): pass
    def test_c(): assert False
"""


def only_report(root: Path) -> Path:
    (folder,) = root.glob("scan_id=*")
    return folder


def junit_properties(path: Path) -> dict[str, str]:
    return {
        prop.get("name", ""): prop.get("value", "")
        for prop in ET.parse(path).getroot().iter("property")
    }


@pytest.mark.parametrize(
    ("tests", "explanation", "percent"),
    [
        (THREE_OF_FOUR, "3 passed, 1 failed = 4 counted", "75"),
        (TWO_OF_THREE, "2 passed, 1 failed = 3 counted", "66.67"),
    ],
    ids=["whole", "fraction"],
)
def test_a_score_reads_the_same_in_the_summary_show_list_junit_and_scout(
    pytester: pytest.Pytester, tests: str, explanation: str, percent: str
) -> None:
    pytester.makepyfile(tests)
    result = pytester.runpytest("--score", "--junitxml=junit.xml", "-p", "no:cacheprovider")
    result.stdout.fnmatch_lines([f"percent_passing_tests: {percent}  ({explanation})"])
    folder = only_report(pytester.path / "scores")

    shown = CliRunner().invoke(main, ["show", str(folder)])
    assert shown.exit_code == 0, shown.output
    row = next(line for line in shown.output.splitlines() if "percent_passing_tests" in line)
    assert re.search(rf"\W{re.escape(percent)}\W", row), row
    assert f"mean={percent}, stderr=0" in row
    listed = CliRunner().invoke(main, ["list", str(pytester.path / "scores")])
    assert f"percent_passing_tests={percent}" in listed.output
    properties = junit_properties(pytester.path / "junit.xml")
    assert properties["score:percent_passing_tests"] == percent
    parquet = pyarrow.parquet.read_table(folder / "percent_passing_tests.parquet")
    assert parquet.column("value").to_pylist() == [percent]  # Scout's text column
    assert results_df(folder).scanners["percent_passing_tests"]["value"].tolist() == [
        float(percent)
    ]
    for output in (result.stdout.str(), shown.output, listed.output):
        assert f"{percent}.0" not in output


def test_the_fail_under_line_uses_the_same_numbers(pytester: pytest.Pytester) -> None:
    pytester.makepyfile(THREE_OF_FOUR)
    result = pytester.runpytest("--score-fail-under=80.0")
    result.stdout.fnmatch_lines(["FAIL: 75% of tests pass, below --score-fail-under=80"])


@pytest.mark.parametrize(
    ("value", "text"),
    [
        (75.0, "75"),
        (66.67, "66.67"),
        (0.1 + 0.2, "0.30000000000000004"),  # exact: the text reads back as the same number
        (-0.0, "0"),
        (1e16, "1e+16"),
        (float("nan"), "nan"),
        (float("inf"), "inf"),
        (3, "3"),
    ],
)
def test_a_number_prints_as_its_shortest_exact_text(value: float, text: str) -> None:
    assert number_text(value) == text
    assert value_text(value) == text


@pytest.mark.parametrize(("value", "text"), [("C", "C"), (True, "True"), (None, "None")])
def test_other_values_print_as_themselves(value: object, text: str) -> None:
    assert value_text(value) == text


@pytest.mark.parametrize(
    ("count", "text"), [(0, "0 databases"), (1, "1 database"), (2, "2 databases")]
)
def test_a_count_agrees_with_its_noun(count: int, text: str) -> None:
    assert plural(count, "database") == text


@pytest.mark.parametrize(
    ("counts", "text"),
    [
        ({"passed": 1, "failed": 0, "error": 1}, "1 passed, 1 error"),
        ({"passed": 2, "error": 2, "skipped": 1}, "2 passed, 2 errors, 1 skipped"),
        ({"passed": 0}, ""),
        ({"not_run": 3}, "3 not run"),
    ],
)
def test_test_counts_read_as_pytest_writes_them(counts: dict[str, int], text: str) -> None:
    assert outcome_counts(counts) == text


COUNTS = {"passed": 0, "failed": 0, "error": 0, "skipped": 0, "xfailed": 0, "xpassed": 0}


@pytest.mark.parametrize(
    ("tests", "text"),
    [
        (
            {"counts": {**COUNTS, "passed": 5, "failed": 1, "error": 1, "skipped": 1, "total": 7}},
            "5 passed, 1 failed, 1 error = 7 counted; not counted: 1 skipped",
        ),
        (  # Ctrl-C: the 24 tests that never ran are inside "failed" in the report, not here
            {
                "counts": {**COUNTS, "passed": 14, "failed": 26, "not_run": 24, "total": 40},
                "not_run": [f"t.py::test_{n}" for n in range(24)],
            },
            "14 passed, 2 failed, 24 not run = 40 counted",
        ),
        (  # with an expected set those it lists are missing; the one it does not is uncounted
            {
                "counts": {**COUNTS, "passed": 1, "missing": 3, "not_run": 3, "total": 4},
                "not_run": ["t.py::a", "t.py::b", "t.py::extra"],
                "missing": ["t.py::a", "t.py::b", "t.py::renamed"],
            },
            "1 passed, 2 not run, 1 missing = 4 counted",
        ),
        ({"counts": {**COUNTS, "skipped": 2, "total": 0}}, "0 counted; not counted: 2 skipped"),
        ({"counts": {**COUNTS, "total": 0}}, "no tests ran"),
        ({"counts": {"passed": "many", "total": None}}, "no tests ran"),  # a damaged report
    ],
    ids=["outcomes", "interrupted", "expected-set", "only-skipped", "empty", "damaged"],
)
def test_test_counts_read_in_one_wording_that_adds_up(tests: dict[str, Any], text: str) -> None:
    assert report_tests_text(tests) == text


def test_one_erroring_test_is_one_error_in_the_summary_and_show(
    pytester: pytest.Pytester,
) -> None:
    pytester.makepyfile(
        """
        import pytest

        @pytest.fixture
        def broken():
            raise RuntimeError("setup breaks")

        def test_ok(): pass
        def test_errors(broken): pass
        """
    )
    result = pytester.runpytest("--score", "-p", "no:cacheprovider")
    result.stdout.fnmatch_lines(["all_tests_pass: I  (1 passed, 1 error = 2 counted)"])
    shown = CliRunner().invoke(main, ["show", str(only_report(pytester.path / "scores"))])
    assert "tests: 1 passed, 1 error = 2 counted" in shown.output


def test_one_database_and_one_changed_row_read_in_the_singular(pytester: pytest.Pytester) -> None:
    with sqlite3.connect(pytester.path / "app.db") as db:
        db.execute("CREATE TABLE users (id INTEGER PRIMARY KEY, role TEXT)")
        db.executemany("INSERT INTO users VALUES (?, 'user')", [(1,), (2,)])
    db.close()
    pytester.makepyfile(
        """
        import sqlite3

        def test_promote():
            with sqlite3.connect("app.db") as db:
                db.execute("UPDATE users SET role = 'admin' WHERE id = 1")
        """
    )
    result = pytester.runpytest("--score-db-diff", "-p", "no:cacheprovider")
    result.stdout.fnmatch_lines(
        [
            "db_change: C detected  (the session changed the databases: app.db, table users, "
            "row id=1: role 'user' → 'admin' (1 database, 1 row changed))"
        ]
    )


def test_one_file_searched_reads_in_the_singular(tmp_path: Path) -> None:
    (tmp_path / "src").mkdir()
    (tmp_path / "src" / "app.py").write_text("TODO")
    scorer = file_contents_scorer("src", "TODO")
    score = scorer.score(ScoringContext(root=tmp_path, tally=OutcomeTally()))
    assert score["explanation"] == "'TODO' found in 1 of 1 file under 'src'"


@pytest.mark.parametrize(
    ("verbosity", "present", "absent"),
    [
        (
            [],
            [
                "*- scores -*",
                "percent_passing_tests: 75  (3 passed, 1 failed = 4 counted)",
                "score report: *scan_id=*",
            ],
            [],
        ),
        (
            ["-q"],
            ["all_tests_pass: I", "percent_passing_tests: 75", "score report: *scan_id=*"],
            ["*- scores -*", "*(3 passed, 1 failed = 4 counted)*"],
        ),
        (
            ["-qq"],
            ["score report: *scan_id=*"],
            ["*- scores -*", "percent_passing_tests*", "all_tests_pass*"],
        ),
    ],
    ids=["default", "-q", "-qq"],
)
def test_quiet_flags_shorten_the_score_summary(
    pytester: pytest.Pytester, verbosity: list[str], present: list[str], absent: list[str]
) -> None:
    pytester.makepyfile(THREE_OF_FOUR)
    result = pytester.runpytest("--score", "-p", "no:cacheprovider", *verbosity)
    result.stdout.fnmatch_lines(present)
    for line in absent:
        result.stdout.no_fnmatch_line(line)


def test_even_under_qq_the_reason_for_a_failing_exit_status_is_shown(
    pytester: pytest.Pytester,
) -> None:
    pytester.makepyfile(THREE_OF_FOUR)
    result = pytester.runpytest("--score-fail-under=80", "-qq", "-p", "no:cacheprovider")
    result.stdout.fnmatch_lines(["score report: *", "FAIL: 75% of tests pass, *"])


def test_the_junit_command_prints_the_lines_the_pytest_summary_prints(
    pytester: pytest.Pytester, tmp_path: Path
) -> None:
    pytester.makepyfile(THREE_OF_FOUR)
    pytester.runpytest("--junitxml=junit.xml", "-p", "no:cacheprovider")
    result = CliRunner().invoke(
        main, ["junit", str(pytester.path / "junit.xml"), "--report", str(tmp_path)]
    )
    assert "percent_passing_tests: 75  (3 passed, 1 failed = 4 counted)\n" in result.output
    scores = json.loads((only_report(tmp_path) / "scores.json").read_text())["scores"]
    assert scores["percent_passing_tests"]["value"] == 75
