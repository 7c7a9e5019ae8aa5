"""Every route agrees on a broken session: an INTERNALERROR is ``complete: false`` with the
test scores ``"N"`` (``unscored: "repository"``) and the same counts; JUnit ids of
unittest-style cases name their file as the other routes do."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner
from runs import AS_EVALUATOR
from runs import only_report
from runs import run_cli

from pytest_scoring.cli.main import main

TESTS = """
def test_1(): pass
def test_2(): assert 0
def test_3(): pass
def test_4(): pass
def test_5(): pass
"""
#: A hook of the repository that raises while pytest logs test_3's call: INTERNALERROR.
BREAKING_CONFTEST = """
def pytest_runtest_logreport(report):
    if report.nodeid.endswith("test_3") and report.when == "call":
        raise SystemError("boom in a hook")
"""
UNITTEST_TESTS = """
import unittest

class LastTests(unittest.TestCase):
    def test_basic(self):
        pass

    def test_broken(self):
        self.assertEqual(1, 2)

class TestPlain:
    def test_method(self):
        pass

def test_function():
    pass
"""


def _scan(root: Path) -> dict[str, Any]:
    (path,) = root.glob("scan_id=*/scores.json")
    content: dict[str, Any] = json.loads(path.read_text())
    return content


def _junit(pytester: pytest.Pytester, xml: Path, report: Path) -> dict[str, Any]:
    """``pytest-scoring junit`` in the repository's folder."""
    with pytest.MonkeyPatch.context() as patch:
        patch.chdir(pytester.path)
        CliRunner().invoke(main, ["junit", str(xml), "--report", str(report)])
    return _scan(report)


def _assert_broken(report: dict[str, Any]) -> None:
    assert report["complete"] is False
    for score in report["scores"].values():
        assert score["value"] == "N"
        assert score["metadata"]["unscored"] == "repository"
        assert "INTERNALERROR" in score["explanation"]


@pytest.mark.slow
def test_an_internalerror_is_incomplete_with_the_same_counts_by_every_route(
    pytester: pytest.Pytester, tmp_path: Path
) -> None:
    pytester.makepyfile(conftest=BREAKING_CONFTEST)
    (pytester.path / "tests").mkdir()
    (pytester.path / "tests" / "test_a.py").write_text(TESTS)
    xml = tmp_path / "junit.xml"
    in_process = tmp_path / "in-process"
    pytester.runpytest_subprocess(
        "-p", "no:cacheprovider", "--score", f"--score-report={in_process}", f"--junitxml={xml}"
    )
    result = run_cli(pytester.path, "--report", tmp_path / "run", *AS_EVALUATOR)
    routes = {
        "in process": _scan(in_process),
        "run": only_report(tmp_path / "run"),
        "junit": _junit(pytester, xml, tmp_path / "junit"),
    }
    for report in routes.values():
        _assert_broken(report)
    expected = {"passed": 1, "failed": 4, "not_run": 3, "total": 5}
    for route in ("in process", "run"):
        counts = routes[route]["tests"]["counts"]
        assert {key: counts[key] for key in expected} == expected, (route, result.output)
    # JUnit lists only the cases pytest wrote: test_3's call passed before the hook broke.
    junit_ids = {test["nodeid"]: test["outcome"] for test in routes["junit"]["tests"]["tests"]}
    assert junit_ids == {
        "tests/test_a.py::test_1": "passed",
        "tests/test_a.py::test_2": "failed",
        "tests/test_a.py::test_3": "passed",
    }


def test_junit_ids_of_unittest_cases_name_their_file_as_the_other_routes_do(
    pytester: pytest.Pytester, tmp_path: Path
) -> None:
    (pytester.path / "tests").mkdir()
    (pytester.path / "tests" / "__init__.py").write_text("")
    (pytester.path / "tests" / "test_more.py").write_text(UNITTEST_TESTS)
    xml = tmp_path / "junit.xml"
    in_process = tmp_path / "in-process"
    pytester.runpytest_subprocess(
        "-p", "no:cacheprovider", "--score", f"--score-report={in_process}", f"--junitxml={xml}"
    )
    assert "tests.test_more" in xml.read_text()  # pytest's own classname, dotted
    outcomes = {
        route: {test["nodeid"]: test["outcome"] for test in report["tests"]["tests"]}
        for route, report in (
            ("in process", _scan(in_process)),
            ("junit", _junit(pytester, xml, tmp_path / "junit")),
        )
    }
    assert outcomes["junit"] == outcomes["in process"]
    assert outcomes["junit"]["tests/test_more.py::LastTests::test_basic"] == "passed"
    assert outcomes["junit"]["tests/test_more.py::LastTests::test_broken"] == "failed"
    assert outcomes["junit"]["tests/test_more.py::TestPlain::test_method"] == "passed"


def test_a_junit_classname_with_no_file_behind_it_keeps_its_dotted_id(
    pytester: pytest.Pytester, tmp_path: Path
) -> None:
    xml = tmp_path / "junit.xml"
    xml.write_text(
        '<testsuite name="s" tests="1"><testcase classname="com.example.AppTest" '
        'name="works"/></testsuite>'
    )
    (pytester.path / "com").mkdir()
    (pytester.path / "com" / "example").symlink_to(tmp_path)  # a link never leads to a file
    (tmp_path / "AppTest.py").write_text("")
    report = _junit(pytester, xml, tmp_path / "junit")
    assert [test["nodeid"] for test in report["tests"]["tests"]] == ["com.example.AppTest::works"]
