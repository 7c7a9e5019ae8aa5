"""``sandbox_state``: a configured shell command's exit status as a score."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from processes import HANG_GUARD
from processes import all_gone

from pytest_scoring import sandbox_state_scorer
from pytest_scoring.core.outcomes import OutcomeTally
from pytest_scoring.core.score import Score
from pytest_scoring.errors import ConfigError
from pytest_scoring.scorers.base import ScoringContext


def run(root: Path, command: str, cwd: str | None = None, timeout: float = HANG_GUARD) -> Score:
    scorer = sandbox_state_scorer(command, cwd=cwd, timeout=timeout)
    return scorer.score(ScoringContext(root=root, tally=OutcomeTally()))


def test_a_command_that_exits_zero_scores_correct_with_its_output(tmp_path: Path) -> None:
    result = run(tmp_path, "echo out; echo err >&2")
    assert result["value"] == "C"
    metadata = result["metadata"]
    assert (metadata["exit_code"], metadata["timed_out"]) == (0, False)
    assert (metadata["stdout"], metadata["stderr"]) == ("out\n", "err\n")


def test_a_failing_command_scores_incorrect_with_its_exit_code(tmp_path: Path) -> None:
    result = run(tmp_path, "exit 3")
    assert result["value"] == "I"
    assert result["metadata"]["exit_code"] == 3


def test_the_command_runs_in_cwd_relative_to_the_repository(tmp_path: Path) -> None:
    (tmp_path / "sub").mkdir()
    result = run(tmp_path, "pwd", cwd="sub")
    assert Path(result["metadata"]["stdout"].strip()) == (tmp_path / "sub").resolve()


@pytest.mark.parametrize("cwd", ["..", "missing"])
def test_a_cwd_outside_the_repository_or_missing_scores_no_answer(tmp_path: Path, cwd: str) -> None:
    (tmp_path / "repo").mkdir()
    result = run(tmp_path / "repo", "true", cwd=cwd)
    assert result["value"] == "N"


def test_a_command_past_its_timeout_is_killed_with_its_whole_group(tmp_path: Path) -> None:
    result = run(tmp_path, "(sleep 600; touch ended_by_itself) & wait", timeout=1)
    assert result["value"] == "I"
    assert result["metadata"]["timed_out"] is True
    all_gone(tmp_path)  # the shell, the subshell and its sleep
    assert not (tmp_path / "ended_by_itself").exists(), "the scorer waited for the command"


def test_what_a_command_leaves_running_in_the_background_is_killed_when_it_exits(
    tmp_path: Path,
) -> None:
    result = run(tmp_path, "sleep 600 > /dev/null 2>&1 &")
    assert result["value"] == "C"
    all_gone(tmp_path)


def test_a_cwd_that_is_a_symlink_loop_scores_no_answer(tmp_path: Path) -> None:
    (tmp_path / "loop").symlink_to(tmp_path / "loop")
    result = run(tmp_path, "true", cwd="loop")
    assert result["value"] == "N"
    assert "outside the repository" in result["explanation"]


SHADOWING_REPOSITORY = {
    # Real compileall fails on this file; the repository's own compileall.py would say it passed.
    "broken.py": "def oops(:\n",
    "compileall.py": "raise SystemExit(0)\n",
    # A shim in front of PATH, put there by the repository's conftest.py while its tests run.
    "bin/python": "#!/bin/sh\nexit 0\n",
    "bin/python3": "#!/bin/sh\nexit 0\n",
    "conftest.py": (
        "import os, pathlib\n"
        "shims = pathlib.Path(__file__).parent / 'bin'\n"
        "for shim in shims.iterdir():\n"
        "    shim.chmod(0o755)\n"
        "os.environ['PATH'] = f\"{shims}{os.pathsep}.{os.pathsep}{os.environ['PATH']}\"\n"
    ),
    "test_ok.py": "def test_ok():\n    pass\n",
}


@pytest.mark.parametrize(
    "command", ["python3 -m compileall -q .", "python3 -m compileall -q broken.py"]
)
def test_the_repository_cannot_shadow_the_command_with_a_module_or_a_path_shim(
    pytester: pytest.Pytester, command: str
) -> None:
    for relpath, text in SHADOWING_REPOSITORY.items():
        (pytester.path / relpath).parent.mkdir(parents=True, exist_ok=True)
        (pytester.path / relpath).write_text(text)
    pytester.makefile(
        ".yaml", scorers=f"scorers:\n  - type: sandbox_state\n    command: {command}\n"
    )
    pytester.runpytest_subprocess("--score-config=scorers.yaml", "-p", "no:cacheprovider")
    (report,) = (pytester.path / "scores").glob("scan_id=*/scores.json")
    score = json.loads(report.read_text())["scores"]["sandbox_state"]
    assert score["value"] == "I", json.dumps(score["metadata"])
    assert "broken.py" in score["metadata"]["stdout"] + score["metadata"]["stderr"]


def test_the_evaluators_env_is_added_last(tmp_path: Path) -> None:
    scorer = sandbox_state_scorer(
        'test "$GREETING" = hello && test "$PYTHONSAFEPATH" = 1', env={"GREETING": "hello"}
    )
    assert scorer.score(ScoringContext(root=tmp_path, tally=OutcomeTally()))["value"] == "C"


def test_an_env_that_is_not_a_table_of_text_is_a_configuration_error() -> None:
    with pytest.raises(ConfigError, match="env: expected a table"):
        sandbox_state_scorer("true", env={"N": 1})  # type: ignore[dict-item]
