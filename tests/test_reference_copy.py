"""The reference copy: what is copied, what never is, and the child pytest run."""

from __future__ import annotations

import hashlib
import os
import re
import threading
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest
from processes import HANG_GUARD
from processes import all_gone
from processes import wait_until

from pytest_scoring.errors import OptionError
from pytest_scoring.fs.copy import copy_tree
from pytest_scoring.process.children import ChildRunner
from pytest_scoring.reference.child import ChildRun
from pytest_scoring.reference.child import reference_timeout
from pytest_scoring.reference.child import run_child
from pytest_scoring.reference.copy import check_reference_dir
from pytest_scoring.reference.copy import check_test_pattern
from pytest_scoring.reference.copy import copy_test_files


def write(path: Path, text: str = "x") -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)
    return path


def tree_hash(root: Path) -> dict[str, str]:
    """Every file's content hash and every symlink's target, by relative path."""
    result = {}
    for dirpath, dirnames, filenames in os.walk(root):
        for name in [*dirnames, *filenames]:
            path = Path(dirpath, name)
            key = path.relative_to(root).as_posix()
            if path.is_symlink():
                result[key] = f"-> {os.readlink(path)}"
            elif path.is_file():
                result[key] = hashlib.sha256(path.read_bytes()).hexdigest()
    return result


def test_the_copy_has_everything_but_git_and_the_excluded_folders(tmp_path: Path) -> None:
    source = tmp_path / "ref"
    write(source / "app.py")
    write(source / "tests" / "test_app.py")
    write(source / ".git" / "HEAD")
    write(source / "node_modules" / "x.js")
    write(source / "env" / "pyvenv.cfg")
    write(source / "scores" / "old.json")
    copy_tree(source, tmp_path / "copy", exclude=[source / "scores"])
    assert sorted(tree_hash(tmp_path / "copy")) == [
        "app.py",
        "env/pyvenv.cfg",
        "node_modules/x.js",
        "tests/test_app.py",
    ]


def test_symlinks_are_kept_inside_and_dropped_when_they_point_outside(tmp_path: Path) -> None:
    source = tmp_path / "ref"
    write(source / "data" / "real.txt", "inside")
    (source / "inside.txt").symlink_to("data/real.txt")
    (source / "outside.txt").symlink_to(write(tmp_path / "secret.txt", "secret"))
    (source / "outside_dir").symlink_to(tmp_path)
    copy_tree(source, tmp_path / "copy")
    copy = tmp_path / "copy"
    assert (copy / "inside.txt").read_text() == "inside"
    assert not (copy / "outside.txt").exists()
    assert not (copy / "outside_dir").exists()


def test_copying_never_changes_the_reference(tmp_path: Path) -> None:
    source = tmp_path / "ref"
    write(source / "app.py")
    write(source / "db" / "x.db", "data")
    (source / "link").symlink_to("app.py")
    before = tree_hash(source)
    copy_tree(source, tmp_path / "copy")
    write(tmp_path / "copy" / "link", "overwritten through the copy's link")
    assert tree_hash(source) == before


@pytest.mark.parametrize("pattern", ["../x/*.py", "tests/../../*.py", "/etc/*", "C:/x/*.py", ""])
def test_patterns_that_could_leave_the_repository_are_refused(pattern: str) -> None:
    with pytest.raises(OptionError, match=f"^{re.escape(repr(pattern))}: "):
        check_test_pattern(pattern)


def test_test_files_matching_the_patterns_replace_the_references(tmp_path: Path) -> None:
    repo, copy = tmp_path / "repo", tmp_path / "copy"
    write(repo / "tests" / "test_a.py", "new")
    write(repo / "tests" / "deep" / "helper.js", "js")
    write(repo / "tests" / "notes.txt")
    write(repo / "app.py", "solution code")
    write(copy / "tests" / "test_a.py", "old")
    write(copy / "app.py", "reference code")
    copied = copy_test_files(repo, ["tests/**/*.py", "tests/**/*.js"], copy)
    assert copied.copied == ["tests/test_a.py", "tests/deep/helper.js"]
    assert (copy / "tests" / "test_a.py").read_text() == "new"
    assert (copy / "app.py").read_text() == "reference code"


def test_a_test_file_that_several_patterns_match_is_listed_once(tmp_path: Path) -> None:
    repo, copy = tmp_path / "repo", tmp_path / "copy"
    write(repo / "tests" / "test_a.py", "new")
    copied = copy_test_files(repo, ["tests/**/*.py", "tests/*.py", "tests/test_a.py"], copy)
    assert copied.copied == ["tests/test_a.py"]


def test_a_test_file_symlinked_out_of_the_repository_is_not_followed(tmp_path: Path) -> None:
    repo, copy = tmp_path / "repo", tmp_path / "copy"
    secret = write(tmp_path / "secret.py", "stolen")
    (repo / "tests").mkdir(parents=True)
    (repo / "tests" / "test_steal.py").symlink_to(secret)
    (repo / "tests" / "linked").symlink_to(tmp_path)
    copied = copy_test_files(repo, ["tests/**/*.py"], copy)
    assert copied.copied == []
    assert copied.skipped == ["tests/test_steal.py"]
    assert not (copy / "tests" / "test_steal.py").exists()


def test_a_test_folder_that_is_a_symlink_is_listed_as_skipped(tmp_path: Path) -> None:
    repo, copy = tmp_path / "repo", tmp_path / "copy"
    write(repo / "real_tests" / "test_a.py", "new")
    (repo / "tests").symlink_to(repo / "real_tests")
    copied = copy_test_files(repo, ["tests/**/*.py", "tests/*.py"], copy)
    assert (copied.copied, copied.skipped) == ([], ["tests"])
    assert not (copy / "tests").exists()


def test_a_symlink_in_the_copy_is_replaced_not_written_through(tmp_path: Path) -> None:
    repo, copy = tmp_path / "repo", tmp_path / "copy"
    write(repo / "tests" / "test_a.py", "new")
    target = write(copy / "elsewhere.py", "keep me")
    (copy / "tests").mkdir()
    (copy / "tests" / "test_a.py").symlink_to(target)
    copy_test_files(repo, ["tests/*.py"], copy)
    assert target.read_text() == "keep me"
    assert (copy / "tests" / "test_a.py").read_text() == "new"


def test_a_copy_folder_linked_outside_is_never_written(tmp_path: Path) -> None:
    repo, copy = tmp_path / "repo", tmp_path / "copy"
    outside = tmp_path / "outside"
    outside.mkdir()
    write(repo / "tests" / "test_a.py", "new")
    copy.mkdir()
    (copy / "tests").symlink_to(outside)
    with pytest.raises(OptionError, match="outside the reference copy"):
        copy_test_files(repo, ["tests/*.py"], copy)
    assert list(outside.iterdir()) == []


def test_a_missing_reference_folder_is_named(tmp_path: Path) -> None:
    with pytest.raises(OptionError, match=r"--score-reference: .*nowhere is not a folder"):
        check_reference_dir(tmp_path / "nowhere")


@pytest.mark.parametrize("text", ["0", "-3", "soon", "inf"])
def test_a_timeout_that_is_not_a_positive_number_is_refused(text: str) -> None:
    with pytest.raises(OptionError, match="PYTEST_SCORING_REFERENCE_TIMEOUT"):
        reference_timeout({"PYTEST_SCORING_REFERENCE_TIMEOUT": text})


def test_the_timeout_defaults_to_ten_minutes() -> None:
    assert reference_timeout({}) == 600


def run_in(
    folder: Path, args: list[str], timeout: float, cancel: threading.Event | None = None
) -> ChildRun:
    children = ChildRunner()
    try:
        return run_child(children, folder, args, timeout, cancel=cancel)
    finally:
        children.close()


@pytest.mark.slow
def test_the_child_run_reports_its_outcomes(tmp_path: Path) -> None:
    write(tmp_path / "test_x.py", "def test_ok():\n    pass\n\ndef test_ko():\n    assert 0\n")
    run = run_in(tmp_path, ["-p", "no:cacheprovider"], timeout=HANG_GUARD)
    assert run.failure(HANG_GUARD) is None
    assert run.tally is not None
    assert run.tally["counts"]["passed"] == run.tally["counts"]["failed"] == 1
    assert run.tally["collected"] == ["test_x.py::test_ko", "test_x.py::test_ok"]


def test_a_child_past_its_timeout_is_killed_and_says_so(tmp_path: Path) -> None:
    write(tmp_path / "test_hang.py", "import time\ndef test_hang():\n    time.sleep(600)\n")
    run = run_in(tmp_path, [], timeout=1)
    assert run.timed_out
    assert run.failure(1) == "the reference run timed out after 1 s and was killed"
    all_gone(tmp_path)


def test_a_cancelled_child_is_killed_with_everything_it_started(tmp_path: Path) -> None:
    started = tmp_path / "grandchild-started"
    write(
        tmp_path / "test_hang.py",
        "import subprocess, time\n"
        "def test_hang():\n"
        "    subprocess.Popen(['setsid', 'sleep', '600'])\n"
        f"    open({str(started)!r}, 'w').close()\n"
        "    time.sleep(600)\n",
    )
    cancel = threading.Event()
    with ThreadPoolExecutor(1) as pool:
        running = pool.submit(run_in, tmp_path, [], HANG_GUARD, cancel)
        wait_until(lambda: started.exists() or running.done(), "the grandchild to start")
        cancel.set()
        run = running.result()
    assert run.tally is None
    assert run.failure(HANG_GUARD) == "the reference run was killed by SIGKILL before it finished"
    all_gone(tmp_path)


def test_a_child_that_kills_itself_is_a_failure_with_the_signal(tmp_path: Path) -> None:
    write(
        tmp_path / "test_die.py",
        "import os, signal\ndef test_die():\n    os.kill(os.getpid(), signal.SIGKILL)\n",
    )
    run = run_in(tmp_path, [], timeout=HANG_GUARD)
    assert run.failure(HANG_GUARD) == "the reference run was killed by SIGKILL before it finished"
