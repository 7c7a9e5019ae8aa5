"""PATH's tests read statically: test files, test roots, loose files, its pytest section, and
putting them into a copy without ever writing through a link (``--tests-from``)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
from evaluator_tests import write
from runs import SYSTEM_PYTHON
from runs import system_python_with_pytest

from pytest_scoring.fs.graft import graft_folder
from pytest_scoring.reference.pytest_config import ConfigReadError
from pytest_scoring.reference.pytest_config import find_config
from pytest_scoring.reference.test_layout import fixture_names
from pytest_scoring.reference.test_layout import read_layout
from pytest_scoring.reference.tests_from import install_tests

A_TEST = "def test_it():\n    pass\n"


def tree(root: Path, files: dict[str, str]) -> Path:
    for relpath, text in files.items():
        write(root / relpath, text)
    return root


@pytest.mark.parametrize(
    ("files", "roots", "loose"),
    [
        ({"tests/test_a.py": A_TEST, "tests/helpers.py": ""}, ["tests"], []),
        ({"src/pkg/tests/test_a.py": A_TEST, "src/pkg/core.py": ""}, ["src/pkg/tests"], []),
        ({"tests/unit/test_a.py": A_TEST, "tests/integration/test_b.py": A_TEST}, ["tests"], []),
        ({"test_app.py": A_TEST, "app.py": ""}, [], ["test_app.py"]),
        ({"pkg/test_core.py": A_TEST, "pkg/core.py": ""}, [], ["pkg/test_core.py"]),
        ({"pkg/test_utils.py": "def make(): pass\n", "tests/test_a.py": A_TEST}, ["tests"], []),
        ({"unit_tests/test_a.py": A_TEST, "integration-tests/deep/test_b.py": A_TEST},
         ["integration-tests", "unit_tests"], []),
    ],
    ids=["tests", "beside a package", "top-most", "at the root", "beside modules", "helpers",
         "named like tests"],
)  # fmt: skip
def test_a_test_root_is_a_folder_named_like_tests_never_the_root_or_a_package(
    tmp_path: Path, files: dict[str, str], roots: list[str], loose: list[str]
) -> None:
    layout = read_layout(tree(tmp_path, files))
    assert (layout.roots, layout.loose) == (roots, loose)


def test_testpaths_are_the_roots_when_named_like_tests_and_limit_what_is_collected(
    tmp_path: Path,
) -> None:
    files = {
        "pytest.ini": "[pytest]\ntestpaths = tests/unit src\n",
        "tests/unit/test_a.py": A_TEST,
        "tests/unit/data/case.json": "{}",
        "tests/integration/test_b.py": A_TEST,
        "src/pkg/test_c.py": A_TEST,
        "src/pkg/c.py": "",
    }
    layout = read_layout(tree(tmp_path, files))
    assert layout.roots == ["tests/unit"]
    assert layout.loose == ["src/pkg/test_c.py"]
    assert layout.collected == ["src/pkg/test_c.py", "tests/unit/test_a.py"]


@pytest.mark.parametrize(
    "source",
    [
        "def test_it(): pass\n",
        "async def test_it(): pass\n",
        "class TestThing:\n    pass\n",
        "import unittest\nclass Thing(unittest.TestCase):\n    pass\n",
        "from .shared import test_shared\n",
        "from .shared import *\n",
        "if True:\n    def test_it(): pass\n",
        "def broken(:\n",
    ],
    ids=["function", "async", "class", "TestCase", "import", "star import", "in an if", "broken"],
)
def test_what_makes_a_module_define_tests(tmp_path: Path, source: str) -> None:
    layout = read_layout(tree(tmp_path, {"pkg/test_x.py": source}))
    assert layout.loose == ["pkg/test_x.py"]


def test_the_configuration_says_what_test_files_and_functions_are(tmp_path: Path) -> None:
    files = {
        "setup.cfg": "[tool:pytest]\npython_files = check_*.py\npython_functions = should_\n",
        "tests/check_a.py": "def should_work():\n    pass\n",
        "tests/test_b.py": A_TEST,
        "other/check_c.py": "def test_named_the_default_way():\n    pass\n",
    }
    layout = read_layout(tree(tmp_path, files))
    assert layout.roots == ["tests"]
    assert layout.collected == ["tests/check_a.py"]
    assert layout.loose == []


def test_what_pytests_collection_skips_is_skipped(tmp_path: Path) -> None:
    files = {
        ".venv/pyvenv.cfg": "",
        ".venv/lib/site-packages/dep/tests/test_dep.py": A_TEST,
        "env/pyvenv.cfg": "",
        "env/lib/tests/test_dep.py": A_TEST,
        "node_modules/x/tests/test_y.py": A_TEST,
        "build/tests/test_old.py": A_TEST,
        "tests/__pycache__/test_a.py": A_TEST,
        "tests/test_a.py": A_TEST,
        "tests/test_legacy.py": A_TEST,
        "tests/conftest.py": 'collect_ignore = ["test_legacy.py"]\n',
    }
    layout = read_layout(tree(tmp_path, files))
    assert layout.collected == ["tests/test_a.py"]
    assert layout.conftests == ["tests/conftest.py"]


def test_fixtures_of_a_conftest_are_read_statically(tmp_path: Path) -> None:
    conftest = write(
        tmp_path / "conftest.py",
        """
        import pytest
        from pytest import fixture

        @pytest.fixture
        def database():
            pass

        @pytest.fixture(scope="session", name="client")
        def make_client():
            pass

        @fixture
        async def server():
            pass

        def helper():
            pass
        """,
    )
    assert fixture_names(conftest) == ["database", "client", "server"]


#: PATH's pytest section in every format, each asking for ``check_*`` functions.
SECTIONS = {
    "pytest.ini": "[pytest]\npython_functions = check_\n",
    "tox.ini": "[tox]\nenvlist = py3\n[pytest]\npython_functions = check_\n",
    "setup.cfg": "[metadata]\nname = x\n[tool:pytest]\npython_functions = check_\n",
    "pyproject.toml": '[project]\n[tool.pytest.ini_options]\npython_functions = "check_"\n',
    "pyproject.toml native": '[tool.pytest]\npython_functions = ["check_"]\n',
    "pytest.toml": '[pytest]\npython_functions = ["check_"]\n',
}


def collected(python: Path | str, copy: Path, args: list[str]) -> list[str]:
    run = subprocess.run(
        [str(python), "-m", "pytest", "--co", "-q", "-p", "no:cacheprovider", *args],
        cwd=copy,
        capture_output=True,
        text=True,
        check=False,
    )
    return [line for line in run.stdout.splitlines() if "::" in line]


@pytest.mark.slow
@pytest.mark.parametrize("source", sorted(SECTIONS))
def test_the_childs_configuration_file_is_paths_section_alone(tmp_path: Path, source: str) -> None:
    path = tree(tmp_path / "path", {source.split()[0]: SECTIONS[source]})
    write(
        path / "tests" / "test_a.py",
        "def check_this():\n    pass\n\ndef test_not_this():\n    pass\n",
    )
    copy = tree(tmp_path / "copy", {"pytest.ini": "[pytest]\npython_functions = test_\n"})
    installed = install_tests(path, copy)
    assert installed.config == source.split()[0]
    assert collected(sys.executable, copy, installed.args) == ["tests/test_a.py::check_this"]
    native = source in ("pyproject.toml native", "pytest.toml")  # TOML types: pytest 9's
    if not native and system_python_with_pytest():  # pytest 7 reads the same file
        assert collected(SYSTEM_PYTHON, copy, installed.args) == ["tests/test_a.py::check_this"]


def test_paths_unreadable_configuration_is_named(tmp_path: Path) -> None:
    path = tree(tmp_path, {"pyproject.toml": "[tool.pytest.ini_options\n"})
    with pytest.raises(ConfigReadError, match=r"--tests-from: pyproject\.toml: invalid TOML"):
        find_config(path, "--tests-from")


def test_a_test_root_that_is_a_link_out_is_removed_never_followed(tmp_path: Path) -> None:
    outside = tree(tmp_path / "outside", {"keep.txt": "mine"})
    path = tree(tmp_path / "path", {"tests/test_a.py": A_TEST})
    copy = tmp_path / "copy"
    copy.mkdir()
    (copy / "tests").symlink_to(outside)
    removed = graft_folder(path / "tests", copy, "tests")
    assert removed == ["tests"]
    assert (outside / "keep.txt").read_text() == "mine"
    assert sorted(p.name for p in outside.iterdir()) == ["keep.txt"]
    assert not (copy / "tests").is_symlink() and (copy / "tests" / "test_a.py").is_file()


def test_a_folder_on_the_way_that_leads_out_is_replaced_by_a_real_one(tmp_path: Path) -> None:
    outside = tmp_path / "outside"
    outside.mkdir()
    path = tree(tmp_path / "path", {"pkg/tests/test_a.py": A_TEST})
    copy = tmp_path / "copy"
    copy.mkdir()
    (copy / "pkg").symlink_to(outside)
    install_tests(path, copy)
    assert list(outside.iterdir()) == []
    assert (copy / "pkg" / "tests" / "test_a.py").is_file() and not (copy / "pkg").is_symlink()


def test_a_link_in_path_leading_out_of_its_test_root_is_not_copied(tmp_path: Path) -> None:
    path = tree(tmp_path / "path", {"tests/test_a.py": A_TEST, "secret.txt": "s"})
    (path / "tests" / "secret.txt").symlink_to(path / "secret.txt")
    copy = tmp_path / "copy"
    copy.mkdir()
    install_tests(path, copy)
    assert not (copy / "tests" / "secret.txt").exists()
