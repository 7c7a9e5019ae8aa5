"""``tests_modified``: what the repository changed in its tests relative to the reference, and
``--score-verify-tests=PATH``, the in-process check that refuses a tree whose tests differ.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from evaluator_tests import AS_EVALUATOR
from evaluator_tests import REFERENCE_APP
from evaluator_tests import make_solution
from evaluator_tests import make_tree
from evaluator_tests import write
from runs import only_report
from runs import run_cli

from pytest_scoring.report.markdown import score_markdown

#: What the hostile solution changes in its tests, and how each change is listed.
CHANGES = [
    {"file": "conftest.py", "change": "added", "what": "conftest.py"},
    {"file": "tests/data/expected.json", "change": "changed", "what": "file in a test folder"},
    {"file": "tests/test_app.py", "change": "changed", "what": "test file"},
    {"file": "tests/test_extra.py", "change": "added", "what": "test file"},
    {"file": "pytest.ini", "change": "added", "what": "pytest configuration"},
]


def modify_tests(solution: Path) -> None:
    write(solution / "conftest.py", "import pytest\n")
    write(solution / "tests" / "data" / "expected.json", '{"greet": "hi bob"}')
    test_file = solution / "tests" / "test_app.py"
    test_file.write_text(test_file.read_text().replace("== 6", "== 5"))
    write(solution / "tests" / "test_extra.py", "def test_mine():\n    pass\n")
    write(solution / "pytest.ini", "[pytest]\naddopts = -ra\n")


def signals(report: dict[str, Any]) -> dict[str, str]:
    return {s["file"]: s["detail"] for s in report["integrity"] if s["kind"] == "tests_modified"}


@pytest.fixture
def modified(tmp_path: Path) -> tuple[Path, Path]:
    reference = make_tree(tmp_path / "reference")
    solution = make_solution(tmp_path / "solution")
    modify_tests(solution)
    return solution, reference


@pytest.mark.slow
def test_run_with_a_reference_lists_each_change_with_an_excerpt(
    modified: tuple[Path, Path], tmp_path: Path
) -> None:
    solution, reference = modified
    run_cli(solution, "--reference", reference, "--report", tmp_path / "out", *AS_EVALUATOR)
    report = only_report(tmp_path / "out")
    # Information only: the repository's own tests ran (edited to pass), and score as they did.
    assert report["scores"]["percent_passing_tests"]["value"] == 100
    metadata = report["scores"]["percent_passing_tests"]["metadata"]
    assert metadata["tests_modified"] == CHANGES
    assert metadata["tests_modified_count"] == len(CHANGES)
    details = signals(report)
    assert set(details) == {change["file"] for change in CHANGES}
    first, hunk, *excerpt = details["tests/test_app.py"].splitlines()
    assert first == "test file changed relative to the reference"
    assert hunk.startswith("@@ -") and hunk.endswith(" @@")
    assert excerpt == [
        " def test_mul():",
        "-    assert app.mul(2, 3) == 6",
        "+    assert app.mul(2, 3) == 5",
        " ",
    ]
    assert details["pytest.ini"].endswith("+[pytest]\n+addopts = -ra")
    summary = score_markdown(report)
    assert "Tests changed relative to the reference (5, information only):" in summary
    assert "- added: `tests/test_extra.py` (test file)" in summary


def test_in_process_a_reference_gives_the_signal_too(
    pytester: pytest.Pytester, modified: tuple[Path, Path]
) -> None:
    solution, reference = modified
    for path in solution.rglob("*"):
        if path.is_file():
            write(pytester.path / path.relative_to(solution), path.read_text())
    pytester.runpytest("--score", f"--score-reference={reference}", "-p", "no:cacheprovider")
    report = json.loads(next((pytester.path / "scores").glob("*/scores.json")).read_text())
    changed = report["scores"]["all_tests_pass"]["metadata"]["tests_modified"]
    assert [change["file"] for change in changed] == [change["file"] for change in CHANGES]


def test_only_the_pytest_section_of_a_shared_file_counts(
    pytester: pytest.Pytester, tmp_path: Path
) -> None:
    reference = make_tree(tmp_path / "reference")
    write(reference / "pyproject.toml", '[project]\nname = "demo"\nversion = "1.0"\n')
    make_tree(pytester.path, REFERENCE_APP)
    write(pytester.path / "pyproject.toml", '[project]\nname = "demo"\nversion = "2.0"\n')
    pytester.runpytest("--score", f"--score-reference={reference}", "-p", "no:cacheprovider")
    report = json.loads(next((pytester.path / "scores").glob("*/scores.json")).read_text())
    assert report["scores"]["all_tests_pass"]["metadata"]["tests_modified"] == []
    assert signals(report) == {}


def test_without_a_reference_there_is_no_comparison(pytester: pytest.Pytester) -> None:
    make_tree(pytester.path, REFERENCE_APP)
    pytester.runpytest("--score", "-p", "no:cacheprovider")
    report = json.loads(next((pytester.path / "scores").glob("*/scores.json")).read_text())
    assert "tests_modified" not in report["scores"]["all_tests_pass"]["metadata"]


# --- --score-verify-tests ---------------------------------------------------------------


MARKER_CONFTEST = """
from pathlib import Path

Path(__file__).with_name("conftest-was-imported").touch()
"""


def test_verify_tests_refuses_a_tree_whose_tests_differ_before_any_conftest_runs(
    pytester: pytest.Pytester, tmp_path: Path
) -> None:
    reference = make_tree(tmp_path / "reference")
    make_tree(pytester.path, REFERENCE_APP)
    write(pytester.path / "conftest.py", MARKER_CONFTEST)
    write(pytester.path / "tests" / "data" / "expected.json", '{"greet": "hi bob"}')
    result = pytester.runpytest(f"--score-verify-tests={reference}")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines(
        [
            f"ERROR: --score-verify-tests: the tests here differ from those of {reference}: "
            "conftest.py (added), tests/data/expected.json (changed)"
        ]
    )
    assert not (pytester.path / "conftest-was-imported").exists()


def test_verify_tests_lets_a_tree_with_paths_tests_run(
    pytester: pytest.Pytester, tmp_path: Path
) -> None:
    reference = make_tree(tmp_path / "reference")
    write(reference / "tests" / "conftest.py", MARKER_CONFTEST)
    make_tree(pytester.path, REFERENCE_APP)
    write(pytester.path / "tests" / "conftest.py", MARKER_CONFTEST)
    write(pytester.path / "src" / "helpers.py", "VALUE = 2\n")  # the repository's own code
    pytester.syspathinsert()  # app.py, as `python -m pytest` finds it
    result = pytester.runpytest(f"--score-verify-tests={reference}", "-p", "no:cacheprovider")
    result.assert_outcomes(passed=5)


def test_verify_tests_has_no_ini_setting(pytester: pytest.Pytester, tmp_path: Path) -> None:
    reference = make_tree(tmp_path / "reference")
    make_solution(pytester.path)
    write(pytester.path / "pytest.ini", f"[pytest]\nscore_verify_tests = {tmp_path}\n")
    write(pytester.path / "tests" / "test_extra.py", "def test_mine():\n    pass\n")
    pytester.syspathinsert()
    result = pytester.runpytest("-p", "no:cacheprovider")
    result.assert_outcomes(passed=4, failed=2)
    assert reference.is_dir()


def test_run_refuses_verify_tests_and_names_tests_from(tmp_path: Path) -> None:
    solution = make_solution(tmp_path / "solution")
    result = run_cli(solution, "--", f"--score-verify-tests={tmp_path}")
    assert result.exit_code == 2
    assert "--score-verify-tests checks the tree pytest runs in" in result.output
    assert "--tests-from PATH" in result.output
