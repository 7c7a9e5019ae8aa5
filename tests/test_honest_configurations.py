"""Honest repositories keep their true scores under ``pytest-scoring run``, whatever their
pytest configuration: the probe and the integrity watch load under every setting a real suite
may have, in every child the evaluator starts (the run, the reference rerun, the baseline, the
expected-tests folder), and the witnesses of the run's end raise nothing against them.

Where pytest cannot start on a repository's configuration, the test scores say why in pytest's
own words. The Inspect sandbox's side is in ``tests/test_inspect.py``.
"""

from __future__ import annotations

import shutil
import textwrap
from pathlib import Path
from typing import Any

import pytest
from runs import AS_EVALUATOR
from runs import make_fifo
from runs import only_report
from runs import run_cli

pytestmark = pytest.mark.slow

ROOT = Path(__file__).parent.parent
EXAMPLES = ROOT / "examples"
#: As root, run the children as root too (the venv's interpreter is closed to "nobody").
TAMPERING = {"stream_forged", "exit_mismatch"}
STRICT = "--strict=stream_forged,exit_mismatch"

APP = """
def add(a, b):
    return a + b

def never_called():
    return "not covered"
"""
TESTS = """
from app import add

def test_adds():
    assert add(1, 2) == 3

def test_adds_negative():
    assert add(-1, -2) == -3

def test_fails():
    assert add(1, 1) == 3
"""
IDS = ["test_app.py::test_adds", "test_app.py::test_adds_negative", "test_app.py::test_fails"]
#: A configuration an honest suite may have: its pytest.ini lines, pytest's arguments, and
#: where the tests are (relative to the repository).
CONFIGURATIONS: dict[str, tuple[str, list[str], str]] = {
    "filterwarnings = error": ("filterwarnings = error", [], ""),
    "-W error": ("", ["-W", "error"], ""),
    "--import-mode=importlib": ("addopts = --import-mode=importlib", [], ""),
    "-p no: of unrelated plugins": (
        "addopts = -p no:cacheprovider -p no:doctest -p no:randomly -p no:nose",
        [],
        "",
    ),
    "rootdir and testpaths in a subfolder": (
        "testpaths = backend/tests\naddopts = --rootdir=backend",
        [],
        "backend/tests/",
    ),
    "pytest-xdist with filterwarnings = error": ("filterwarnings = error", ["-n", "2"], ""),
}


def write(path: Path, text: str) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(textwrap.dedent(text))
    return path


def honest_repository(folder: Path, ini: str = "", tests_in: str = "") -> Path:
    write(folder / tests_in / "app.py", APP)
    write(folder / tests_in / "test_app.py", TESTS)
    write(folder / "pytest.ini", f"[pytest]\n{ini}\n")
    return folder


def kinds(report: dict[str, Any]) -> set[str]:
    return {signal["kind"] for signal in report["integrity"]}


def run_with_ids(tmp_path: Path, repo: Path, ids: list[str], *args: str) -> dict[str, Any]:
    (tmp_path / "ids.txt").write_text("\n".join(ids) + "\n")
    expected = ["--expected-tests", str(tmp_path / "ids.txt")]
    result = run_cli(repo, "--report", tmp_path / "out", *expected, *AS_EVALUATOR, *args)
    assert result.exception is None or isinstance(result.exception, SystemExit), result.output
    return only_report(tmp_path / "out")


@pytest.mark.parametrize("configuration", sorted(CONFIGURATIONS))
def test_an_honest_configuration_keeps_its_true_score(tmp_path: Path, configuration: str) -> None:
    ini, args, tests_in = CONFIGURATIONS[configuration]
    repo = honest_repository(tmp_path / "repo", ini, tests_in)
    ids = [f"{tests_in}{test_id}" for test_id in IDS]
    report = run_with_ids(tmp_path, repo, ids, STRICT, "--", *args)
    outcomes = {test["nodeid"]: test["outcome"] for test in report["tests"]["tests"]}
    assert outcomes == {ids[0]: "passed", ids[1]: "passed", ids[2]: "failed"}
    assert report["scores"]["percent_passing_tests"]["value"] == 66.67
    assert kinds(report) <= {"containment"}, report["integrity"]
    assert report["complete"] is True
    assert report["run"]["cpu_time"] > 0


#: An honest conftest of the repository's own: a screenshot name for every failed test.
SCREENSHOTS = """
import pytest

@pytest.hookimpl(wrapper=True)
def pytest_runtest_makereport(item, call):
    report = yield
    if report.when == "call" and report.failed:
        item.user_properties.append(("screenshot", item.name + ".png"))
    return report
"""


def test_a_conftest_that_implements_makereport_honestly_keeps_the_true_score(
    tmp_path: Path,
) -> None:
    repo = honest_repository(tmp_path / "repo")
    write(repo / "conftest.py", SCREENSHOTS)
    report = run_with_ids(tmp_path, repo, IDS)  # run's default strict set
    assert report["scores"]["percent_passing_tests"]["value"] == 66.67, report["integrity"]
    assert kinds(report) <= {"containment", "outcome_hook"}, report["integrity"]
    failed = next(test for test in report["tests"]["tests"] if test["outcome"] == "failed")
    assert failed["user_properties"] == [["screenshot", "test_fails.png"]]


def test_coverage_under_its_threshold_exits_1_explained_by_pytest_cov(tmp_path: Path) -> None:
    pytest.importorskip("pytest_cov")
    repo = honest_repository(tmp_path / "repo", "addopts = --cov --cov-fail-under=100")
    report = run_with_ids(tmp_path, repo, IDS[:2], STRICT, "--", "-k", "not test_fails")
    assert report["run"]["exit_code"] == 1, "coverage under 100 % makes pytest exit 1"
    assert report["tests"]["counts"]["passed"] == 2
    assert report["scores"]["percent_passing_tests"]["value"] == 100
    assert report["scores"]["all_tests_pass"]["value"] == "C"
    assert not kinds(report) & TAMPERING, report["integrity"]


#: A conftest that turns each failure into a pass after pytest counted it (pytest exits 1,
#: the stream says every test passed).
AFTER_PYTEST_COUNTED = """
def pytest_runtest_logreport(report):
    if report.failed:
        report.outcome = "passed"
"""
#: The same, posing as pytest-cov: an object registered under its name, its line printed.
POSING_AS_PYTEST_COV = (
    AFTER_PYTEST_COUNTED
    + """
import types

def pytest_configure(config):
    config.pluginmanager.unregister(name="pytest_cov")  # the installed one, if any
    config.pluginmanager.register(types.ModuleType("pytest_cov"), "pytest_cov")

def pytest_terminal_summary(terminalreporter):
    terminalreporter.write_line("FAIL Required test coverage of 100% not reached.")
"""
)


@pytest.mark.parametrize("conftest", [AFTER_PYTEST_COUNTED, POSING_AS_PYTEST_COV])
def test_exit_status_1_with_every_test_passed_and_no_plugin_saying_why_is_a_mismatch(
    tmp_path: Path, conftest: str
) -> None:
    # The hostile twin of the test above.
    repo = honest_repository(tmp_path / "repo")
    write(repo / "conftest.py", conftest)
    report = run_with_ids(tmp_path, repo, IDS, STRICT)
    assert report["run"]["exit_code"] == 1
    (mismatch,) = [s for s in report["integrity"] if s["kind"] == "exit_mismatch"]
    assert "exited with status 1, but no test failed or errored" in mismatch["detail"]
    assert report["scores"]["percent_passing_tests"]["value"] == "N"


#: A server's test that shuts the process down at once on SIGINT, as servers do: the
#: evaluator's deadline ends the process with status 0 and no end record.
SHUTS_DOWN_ON_SIGINT = """
import os, signal
from pathlib import Path

def test_first():
    pass

def test_serves():
    signal.signal(signal.SIGINT, lambda *args: os._exit(0))
    Path({never!r}).read_text()  # no writer ever comes: only the deadline ends it
"""


def test_the_evaluators_deadline_is_no_tampering(tmp_path: Path) -> None:
    never = make_fifo(tmp_path / "never")
    repo = tmp_path / "repo"
    write(repo / "test_serves.py", SHUTS_DOWN_ON_SIGINT.format(never=str(never)))
    ids = ["test_serves.py::test_first", "test_serves.py::test_serves"]
    # Long enough for pytest to start and reach test_serves on a loaded machine (a deadline
    # before its handler is set would be a plain Ctrl-C); test_serves never ends by itself.
    report = run_with_ids(tmp_path, repo, ids, STRICT, "--timeout", "20")
    assert (report["run"]["timed_out"], report["run"]["exit_code"]) == (True, 0)
    assert report["complete"] is False
    assert not kinds(report) & TAMPERING, report["integrity"]
    assert report["scores"]["percent_passing_tests"]["value"] == 50


@pytest.mark.parametrize(
    ("ini", "said"),
    [
        ("minversion = 999", "'minversion' requires pytest-999"),
        ("addopts = --no-such-option", "unrecognized arguments: --no-such-option"),
    ],
)
def test_pytest_refusing_the_repositorys_configuration_says_why_in_the_scores(
    tmp_path: Path, ini: str, said: str
) -> None:
    repo = honest_repository(tmp_path / "repo", ini)
    report = run_with_ids(tmp_path, repo, IDS)
    for name in ("percent_passing_tests", "all_tests_pass", "percent_failing_tests"):
        score = report["scores"][name]
        assert score["value"] == "N"
        assert said in score["explanation"], score["explanation"]
        assert "could not start on the repository's configuration" in score["explanation"]
        assert score["metadata"]["unscored"] == "repository"
        assert "pytest-scoring-run-" not in score["explanation"], "REPO, not the private copy"


#: Configurations for every child the evaluator starts (the shipped example's pytest.ini
#: gets the line).
EVERYWHERE = {
    "filterwarnings = error": "filterwarnings = error",
    "-W error": "addopts = -W error",
    "--import-mode=importlib": "addopts = --import-mode=importlib",
    "-p no: of unrelated plugins": "addopts = -p no:cacheprovider -p no:doctest",
}


@pytest.mark.parametrize("configuration", list(EVERYWHERE))
def test_an_honest_configuration_everywhere_the_evaluator_starts_pytest(
    tmp_path: Path, configuration: str
) -> None:
    # The run, the reference rerun, the baseline (the reference's own tests) and the
    # expected-tests folder each start pytest in a child on that configuration.
    reference, repo = tmp_path / "reference", tmp_path / "repo"
    shutil.copytree(EXAMPLES / "reference", reference)
    shutil.copytree(EXAMPLES / "solution-attack", repo)
    for folder in (reference, repo):
        with (folder / "pytest.ini").open("a") as ini:
            ini.write(EVERYWHERE[configuration] + "\n")
    selector = f"@{EXAMPLES / 'selectors' / 'password_change.json'}"
    result = run_cli(
        repo,
        *("--report", tmp_path / "out", "--reference", reference, "--selector", selector),
        *("--expected-tests", reference, STRICT, *AS_EVALUATOR),
    )
    report = only_report(tmp_path / "out")
    assert report["tests"]["expected_tests"]["tests"] == 6, result.output
    assert report["scores"]["percent_passing_tests"]["value"] == 100
    changed = report["scores"]["db_diff_change"]
    assert changed["value"] == "C", changed["explanation"]
    assert changed["metadata"]["reference_counts"]["passed"] == 5
    assert changed["metadata"]["baseline"]["counts"]["passed"] == 5
    assert kinds(report) <= {"containment"}, report["integrity"]
