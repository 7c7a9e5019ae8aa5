"""Test ids are never rewritten on the session's side; two tests with one id are an
``id_collision``, and the worse outcome counts.

The backslash twin: with no code at all, a root file literally named ``tests\\test_a.py``
holds two passing functions named like the two genuine failures of ``tests/test_a.py``, and a
``python_files`` line collects it. pytest 9 writes both files' ids with ``/``: four tests, two
ids, and the passing twin used to win (100 % by both ``run`` and ``pytest
--score-expected-tests``; the truth is 60 %).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from evaluator_tests import AS_EVALUATOR
from evaluator_tests import write
from runs import SYSTEM_PYTHON
from runs import only_report
from runs import run_cli
from runs import system_python_with_pytest

from pytest_scoring.core.outcomes import OutcomeTally
from pytest_scoring.core.outcomes import PhaseRecord

GENUINE = """
def test_ok1(): pass
def test_ok2(): pass
def test_ok3(): pass
def test_fail1(): assert 0
def test_fail2(): assert 0
"""
TWIN = "def test_fail1(): pass\ndef test_fail2(): pass\n"
IDS = [f"tests/test_a.py::test_{name}" for name in ("ok1", "ok2", "ok3", "fail1", "fail2")]


def make_twin(folder: Path) -> Path:
    write(folder / "tests" / "test_a.py", GENUINE)
    write(folder / "tests\\test_a.py", TWIN)
    write(folder / "pytest.ini", "[pytest]\npython_files = test_*.py 'tests\\test_*.py'\n")
    return folder


def collisions(report: dict[str, Any]) -> list[str]:
    return [s["detail"] for s in report["integrity"] if s["kind"] == "id_collision"]


@pytest.fixture
def ids(tmp_path: Path) -> Path:
    return write(tmp_path / "ids.txt", "\n".join(IDS) + "\n")


@pytest.mark.slow
def test_run_counts_the_twins_worse_outcome_and_says_so(tmp_path: Path, ids: Path) -> None:
    repo = make_twin(tmp_path / "repo")
    run_cli(repo, "--expected-tests", ids, "--report", tmp_path / "strict", *AS_EVALUATOR)
    score = only_report(tmp_path / "strict")["scores"]["percent_passing_tests"]
    assert (score["value"], score["metadata"]["strict_kinds"]) == ("N", ["id_collision"])
    # Without strict kinds, the worse outcome counts: the truth.
    run_cli(
        repo, "--expected-tests", ids, "--report", tmp_path / "out", *AS_EVALUATOR, "--strict=none"
    )
    report = only_report(tmp_path / "out")
    assert report["scores"]["percent_passing_tests"]["value"] == 60
    assert report["tests"]["counts"]["failed"] == 2
    assert collisions(report) == [
        f"pytest collected 2 different tests with the id {nodeid}: they count as one, with "
        "the worst outcome any of them had"
        for nodeid in IDS[3:]
    ]


@pytest.mark.slow
def test_under_tests_from_the_twin_is_never_collected(tmp_path: Path, ids: Path) -> None:
    repo = make_twin(tmp_path / "repo")
    reference = tmp_path / "reference"
    write(reference / "tests" / "test_a.py", GENUINE)
    run_cli(
        repo,
        "--tests-from",
        reference,
        "--expected-tests",
        ids,
        "--report",
        tmp_path / "out",
        *AS_EVALUATOR,
    )
    report = only_report(tmp_path / "out")
    assert report["scores"]["percent_passing_tests"]["value"] == 60
    assert collisions(report) == []
    assert report["tests_from"]["ignored"] == ["pytest.ini [pytest]", "tests\\test_a.py"]


@pytest.mark.parametrize("workers", [[], ["-n", "2"]], ids=["plain", "xdist"])
def test_in_process_the_twin_counts_its_worse_outcome(
    pytester: pytest.Pytester, ids: Path, workers: list[str]
) -> None:
    make_twin(pytester.path)
    pytester.runpytest("--score", f"--score-expected-tests={ids}", "-p", "no:randomly", *workers)
    report = json.loads(next((pytester.path / "scores").glob("*/scores.json")).read_text())
    assert report["scores"]["percent_passing_tests"]["value"] == 60
    assert len(collisions(report)) == 2
    assert report["tests"]["counts"]["passed"] == 3


def phases(nodeid: str, call: str, setup: str = "passed") -> list[PhaseRecord]:
    """One test's three phase records."""
    return [
        {"nodeid": nodeid, "when": "setup", "outcome": setup},
        {"nodeid": nodeid, "when": "call", "outcome": call},
        {"nodeid": nodeid, "when": "teardown", "outcome": "passed"},
    ]


def tally_of(collected: list[str], records: list[PhaseRecord]) -> OutcomeTally:
    tally = OutcomeTally()
    tally.record_collected(collected)
    for record in records:
        tally.record_phase(record)
    return tally


@pytest.mark.parametrize("twin_first", [False, True], ids=["twin last", "twin first"])
def test_two_tests_with_one_id_count_the_worse_outcome(twin_first: bool) -> None:
    real, twin = phases("t.py::a", "failed"), phases("t.py::a", "passed")
    tally = tally_of(["t.py::a", "t.py::a"], [*twin, *real] if twin_first else [*real, *twin])
    assert tally.outcome_of("t.py::a") == "failed"
    assert tally.collided == {"t.py::a": 2}


def test_interleaved_reports_of_two_tests_with_one_id_keep_the_worse() -> None:
    # Under pytest-xdist, two workers' reports arrive in any order.
    real, twin = phases("t.py::a", "failed"), phases("t.py::a", "passed")
    interleaved = [real[0], twin[0], real[1], twin[1], twin[2], real[2]]
    assert tally_of(["t.py::a", "t.py::a"], interleaved).outcome_of("t.py::a") == "failed"


def test_a_setup_error_of_either_test_with_one_id_is_an_error() -> None:
    records = [*phases("t.py::a", "passed"), *phases("t.py::a", "skipped", setup="failed")[::2]]
    assert tally_of(["t.py::a", "t.py::a"], records).outcome_of("t.py::a") == "error"


def test_repeated_records_of_one_collected_id_are_attempts_and_the_last_counts() -> None:
    tally = tally_of(["t.py::a"], [*phases("t.py::a", "failed"), *phases("t.py::a", "passed")])
    assert tally.outcome_of("t.py::a") == "passed"
    assert tally.collided == {}


def test_session_ids_are_matched_as_pytest_wrote_them_never_normalised() -> None:
    tally = tally_of(
        [IDS[3], "tests\\test_a.py::test_fail1"],
        [*phases(IDS[3], "failed"), *phases("tests\\test_a.py::test_fail1", "passed")],
    )
    tally.expected = {IDS[3]: "passed"}
    assert tally.counts()["failed"] == 1
    assert tally.extra() == ["tests\\test_a.py::test_fail1"]


@pytest.mark.slow
@pytest.mark.skipif(not system_python_with_pytest(), reason="needs /usr/bin/python3 with pytest")
def test_with_a_pytest_that_keeps_the_backslash_the_twin_is_extra(
    tmp_path: Path, ids: Path
) -> None:
    # Debian's pytest 7 writes the twin's ids as its file is named: they match nothing.
    repo = make_twin(tmp_path / "repo")
    run_cli(repo, "--expected-tests", ids, "--python", SYSTEM_PYTHON, "--report", tmp_path / "out")
    report = only_report(tmp_path / "out")
    if not report["run"]["pytest"].startswith("7."):
        pytest.skip(f"Debian's pytest is {report['run']['pytest']}, which writes ids with /")
    assert report["scores"]["percent_passing_tests"]["value"] == 60
    assert report["tests"]["extra"] == [
        "tests\\test_a.py::test_fail1",
        "tests\\test_a.py::test_fail2",
    ]
