"""``--black-box``: the test process loads no file of the repository; its code runs only in
the subprocesses the evaluator's tests start (docs/security.md#black-box).

The refusal itself is the kit's (the tripwire's audit hook in the child): these tests start
the child as ``run`` does, with the evaluator's tests named as the only files of the copy it
may load, and read what its probe reported.
"""

from __future__ import annotations

import py_compile
import textwrap
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pytest
from runs import AS_OTHER_USERS
from runs import SYSTEM_PYTHON
from runs import only_report
from runs import run_cli

from pytest_scoring.process.children import BlackBox
from pytest_scoring.process.children import ChildRunner
from pytest_scoring.process.stream import ProbeState
from pytest_scoring.process.witness import black_box_refusal

pytestmark = pytest.mark.slow

#: The repository's module: importing it leaves a mark (it must never be there).
APP = """
from pathlib import Path

Path(__file__).with_name("app-ran").write_text("the repository's code ran in the test process")

def add(a, b):
    return a + b

if __name__ == "__main__":
    import sys
    print(add(int(sys.argv[1]), int(sys.argv[2])))
"""
#: How an evaluator's test (or pytest on its behalf) may pull the repository's code in.
LOADS = {
    "import": "import app",
    "import a package": "import pkg.core",
    "runpy": "import runpy; runpy.run_path(str(ROOT / 'app.py'))",
    "exec": "exec(compile((ROOT / 'app.py').read_text(), str(ROOT / 'app.py'), 'exec'), {})",
    "importlib": (
        "import importlib.util as u; s = u.spec_from_file_location('m', ROOT / 'app.py'); "
        "s.loader.exec_module(u.module_from_spec(s))"
    ),
    "a shadowed module": "import timeit",
    "a compiled module": "import compiled",
}
EVALUATOR_TEST = """
import subprocess, sys
from pathlib import Path

ROOT = Path(__file__).parents[1]

def test_loads():
    {load}
"""


def write(path: Path, text: str) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(textwrap.dedent(text))
    return path


def repository(root: Path) -> Path:
    """A repository with modules, a package, a module that shadows the standard library's and
    one that is only compiled; the evaluator's tests in ``tests/`` (a package, so that pytest
    puts the repository's folder first on the path, as honest layouts do)."""
    write(root / "app.py", APP)
    write(root / "pkg" / "__init__.py", "")
    write(root / "pkg" / "core.py", APP)
    write(root / "timeit.py", APP)
    source = write(root / "compiled.py", APP)
    py_compile.compile(str(source), cfile=str(root / "compiled.pyc"))
    source.unlink()
    write(root / "tests" / "__init__.py", "")
    return root


def black_box_session(
    root: Path, elsewhere: Sequence[Path] = (), args: Sequence[str] = ()
) -> ProbeState:
    """The evaluator's tests of ``root/tests`` in a child under ``--black-box``."""
    runner = ChildRunner()
    try:
        black_box = BlackBox([root / "tests"], elsewhere)
        arguments = ["-p", "no:cacheprovider", *args, "tests"]
        child = runner.start_pytest(root, arguments, timeout=600, black_box=black_box)
        ended = child.wait()
        assert ended.error is None, ended.error
        return child.state
    finally:
        runner.close()


@pytest.mark.parametrize("load", list(LOADS))
def test_a_file_of_the_repository_the_test_process_would_load_is_refused(
    tmp_path: Path, load: str
) -> None:
    root = repository(tmp_path / "repo")
    write(root / "tests" / "test_loads.py", EVALUATOR_TEST.format(load=LOADS[load]))
    state = black_box_session(root)
    assert state.refused is not None, state.collect_errors
    modules = ("app.py", "pkg/core.py", "pkg/__init__.py", "timeit.py", "compiled.pyc")
    assert state.refused["file"] in modules
    assert not list(root.rglob("app-ran")), "the repository's code ran in the test process"
    reason = black_box_refusal(state.refused)
    assert reason.unscored == "repository"
    assert state.refused["file"] in reason.reason


def test_a_conftest_that_imports_the_repository_is_refused_before_pytest_starts(
    tmp_path: Path,
) -> None:
    # Tests written for in-process use (a fixture that imports the app): pytest cannot even
    # load the conftest, and the refusal is what the report says.
    root = repository(tmp_path / "repo")
    write(root / "tests" / "conftest.py", "import app\n")
    write(root / "tests" / "test_app.py", "def test_app():\n    pass\n")
    state = black_box_session(root)
    assert state.refused is not None and state.refused["file"] == "app.py"
    assert state.start is None  # pytest never started its session
    assert not list(root.rglob("app-ran"))


def test_a_pytest_xdist_worker_refuses_the_repository_too(tmp_path: Path) -> None:
    root = repository(tmp_path / "repo")
    write(root / "tests" / "test_loads.py", EVALUATOR_TEST.format(load="import app"))
    state = black_box_session(root, args=["-n", "2"])
    assert state.refused is not None and state.refused["file"] == "app.py"
    assert not list(root.rglob("app-ran"))


def test_the_repository_itself_is_refused_too_not_only_its_copy(tmp_path: Path) -> None:
    # An interpreter with REPO installed (an editable install) would load it from REPO.
    original = repository(tmp_path / "original")
    root = repository(tmp_path / "copy")
    load = f"sys.path.insert(0, {str(original)!r}); import app"
    write(root / "tests" / "test_loads.py", EVALUATOR_TEST.format(load=load))
    state = black_box_session(root, elsewhere=[original])
    assert state.refused is not None and state.refused["file"] == str(original / "app.py")
    assert not list(tmp_path.rglob("app-ran"))


def test_the_evaluators_tests_drive_the_repository_in_subprocesses(tmp_path: Path) -> None:
    root = repository(tmp_path / "repo")
    write(
        root / "tests" / "test_cli.py",
        """
        import subprocess, sys
        from pathlib import Path

        ROOT = Path(__file__).parents[1]

        def test_the_cli_adds():
            run = subprocess.run(
                [sys.executable, "app.py", "2", "3"], cwd=ROOT, capture_output=True, text=True
            )
            assert run.stdout == "5\\n"

        def test_the_repository_files_are_data():
            assert "def add" in (ROOT / "app.py").read_text()

        def test_a_wrong_answer_fails():
            run = subprocess.run(
                [sys.executable, "app.py", "2", "2"], cwd=ROOT, capture_output=True
            )
            assert run.stdout == b"5\\n"
        """,
    )
    state = black_box_session(root)
    assert state.refused is None
    outcomes = {record["nodeid"]: record["outcome"] for record in state.tally.records()}
    assert outcomes == {
        "tests/test_cli.py::test_the_cli_adds": "passed",
        "tests/test_cli.py::test_the_repository_files_are_data": "passed",
        "tests/test_cli.py::test_a_wrong_answer_fails": "failed",
    }


def test_black_box_without_the_evaluators_tests_is_a_usage_error(tmp_path: Path) -> None:
    write(tmp_path / "repo" / "test_ok.py", "def test_ok():\n    pass\n")
    result = run_cli(tmp_path / "repo", "--black-box", "--report", tmp_path / "out")
    assert result.exit_code == 2
    assert "--black-box: give --tests-from PATH too" in result.output
    assert not (tmp_path / "out").exists()


#: The repository: a small HTTP app whose ``mul`` is wrong (the truth is 2 of 3).
HTTP_APP = """
import http.server, json

def add(a, b):
    return a + b

def mul(a, b):
    return a + b

class Handler(http.server.BaseHTTPRequestHandler):
    def do_GET(self):
        name, a, b = self.path.strip("/").split("/")
        body = json.dumps({"add": add, "mul": mul}[name](int(a), int(b))).encode()
        self.send_response(200)
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args):
        pass

if __name__ == "__main__":
    server = http.server.HTTPServer(("127.0.0.1", 0), Handler)
    print(server.server_port, flush=True)
    server.serve_forever()
"""
#: The evaluator's tests: they start the app and talk to it over HTTP.
HTTP_CONFTEST = """
import subprocess, sys, urllib.request
from pathlib import Path

import pytest

@pytest.fixture(scope="session")
def url():
    root = Path(__file__).parents[1]
    app = subprocess.Popen([sys.executable, "app.py"], cwd=root, stdout=subprocess.PIPE, text=True)
    yield f"http://127.0.0.1:{app.stdout.readline().strip()}"
    app.terminate()
    app.wait()

@pytest.fixture
def get(url):
    return lambda path: urllib.request.urlopen(url + path).read().decode()
"""
HTTP_TESTS = """
def test_add(get):
    assert get("/add/2/3") == "5"

def test_add_negative(get):
    assert get("/add/-2/-3") == "-5"

def test_mul(get):
    assert get("/mul/2/3") == "6"
"""


def as_other_users(test: Any) -> Any:
    """Full containment: root, and an interpreter the children's user can run."""
    for mark in AS_OTHER_USERS:
        test = mark(test)
    return test


def scored_black_box(tmp_path: Path, tests: str, planted: dict[str, str] | None = None) -> Any:
    """The HTTP app (and ``planted`` files) scored by the evaluator's ``tests`` (with the
    HTTP conftest, which imports the app when the tests ask for it from there) under ``run
    --tests-from … --black-box``, with full containment."""
    repo, evaluator = tmp_path / "repo", tmp_path / "evaluator"
    write(repo / "app.py", HTTP_APP)
    for name, text in (planted or {}).items():
        write(repo / name, text)
    conftest = ("import app\n" if "from conftest import app" in tests else "") + HTTP_CONFTEST
    write(evaluator / "tests" / "conftest.py", conftest)
    write(evaluator / "tests" / "test_http.py", tests)
    out = tmp_path / "out"
    result = run_cli(
        repo, "--tests-from", evaluator, "--black-box", "--python", SYSTEM_PYTHON, "--report", out
    )
    # 2 when pytest cannot even load the evaluator's conftest: it says so, as for any usage error
    assert result.exit_code in (0, 1, 2), result.output
    return only_report(out)


@as_other_users
def test_the_evaluators_tests_over_http_score_what_they_saw_of_the_app(tmp_path: Path) -> None:
    report = scored_black_box(tmp_path, HTTP_TESTS)
    assert report["containment"] == "full"
    score = report["scores"]["percent_passing_tests"]
    assert score["value"] == 66.67  # 2 of 3
    assert not [s for s in report["integrity"] if s["kind"] in ("tripwire", "patched")]


REFUSALS = {
    "the evaluator's test imports the app": ({}, "import app\n\ndef test_app():\n    pass\n"),
    "the evaluator's conftest imports the app": (
        {},
        "from conftest import app\n\ndef test_app():\n    assert app\n",
    ),
    "the repository plants a module the tests import": (
        {"timeit.py": "print('the repository runs here')\n"},
        "import timeit\n\ndef test_timer():\n    assert timeit.default_timer()\n",
    ),
}


@as_other_users
@pytest.mark.parametrize("case", list(REFUSALS))
def test_a_file_of_the_repository_in_the_test_process_scores_no_answer_naming_it(
    tmp_path: Path, case: str
) -> None:
    planted, tests = REFUSALS[case]
    report = scored_black_box(tmp_path, tests, planted)
    file = next(iter(planted), "app.py")
    for name in ("all_tests_pass", "percent_passing_tests", "percent_failing_tests"):
        score = report["scores"][name]
        assert score["value"] == "N"
        assert score["metadata"]["unscored"] == "repository"
        assert f"tried to load {file} of the repository" in score["explanation"]
