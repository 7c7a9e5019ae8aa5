"""The supervisor: every child's real exit status, and nothing of its tree left afterwards."""

from __future__ import annotations

import os
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest
from processes import all_gone
from processes import processes_working_in
from processes import running
from runs import make_fifo
from runs import wait_for_ready

from pytest_scoring.process.children import ChildRunner
from pytest_scoring.process.supervisor import ChildExit
from pytest_scoring.process.supervisor import ChildSpec
from pytest_scoring.process.supervisor import ChildUser
from pytest_scoring.process.supervisor import Limits
from pytest_scoring.process.supervisor import Supervisor

#: Long enough for any loaded machine; the tests never wait for it to pass.
GENEROUS = 600.0


@pytest.fixture
def runner() -> Iterator[ChildRunner]:
    children = ChildRunner()
    yield children
    children.close()


def run(
    runner: ChildRunner, cwd: Path, *argv: str, timeout: float = GENEROUS
) -> tuple[ChildExit, str]:
    with tempfile.TemporaryFile() as out, tempfile.TemporaryFile() as err:
        ended = runner.run_command(list(argv), cwd, timeout, out, err)
        out.seek(0)
        return ended, out.read().decode()


def python(code: str) -> list[str]:
    return [sys.executable, "-c", code]


def test_the_exit_status_and_a_killing_signal_are_reported(
    runner: ChildRunner, tmp_path: Path
) -> None:
    ended, _ = run(runner, tmp_path, "sh", "-c", "exit 3")
    assert (ended.exit_code, ended.signal, ended.containment) == (3, None, "full")
    ended, _ = run(runner, tmp_path, "sh", "-c", "kill -SEGV $$")
    assert (ended.exit_code, ended.signal) == (None, "SIGSEGV")


def test_a_setsid_daemon_left_behind_is_killed_before_the_answer(
    runner: ChildRunner, tmp_path: Path
) -> None:
    daemon = (
        "setsid sh -c 'echo $$ > daemon.pid; exec sleep 300' > /dev/null 2>&1 & "
        "while [ ! -s daemon.pid ]; do sleep 0.01; done"
    )
    ended, _ = run(runner, tmp_path, "sh", "-c", daemon)
    assert ended.exit_code == 0
    assert not running(int((tmp_path / "daemon.pid").read_text()))


def test_a_fork_storm_is_swept_away_to_the_last_process(
    runner: ChildRunner, tmp_path: Path
) -> None:
    # Twenty processes that keep replacing themselves with a child of their own, in new
    # sessions, so that their process ids and groups keep changing under any killer.
    storm = f"""
import os, sys
for _ in range(20):
    if os.fork() == 0:
        while True:
            if os.fork():
                os._exit(0)
            os.setsid()
open({str(tmp_path / "started")!r}, "w").close()
"""
    ended, _ = run(runner, tmp_path, *python(storm))
    assert (ended.exit_code, ended.containment) == (0, "full")
    assert (tmp_path / "started").exists()
    marker = str(tmp_path / "started").encode()
    survivors = [pid for pid in os.listdir("/proc") if pid.isdigit() and _cmdline_has(pid, marker)]
    assert survivors == []


def _cmdline_has(pid: str, marker: bytes) -> bool:
    try:
        return marker in Path(f"/proc/{pid}/cmdline").read_bytes() and running(int(pid))
    except OSError:
        return False


def test_a_child_that_ignores_sigint_is_killed_after_the_grace_period(tmp_path: Path) -> None:
    ready = make_fifo(tmp_path / "ready")
    code = f"""
import signal
signal.signal(signal.SIGINT, signal.SIG_IGN)
open({str(ready)!r}, "w").write("x")
signal.pause()
"""
    with open(os.devnull, "wb") as null:
        spec = ChildSpec(
            python(code), tmp_path, dict(os.environ), null.fileno(), null.fileno(), grace=1
        )
        supervisor = Supervisor(spec)
        wait_for_ready(ready)
        supervisor.interrupt()
        ended = supervisor.wait()
    assert (ended.interrupted, ended.signal) == (True, "SIGKILL")


def test_a_killed_evaluators_child_and_its_daemon_are_ended_long_before_their_deadline(
    tmp_path: Path,
) -> None:
    """The evaluator is killed (SIGKILL: none of its own code runs) while its child and a
    ``setsid`` daemon of the child's run, an hour from their deadline: the supervisor sees
    the evaluator gone and ends them both."""
    work = tmp_path / "work"
    work.mkdir()
    ready = make_fifo(tmp_path / "ready")
    child = f"setsid sleep 3600 & echo x > {ready}; exec sleep 3600"
    evaluator = f"""
import os
from pathlib import Path
from pytest_scoring.process.supervisor import ChildSpec, Supervisor
with open(os.devnull, "wb") as null:
    spec = ChildSpec(["sh", "-c", {child!r}], Path({str(work)!r}), dict(os.environ),
                     null.fileno(), null.fileno(), timeout=3600)
    Supervisor(spec).wait()
"""
    process = subprocess.Popen(python(evaluator), start_new_session=True)
    wait_for_ready(ready)
    assert len(processes_working_in(work)) == 2  # the child and its daemon

    process.kill()
    process.wait()

    all_gone(work)


def test_an_interrupt_reaches_the_child_as_sigint(tmp_path: Path) -> None:
    ready = make_fifo(tmp_path / "ready")
    code = f"""
import sys
try:
    # "with": an interrupt while the file closes must not be swallowed by its finaliser.
    with open({str(ready)!r}, "w") as ready:
        ready.write("x")
    open({str(tmp_path / "never")!r}).read()
except KeyboardInterrupt:
    sys.exit(7)
"""
    make_fifo(tmp_path / "never")
    with open(os.devnull, "wb") as null:
        spec = ChildSpec(
            python(code), tmp_path, dict(os.environ), null.fileno(), null.fileno(), grace=GENEROUS
        )
        supervisor = Supervisor(spec)
        wait_for_ready(ready)
        supervisor.interrupt()
        ended = supervisor.wait()
    assert (ended.exit_code, ended.interrupted, ended.timed_out) == (7, True, False)


def test_a_pytest_whose_teardown_hangs_after_the_deadline_is_killed(tmp_path: Path) -> None:
    # However loaded the machine, the deadline's SIGINT can never end the run by itself: the
    # interpreter starts with SIGINT ignored (a shell's trap, kept across exec, which Python
    # keeps too) until the test starts, so a SIGINT that comes while pytest still starts is
    # lost; one that comes in the test interrupts it and its teardown hangs. Either way only
    # the SIGKILL after the grace period ends it.
    wrapper = tmp_path / "python-ignoring-sigint"
    wrapper.write_text(f'#!/bin/sh\ntrap "" INT\nexec {sys.executable} "$@"\n')
    wrapper.chmod(0o755)
    (tmp_path / "test_hang.py").write_text(
        "import signal\n"
        "import threading\n"
        "import pytest\n\n"
        "@pytest.fixture\n"
        "def stuck():\n"
        "    signal.signal(signal.SIGINT, signal.default_int_handler)\n"
        "    yield\n"
        "    threading.Event().wait()\n\n"
        "def test_waits_forever(stuck):\n"
        "    threading.Event().wait()\n"
    )
    runner = ChildRunner(python=str(wrapper))
    try:
        # Long enough for pytest to start (and say so) on a loaded machine.
        child = runner.start_pytest(tmp_path, ["-p", "no:cacheprovider"], timeout=10, grace=2)
        ended = child.wait()
    finally:
        runner.close()
    assert (ended.timed_out, ended.signal) == (True, "SIGKILL")
    assert child.state.start is not None and not child.state.finished_session()


def test_the_file_size_limit_holds_for_the_child(tmp_path: Path) -> None:
    runner = ChildRunner(limits=Limits(file_size=1000))
    try:
        ended, _ = run(runner, tmp_path, *python("open('big', 'wb').write(b'x' * 5000)"))
    finally:
        runner.close()
    assert ended.exit_code == 0
    assert (tmp_path / "big").stat().st_size == 1000


@pytest.mark.skipif(os.geteuid() != 0, reason="only root can run a child as another user")
def test_as_root_the_child_runs_as_the_unprivileged_user(tmp_path: Path) -> None:
    runner = ChildRunner(user=ChildUser("nobody", 65534, 65534))
    try:
        ended, output = run(runner, tmp_path, "sh", "-c", "id -u; id -G")
    finally:
        runner.close()
    assert ended.exit_code == 0
    assert output.split() == ["65534", "65534"]


def test_a_command_that_cannot_start_says_why(runner: ChildRunner, tmp_path: Path) -> None:
    ended, _ = run(runner, tmp_path, str(tmp_path / "missing"))
    assert ended.error is not None and "No such file or directory" in ended.error
