"""``run`` as root: no two runs share a user, in one invocation or across invocations.

Each run (the scored session, the reference rerun, the baseline, another ``run`` on the same
machine) gets a user id of its own, held by a lock while it lasts: a process of one run cannot
find, signal or write into another's private copy. These tests need root and an interpreter
other users may run, as in ``test_run_user.py``; every repository's name carries a token of
the test, so that its attempts only ever aim at this test's own runs.
"""

from __future__ import annotations

import json
import os
import subprocess
import uuid
from pathlib import Path

import pytest
from processes import wait_until
from runs import AS_OTHER_USERS
from runs import SYSTEM_PYTHON
from runs import only_report
from runs import run_cli
from runs import start_run

from pytest_scoring.errors import OptionError
from pytest_scoring.process.supervisor import ChildUser
from pytest_scoring.process.users import FIRST_UID
from pytest_scoring.process.users import UserPool

pytestmark = [pytest.mark.slow, *AS_OTHER_USERS]

#: Repository A's test: it leaves a process that looks for repository V's private copy in
#: every private area of ``run`` on the machine and rewrites V's tests to pass, and keeps A's
#: run going until the test says stop.
LEAVE_BEHIND = """
import subprocess, sys, time
from pathlib import Path

DROP = Path({drop!r})
HUNTER = '''
import glob, json, sys, time
from pathlib import Path

drop, victim = Path(sys.argv[1]), sys.argv[2]
tried = {{}}
deadline = time.monotonic() + 900
while not (drop / "stop").exists() and time.monotonic() < deadline:
    for area in glob.glob("/tmp/pytest-scoring-run-*"):
        for number in range(1, 12):
            target = Path(area) / f"repo-{{number}}" / victim / "test_calc.py"
            try:
                target.write_text("def test_one(): pass\\\\n")
                tried[str(target)] = "written"
            except OSError as error:
                tried.setdefault(str(target), type(error).__name__)
    (drop / "hunted.json").write_text(json.dumps(tried))
    time.sleep(0.01)
'''

def test_leave_a_process_behind():
    subprocess.Popen(
        [sys.executable, "-c", HUNTER, str(DROP), {victim!r}],
        start_new_session=True,
        stdin=subprocess.DEVNULL,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    (DROP / "ready").write_text("ready")
    deadline = time.monotonic() + 900
    while not (DROP / "stop").exists() and time.monotonic() < deadline:
        time.sleep(0.05)
"""
VICTIM_TESTS = """
def test_pass_one(): pass
def test_pass_two(): pass
def test_pass_three(): pass
def test_fail_one(): assert False
def test_fail_two(): assert False
"""


def test_a_process_left_by_another_run_cannot_rewrite_this_runs_copy(
    tmp_path: Path, drop: Path
) -> None:
    token = uuid.uuid4().hex[:10]
    victim = tmp_path / f"victim-{token}"
    victim.mkdir()
    (victim / "test_calc.py").write_text(VICTIM_TESTS)
    attacker = tmp_path / f"attacker-{token}"
    attacker.mkdir()
    (attacker / "test_leave.py").write_text(LEAVE_BEHIND.format(drop=str(drop), victim=victim.name))
    first = start_run(attacker, "--report", tmp_path / "a", "--python", SYSTEM_PYTHON)
    try:
        wait_until(lambda: (drop / "ready").exists() or first.poll() is not None, "A's hunter")
        assert first.poll() is None, first.communicate()[0]
        result = run_cli(victim, "--report", tmp_path / "v", "--python", SYSTEM_PYTHON)
    finally:
        (drop / "stop").write_text("stop")
        output, _ = first.communicate()
    assert result.exit_code == 0, result.output
    report = only_report(tmp_path / "v")
    assert report["scores"]["percent_passing_tests"]["value"] == 60
    assert report["containment"] == "full"
    assert first.returncode == 0, output
    hunted = json.loads((drop / "hunted.json").read_text())
    assert "written" not in hunted.values()
    assert set(hunted.values()) <= {"PermissionError", "FileNotFoundError"}


def test_a_user_one_run_holds_is_refused_to_another(tmp_path: Path) -> None:
    """``--user nobody`` while another run holds nobody: refused in one line, nothing runs."""
    holder = UserPool()
    holder.claim(ChildUser("nobody", 65534, 65534))
    try:
        repo = tmp_path / "repo"
        repo.mkdir()
        (repo / "test_ok.py").write_text("def test_ok():\n    pass\n")
        args = ("--user", "nobody", "--report", tmp_path / "out", "--python", SYSTEM_PYTHON)
        result = run_cli(repo, *args)
    finally:
        holder.close()
    assert result.exit_code == 2, result.output
    assert "--user nobody: another run uses this user now" in result.output
    assert "Traceback" not in result.output and not list(tmp_path.glob("out/scan_id=*"))


def test_a_user_id_that_still_owns_a_process_is_never_handed_out() -> None:
    first = UserPool()
    user = first.take()
    leftover = subprocess.Popen(
        ["sleep", "600"],
        user=user.uid,
        group=user.gid,
        extra_groups=[],
    )
    try:
        first.release(user)  # as a run whose containment was partial would leave it
        second = UserPool()
        try:
            taken = second.take()
            with pytest.raises(OptionError, match="another run uses this user now"):
                UserPool().claim(taken)
        finally:
            second.close()
    finally:
        leftover.kill()
        leftover.wait()
        first.close()
    assert taken.uid != user.uid and taken.uid >= FIRST_UID


def test_two_evaluators_never_take_the_same_user_id() -> None:
    pools = [UserPool() for _ in range(3)]
    try:
        taken = [pool.take() for pool in pools for _ in range(2)]
    finally:
        for pool in pools:
            pool.close()
    assert len({user.uid for user in taken}) == 6
    assert all(os.path.exists(f"/run/pytest-scoring/uids/{user.uid}") for user in taken)
