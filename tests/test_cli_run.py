"""``pytest-scoring run``: scoring a repository from outside, its output and exit status."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
from click.testing import CliRunner
from click.testing import Result
from runs import TAMPERING_ONLY

from pytest_scoring.cli.main import main
from pytest_scoring.cli.request import RunRequest

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
    result = run(repo, "--report", tmp_path / "out", TAMPERING_ONLY)
    assert result.exit_code == 0, result.output
    assert "percent_passing_tests" in result.output
    assert "50" in result.output
    assert f"report: {tmp_path / 'out'}" in result.output.replace("\n", "")
    assert scores_of(tmp_path / "out")["complete"] is True


@pytest.mark.slow
def test_a_pass_rate_below_fail_under_exits_with_one(repo: Path, tmp_path: Path) -> None:
    result = run(repo, "--report", tmp_path / "out", "--fail-under", "75", TAMPERING_ONLY)
    assert result.exit_code == 1
    assert "FAIL: 50% of tests pass, below --fail-under=75" in result.output


@pytest.mark.slow
def test_arguments_after_the_separator_go_to_pytest(repo: Path, tmp_path: Path) -> None:
    args = (
        "--report",
        tmp_path / "out",
        "--fail-under=100",
        TAMPERING_ONLY,
        "--",
        "-k",
        "not broken",
    )
    result = run(repo, *args)
    assert result.exit_code == 0, result.output
    assert scores_of(tmp_path / "out")["tests"]["counts"]["total"] == 1  # type: ignore[index]


def test_a_missing_repository_is_bad_input(tmp_path: Path) -> None:
    result = run(tmp_path / "nowhere")
    assert result.exit_code == 2
    assert "REPO:" in result.output and "nowhere is not a folder" in result.output


def test_an_invalid_selector_is_bad_input_with_pytests_message(repo: Path, tmp_path: Path) -> None:
    result = run(repo, "--report", tmp_path / "out", "--selector", "{not json")
    assert result.exit_code == 2
    assert "error: --selector: inline JSON: not valid JSON" in result.output
    assert "Traceback" not in result.output


@pytest.mark.slow
def test_a_run_past_its_timeout_is_stopped_and_reports_what_ran(repo: Path, tmp_path: Path) -> None:
    (repo / "test_slow.py").write_text("import time\n\ndef test_slow():\n    time.sleep(600)\n")
    # Long enough for pytest to start and run the other tests on a loaded machine (the run is
    # stopped at the timeout whenever it comes: a test that never ends is always past it).
    result = run(repo, "--report", tmp_path / "out", "--timeout", "20", TAMPERING_ONLY)
    assert result.exit_code == 0, result.output
    assert "timed out after 20 s" in result.output
    report = scores_of(tmp_path / "out")
    assert report["complete"] is False
    assert report["tests"]["counts"]["passed"] == 1  # type: ignore[index]
    # The evaluator's deadline ended the run: its early_end informs, the scores stay numbers.
    assert "early_end" in {signal["kind"] for signal in report["integrity"]}  # type: ignore[attr-defined]
    assert isinstance(report["scores"]["percent_passing_tests"]["value"], float)  # type: ignore[index]


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
        "[pytest]\naddopts = --score-config=mine.yaml --score-fail-under=0 -k 'not broken'\n"
    )
    result = run(repo, "--report", tmp_path / "out", "--fail-under", "75", TAMPERING_ONLY)
    assert result.exit_code == 0, result.output
    report = scores_of(tmp_path / "out")
    assert set(report["scores"]) == {  # type: ignore[call-overload]
        "all_tests_pass",
        "percent_passing_tests",
        "percent_failing_tests",
    }
    assert report["tests"]["counts"]["total"] == 1, "the other addopts still apply"  # type: ignore[index]
    assert not (repo / "ran_my_command").exists()


def test_the_fail_under_threshold_reaches_the_evaluator_exactly(repo: Path, tmp_path: Path) -> None:
    request = RunRequest(repo, tmp_path / "out", timeout=1e6, fail_under=99.9999999)
    assert "--score-fail-under=99.9999999" in request.own_options()


def test_the_scored_repository_is_never_modified_and_two_runs_agree(
    repo: Path, tmp_path: Path
) -> None:
    (repo / "test_writes.py").write_text(
        "from pathlib import Path\n\n"
        "def test_appends():\n"
        "    log = Path(__file__).with_name('log.txt')\n"
        "    log.write_text(log.read_text() + 'x' if log.exists() else 'x')\n"
        "    assert log.read_text() == 'x'\n"
    )
    for attempt in ("first", "second"):
        run(repo, "--report", tmp_path / attempt)
        assert scores_of(tmp_path / attempt)["tests"]["counts"]["passed"] == 2  # type: ignore[index]
    assert sorted(path.name for path in repo.iterdir()) == ["test_app.py", "test_writes.py"]


def test_reports_name_the_repository_never_its_private_copy(repo: Path, tmp_path: Path) -> None:
    (repo / "test_where.py").write_text(
        "import os\n\ndef test_where(record_property):\n"
        "    record_property('cwd', os.getcwd())\n    assert False, os.getcwd()\n"
    )
    result = run(repo, "--report", tmp_path / "out", "--", "--score-db-diff")
    report = scores_of(tmp_path / "out")
    assert report["repository"] == str(repo)
    (where,) = [t for t in report["tests"]["tests"] if t["nodeid"].endswith("test_where")]  # type: ignore[index]
    assert where["user_properties"] == [["cwd", str(repo)]]
    assert "pytest-scoring-run-" not in json.dumps(report)
    assert "pytest-scoring-run-" not in result.output


def test_a_report_root_inside_the_repository_is_refused(repo: Path) -> None:
    result = run(repo, "--report", repo / "scores")
    assert result.exit_code == 2
    assert "--report:" in result.output and "is inside REPO" in result.output
    assert not (repo / "scores").exists()


def test_pytests_own_usage_error_is_shown_verbatim(repo: Path, tmp_path: Path) -> None:
    result = run(repo, "--report", tmp_path / "out", "--", "--bogus")
    assert result.exit_code == 2
    assert "error: unrecognized arguments: --bogus" in result.output
    assert "usage: pytest" in result.output
    assert scores_of(tmp_path / "out")["complete"] is False


def test_a_bad_score_option_after_the_separator_is_bad_input(repo: Path, tmp_path: Path) -> None:
    result = run(repo, "--report", tmp_path / "out", "--", "--score-fail-under=lots")
    assert result.exit_code == 2
    assert "--score-fail-under: 'lots' is not a number" in result.output
    assert not (tmp_path / "out").exists()


@pytest.mark.parametrize(
    ("option", "message"),
    [
        (["--limit", "as=lots"], "--limit 'as=lots': expected a positive size"),
        (["--limit", "cpu=1"], "the kind must be one of fsize, as, data, nofile, nproc, disk"),
        (["--python", "/no/such/python"], "--python: /no/such/python is not an interpreter"),
        (["--plugin", "no_such_plugin_module"], "--plugin no_such_plugin_module: cannot import"),
    ],
)
def test_bad_run_options_are_named(
    repo: Path, tmp_path: Path, option: list[str], message: str
) -> None:
    result = run(repo, "--report", tmp_path / "out", *option)
    assert result.exit_code == 2
    assert message in result.output
    assert "Traceback" not in result.output


def test_progress_is_printed_as_lines_when_the_output_is_not_a_terminal(
    repo: Path, tmp_path: Path
) -> None:
    result = run(repo, "--report", tmp_path / "out")
    lines = result.output.splitlines()
    assert "pytest-scoring: collected 2 tests" in lines
    assert any(line.startswith("pytest-scoring: 2/2 tests (1 passed, 1 failed)") for line in lines)


def test_tests_the_session_never_ran_are_counted_as_not_run_never_as_failed(
    repo: Path, tmp_path: Path
) -> None:
    (repo / "test_app.py").write_text(PASS_AND_FAIL + "\ndef test_later():\n    pass\n")
    result = run(repo, "--report", tmp_path / "out", TAMPERING_ONLY, "--", "-x")
    lines = result.output.splitlines()
    assert any(
        line.startswith("pytest-scoring: 2/3 tests (1 passed, 1 failed, 1 not run)")
        for line in lines
    ), result.output
    assert "tests: 1 passed, 1 failed, 1 not run = 3 counted" in lines
    counts = scores_of(tmp_path / "out")["tests"]["counts"]  # type: ignore[index]
    # The report keeps its shape: a test that never ran counts as failed in the score.
    assert (counts["failed"], counts["not_run"], counts["total"]) == (2, 1, 3)


def test_score_options_after_the_separator_are_the_evaluators(repo: Path, tmp_path: Path) -> None:
    import sqlite3

    with sqlite3.connect(repo / "app.db") as db:
        db.execute("CREATE TABLE t (x)")
    db.close()
    (repo / "test_db.py").write_text(
        "import sqlite3\nfrom pathlib import Path\n\n"
        "def test_inserts():\n"
        "    with sqlite3.connect(Path(__file__).with_name('app.db')) as db:\n"
        "        db.execute('INSERT INTO t VALUES (1)')\n"
    )
    run(repo, "--report", tmp_path / "out", "--", "--score-db-diff", "-k", "inserts")
    report = scores_of(tmp_path / "out")
    assert report["scores"]["db_change"]["value"] == "C"  # type: ignore[index]
    assert report["tests"]["counts"]["total"] == 1  # type: ignore[index]


def test_the_junit_xml_the_tests_wrote_gets_the_scores(repo: Path, tmp_path: Path) -> None:
    junit = tmp_path / "junit.xml"
    run(repo, "--report", tmp_path / "out", TAMPERING_ONLY, "--", "--junitxml", junit)
    xml = (tmp_path / "junit.xml").read_text()
    assert 'name="score:percent_passing_tests" value="50"' in xml
    assert 'name="test_broken"' in xml


def test_scorer_types_come_from_the_evaluators_side_never_from_a_conftest(
    repo: Path, tmp_path: Path
) -> None:
    (repo / "conftest.py").write_text(
        "def pytest_scoring_scorers(config):\n    return {'mine': lambda: None}\n"
    )
    config = tmp_path / "scores.yaml"
    config.write_text("scorers:\n  - type: mine\n")
    result = run(repo, "--report", tmp_path / "out", "--config", config)
    assert result.exit_code == 2
    assert "unknown scorer type 'mine'" in result.output
    plugin = tmp_path / "my_plugin.py"
    plugin.write_text(
        "from pytest_scoring.core.score import make_score\n\n"
        "class Mine:\n    type = name = 'mine'\n    metrics = ()\n\n"
        "    def score(self, context):\n"
        "        return make_score(context.tally.counts()['total'], self.type)\n\n"
        "def pytest_scoring_scorers(config):\n    return {'mine': Mine}\n"
    )
    result = run(repo, "--report", tmp_path / "out", "--config", config, "--plugin", plugin)
    assert result.exit_code == 0, result.output
    assert scores_of(tmp_path / "out")["scores"]["mine"]["value"] == 2  # type: ignore[index]


def test_missing_dependencies_of_the_tests_are_said_with_pytests_error(
    repo: Path, tmp_path: Path
) -> None:
    (repo / "test_needs.py").write_text("import flask_nowhere_installed\n")
    result = run(repo, "--report", tmp_path / "out")
    assert "the tests could not import flask_nowhere_installed with" in result.output
    assert "give one that has them with --python PATH" in result.output
    assert "ModuleNotFoundError: No module named 'flask_nowhere_installed'" in result.output


def test_an_interpreter_without_pytest_is_bad_input(repo: Path, tmp_path: Path) -> None:
    import venv

    venv.create(tmp_path / "bare", with_pip=False)
    result = run(
        repo, "--report", tmp_path / "out", "--python", tmp_path / "bare" / "bin" / "python"
    )
    assert result.exit_code == 2
    assert "cannot import pytest" in result.output


def test_keep_leaves_the_private_copy_and_says_where(repo: Path, tmp_path: Path) -> None:
    (repo / "test_writes.py").write_text(
        "from pathlib import Path\n\ndef test_writes():\n"
        "    Path(__file__).with_name('written.txt').write_text('by the tests')\n"
    )
    result = run(repo, "--report", tmp_path / "out", "--keep")
    (line,) = [line for line in result.output.splitlines() if "private area is kept" in line]
    area = Path(line.rsplit(": ", 1)[1])
    try:
        (written,) = area.glob("repo/repo/written.txt")
        assert written.read_text() == "by the tests"
        assert not (repo / "written.txt").exists()
    finally:
        shutil.rmtree(area)
