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
import sqlite3
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

APP = """
import sqlite3
from pathlib import Path

def login(name):
    with sqlite3.connect(Path(__file__).with_name("app.db")) as db:
        db.execute("SELECT * FROM users WHERE name = ?", (name,))
"""
ATTACK = "        db.execute(\"UPDATE users SET password = 'pwned' WHERE name = 'admin'\")\n"

#: The repository's tests, which the reference rerun runs too (in its copy of the reference).
#: In the session, the second test looks for the rerun's test process through /proc (a
#: launcher whose supervisor the same evaluator started), and writes the session's change into
#: the rerun's database, through its working folder or the folder names ``run`` uses; the
#: rerun's waits meanwhile.
REACH_RERUN = """
import json, os, sqlite3, sys, time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parents[1]))
import app

DROP = Path({drop!r})
HERE = Path(__file__).resolve()
IN_RERUN = HERE.parents[1].name == "checkout"
CHANGE = "UPDATE users SET password = 'pwned' WHERE name = 'admin'"


def parent_of(pid):
    with open(f"/proc/{{pid}}/stat") as stat:
        return int(stat.read().rsplit(")", 1)[1].split()[1])


def launchers_beside_me():
    evaluator = parent_of(parent_of(os.getpid()))
    found = []
    for entry in Path("/proc").iterdir():
        try:
            pid = int(entry.name)
            if pid != os.getpid() and b"_pytest_scoring_launch" in (entry / "cmdline").read_bytes():
                if parent_of(parent_of(pid)) == evaluator:
                    found.append(pid)
        except (ValueError, OSError):
            continue
    return found


def rewrite(database):
    try:
        with sqlite3.connect(f"file:{{database}}?mode=rw", uri=True) as db:
            db.execute(CHANGE)
        return "written"
    except (OSError, sqlite3.Error) as error:
        return type(error).__name__ + ": " + str(error)


def test_login():
    app.login("bob")


def test_reach_the_rerun(record_property):
    if IN_RERUN:
        deadline = time.monotonic() + 300
        while not (DROP / "done").exists() and time.monotonic() < deadline:
            time.sleep(0.05)
        return
    workspace = HERE.parents[2]
    info = workspace.stat()
    record_property("workspace", [info.st_uid, oct(info.st_mode & 0o777), os.getuid()])
    deadline = time.monotonic() + 300
    while not (found := launchers_beside_me()) and time.monotonic() < deadline:
        time.sleep(0.05)
    attempts = {{"launchers": len(found)}}
    for pid in found:
        try:
            cwd = os.readlink(f"/proc/{{pid}}/cwd")
        except OSError as error:
            attempts[f"cwd of {{pid}}"] = type(error).__name__
            continue
        attempts[cwd] = rewrite(Path(cwd) / "app.db")
    area = HERE.parents[3]
    for number in range(1, 30):
        runs = [area / f"reference-run-{{number}}" / f"checkout-{{n}}" for n in (1, 2, 3)]
        for guess in (area / f"reference-checkout-{{number}}", *runs):
            result = rewrite(guess / "checkout" / "app.db")
            if "unable to open" not in result:
                attempts[str(guess)] = result
    record_property("attempts", attempts)
    (DROP / "done").write_text("done")
"""

REFERENCE_TESTS = """
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parents[1]))
import app


def test_login():
    app.login("bob")
"""


def make_app(folder: Path, app: str, tests: str) -> Path:
    (folder / "tests").mkdir(parents=True)
    (folder / "app.py").write_text(app)
    (folder / "tests" / "test_app.py").write_text(tests)
    with sqlite3.connect(folder / "app.db") as db:
        db.execute("CREATE TABLE users (id INTEGER PRIMARY KEY, name TEXT, password TEXT)")
        db.execute("INSERT INTO users (name, password) VALUES ('admin', 'h0'), ('bob', 'h1')")
    db.close()
    folder.chmod(0o755)
    return folder


def properties(report: dict[str, object]) -> dict[str, object]:
    tests = report["tests"]["tests"]  # type: ignore[index]
    return {name: value for test in tests for name, value in test["user_properties"]}


def test_the_session_cannot_write_its_change_into_the_reference_reruns_copy(
    tmp_path: Path, drop: Path
) -> None:
    token = uuid.uuid4().hex[:10]
    reference = make_app(tmp_path / f"reference-{token}", APP, REFERENCE_TESTS)
    repo = make_app(tmp_path / f"repo-{token}", APP + ATTACK, REACH_RERUN.format(drop=str(drop)))
    config = tmp_path / "scorers.json"
    selector = {"rows": {"changed": {"has_one": ["password"]}}}
    config.write_text(json.dumps({"scorers": [{"type": "db_diff_change", "selector": selector}]}))
    args = ["--reference", reference, "--config", config, "--python", SYSTEM_PYTHON]
    result = run_cli(repo, *args, "--report", tmp_path / "out")
    assert result.exit_code == 0, result.output
    report = only_report(tmp_path / "out")
    found = properties(report)
    attempts = found["attempts"]
    assert isinstance(attempts, dict) and attempts["launchers"] >= 1, attempts
    assert "written" not in attempts.values(), attempts
    assert any(value == "PermissionError" for value in attempts.values()), attempts
    owner, mode, uid = found["workspace"]  # type: ignore[misc]
    assert (owner, mode) == (uid, "0o700") and uid >= FIRST_UID
    score = report["scores"]["db_diff_change"]
    assert score["value"] == "C", score
    assert report["containment"] == "full"


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
