"""``sandbox_state``: a configured shell command's exit status as a score (SPEC 2.3)."""

from __future__ import annotations

import os
import time
from pathlib import Path

import pytest

from pytest_scoring import sandbox_state_scorer
from pytest_scoring.errors import ConfigError
from pytest_scoring.outcomes import OutcomeTally
from pytest_scoring.scorers.base import ScoringContext
from pytest_scoring.scores import METADATA_TEXT_CAP
from pytest_scoring.scores import Score


def run(root: Path, command: str, cwd: str | None = None, timeout: float = 10) -> Score:
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
    pid_file = tmp_path / "child.pid"
    started = time.monotonic()
    result = run(tmp_path, f"sleep 30 & echo $! > {pid_file}; wait", timeout=0.5)
    assert time.monotonic() - started < 20
    assert result["value"] == "I"
    assert result["metadata"]["timed_out"] is True
    child = int(pid_file.read_text())
    assert _dies_within(child, seconds=5)


def _dies_within(pid: int, seconds: float) -> bool:
    """A killed process disappears a moment after the signal is sent, not at once."""
    deadline = time.monotonic() + seconds
    while _alive(pid):
        if time.monotonic() > deadline:
            return False
        time.sleep(0.05)
    return True


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    # A killed child of the shell may linger as a zombie until init reaps it.
    status = Path(f"/proc/{pid}/stat")
    return status.exists() and status.read_text().split(") ")[1][0] != "Z"


def test_huge_output_is_capped(tmp_path: Path) -> None:
    result = run(tmp_path, "yes line | head -c 2000000")
    stdout = result["metadata"]["stdout"]
    assert len(stdout) < METADATA_TEXT_CAP + 200
    assert stdout.endswith("[2000000 bytes in all, the rest cut]")
    assert result["metadata"]["stdout_bytes"] == 2_000_000


@pytest.mark.parametrize(
    ("command", "options", "message"),
    [
        ("  ", {}, "command: must not be empty"),
        ("true", {"cwd": "/tmp"}, "cwd: '/tmp' must be relative"),
        ("true", {"timeout": 0}, "timeout: 0 is not a positive number"),
        ("true", {"timeout": float("nan")}, "timeout: nan is not a positive number"),
    ],
)
def test_bad_parameters_are_rejected_when_the_scorer_is_built(
    command: str, options: dict[str, object], message: str
) -> None:
    with pytest.raises(ConfigError, match=message):
        sandbox_state_scorer(command, **options)  # type: ignore[arg-type]


def test_sandbox_state_runs_in_a_real_session_from_a_config_file(
    pytester: pytest.Pytester,
) -> None:
    pytester.makepyfile("def test_ok(): open('made_by_test.txt', 'w').close()")
    pytester.makefile(
        ".toml",
        scores="""
        [[scorers]]
        type = "sandbox_state_scorer"
        name = "artifact_exists"
        command = "test -f made_by_test.txt"
        timeout = 5
        """,
    )
    result = pytester.runpytest("--score-config=scores.toml", "-p", "no:cacheprovider")
    result.assert_outcomes(passed=1)
    result.stdout.fnmatch_lines(["artifact_exists: C *exit code 0*"])
