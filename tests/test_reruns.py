"""``run --retries N``: flaky tests found by running the tests that did not pass again, in
fresh contained pytest processes; ``--flaky`` decides how they count; a repository that
behaves differently when rerun is not rewarded."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pyarrow.parquet as pq
import pytest
from evaluator_flaky import FLAKY
from evaluator_flaky import flaky_suite
from runs import AS_EVALUATOR
from runs import run_cli
from runs import scores_json

BROKEN = "tests/test_flaky.py::test_broken"


def _run(repo: Path, report: Path, *args: str) -> dict[str, Any]:
    result = run_cli(repo, "--report", report, *AS_EVALUATOR, *args)
    assert result.exit_code == 0, result.output
    (folder,) = report.glob("scan_id=*")
    return scores_json(folder)


def _values(report: dict[str, Any]) -> dict[str, Any]:
    return {name: score["value"] for name, score in report["scores"].items()}


@pytest.mark.slow
def test_ten_runs_with_two_retries_give_identical_scores_and_list_the_flaky_tests(
    tmp_path: Path,
) -> None:
    repo = flaky_suite(tmp_path / "repo")
    reports = [_run(repo, tmp_path / f"out-{run}", "--retries", "2") for run in range(10)]
    assert len({json.dumps(_values(report)) for report in reports}) == 1
    # --flaky fail: a flaky test counts as failed; only test_fine and the neighbours pass.
    assert _values(reports[0])["percent_passing_tests"] == 42.86
    for report in reports:
        tests = report["tests"]
        assert sorted(tests["flaky"]) == sorted(FLAKY)
        assert all(attempts == ["failed", "passed"] for attempts in tests["flaky"].values())
        by_id = {test["nodeid"]: test for test in tests["tests"]}
        assert by_id[BROKEN]["attempts"] == ["failed", "failed", "failed"]
        assert report["run"]["reruns"] == 2


@pytest.mark.slow
@pytest.mark.parametrize(
    ("rule", "percent", "counted", "excluded"),
    [("fail", 42.86, 7, 0), ("pass", 85.71, 7, 3), ("exclude", 75, 4, 3)],
)
def test_the_flaky_rule_decides_how_a_flaky_test_counts(
    tmp_path: Path, rule: str, percent: float, counted: int, excluded: int
) -> None:
    repo = flaky_suite(tmp_path / "repo")
    report = _run(repo, tmp_path / "out", "--retries", "1", "--flaky", rule)
    assert report["scores"]["percent_passing_tests"]["value"] == percent
    counts = report["tests"]["counts"]
    assert counts["total"] == counted
    assert counts["flaky"] == (excluded if rule == "exclude" else 0)
    assert sorted(report["tests"]["flaky"]) == sorted(FLAKY)
    (folder,) = (tmp_path / "out").glob("scan_id=*")
    rows = pq.read_table(folder / "percent_passing_tests.parquet").to_pylist()
    assert json.loads(rows[0]["flaky"]) == report["tests"]["flaky"]


@pytest.mark.slow
def test_without_retries_nothing_is_rerun(tmp_path: Path) -> None:
    report = _run(flaky_suite(tmp_path / "repo"), tmp_path / "out")
    assert "flaky" not in report["tests"]
    assert "flaky" not in report["tests"]["counts"]
    assert all("attempts" not in test for test in report["tests"]["tests"])


#: Honest in the session; in a rerun (a second attempt, counted in HOME) the conftest that
#: took SWE-bench Verified to 500/500 rewrites every outcome to passed.
TAMPERS_WHEN_RERUN = """
import pytest
from pathlib import Path

RERUN = (Path.home() / ".seen").exists()
(Path.home() / ".seen").write_text("yes")

@pytest.hookimpl(wrapper=True)
def pytest_runtest_makereport(item, call):
    report = yield
    if RERUN:
        report.outcome = "passed"
    return report
"""


@pytest.mark.slow
def test_tampering_in_a_rerun_makes_the_test_scores_n(tmp_path: Path) -> None:
    repo = tmp_path / "repo"
    repo.mkdir()
    (repo / "conftest.py").write_text(TAMPERS_WHEN_RERUN)
    (repo / "test_app.py").write_text("def test_ok():\n    pass\n\ndef test_bad():\n    assert 0\n")
    report = _run(repo, tmp_path / "out", "--retries", "2", "--flaky", "pass")
    score = report["scores"]["percent_passing_tests"]
    assert score["value"] == "N", score
    assert score["metadata"]["unscored"] == "tampering"
    assert "outcome_changed" in score["metadata"]["strict_kinds"]


@pytest.mark.slow
def test_with_an_expected_set_only_its_tests_are_rerun(tmp_path: Path) -> None:
    repo = flaky_suite(tmp_path / "repo")
    expected = tmp_path / "expected.txt"
    expected.write_text("\n".join([*FLAKY, "tests/test_flaky.py::test_fine"]) + "\n")
    args = ("--retries", "1", "--expected-tests", str(expected))
    report = _run(repo, tmp_path / "out", *args)
    by_id = {test["nodeid"]: test for test in report["tests"]["tests"]}
    assert "attempts" not in by_id[BROKEN]  # an extra test: never rerun
    assert by_id["tests/test_flaky.py::test_order_b"]["attempts"] == ["failed", "passed"]


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--retries", "-1"], "--retries"),
        (["--flaky", "sometimes"], "--flaky"),
    ],
)
def test_bad_retries_and_flaky_values_are_bad_input(
    tmp_path: Path, args: list[str], message: str
) -> None:
    repo = tmp_path / "repo"
    repo.mkdir()
    result = run_cli(repo, "--report", tmp_path / "out", *args)
    assert result.exit_code == 2
    assert message in result.output
    assert "Traceback" not in result.output


@pytest.mark.slow
def test_in_process_score_retries_reruns_in_fresh_copies(pytester: pytest.Pytester) -> None:
    flaky_suite(pytester.path)
    report_root = pytester.path.parent / f"{pytester.path.name}-scores"
    result = pytester.runpytest_subprocess(
        "-p",
        "no:cacheprovider",
        f"--score-report={report_root}",
        "--score-retries=1",
        "--score-flaky=pass",
    )
    assert result.ret == 1  # pytest's own verdict on its session is unchanged
    (folder,) = report_root.glob("scan_id=*")
    report = scores_json(folder)
    assert sorted(report["tests"]["flaky"]) == sorted(FLAKY)
    assert report["scores"]["percent_passing_tests"]["value"] == 85.71
    assert not list(pytester.path.rglob("rerun-*"))  # the copies were the evaluator's


def test_in_process_the_repositorys_addopts_cannot_rerun_its_failures(
    pytester: pytest.Pytester,
) -> None:
    flaky_suite(pytester.path)
    (pytester.path / "pytest.ini").write_text(
        "[pytest]\naddopts = --score-retries=1 --score-flaky=pass\n"
    )
    report_root = pytester.path.parent / "scores-of-addopts"
    result = pytester.runpytest_subprocess(
        "-p", "no:cacheprovider", f"--score-report={report_root}"
    )
    (folder,) = report_root.glob("scan_id=*")
    report = scores_json(folder)
    assert "configfile: pytest.ini" in result.stdout.str()
    assert not report["tests"].get("flaky"), result.stdout.str()
    assert report["scores"]["percent_passing_tests"]["value"] < 85.71


def test_in_process_a_negative_score_retries_is_a_usage_error(pytester: pytest.Pytester) -> None:
    pytester.makepyfile(test_one="def test_one():\n    pass\n")
    result = pytester.runpytest("--score", "--score-retries=-1")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines(["*--score-retries*0 or more*"])


#: Fails in the session, skips itself when rerun (it can tell from what it left in HOME).
SKIPS_WHEN_RERUN = """
import pytest
from pathlib import Path

def test_dodges():
    seen = Path.home() / ".seen"
    if seen.exists():
        pytest.skip("rerun")
    seen.write_text("yes")
    assert 0
"""


@pytest.mark.slow
@pytest.mark.parametrize("rule", ["pass", "exclude"])
def test_a_failing_test_that_skips_when_rerun_still_fails(tmp_path: Path, rule: str) -> None:
    repo = tmp_path / "repo"
    repo.mkdir()
    (repo / "test_app.py").write_text(SKIPS_WHEN_RERUN)
    report = _run(repo, tmp_path / "out", "--retries", "1", "--flaky", rule)
    assert report["tests"]["flaky"] == {}
    (test,) = report["tests"]["tests"]
    assert test["outcome"] == "failed" and test["attempts"] == ["failed", "skipped"]
    assert report["scores"]["percent_passing_tests"]["value"] == 0
