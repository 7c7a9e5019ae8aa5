"""The trees of ``--tests-from`` tests: a reference (the evaluator's tests) and solutions.

The reference's five tests read its code, a data file and a snapshot; the base solution gets
``mul`` and ``greet`` wrong, so that the truth is 3 of 5 (60 %) on the reference's tests.
"""

from __future__ import annotations

import json
import textwrap
from pathlib import Path
from typing import Any

from runs import AS_EVALUATOR
from runs import only_report
from runs import run_cli

#: As root, the children run as root too: the repositories write to the test's folders.

REFERENCE_APP = """
    def add(a, b):
        return a + b

    def mul(a, b):
        return a * b

    def greet(name):
        return f"hello {name}"

    def render(items):
        return ", ".join(sorted(items))
"""
#: mul and greet are wrong; add and render are right.
SOLUTION_APP = """
    def add(a, b):
        return a + b

    def mul(a, b):
        return a + b

    def greet(name):
        return f"hi {name}"

    def render(items):
        return ", ".join(sorted(items))
"""
REFERENCE_TESTS = """
    import json
    from pathlib import Path

    import app

    HERE = Path(__file__).parent

    def test_add():
        assert app.add(2, 3) == 5

    def test_add_negative():
        assert app.add(-2, -3) == -5

    def test_mul():
        assert app.mul(2, 3) == 6

    def test_greet():
        expected = json.loads((HERE / "data" / "expected.json").read_text())
        assert app.greet("bob") == expected["greet"]

    def test_render():
        snapshot = (HERE / "__snapshots__" / "test_app.ambr").read_text().strip()
        assert app.render(["b", "a"]) == snapshot
"""
IDS = [
    f"tests/test_app.py::test_{name}" for name in ("add", "add_negative", "mul", "greet", "render")
]
TRUTH = 60


def write(path: Path, text: str) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(textwrap.dedent(text))
    return path


def make_tree(folder: Path, app: str | None = REFERENCE_APP, greeting: str = "hello bob") -> Path:
    """A tree laid out like the reference: ``app.py`` (unless None) and ``tests/``."""
    if app is not None:
        write(folder / "app.py", app)
    write(folder / "tests" / "test_app.py", REFERENCE_TESTS)
    write(folder / "tests" / "data" / "expected.json", json.dumps({"greet": greeting}))
    write(folder / "tests" / "__snapshots__" / "test_app.ambr", "a, b\n")
    return folder


def make_solution(folder: Path, app: str = SOLUTION_APP) -> Path:
    """The solution: the reference's tests as they were handed out, its own code."""
    return make_tree(folder, app)


def ids_file(folder: Path, ids: list[str] = IDS) -> Path:
    return write(folder / "ids.txt", "\n".join(ids) + "\n")


def score_with_tests_from(
    repo: Path, reference: Path, tmp_path: Path, *args: str | Path
) -> dict[str, Any]:
    """``run REPO --tests-from REFERENCE --expected-tests ids``: the report."""
    report_root = tmp_path / "out"
    result = run_cli(
        repo,
        "--tests-from",
        reference,
        "--expected-tests",
        ids_file(tmp_path),
        "--report",
        report_root,
        *AS_EVALUATOR,
        *args,
    )
    assert result.exit_code == 0, result.output
    return only_report(report_root)


def percent(report: dict[str, Any]) -> object:
    return report["scores"]["percent_passing_tests"]["value"]


def outcomes(report: dict[str, Any]) -> dict[str, str]:
    return {test["nodeid"]: test["outcome"] for test in report["tests"]["tests"]}
