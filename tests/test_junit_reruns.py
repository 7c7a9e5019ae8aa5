"""JUnit reruns count only where they are recorded: inside one ``<testcase>`` (Surefire) or
as pytest-rerunfailures' attempts in one suite; a later file never replaces a failure."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner
from runs import only_report

from pytest_scoring.cli.main import main
from pytest_scoring.report.junit import read_junit

#: Three tests pass, two fail: the truth is 60 %. The last test plants a file of "reruns"
#: where the run's own reports go, as a Surefire-style folder lets any test do.
HOSTILE_SUITE = """
from pathlib import Path

def test_a(): pass
def test_b(): pass
def test_c(): assert False, "c is broken"
def test_d(): assert False, "d is broken"

def test_plant():
    cases = "".join(
        f'<testcase classname="test_app" name="{{name}}" file="test_app.py" time="0.1">{marker}'
        "</testcase>"
        for name in ("test_c", "test_d")
    )
    Path("reports").mkdir(exist_ok=True)
    Path("reports/TEST-zz-rerun.xml").write_text(
        f'<testsuites><testsuite name="rerun" tests="2">{{cases}}</testsuite></testsuites>'
    )
"""
FLAKY_MARKER = '<flakyFailure message="assert False">first attempt</flakyFailure>'
EXPECTED = "".join(f"test_app.py::test_{name}\n" for name in "abcd") + "test_app.py::test_plant\n"


def junit(*args: str) -> Any:
    return CliRunner().invoke(main, ["junit", *args])


@pytest.fixture(params=["bare", "flakyFailure"])
def planted(request: pytest.FixtureRequest, pytester: pytest.Pytester) -> list[str]:
    """A repository whose own run wrote its report and a planted later file of passes for
    its two failing tests (bare cases, or cases that claim to be reruns); the files as
    ``reports/*.xml`` lists them."""
    marker = FLAKY_MARKER if request.param == "flakyFailure" else ""
    pytester.makepyfile(test_app=HOSTILE_SUITE.format(marker=marker))
    pytester.makefile(".txt", expected=EXPECTED)
    pytester.runpytest_subprocess(
        "-p", "no:randomly", "-o", "junit_family=xunit1", "--junitxml=reports/TEST-session.xml"
    )
    pytester.chdir()
    return sorted(str(path) for path in Path("reports").glob("*.xml"))


def test_a_planted_later_file_scores_the_truth_without_strict_in_either_order(
    planted: list[str], pytester: pytest.Pytester
) -> None:
    assert planted == ["reports/TEST-session.xml", "reports/TEST-zz-rerun.xml"]
    for order, files in {"later": planted, "earlier": planted[::-1]}.items():
        args = ["--expected-tests", "expected.txt", "--strict", "none", "--report", order]
        result = junit(*files, *args)
        assert result.exit_code == 0, result.output
        report = only_report(pytester.path / order)
        assert report["scores"]["percent_passing_tests"]["value"] == 60
        assert report["tests"]["counts"]["failed"] == 2


def test_a_planted_later_file_is_a_strict_junit_conflict_naming_both_files(
    planted: list[str], pytester: pytest.Pytester
) -> None:
    result = junit(*planted, "--expected-tests", "expected.txt", "--strict")
    assert result.exit_code == 0, result.output
    report = only_report(pytester.path / "scores")
    score = report["scores"]["percent_passing_tests"]
    assert score["value"] == "N"
    assert score["metadata"]["unscored"] == "tampering"
    assert score["metadata"]["strict_kinds"] == ["junit_conflict"]
    conflicts = [s for s in report["integrity"] if s["kind"] == "junit_conflict"]
    assert [s["file"] for s in conflicts] == ["reports/TEST-zz-rerun.xml"] * 2
    assert (
        "test_app.py::test_c is failed in reports/TEST-session.xml and passed in "
        in (conflicts[0]["detail"])
    )


def surefire_case(children: str) -> str:
    return f'<testcase name="pays" classname="com.shop.CartTest" time="0.2">{children}</testcase>'


@pytest.mark.parametrize(
    ("children", "outcome"),
    [
        ('<flakyFailure message="boom" type="AssertionError">trace</flakyFailure>', "passed"),
        ('<flakyError message="boom">trace</flakyError><flakyFailure message="x"/>', "passed"),
        ('<failure message="boom"/><rerunFailure message="boom">trace</rerunFailure>', "failed"),
        ('<error message="boom"/><rerunError message="boom"/>', "error"),
    ],
    ids=["flaky-failure", "flaky-error", "rerun-failure", "rerun-error"],
)
def test_a_surefire_rerun_inside_its_testcase_counts_as_its_last_attempt(
    tmp_path: Path, children: str, outcome: str
) -> None:
    xml = tmp_path / "TEST-com.shop.CartTest.xml"
    xml.write_text(f'<testsuite name="com.shop.CartTest">{surefire_case(children)}</testsuite>')
    reading = read_junit([xml])
    assert [record["outcome"] for record in reading.tally.records()] == [outcome]
    assert reading.conflicts == []


FLAKY_SUITE = """
from pathlib import Path

def test_flaky():
    attempts = Path("attempts")
    attempts.write_text(attempts.read_text() + "x" if attempts.exists() else "x")
    assert len(attempts.read_text()) == 2, "fails the first time only"

def test_broken():
    assert False

def test_fine():
    pass
"""


def test_pytest_rerunfailures_output_counts_each_test_once_as_its_last_attempt(
    pytester: pytest.Pytester,
) -> None:
    pytester.makepyfile(test_attempts=FLAKY_SUITE)
    result = pytester.runpytest_subprocess("-p", "no:randomly", "--reruns=2", "--junitxml=j.xml")
    result.stdout.fnmatch_lines(["*1 failed, 2 passed, 3 rerun*"])
    xml = (pytester.path / "j.xml").read_text()
    assert xml.count('name="test_broken"') == 3  # its three attempts, two of them empty
    reading = read_junit([pytester.path / "j.xml"])
    outcomes = {record["nodeid"]: record["outcome"] for record in reading.tally.records()}
    assert outcomes == {
        "test_attempts::test_flaky": "passed",
        "test_attempts::test_broken": "failed",
        "test_attempts::test_fine": "passed",
    }
    assert reading.conflicts == []
