"""Obvious mistakes are refused or said: a reference that is the repository, a session without
tests, an expected set that drops tests, a flag named as the user typed it."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from click.testing import CliRunner
from evaluator_tests import make_solution
from evaluator_tests import make_tree
from evaluator_tests import write
from runs import AS_EVALUATOR
from runs import only_report
from runs import run_cli
from runs import scored_session
from test_markdown import rendered

from pytest_scoring.cli.main import main

# --- the reference must be apart from the repository ----------------------------------------


@pytest.mark.parametrize("where", ["is REPO", "is inside REPO", "holds REPO"])
def test_a_reference_equal_to_inside_or_holding_repo_is_a_usage_error(
    tmp_path: Path, where: str
) -> None:
    repo = write(tmp_path / "repo" / "test_a.py", "def test_a(): pass\n").parent
    (repo / "vendor").mkdir()
    reference = {"is REPO": repo, "is inside REPO": repo / "vendor", "holds REPO": tmp_path}
    result = run_cli(repo, "--reference", reference[where], "--report", tmp_path / "out")
    assert result.exit_code == 2
    (line,) = result.output.strip().splitlines()
    assert line.startswith(f"pytest-scoring: error: --reference: {reference[where]} {where} (")
    assert not (tmp_path / "out").exists()


def test_in_process_a_reference_that_is_the_repository_stops_pytest(
    pytester: pytest.Pytester,
) -> None:
    pytester.makepyfile("def test_a(): pass")
    result = pytester.runpytest("--score-reference=.", "-p", "no:cacheprovider")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines([f"ERROR: --score-reference: {pytester.path} is REPO (*"])


# --- a session that collected no test -------------------------------------------------------


@pytest.mark.parametrize("xdist", [["-p", "no:xdist"], ["-n", "2"]], ids=["plain", "xdist"])
def test_a_session_without_tests_scores_n_and_exits_5_unless_allowed(
    pytester: pytest.Pytester, xdist: list[str]
) -> None:
    pytester.makepyfile(test_nothing="VALUE = 1\n")
    result = pytester.runpytest("--score", "-p", "no:cacheprovider", *xdist)
    assert result.ret == pytest.ExitCode.NO_TESTS_COLLECTED
    result.stdout.fnmatch_lines(["percent_passing_tests: N  (no tests collected)"])
    scores = scored_session(pytester).scores
    for name, failed in (("all_tests_pass", "I"), ("percent_passing_tests", 0)):
        metadata = scores[name]["metadata"]
        assert (scores[name]["value"], metadata["unscored"]) == ("N", "repository")
        assert metadata["counted_as"] == failed  # an empty suite counts as a failed sample
    allowed = pytester.runpytest("--score", "--score-allow-empty", "-p", "no:cacheprovider")
    assert allowed.ret == pytest.ExitCode.OK
    gated = pytester.runpytest("--score-allow-empty", "--score-fail-under=50")
    assert gated.ret == pytest.ExitCode.TESTS_FAILED  # allowed, but 0 % is below the gate


def test_deselecting_every_test_is_no_test_collected_too(pytester: pytest.Pytester) -> None:
    pytester.makepyfile("def test_a(): pass")
    result = pytester.runpytest("--score", "-k", "nothing_matches", "-p", "no:cacheprovider")
    assert result.ret == pytest.ExitCode.NO_TESTS_COLLECTED


@pytest.mark.slow
def test_run_exits_5_for_a_repository_without_tests_unless_allow_empty(tmp_path: Path) -> None:
    empty = tmp_path / "empty"
    empty.mkdir()
    result = run_cli(empty, "--report", tmp_path / "out", *AS_EVALUATOR)
    assert result.exit_code == 5, result.output
    assert f"pytest-scoring: no tests collected in {empty} (exit status 5;" in result.output
    report = only_report(tmp_path / "out")
    assert report["scores"]["percent_passing_tests"]["explanation"] == "no tests collected"
    allowed = run_cli(empty, "--report", tmp_path / "out", *AS_EVALUATOR, "--allow-empty")
    assert allowed.exit_code == 0, allowed.output


@pytest.mark.slow
def test_a_batch_exits_5_only_when_no_repository_collected_a_test(tmp_path: Path) -> None:
    empty = [tmp_path / "a", tmp_path / "b"]
    for folder in empty:
        folder.mkdir()
    assert run_cli(*empty, "--report", tmp_path / "out", *AS_EVALUATOR).exit_code == 5
    tested = write(tmp_path / "c" / "test_c.py", "def test_c(): pass\n").parent
    result = run_cli(empty[0], tested, "--report", tmp_path / "out2", *AS_EVALUATOR)
    assert result.exit_code == 0, result.output


# --- run's flags are named as typed ---------------------------------------------------------


def test_a_bad_selector_is_named_by_the_flag_the_user_typed(tmp_path: Path) -> None:
    repo = write(tmp_path / "repo" / "test_a.py", "def test_a(): pass\n").parent
    typed = run_cli(repo, "--selector", '{"rows": 3}', "--report", tmp_path / "out")
    assert typed.exit_code == 2
    assert typed.output.startswith("pytest-scoring: error: --selector: selector.rows: ")
    passed_on = run_cli(repo, "--report", tmp_path / "out", "--", '--score-selector={"rows": 3}')
    assert passed_on.output.startswith("pytest-scoring: error: --score-selector: selector.rows")


# --- an expected set that drops tests -------------------------------------------------------

#: A test the reference's code fails: what SWE-bench calls FAIL_TO_PASS (the fix makes it pass).
FAIL_TO_PASS = """
    import app

    def test_sub():
        assert app.sub(5, 3) == 2
"""


def test_a_folder_set_that_drops_tests_says_so_in_the_summary_show_and_markdown(
    pytester: pytest.Pytester,
) -> None:
    source = pytester.mkdir("source")
    (source / "test_suite.py").write_text("def test_a(): pass\ndef test_b(): assert False\n")
    pytester.makepyfile(test_suite="def test_a(): pass\ndef test_b(): pass\n")
    result = pytester.runpytest(
        "test_suite.py", f"--score-expected-tests={source}", "--score-markdown=summary.md"
    )
    line = "1 expected test dropped: they fail in the source folder (test_suite.py::test_b)"
    result.stdout.fnmatch_lines([line])
    assert line in rendered((pytester.path / "summary.md").read_text())
    shown = CliRunner().invoke(main, ["show", str(pytester.path / "scores")])
    assert line in shown.output.splitlines()


@pytest.mark.slow
def test_with_tests_from_a_folder_set_may_drop_failing_tests_only_when_asked(
    tmp_path: Path,
) -> None:
    reference = make_tree(tmp_path / "reference")
    write(reference / "tests" / "test_sub.py", FAIL_TO_PASS)
    solution = make_solution(tmp_path / "solution")
    args = ["--tests-from", reference, "--expected-tests", reference, *AS_EVALUATOR]
    refused = run_cli(solution, *args, "--report", tmp_path / "out")
    assert refused.exit_code == 2, refused.output
    (line,) = refused.output.strip().splitlines()
    assert line.startswith(
        f"pytest-scoring: error: --expected-tests: 1 test(s) fail in {reference} "
        "(tests/test_sub.py::test_sub); with --tests-from they would silently leave"
    )
    assert line.endswith("or --expected-tests-drop-failing")
    dropped = run_cli(solution, *args, "--expected-tests-drop-failing", "--report", tmp_path / "o")
    assert dropped.exit_code == 0, dropped.output
    assert "1 expected test dropped: they fail in the source folder" in dropped.output
    # The recipe the docs give: the ids to expect, FAIL_TO_PASS among them, as a file.
    ids = write(tmp_path / "ids.json", json.dumps(["tests/test_sub.py::test_sub"]))
    listed = run_cli(
        solution,
        "--tests-from",
        reference,
        "--expected-tests",
        ids,
        *AS_EVALUATOR,
        "--report",
        tmp_path / "listed",
    )
    assert listed.exit_code == 0, listed.output
    counts = only_report(tmp_path / "listed")["tests"]["counts"]
    assert (counts["failed"], counts["total"]) == (1, 1)  # the solution did not add sub()


def test_the_drop_flag_needs_tests_from(tmp_path: Path) -> None:
    repo = write(tmp_path / "repo" / "test_a.py", "def test_a(): pass\n").parent
    result = run_cli(repo, "--expected-tests-drop-failing")
    assert result.exit_code == 2
    assert "--expected-tests-drop-failing: only with --tests-from" in result.output
