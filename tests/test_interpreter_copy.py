"""The copy of an interpreter the children's user cannot run: made once, runnable by others,
and never taken from a cache another user could have written into."""

from __future__ import annotations

import os
import shutil
import tempfile
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest
from runs import AS_OTHER_USERS
from runs import SYSTEM_PYTHON

from pytest_scoring.process.children import ChildRunner
from pytest_scoring.process.environment import captured_environment
from pytest_scoring.process.interpreter import InterpreterCopyError
from pytest_scoring.process.interpreter import interpreter_copy
from pytest_scoring.process.supervisor import ChildUser

pytestmark = AS_OTHER_USERS


@pytest.fixture
def cache() -> Iterator[Path]:
    """A cache folder of this test's own, root's alone like the real one."""
    folder = Path("/var/cache/pytest-scoring") / f"test-{uuid.uuid4().hex[:10]}"
    yield folder
    shutil.rmtree(folder, ignore_errors=True)


def runs_pytest_as_nobody(python: str, environment: dict[str, str]) -> bool:
    folder = Path(tempfile.mkdtemp(prefix="pytest-scoring-test-"))
    folder.chmod(0o755)
    runner = ChildRunner(python=python, user=ChildUser("nobody", 65534, 65534))
    runner.environment.update(environment)
    try:
        with tempfile.TemporaryFile() as out, tempfile.TemporaryFile() as err:
            argv = [python, "-c", "import pytest, sys; print(sys.prefix)"]
            ended = runner.run_command(argv, folder, 600, out, err)
            out.seek(0)
            return ended.exit_code == 0 and out.read().decode().startswith("/var/cache/")
    finally:
        runner.close()
        shutil.rmtree(folder, ignore_errors=True)


def test_a_copy_is_made_once_and_another_user_runs_it(cache: Path) -> None:
    copy = interpreter_copy(str(SYSTEM_PYTHON), captured_environment(), cache)
    assert copy.python.startswith(f"{cache}/")
    assert runs_pytest_as_nobody(copy.python, copy.environment)
    entry = Path(copy.python).parents[1]
    made = entry.stat().st_ino
    assert interpreter_copy(str(SYSTEM_PYTHON), captured_environment(), cache) == copy
    assert entry.stat().st_ino == made, "the same copy, not made again"


@pytest.mark.parametrize("how", ["a folder others may write", "a folder of another user"])
def test_a_copy_another_user_could_have_written_into_is_made_again(cache: Path, how: str) -> None:
    copy = interpreter_copy(str(SYSTEM_PYTHON), captured_environment(), cache)
    entry = Path(copy.python).parents[1]
    folder = next(path for path in entry.rglob("json") if path.is_dir())
    (folder / "planted.py").write_text("raise SystemExit('planted')\n")
    if how == "a folder others may write":
        folder.chmod(0o777)
    else:
        os.chown(folder, 65534, 65534)
    again = interpreter_copy(str(SYSTEM_PYTHON), captured_environment(), cache)
    assert again == copy
    assert not (folder / "planted.py").exists()
    assert (folder.stat().st_mode & 0o777, folder.stat().st_uid) == (0o755, 0)
    assert runs_pytest_as_nobody(again.python, again.environment)


def test_a_cache_below_a_folder_others_may_write_is_never_used() -> None:
    planted = Path(tempfile.gettempdir()) / f"pytest-scoring-cache-{uuid.uuid4().hex[:10]}"
    with pytest.raises(InterpreterCopyError, match="is writable by other users"):
        interpreter_copy(str(SYSTEM_PYTHON), captured_environment(), planted)
    assert not planted.exists()
