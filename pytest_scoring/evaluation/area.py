"""The private area of one ``pytest-scoring run``, the copies in it, and the children's user.

Layout (docs/security.md): one new folder outside REPO and the report root, which the
children's user may pass through but not list (0711), holding

* folders only the evaluator can read (0700): the pristine copies of the reference checkout
  and of ``--tests-from`` PATH, the database snapshots, the children's logs;
* folders the children's user owns (0700): the private copy of REPO that is scored, a private
  ``HOME`` and ``TMPDIR``;
* a folder for each other run (the reference rerun, the baseline, an expected-tests folder),
  holding the same for that run's own user;
* the launch kit (launcher, probe, deterministic plugin), readable by all, writable by the
  evaluator only.

As root, every run gets a user id of its own (:mod:`pytest_scoring.process.users`), and an
interpreter those users cannot run is replaced by a copy they can
(:mod:`pytest_scoring.process.interpreter`).
"""

from __future__ import annotations

import getpass
import json
import os
import platform
import pwd
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Final

from pytest_scoring.errors import OptionError
from pytest_scoring.errors import ScoringError
from pytest_scoring.fs.copy import copy_tree
from pytest_scoring.kit.launch import NO_PYTEST
from pytest_scoring.process.children import ChildRunner
from pytest_scoring.process.children import read_tail
from pytest_scoring.process.environment import evaluator_pytest_version
from pytest_scoring.process.interpreter import InterpreterCopyError
from pytest_scoring.process.interpreter import interpreter_copy
from pytest_scoring.process.supervisor import ChildUser
from pytest_scoring.process.users import FIRST_UID
from pytest_scoring.process.users import UserPool
from pytest_scoring.reference.test_changes import FileChange
from pytest_scoring.reference.test_changes import compare_tests
from pytest_scoring.reference.tests_from import TestsFrom
from pytest_scoring.reference.tests_from import install_tests
from pytest_scoring.scorers.inputs import ScorerInputs

#: Seconds the check that the children's user can run the interpreter may take.
CHECK_TIMEOUT: Final = 120.0
#: What the check reports.
VERSIONS: Final = ("python", "pytest")


def new_area(report_root: Path, *repos: Path) -> Path:
    """A new private area (0700 until a children's user needs to pass through).

    :raises OptionError: when the temporary folder is inside a REPO or the report root.
    """
    area = Path(tempfile.mkdtemp(prefix="pytest-scoring-run-")).resolve()
    places = [*(("REPO", repo) for repo in repos), ("the report root", report_root)]
    for what, folder in places:
        if area.is_relative_to(folder.resolve()):
            area.rmdir()
            raise OptionError(
                f"the private area {area} would be inside {what}: set TMPDIR to another folder"
            )
    return area


def check_report_root_outside(report_root: Path, repo: Path) -> None:
    """A report root inside REPO is refused: the repository could plant or change reports.

    :raises OptionError: naming ``--report`` and both folders.
    """
    if report_root.resolve().is_relative_to(repo.resolve()):
        raise OptionError(
            f"--report: {report_root} is inside REPO ({repo}); the scored repository could "
            "plant or change reports there: choose a folder outside it"
        )


def user_pool() -> UserPool | None:
    """Where the runs get their users: a pool of locked user ids when root, else None."""
    return UserPool() if os.geteuid() == 0 else None


def requested_user(
    name: str | None, users: UserPool | None = None
) -> tuple[ChildUser | None, str | None]:
    """The scored session's user, held for the run, and why containment is partial without one.

    :param name: ``--user`` (as root, default: a user id of the run's own from ``users``).
    :param users: the evaluator's :func:`user_pool`.
    :raises OptionError: for an unknown user, ``--user`` without root, or a user another run
        holds now.
    """
    if os.geteuid() != 0 or users is None:
        if name is not None and name != getpass.getuser():
            raise OptionError(f"--user {name}: only root can run the tests as another user")
        return None, f"not run as root: the tests ran as the evaluator's user {getpass.getuser()}"
    if name is None:
        return users.take(), None
    try:
        entry = pwd.getpwnam(name)
    except KeyError:
        raise OptionError(f"--user: there is no user named {name!r}") from None
    if entry.pw_uid == 0:
        return None, f"--user {name}: the repository's code runs as root, like the evaluator"
    user = ChildUser(name, entry.pw_uid, entry.pw_gid)
    users.claim(user)
    return user, None


@dataclass(frozen=True)
class Runnable:
    """What :func:`make_runnable` found."""

    #: Why even a copy of the interpreter fails (the children then run as the evaluator).
    problem: str | None = None
    #: The versions the session's user found in the interpreter the children run (None:
    #: not checked as that user): :func:`interpreter_versions` need not start it again.
    versions: dict[str, str | None] | None = None


def make_runnable(runner: ChildRunner) -> Runnable:
    """Check that the children's users can run the interpreter with pytest; where one cannot
    (pyenv's, under ``/root``), let the children run a copy they can.

    The users checked: the session's, and a user id of the pool (the other runs' users).
    """
    problem, versions = _users_cannot_run(runner)
    if problem is None:
        return Runnable(versions=versions)
    try:
        copy = interpreter_copy(runner.python, runner.environment)
    except InterpreterCopyError as error:
        return Runnable(f"{problem}; no copy of it could be made: {error}")
    named, environment = runner.python, dict(runner.environment)
    runner.python = copy.python
    runner.environment.update(copy.environment)
    still, versions = _users_cannot_run(runner)
    if still is not None:
        runner.python, runner.environment = named, environment
        return Runnable(f"{problem}; nor a copy of it ({still})")
    return Runnable(versions=versions)


def _users_cannot_run(runner: ChildRunner) -> tuple[str | None, dict[str, str | None] | None]:
    """Why a user cannot run the interpreter (or None), and the versions the session's user
    found in it."""
    versions = None
    if runner.user is not None:
        check = check_interpreter(runner)
        if check.problem is not None:
            return check.problem, None
        versions = check.versions
    if runner.users is None or (runner.user is not None and runner.user.uid >= FIRST_UID):
        return None, versions  # a user id of the pool was checked, or there is no pool
    other = runner.for_another_run("check-user")
    try:
        return user_cannot_run(other), versions
    finally:
        other.close()


@dataclass(frozen=True)
class InterpreterCheck:
    """What the launcher's ``--check`` found, run as the children's user before any code of
    the repository: the interpreter's and pytest's versions, or why it cannot run them."""

    #: ``{"python": …, "pytest": …}``; None when the check failed.
    versions: dict[str, str | None] | None
    problem: str | None = None


def check_interpreter(runner: ChildRunner) -> InterpreterCheck:
    """Run the interpreter with pytest as the children's user, in the kit's folder."""
    folder = runner.folder("check")
    with (folder / "out").open("wb") as out, (folder / "err").open("wb+") as err:
        ended = runner.run_command(
            runner.launcher_command("--check"), runner.kit(), CHECK_TIMEOUT, out, err
        )
    who = f"user {runner.user.name if runner.user is not None else getpass.getuser()}"
    if ended.error is not None:
        reason = ended.error.rsplit(": ", 1)[-1]
        return InterpreterCheck(None, f"{who} cannot run {runner.python} ({reason})")
    if ended.exit_code == 0:
        return InterpreterCheck(_reported_versions(read_tail(folder / "out", 1000)))
    if ended.exit_code == NO_PYTEST:
        return InterpreterCheck(None, f"{who} cannot import pytest with {runner.python}")
    detail = read_tail(folder / "err", 300).strip().splitlines()[-1:] or [ended.describe()]
    return InterpreterCheck(None, f"{who} cannot run {runner.python} ({detail[0]})")


def _reported_versions(text: str) -> dict[str, str | None]:
    """The versions the launcher's check printed (None for one it did not)."""
    try:
        found = json.loads(text)
    except ValueError:
        found = None
    found = found if isinstance(found, dict) else {}
    return {key: str(found[key]) if key in found else None for key in VERSIONS}


def user_cannot_run(runner: ChildRunner) -> str | None:
    """Why the children's user cannot run the interpreter with pytest, or None when it can."""
    assert runner.user is not None
    return check_interpreter(runner).problem


def interpreter_versions(runner: ChildRunner) -> dict[str, str | None]:
    """The Python and pytest versions of the children's interpreter, as the evaluator
    measures them before any code of the repository runs (``scores.json``'s ``run``): its
    own, when the children run this interpreter as this user, else the launcher's check."""
    if runner.user is None and os.path.realpath(runner.python) == os.path.realpath(sys.executable):
        return {"python": platform.python_version(), "pytest": evaluator_pytest_version()}
    return check_interpreter(runner).versions or dict.fromkeys(VERSIONS)


@dataclass
class EvaluatorsTests:
    """``--tests-from PATH`` in the copy of REPO: what was put in, and what the repository
    had changed in its tests relative to PATH (``tests_modified``), for the scorers."""

    installed: TestsFrom
    changes: list[FileChange]

    def give(self, inputs: ScorerInputs) -> None:
        """Put them where the scorers read them."""
        inputs.tests_from, inputs.test_changes = self.installed, self.changes


def copy_repository(
    runner: ChildRunner,
    repo: Path,
    tests_from: tuple[Path, str] | None = None,
    folder: str = "repo",
) -> tuple[Path, EvaluatorsTests | None]:
    """The private copy of REPO that is scored, owned by the children's user; with
    ``--tests-from``, its tests made PATH's before any of its code runs.

    :param tests_from: PATH (its private copy) and how the report names it.
    :param folder: the folder of the area it goes in (a rerun's copy has its own).
    :raises OptionError: when REPO cannot be copied (an unreadable file, a full disk), or
        PATH's tests cannot be put in.
    """
    copy = runner.workspace(folder, numbered=False) / repo.name
    _copy(repo, copy, "REPO")
    placed = None if tests_from is None else _put_tests(*tests_from, copy)
    runner.give(copy)
    return copy, placed


def _put_tests(path: Path, public_path: str, copy: Path) -> EvaluatorsTests:
    """Compare the copy's tests with PATH's, then put PATH's in (docs/security.md)."""
    try:
        changes = compare_tests(copy, path)
        return EvaluatorsTests(install_tests(path, copy, public_path), changes)
    except ScoringError as error:
        raise OptionError(f"--tests-from: {error}") from None
    except OSError as error:
        where = f" {error.filename}" if error.filename else ""
        raise OptionError(f"--tests-from: cannot put the tests in{where}: {error}") from None


def copy_tests_from(runner: ChildRunner, path: Path) -> Path:
    """The pristine copy of PATH (``--tests-from``), made before any code of REPO runs and
    read from then on: only the evaluator can read it; its manifest is fingerprinted.

    :raises OptionError: when PATH cannot be copied.
    """
    copy = runner.folder("tests-from") / path.name
    _copy(path, copy, "--tests-from")
    if runner.guard is not None:
        runner.guard.add_tree(copy)
    return copy


def copy_reference(runner: ChildRunner, reference: Path) -> Path:
    """The pristine copy of the reference checkout, made before any code of REPO runs.

    Only the evaluator can read it; its manifest's fingerprint is checked before scoring.

    :raises OptionError: when the reference cannot be copied.
    """
    copy = runner.folder("reference") / reference.name
    _copy(reference, copy, "--reference")
    if runner.guard is not None:
        runner.guard.add_tree(copy)
    return copy


def _copy(source: Path, target: Path, what: str) -> None:
    try:
        copy_tree(source, target)
    except OSError as error:
        where = f" {error.filename}" if error.filename else ""
        raise OptionError(f"{what}: cannot copy{where}: {error.strerror or error}") from None
