"""``sandbox_state``: a configured shell command's exit status as a score."""

from __future__ import annotations

from pathlib import Path

import pytest
from processes import HANG_GUARD
from processes import all_gone

from pytest_scoring import sandbox_state_scorer
from pytest_scoring.scorers.base import ScoringContext
from pytest_scoring.scorers.outcomes import OutcomeTally
from pytest_scoring.scorers.score import Score


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
