"""The show, list and junit commands, run through click's CliRunner on real files."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from click.testing import CliRunner
from click.testing import Result

from pytest_scoring import results_df
from pytest_scoring.cli.main import main
from pytest_scoring.report.reader import list_reports

SAMPLES = Path(__file__).parent / "data" / "junit"
SUREFIRE = [
    str(SAMPLES / "TEST-com.example.shop.CartTest.xml"),
    str(SAMPLES / "TEST-com.example.shop.OrderTest.xml"),
]


def run(*args: str) -> Result:
    return CliRunner().invoke(main, list(args))


@pytest.fixture
def root(tmp_path: Path) -> Path:
    """A report root holding the report of the Surefire sample files."""
    reports = tmp_path / "scores"
    assert run("junit", *SUREFIRE, "--report", str(reports)).exit_code == 0
    return reports


def test_junit_scores_the_files_into_a_report_scout_can_read(tmp_path: Path) -> None:
    reports = tmp_path / "deep" / "scores"
    result = run("junit", *SUREFIRE, "--report", str(reports))
    assert result.exit_code == 0, result.output
    assert "percent_passing_tests: 50  (" in result.output
    (folder,) = reports.glob("scan_id=*")
    assert f"score report: {folder}" in result.output
    scores = json.loads((folder / "scores.json").read_text())
    assert scores["tests"]["counts"]["total"] == 4
    assert results_df(folder).scanners["all_tests_pass"]["value"].tolist() == ["I"]


@pytest.mark.parametrize(("threshold", "status"), [("50", 0), ("50.01", 1)])
def test_junit_exits_1_below_fail_under(tmp_path: Path, threshold: str, status: int) -> None:
    result = run("junit", *SUREFIRE, "--report", str(tmp_path), "--fail-under", threshold)
    assert result.exit_code == status
    assert ("FAIL: 50% of tests pass" in result.output) == bool(status)


def test_junit_writes_its_report_under_scores_by_default(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    assert run("junit", str(SAMPLES / "go-junit-report.xml")).exit_code == 0
    assert len(list_reports(tmp_path / "scores")) == 1


@pytest.mark.parametrize("content", ["", "<testsuite><testcase name='a'>"], ids=["empty", "cut"])
def test_junit_rejects_a_bad_file_with_one_line_and_exit_2(tmp_path: Path, content: str) -> None:
    bad = tmp_path / "bad.xml"
    bad.write_text(content)
    result = run("junit", str(SAMPLES / "pytest.xml"), str(bad), "--report", str(tmp_path / "r"))
    assert result.exit_code == 2
    assert result.output.startswith(f"pytest-scoring: error: {bad}: ")
    assert result.output.count("\n") == 1
    assert "Traceback" not in result.output
    assert not (tmp_path / "r").exists()


def test_junit_rejects_a_fail_under_outside_0_to_100(tmp_path: Path) -> None:
    result = run("junit", *SUREFIRE, "--fail-under", "120")
    assert result.exit_code == 2
    assert "120" in result.output


def test_show_prints_scores_metrics_counts_and_completeness(root: Path) -> None:
    result = run("show", str(root))
    assert result.exit_code == 0, result.output
    for text in (
        "percent_passing_tests",
        "50",
        "accuracy_at_100=0",
        "2 passed, 1 failed, 1 error = 4 counted; not counted: 1 skipped",
        "complete: yes",
    ):
        assert text in result.output


def test_show_reads_a_scan_id_folder_given_directly(root: Path) -> None:
    (folder,) = root.glob("scan_id=*")
    result = run("show", str(folder))
    assert result.exit_code == 0
    assert f"report: {folder}" in result.output


@pytest.mark.parametrize("file", ["scores.json", "_scan.json"])
def test_show_reads_the_report_of_a_file_in_it(root: Path, file: str) -> None:
    (folder,) = root.glob("scan_id=*")
    result = run("show", str(folder / file))
    assert result.exit_code == 0, result.output
    assert f"report: {folder}" in result.output


def test_show_of_a_file_outside_any_report_says_so(tmp_path: Path) -> None:
    (tmp_path / "scores.json").write_text("{}")
    result = run("show", str(tmp_path / "scores.json"))
    assert result.exit_code == 2
    assert "scores.json: a file outside any report" in result.output
    assert result.output.count("\n") == 1


def test_show_of_a_missing_folder_exits_2_with_one_line(tmp_path: Path) -> None:
    result = run("show", str(tmp_path / "nowhere"))
    assert result.exit_code == 2
    assert (
        result.output == f"pytest-scoring: error: {tmp_path / 'nowhere'}: no such report folder\n"
    )


def test_show_of_a_report_whose_scores_json_is_not_utf8_exits_2_with_one_line(
    root: Path,
) -> None:
    (folder,) = root.glob("scan_id=*")
    (folder / "scores.json").write_bytes(b"\xff\xfe{")
    result = run("show", str(folder))
    assert result.exit_code == 2
    assert result.output.startswith(f"pytest-scoring: error: {folder / 'scores.json'}: not UTF-8")
    assert result.output.count("\n") == 1


@pytest.mark.parametrize(
    ("content", "where"),
    [
        ({"scores": [1]}, "scores: expected a JSON object, found list"),
        ({"scores": {"a": None}}, "scores.a: expected a JSON object, found NoneType"),
        ({"metrics": {"a": [1]}}, "metrics.a: expected a JSON object, found list"),
        ({"tests": {"counts": [1]}}, "tests.counts: expected a JSON object, found list"),
    ],
)
def test_show_and_list_of_a_report_with_a_malformed_scores_json_say_where(
    root: Path, content: dict[str, object], where: str
) -> None:
    (folder,) = root.glob("scan_id=*")
    (folder / "scores.json").write_text(json.dumps(content))
    result = run("show", str(folder))
    assert (result.exit_code, result.output) == (
        2,
        f"pytest-scoring: error: {folder / 'scores.json'}: {where}\n",
    )
    assert run("list", str(root)).output == f"no reports under {root}\n"


def test_show_prints_an_explanation_that_is_not_text(root: Path) -> None:
    (folder,) = root.glob("scan_id=*")
    (folder / "scores.json").write_text(
        json.dumps({"scores": {"odd": {"value": 1, "explanation": 42}}})
    )
    result = run("show", str(folder))
    assert result.exit_code == 0, result.output
    assert "42" in result.output


def test_list_shows_reports_newest_first(root: Path) -> None:
    (oldest,) = root.glob("scan_id=*")
    assert run("junit", str(SAMPLES / "jest-junit.xml"), "--report", str(root)).exit_code == 0
    (newest,) = set(root.glob("scan_id=*")) - {oldest}
    result = run("list", str(root))
    assert result.exit_code == 0, result.output
    ids = [folder.name.removeprefix("scan_id=") for folder in (newest, oldest)]
    assert result.output.index(ids[0]) < result.output.index(ids[1])
    assert "percent_passing_tests=66.67" in result.output


def test_list_of_an_empty_root_says_so(tmp_path: Path) -> None:
    result = run("list", str(tmp_path))
    assert (result.exit_code, result.output) == (0, f"no reports under {tmp_path}\n")


def test_list_of_a_missing_root_exits_2(tmp_path: Path) -> None:
    assert run("list", str(tmp_path / "missing")).exit_code == 2
