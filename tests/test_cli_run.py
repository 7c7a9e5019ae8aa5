"""``pytest-scoring run``: scoring a repository from outside, its output and exit status."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from click.testing import CliRunner
from click.testing import Result

from pytest_scoring.cli.main import main
from pytest_scoring.cli.runner import Progress
from pytest_scoring.cli.runner import RunRequest

PASS_AND_FAIL = """
def test_ok():
    pass

def test_broken():
    assert False
"""


@pytest.fixture
def repo(tmp_path: Path) -> Path:
    folder = tmp_path / "repo"
    folder.mkdir()
    (folder / "test_app.py").write_text(PASS_AND_FAIL)
    return folder


def run(*args: str | Path) -> Result:
    return CliRunner().invoke(main, ["run", *map(str, args)])


def scores_of(report_root: Path) -> dict[str, object]:
    (path,) = report_root.glob("scan_id=*/scores.json")
    content = json.loads(path.read_text())
    assert isinstance(content, dict)
    return content


@pytest.mark.slow
def test_a_run_prints_the_scores_and_where_the_report_is(repo: Path, tmp_path: Path) -> None:
    result = run(repo, "--report", tmp_path / "out")
    assert result.exit_code == 0, result.output
    assert "percent_passing_tests" in result.output
    assert "50" in result.output
    assert f"report: {tmp_path / 'out'}" in result.output.replace("\n", "")
    assert scores_of(tmp_path / "out")["complete"] is True


@pytest.mark.slow
def test_a_pass_rate_below_fail_under_exits_with_one(repo: Path, tmp_path: Path) -> None:
    result = run(repo, "--report", tmp_path / "out", "--fail-under", "75")
    assert result.exit_code == 1
    assert "FAIL: 50% of tests pass, below --fail-under=75" in result.output


@pytest.mark.slow
def test_arguments_after_the_separator_go_to_pytest(repo: Path, tmp_path: Path) -> None:
    result = run(repo, "--report", tmp_path / "out", "--fail-under=100", "--", "-k", "not broken")
    assert result.exit_code == 0, result.output
    assert scores_of(tmp_path / "out")["tests"]["counts"]["total"] == 1  # type: ignore[index]


def test_a_missing_repository_is_bad_input(tmp_path: Path) -> None:
    result = run(tmp_path / "nowhere")
    assert result.exit_code == 2
    assert "REPO:" in result.output and "nowhere is not a folder" in result.output


def test_an_invalid_selector_is_bad_input_with_pytests_message(repo: Path, tmp_path: Path) -> None:
    result = run(repo, "--report", tmp_path / "out", "--selector", "{not json")
    assert result.exit_code == 2
    assert "error: --score-selector: inline JSON: not valid JSON" in result.output
    assert "Traceback" not in result.output


@pytest.mark.slow
def test_a_run_past_its_timeout_is_stopped_and_reports_what_ran(repo: Path, tmp_path: Path) -> None:
    (repo / "test_slow.py").write_text("import time\n\ndef test_slow():\n    time.sleep(600)\n")
    # Long enough for pytest to start and run the other tests on a loaded machine (the run is
    # stopped at the timeout whenever it comes: a test that never ends is always past it).
    result = run(repo, "--report", tmp_path / "out", "--timeout", "20")
    assert result.exit_code == 0, result.output
    assert "timed out after 20 s" in result.output
    report = scores_of(tmp_path / "out")
    assert report["complete"] is False
    assert report["tests"]["counts"]["passed"] == 1  # type: ignore[index]


def test_progress_counts_tests_as_pytest_reports_them() -> None:
    progress = Progress()
    progress.feed("collected 5 items\n\ntests/test_a.py ..F")
    assert progress.describe().startswith("3/5 tests")
    progress.feed("s.  [100%]\n\nFAILED tests/test_a.py::test_c - assert 0\n")
    assert progress.describe().startswith("5/5 tests, scoring")
    progress.feed("tests/test_b.py::test_x PASSED   [ 50%]\n[gw1] [ 60%] SKIPPED tests/b.py::y\n")
    assert progress.tests_done() == 7


@pytest.mark.slow
def test_the_repositorys_own_scoring_settings_cannot_steer_a_run(
    repo: Path, tmp_path: Path
) -> None:
    (repo / "only_tests.yaml").write_text("scorers:\n  - type: all_tests_pass\n")
    (repo / "pytest.ini").write_text(
        "[pytest]\n"
        "score_config = only_tests.yaml\n"
        "score_fail_under = 0\n"
        "score_db_patterns = *.nothing\n"
        "score_report = elsewhere\n"
        "score_markdown = ../planted.md\n"
    )
    result = run(repo, "--report", tmp_path / "out", "--fail-under", "75")
    assert result.exit_code == 1, result.output
    scores = scores_of(tmp_path / "out")["scores"]
    assert isinstance(scores, dict)
    assert set(scores) == {"all_tests_pass", "percent_passing_tests", "percent_failing_tests"}
    assert not (repo / "elsewhere").exists()
    assert not (tmp_path / "planted.md").exists()


@pytest.mark.slow
def test_the_repositorys_addopts_cannot_choose_scorers_or_run_commands(
    repo: Path, tmp_path: Path
) -> None:
    (repo / "mine.yaml").write_text(
        "scorers:\n  - type: sandbox_state\n    command: touch ran_my_command\n"
    )
    (repo / "pytest.ini").write_text(
        "[pytest]\naddopts = --score-config=mine.yaml --score-fail-under=0 -p no:cacheprovider\n"
    )
    result = run(repo, "--report", tmp_path / "out", "--fail-under", "75")
    assert result.exit_code == 1, result.output
    scores = scores_of(tmp_path / "out")["scores"]
    assert isinstance(scores, dict)
    assert set(scores) == {"all_tests_pass", "percent_passing_tests", "percent_failing_tests"}
    assert not (repo / "ran_my_command").exists()
    assert not (repo / ".pytest_cache").exists(), "the repository's other addopts still apply"


def test_the_fail_under_threshold_reaches_pytest_exactly(
    repo: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("PYTEST_SCORING_REFERENCE_TIMEOUT", raising=False)
    request = RunRequest(repo, tmp_path / "out", timeout=1e6, fail_under=99.9999999)
    assert "--score-fail-under=99.9999999" in request.arguments()
    assert request.environment()["PYTEST_SCORING_REFERENCE_TIMEOUT"] == "600"
