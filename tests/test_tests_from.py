"""``run REPO --tests-from PATH``: the evaluator's tests, configuration and conftests decide.

Each attack is a small hostile repository scored by ``pytest-scoring run REPO --tests-from
REFERENCE --expected-tests ids``: it must score the truth of the reference's tests on its code.
Each honest repository keeps its true score.
"""

from __future__ import annotations

import hashlib
import json
import textwrap
from pathlib import Path
from typing import Any

import pytest
from evaluator_tests import AS_EVALUATOR
from evaluator_tests import IDS
from evaluator_tests import REFERENCE_APP
from evaluator_tests import REFERENCE_TESTS
from evaluator_tests import SOLUTION_APP
from evaluator_tests import TRUTH
from evaluator_tests import make_solution
from evaluator_tests import make_tree
from evaluator_tests import outcomes
from evaluator_tests import percent
from evaluator_tests import score_with_tests_from
from evaluator_tests import write
from runs import run_cli

pytestmark = pytest.mark.slow

#: The SWE-bench/BenchJack conftest: every failed call reported as passed.
BENCHJACK = """
    import pytest

    @pytest.hookimpl(hookwrapper=True)
    def pytest_runtest_makereport(item, call):
        outcome = yield
        report = outcome.get_result()
        if report.when == "call" and report.failed:
            report.outcome = "passed"
"""
#: An honest conftest of the evaluator's: a screenshot name for every failed test.
EVALUATORS_SCREENSHOTS = """
    import pytest

    @pytest.hookimpl(wrapper=True)
    def pytest_runtest_makereport(item, call):
        report = yield
        if report.when == "call" and report.failed:
            item.user_properties.append(("screenshot", f"{item.name}.png"))
        return report
"""
#: A plugin module the repository's configuration loads: the same trick, from a -p.
HACK_PLUGIN = BENCHJACK


@pytest.fixture
def reference(tmp_path: Path) -> Path:
    return make_tree(tmp_path / "reference")


@pytest.fixture
def solution(tmp_path: Path) -> Path:
    return make_solution(tmp_path / "solution")


def test_the_reference_scores_what_its_own_tests_say_of_a_solution(
    solution: Path, reference: Path, tmp_path: Path
) -> None:
    report = score_with_tests_from(solution, reference, tmp_path)
    assert percent(report) == TRUTH
    assert outcomes(report) == {
        IDS[0]: "passed",
        IDS[1]: "passed",
        IDS[2]: "failed",
        IDS[3]: "failed",
        IDS[4]: "passed",
    }
    assert report["tests_from"] == {
        "path": str(reference),
        "config": None,
        "replaced": ["tests/"],
        "removed": [],
        "added": [],
        "ignored": [],
    }
    assert report["scores"]["percent_passing_tests"]["metadata"]["tests_modified"] == []


def test_an_honest_solution_scores_all_of_the_reference_tests(
    reference: Path, tmp_path: Path
) -> None:
    honest = make_tree(tmp_path / "honest", REFERENCE_APP)
    write(honest / "tests" / "test_mine.py", "def test_my_own_addition():\n    pass\n")
    report = score_with_tests_from(honest, reference, tmp_path)
    assert percent(report) == 100
    assert report["tests"]["counts"]["extra"] == 0, "its own test is not collected"
    assert report["tests_from"]["removed"] == ["tests/test_mine.py"]
    changed = report["scores"]["all_tests_pass"]["metadata"]["tests_modified"]
    assert changed == [{"file": "tests/test_mine.py", "change": "added", "what": "test file"}]


@pytest.mark.parametrize("where", ["conftest.py", "tests/conftest.py"])
def test_the_benchjack_conftest_never_loads(
    solution: Path, reference: Path, tmp_path: Path, where: str
) -> None:
    write(solution / where, BENCHJACK)
    report = score_with_tests_from(solution, reference, tmp_path)
    assert percent(report) == TRUTH
    assert where in report["tests_from"]["removed"]
    assert not [s for s in report["integrity"] if s["kind"] in ("outcome_hook", "outcome_changed")]


def test_a_module_named_like_an_installed_plugin_is_not_loaded_as_that_plugin(
    solution: Path, reference: Path, tmp_path: Path
) -> None:
    pytest.importorskip("pytest_rerunfailures")  # a plugin pytest loads by its entry point
    write(solution / "pytest_rerunfailures.py", BENCHJACK)
    report = score_with_tests_from(solution, reference, tmp_path)
    assert percent(report) == TRUTH
    assert not [s for s in report["integrity"] if s["kind"] == "outcome_changed"]


#: Configuration files that load the plugin above, in every format pytest 9 reads.
PROJECT = '[project]\nname = "demo"\n\n'
PLANTED_CONFIGS = {
    "pytest.toml": '[pytest]\naddopts = ["-p", "hack"]\n',
    ".pytest.toml": '[pytest]\naddopts = ["-p", "hack"]\n',
    "pytest.ini": "[pytest]\naddopts = -p hack\n",
    ".pytest.ini": "[pytest]\naddopts = -p hack\n",
    "pyproject.toml": PROJECT + '[tool.pytest.ini_options]\naddopts = "-p hack"\n',
    "pyproject.toml native": PROJECT + '[tool.pytest]\naddopts = ["-p", "hack"]\n',
    "tox.ini": "[tox]\nenvlist = py3\n\n[pytest]\naddopts = -p hack\n",
    "setup.cfg": "[metadata]\nname = demo\n\n[tool:pytest]\naddopts = -p hack\n",
}


@pytest.mark.parametrize("planted", sorted(PLANTED_CONFIGS))
def test_no_configuration_file_of_the_repository_is_read(
    solution: Path, reference: Path, tmp_path: Path, planted: str
) -> None:
    name = planted.split()[0]
    write(solution / name, PLANTED_CONFIGS[planted])
    write(solution / "hack.py", HACK_PLUGIN)
    report = score_with_tests_from(solution, reference, tmp_path)
    assert percent(report) == TRUTH
    assert any(entry.startswith(name) for entry in report["tests_from"]["ignored"])
    (changed,) = [s for s in report["integrity"] if s["kind"] == "tests_modified"]
    assert changed["file"] == name and "pytest configuration added" in changed["detail"]


def test_edited_expected_output_is_replaced_by_the_references(
    reference: Path, tmp_path: Path
) -> None:
    # The solution renders wrongly too, and rewrites what its tests expect to match.
    app = REFERENCE_APP.replace("return a * b", "return a + b")
    app = app.replace('return f"hello {name}"', 'return f"hi {name}"')
    app = app.replace('", ".join(sorted(items))', '" ".join(items)')
    solution = make_solution(tmp_path / "solution", app)
    write(solution / "tests" / "data" / "expected.json", '{"greet": "hi bob"}')
    write(solution / "tests" / "__snapshots__" / "test_app.ambr", "b a\n")
    report = score_with_tests_from(solution, reference, tmp_path)
    assert percent(report) == 40  # add and add_negative: 2 of 5
    changed = {s["file"] for s in report["integrity"] if s["kind"] == "tests_modified"}
    assert changed == {"tests/data/expected.json", "tests/__snapshots__/test_app.ambr"}


#: A source module that makes the evaluator's data say what its code does while the tests
#: run, each way putting things back before the end (but the first): ``name -> code``.
REWRITES = {
    "left changed": """
        from pathlib import Path
        DATA = Path(__file__).parent / "tests" / "data" / "expected.json"
        DATA.write_text('{"greet": "hi bob"}')
    """,
    "put back at exit": """
        import atexit
        from pathlib import Path
        DATA = Path(__file__).parent / "tests" / "data" / "expected.json"
        atexit.register(DATA.write_bytes, DATA.read_bytes())
        DATA.write_text('{"greet": "hi bob"}')
    """,
    "by a subprocess, put back": """
        import atexit, subprocess, sys
        from pathlib import Path
        DATA = Path(__file__).parent / "tests" / "data" / "expected.json"
        WRITE = "import pathlib, sys; pathlib.Path(sys.argv[1]).write_text(sys.argv[2])"
        atexit.register(subprocess.run, [sys.executable, "-c", WRITE, str(DATA), DATA.read_text()])
        subprocess.run([sys.executable, "-c", WRITE, str(DATA), '{"greet": "hi bob"}'])
    """,
    "its folder swapped, put back": """
        import atexit, os, shutil
        from pathlib import Path
        DATA = Path(__file__).parent / "tests" / "data"
        os.rename(DATA, DATA.with_name("real"))
        DATA.mkdir()
        (DATA / "expected.json").write_text('{"greet": "hi bob"}')

        def put_back():
            shutil.rmtree(DATA)
            os.rename(DATA.with_name("real"), DATA)

        atexit.register(put_back)
    """,
}


@pytest.mark.parametrize("how", list(REWRITES))
def test_the_evaluators_data_changed_while_the_tests_run_is_seen(
    reference: Path, tmp_path: Path, how: str
) -> None:
    app = textwrap.dedent(SOLUTION_APP) + textwrap.dedent(REWRITES[how])
    solution = make_solution(tmp_path / "solution", app)
    report = score_with_tests_from(solution, reference, tmp_path)
    changed = [s for s in report["integrity"] if s["kind"] == "patched"]
    assert changed, report["integrity"]
    assert "tests/data/" in changed[0]["detail"], changed
    assert changed[0]["detail"].endswith("while the tests ran"), changed
    assert percent(report) == "N"
    assert report["scores"]["percent_passing_tests"]["metadata"]["unscored"] == "tampering"


def test_the_evaluators_tests_may_write_new_files_beside_theirs(tmp_path: Path) -> None:
    writing = textwrap.dedent(REFERENCE_TESTS) + textwrap.dedent(
        """
        def test_writes_beside_itself():
            (HERE / "output.txt").write_text("made by the test")
            (HERE / "data" / "made.json").write_text("{}")
        """
    )
    reference = make_tree(tmp_path / "reference")
    write(reference / "tests" / "test_app.py", writing)
    solution = make_solution(tmp_path / "solution")
    beside = IDS[0].replace("add", "writes_beside_itself")
    ids = write(tmp_path / "six.txt", "\n".join([*IDS, beside]))
    report = score_with_tests_from(solution, reference, tmp_path, "--expected-tests", ids)
    assert [s for s in report["integrity"] if s["kind"] == "patched"] == []
    assert percent(report) == round(100 * 4 / 6, 2)


def test_a_test_file_added_elsewhere_is_never_collected_and_stays(
    solution: Path, reference: Path, tmp_path: Path
) -> None:
    write(solution / "extra" / "test_more.py", "def test_free_pass():\n    pass\n")
    write(solution / "test_root.py", "def test_another_free_pass():\n    pass\n")
    report = score_with_tests_from(solution, reference, tmp_path)
    assert percent(report) == TRUTH
    assert set(outcomes(report)) == set(IDS)
    assert report["tests_from"]["ignored"] == ["extra/test_more.py", "test_root.py"]


def test_a_source_module_named_like_a_test_is_neither_deleted_nor_collected(
    tmp_path: Path,
) -> None:
    test = "from pkg.test_utils import make_pair\n\n"
    test += "def test_pair():\n    assert make_pair() == (1, 2)\n"
    reference = tmp_path / "reference"
    write(reference / "pkg" / "__init__.py", "")
    write(reference / "pkg" / "test_utils.py", "def make_pair():\n    return (0, 0)\n")
    write(reference / "tests" / "test_pairs.py", test)
    solution = tmp_path / "solution"
    write(solution / "pkg" / "__init__.py", "")
    # The solution's helper module has the right pair, and a helper named like a test
    # function: pytest would collect it if it were given the module.
    write(
        solution / "pkg" / "test_utils.py",
        "def make_pair():\n    return (1, 2)\n\ndef testing_data():\n    return 1\n",
    )
    write(solution / "tests" / "test_pairs.py", test)
    one = write(tmp_path / "one.txt", "tests/test_pairs.py::test_pair\n")
    report = score_with_tests_from(solution, reference, tmp_path, "--expected-tests", one)
    assert percent(report) == 100, "the repository's own helper module was used"
    assert list(outcomes(report)) == ["tests/test_pairs.py::test_pair"]
    assert report["tests"]["counts"]["extra"] == 0
    assert report["tests_from"]["ignored"] == ["pkg/test_utils.py"]
    assert report["tests_from"]["removed"] == []


def test_only_the_pytest_section_of_pyproject_is_taken_from_path(
    reference: Path, tmp_path: Path
) -> None:
    write(
        reference / "pyproject.toml",
        """
        [project]
        name = "demo"
        version = "1.0"

        [tool.pytest.ini_options]
        addopts = "--strict-markers"
        markers = ["slow: takes long"]
        """,
    )
    solution = make_tree(tmp_path / "solution", REFERENCE_APP)
    own = write(
        solution / "pyproject.toml",
        """
        [project]
        name = "demo"
        version = "2.0"

        [tool.pytest.ini_options]
        addopts = "--strict-markers"
        """,
    )
    digest = hashlib.sha256(own.read_bytes()).hexdigest()
    write(
        reference / "tests" / "test_project.py",
        f"""
        import hashlib
        from pathlib import Path

        import pytest

        @pytest.mark.slow
        def test_the_repository_keeps_its_own_project_file():
            data = Path("pyproject.toml").read_bytes()
            assert hashlib.sha256(data).hexdigest() == {digest!r}
        """,
    )
    ids = [*IDS, "tests/test_project.py::test_the_repository_keeps_its_own_project_file"]
    report = score_with_tests_from(
        solution,
        reference,
        tmp_path,
        "--expected-tests",
        write(tmp_path / "all.txt", "\n".join(ids)),
    )
    assert percent(report) == 100, report["tests"]
    assert report["tests_from"]["config"] == "pyproject.toml"
    assert report["tests_from"]["ignored"] == ["pyproject.toml [tool.pytest.ini_options]"]


def test_a_path_holding_only_test_files(solution: Path, tmp_path: Path) -> None:
    only_tests = make_tree(tmp_path / "only-tests", app=None)
    report = score_with_tests_from(solution, only_tests, tmp_path)
    assert percent(report) == TRUTH
    assert report["tests_from"]["replaced"] == ["tests/"]


def test_the_evaluators_conftest_implementing_makereport_runs(
    solution: Path, reference: Path, tmp_path: Path
) -> None:
    write(reference / "tests" / "conftest.py", EVALUATORS_SCREENSHOTS)
    report = score_with_tests_from(solution, reference, tmp_path)
    assert percent(report) == TRUTH
    shots = {t["nodeid"]: t["user_properties"] for t in report["tests"]["tests"]}
    assert shots[IDS[2]] == [["screenshot", "test_mul.png"]]
    assert report["tests_from"]["replaced"] == ["tests/"]


#: The solution's code registers, when the tests import it, a hookwrapper that turns its
#: failures into passes: it finds pytest's config by walking frames (no audit event).
REGISTERS_A_FLIPPER = """
    import sys

    import pytest


    class Flip:
        @pytest.hookimpl(hookwrapper=True)
        def pytest_runtest_makereport(self, item, call):
            outcome = yield
            report = outcome.get_result()
            if report.when == "call" and report.failed:
                report.outcome = "passed"


    frame = sys._getframe(0)
    while frame is not None:
        found = frame.f_locals.get("config") or getattr(frame.f_locals.get("self"), "config", None)
        if hasattr(found, "pluginmanager"):
            found.pluginmanager.register(Flip(), "flip")
            break
        frame = frame.f_back
"""


def test_an_outcome_changed_beside_the_evaluators_own_hook_is_not_the_evaluators(
    solution: Path, reference: Path, tmp_path: Path
) -> None:
    # PATH's honest conftest implements makereport too: the change is not blamed on it.
    write(reference / "tests" / "conftest.py", EVALUATORS_SCREENSHOTS)
    write(
        solution / "app.py",
        textwrap.dedent(REGISTERS_A_FLIPPER) + (solution / "app.py").read_text(),
    )
    score = score_with_tests_from(solution, reference, tmp_path)["scores"]["percent_passing_tests"]
    assert score["value"] == "N", score["explanation"]
    assert score["metadata"]["strict_kinds"] == ["outcome_changed"]


def test_a_fixture_of_a_removed_conftest_is_named_in_the_explanation(
    solution: Path, tmp_path: Path
) -> None:
    only_tests = make_tree(tmp_path / "only-tests", app=None)
    write(
        only_tests / "tests" / "test_db.py",
        "def test_uses_the_repositorys_fixture(database):\n    assert database == 'ready'\n",
    )
    write(
        solution / "conftest.py",
        "import pytest\n\n@pytest.fixture\ndef database():\n    return 'ready'\n",
    )
    ids = [*IDS, "tests/test_db.py::test_uses_the_repositorys_fixture"]
    report = score_with_tests_from(
        solution,
        only_tests,
        tmp_path,
        "--expected-tests",
        write(tmp_path / "db.txt", "\n".join(ids)),
    )
    explanation = report["scores"]["percent_passing_tests"]["explanation"]
    assert "1 test errored for want of fixture 'database'" in explanation
    assert "which the repository's conftest.py defined: --tests-from removed it" in explanation
    assert report["tests_from"]["removed"] == ["conftest.py"]


def reference_and_log(tmp_path: Path, name: str, who: str) -> tuple[Path, Path]:
    """A reference whose test logs which code it ran on, to a file outside every copy."""
    log = tmp_path / "runs.log"
    tree = tmp_path / name
    write(tree / "app.py", f"WHO = {who!r}\n")
    write(
        tree / "tests" / "test_who.py",
        f"""
        import app

        def test_logs_the_code_it_runs_on():
            with open({str(log)!r}, "a") as out:
                out.write({name!r} + ":" + app.WHO + "\\n")
        """,
    )
    return tree, log


def scored_runs(repo: Path, tmp_path: Path, *args: str | Path) -> dict[str, Any]:
    result = run_cli(repo, "--report", tmp_path / "out", *AS_EVALUATOR, *args)
    assert result.exit_code == 0, result.output
    (report,) = (json.loads(p.read_text()) for p in (tmp_path / "out").glob("*/scores.json"))
    return report


def test_when_path_is_the_reference_the_rerun_is_the_baseline_and_runs_once(
    tmp_path: Path,
) -> None:
    reference, log = reference_and_log(tmp_path, "reference", "reference code")
    solution = tmp_path / "solution"
    write(solution / "app.py", "WHO = 'solution code'\n")
    # The same test as the reference's: without --tests-from the rerun would run it too.
    write(solution / "tests" / "test_who.py", (reference / "tests" / "test_who.py").read_text())
    report = scored_runs(solution, tmp_path, "--reference", reference, "--tests-from", reference)
    assert sorted(log.read_text().splitlines()) == [
        "reference:reference code",
        "reference:solution code",
    ]
    metadata = report["scores"]["db_diff_change"]["metadata"]
    assert report["scores"]["db_diff_change"]["value"] == "I", metadata
    assert metadata["reference_counts"]["passed"] == 1


def test_the_rerun_runs_paths_tests_on_the_references_code(tmp_path: Path) -> None:
    reference, log = reference_and_log(tmp_path, "reference", "reference code")
    evaluators, _ = reference_and_log(tmp_path, "evaluators", "evaluator's code")
    solution = tmp_path / "solution"
    write(solution / "app.py", "WHO = 'solution code'\n")
    scored_runs(solution, tmp_path, "--reference", reference, "--tests-from", evaluators)
    assert sorted(log.read_text().splitlines()) == [
        "evaluators:reference code",  # the rerun: PATH's tests, the reference's code
        "evaluators:solution code",  # the session
        "reference:reference code",  # the baseline: the reference's own tests
    ]


@pytest.mark.parametrize("where", ["is REPO", "is inside REPO", "holds REPO"])
def test_path_equal_to_inside_or_holding_repo_is_a_usage_error(solution: Path, where: str) -> None:
    path = {
        "is REPO": solution,
        "is inside REPO": solution / "tests",
        "holds REPO": solution.parent,
    }
    result = run_cli(solution, "--tests-from", path[where])
    assert result.exit_code == 2
    (line,) = result.output.strip().splitlines()
    assert line.startswith(f"pytest-scoring: error: --tests-from: {path[where]} {where} (")


def test_a_batch_gives_every_repository_paths_tests_and_runs_the_baseline_once(
    tmp_path: Path,
) -> None:
    reference, log = reference_and_log(tmp_path, "reference", "reference code")
    repos = []
    for name in ("first", "second"):
        repo = tmp_path / name
        write(repo / "app.py", f"WHO = '{name} code'\n")
        write(repo / "tests" / "test_who.py", "def test_would_pass_anything():\n    pass\n")
        repos.append(repo)
    result = run_cli(
        *repos,
        "--reference",
        reference,
        "--tests-from",
        reference,
        "--report",
        tmp_path / "out",
        *AS_EVALUATOR,
    )
    assert result.exit_code == 0, result.output
    assert sorted(log.read_text().splitlines()) == [
        "reference:first code",
        "reference:reference code",
        "reference:second code",
    ]
    (report,) = (json.loads(p.read_text()) for p in (tmp_path / "out").glob("*/scores.json"))
    assert [sample["tests_from"]["replaced"] for sample in report["samples"]] == [["tests/"]] * 2
