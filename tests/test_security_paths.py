"""A hostile repository against the reference copy and ``file_contents``: loops, FIFOs, forgeries.

Real files, real symlinks and real pytest processes; nothing is mocked.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
from processes import HANG_GUARD

from pytest_scoring import file_contents_scorer
from pytest_scoring.errors import ConfigError
from pytest_scoring.fs.copy import copy_tree
from pytest_scoring.process.children import ChildRunner
from pytest_scoring.reference.child import run_child
from pytest_scoring.reference.copy import copy_test_files


@pytest.fixture
def looping_repo(tmp_path: Path) -> Path:
    """A repository whose tests folder holds a test, two links to each other and a self-link."""
    tests = tmp_path / "repo" / "tests"
    tests.mkdir(parents=True)
    (tests / "test_ok.py").write_text("def test_ok():\n    pass\n")
    (tests / "test_a.py").symlink_to("test_b.py")
    (tests / "test_b.py").symlink_to("test_a.py")
    (tests / "self").symlink_to("self")
    return tmp_path / "repo"


def test_test_files_in_a_symlink_loop_are_skipped_and_the_others_copied(
    looping_repo: Path, tmp_path: Path
) -> None:
    (tmp_path / "copy").mkdir()
    copied = copy_test_files(looping_repo, ["tests/**/*.py"], tmp_path / "copy")
    assert copied.copied == ["tests/test_ok.py"]
    assert sorted(copied.skipped) == ["tests/test_a.py", "tests/test_b.py"]


def test_a_reference_checkout_with_symlink_loops_is_copied_without_them(
    looping_repo: Path, tmp_path: Path
) -> None:
    copy_tree(looping_repo, tmp_path / "copy")
    assert os.listdir(tmp_path / "copy" / "tests") == ["test_ok.py"]


def test_file_contents_searches_past_a_symlink_loop(looping_repo: Path) -> None:
    scorer = file_contents_scorer("tests", "def test_ok")
    result = scorer.search(looping_repo.resolve() / "tests", looping_repo.resolve())
    assert result.matched == ["tests/test_ok.py"]


def test_a_folder_path_with_a_nul_character_is_a_configuration_error() -> None:
    with pytest.raises(ConfigError, match="folder_path: 'src\\\\x00' must not contain a NUL"):
        file_contents_scorer("src\0", "needle")


def test_a_fifo_swapped_in_after_the_walk_is_unreadable_not_waited_on(tmp_path: Path) -> None:
    os.mkfifo(tmp_path / "notes.txt")
    code = (
        "import sys; from pathlib import Path\n"
        "from pytest_scoring.scorers.file_contents import file_contains\n"
        "try:\n    file_contains(Path(sys.argv[1]), 'x', True)\n"
        "except OSError as error:\n    print(error)\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", code, str(tmp_path / "notes.txt")],
        capture_output=True,
        text=True,
        timeout=HANG_GUARD,
    )
    assert "notes.txt is not a regular file" in done.stdout


@pytest.mark.slow
def test_a_copied_conftest_that_silences_the_probe_counts_as_no_result(tmp_path: Path) -> None:
    (tmp_path / "test_x.py").write_text("def test_ok():\n    pass\n")
    (tmp_path / "conftest.py").write_text(
        "import pytest\n\n"
        "@pytest.hookimpl(tryfirst=True)\n"
        "def pytest_configure(config):\n"
        "    for plugin in list(config.pluginmanager.get_plugins()):\n"
        "        if type(plugin).__module__.startswith('_pytest_scoring'):  # the probe's\n"
        "            config.pluginmanager.unregister(plugin)\n"
    )
    children = ChildRunner()
    try:
        run = run_child(children, tmp_path, ["-p", "no:cacheprovider"], timeout=HANG_GUARD)
    finally:
        children.close()
    assert run.tally is None
    failure = run.failure(HANG_GUARD) or ""
    assert failure.startswith("the reference run gave no result that can be trusted: ")
    assert "pytest exited with status 0 without the probe's end record" in failure
