"""``run --limit``: processes, memory and disk stay bounded while the repository's tests run.

A fork storm meets ``nproc`` (a limit of the children's own user: root only), a disk filler
meets ``disk`` (the evaluator's watch), and where cgroup v2 allows, one cgroup bounds the whole
tree. Each run ends, is scored and its report is written.
"""

from __future__ import annotations

import os
import resource
import shutil
import sys
import tempfile
from pathlib import Path

import pytest
from runs import TAMPERING_ONLY
from runs import only_report
from runs import run_cli

from pytest_scoring.errors import OptionError
from pytest_scoring.evaluation.options import DEFAULT_LIMITS
from pytest_scoring.evaluation.options import parse_limits
from pytest_scoring.kit import cgroup
from pytest_scoring.process.children import ChildRunner
from pytest_scoring.process.supervisor import ChildUser
from pytest_scoring.process.supervisor import Limits

#: Forks until the kernel refuses one, never more than a bounded number (should the limit
#: fail, the machine still survives); each child sleeps until the supervisor's sweep.
FORK_STORM = """
import os, time

def test_storm():
    started, refused = 0, None
    while started < 1000:
        try:
            pid = os.fork()
        except OSError as error:
            refused = error.errno
            break
        if pid == 0:
            time.sleep(600)
            os._exit(0)
        started += 1
    print("started", started, "refused", refused)
    assert refused is not None and started < 64, (started, refused)
"""

#: Writes 10 MiB files (each far below the file-size limit) until stopped, then waits.
DISK_FILLER = """
import os, time
from pathlib import Path

def test_fill():
    here = Path(__file__).parent
    block = os.urandom(1024 * 1024)
    for index in range(100):
        with open(here / f"blob-{index}", "wb") as blob:
            for _ in range(10):
                blob.write(block)
    (here / "all-written").write_text("yes")
    time.sleep(600)
"""


def test_the_limits_have_defaults_and_each_kind_can_be_set_or_lifted() -> None:
    assert DEFAULT_LIMITS.options() == {
        "fsize": 4 * 1024**3,
        "as": None,
        "data": 16 * 1024**3,
        "nofile": 4096,
        "nproc": 4096,
        "disk": 16 * 1024**3,
        "tests": 100_000,
    }
    limits = parse_limits(["nproc=64", "disk=50M", "data=none", "as=8G", "tests=20"])
    assert limits.tests == 20
    assert (limits.processes, limits.disk, limits.data) == (64, 50 * 1024**2, None)
    assert limits.address_space == 8 * 1024**3
    with pytest.raises(OptionError, match="the kind must be one of fsize, as, data, nofile"):
        parse_limits(["cpu=1"])


def output_of(runner: ChildRunner, cwd: Path, *argv: str) -> list[str]:
    """What a command the runner starts prints (it must succeed)."""
    try:
        with tempfile.TemporaryFile() as out, tempfile.TemporaryFile() as err:
            ended = runner.run_command(list(argv), cwd, 600, out, err)
            out.seek(0)
            assert ended.exit_code == 0, ended
            return out.read().decode().split()
    finally:
        runner.close()


def test_the_data_limit_holds_for_the_child_and_nproc_only_for_a_user_of_its_own(
    tmp_path: Path,
) -> None:
    """As the evaluator's own user, ``nproc`` would count the evaluator's processes: it is
    left unchanged."""
    runner = ChildRunner(limits=Limits(data=2 * 1024**3, processes=50))
    probe = "import resource as r; print(*r.getrlimit(r.RLIMIT_DATA), *r.getrlimit(r.RLIMIT_NPROC))"
    shown = output_of(runner, tmp_path, sys.executable, "-c", probe)
    data, data_hard, nproc, _ = (int(value) for value in shown)
    assert (data, data_hard) == (2 * 1024**3, 2 * 1024**3)
    assert nproc == resource.getrlimit(resource.RLIMIT_NPROC)[0]


@pytest.mark.skipif(os.geteuid() != 0, reason="only root runs a child as another user")
def test_as_another_user_the_child_gets_the_process_limit(tmp_path: Path) -> None:
    tmp_path.chmod(0o755)
    runner = ChildRunner(user=ChildUser("nobody", 65534, 65534), limits=Limits(processes=50))
    shown = output_of(runner, tmp_path, "grep", "Max processes", "/proc/self/limits")
    assert shown == ["Max", "processes", "50", "50", "processes"]


@pytest.mark.slow
@pytest.mark.skipif(
    os.geteuid() != 0,
    reason="nproc holds only for a user of the children's own, which only root can give",
)
def test_a_fork_storm_meets_the_process_limit_and_the_run_is_scored(tmp_path: Path) -> None:
    """With this interpreter (a copy of it where the children cannot run it)."""
    repo = tmp_path / "repo"
    repo.mkdir()
    (repo / "test_storm.py").write_text(FORK_STORM)
    result = run_cli(repo, "--report", tmp_path / "out", "--limit", "nproc=64")
    assert result.exit_code == 0, result.output
    report = only_report(tmp_path / "out")
    assert report["containment"] == "full", report["containment_reason"]
    assert report["scores"]["percent_passing_tests"]["value"] == 100, report["tests"]
    assert report["complete"] is True


#: Many trivial tests: the evaluator's memory grows with each test it records.
MANY_TESTS = """
import pytest

@pytest.mark.parametrize("number", range(40))
def test_number(number):
    assert number >= 0
"""


@pytest.mark.slow
def test_tests_past_the_limit_are_left_out_and_the_test_scores_say_so(tmp_path: Path) -> None:
    repo = tmp_path / "repo"
    repo.mkdir()
    (repo / "test_many.py").write_text(MANY_TESTS)
    report_root = tmp_path / "out"
    result = run_cli(repo, "--report", report_root, "--limit", "tests=25", TAMPERING_ONLY)
    assert result.exit_code == 0, result.output
    report = only_report(report_root)
    assert len(report["tests"]["tests"]) == 25
    score = report["scores"]["percent_passing_tests"]
    assert score["value"] == "N"
    assert score["metadata"]["unscored"] == "repository"
    assert "the session ran more than 25 tests" in score["explanation"]
    assert not {s["kind"] for s in report["integrity"]} & {"stream_forged", "exit_mismatch"}


@pytest.mark.slow
def test_a_disk_filler_stops_the_run_with_n_and_the_reason(tmp_path: Path) -> None:
    repo = tmp_path / "repo"
    repo.mkdir()
    (repo / "test_fill.py").write_text(DISK_FILLER)
    report_root = tmp_path / "out"
    args = ("--report", report_root, "--limit", "disk=50M", TAMPERING_ONLY, "--keep")
    result = run_cli(repo, *args)
    assert result.exit_code == 0, result.output
    assert "every score is N: the repository's processes wrote more than --limit disk=50M" in (
        result.output
    )
    report = only_report(report_root)
    for score in report["scores"].values():
        assert score["value"] == "N"
        assert score["metadata"]["unscored"] == "repository"
        assert "--limit disk=50M" in score["metadata"]["error"]
    assert report["run"]["signal"] == "SIGKILL" and not report["run"]["timed_out"]
    (kept,) = [line for line in result.output.splitlines() if "private area is kept" in line]
    area = Path(kept.rsplit(": ", 1)[1])
    try:
        (copy,) = area.glob("repo/repo")
        assert not (copy / "all-written").exists(), "killed before the filler was done"
    finally:
        shutil.rmtree(area, ignore_errors=True)


@pytest.mark.slow
@pytest.mark.skipif(cgroup.unavailable() is not None, reason=f"{cgroup.unavailable()}")
def test_where_cgroup_v2_allows_the_tree_runs_in_a_cgroup_of_its_own(tmp_path: Path) -> None:
    tmp_path.chmod(0o755)
    limits = Limits(processes=50, data=2**30)
    runner = ChildRunner(user=ChildUser("nobody", 65534, 65534), limits=limits)
    probe = "cat /proc/self/cgroup; cat /sys/fs/cgroup$(cut -d: -f3 /proc/self/cgroup)/pids.max"
    shown = output_of(runner, tmp_path, "sh", "-c", probe)
    assert f"/{cgroup.PARENT}/run-" in shown[0] and shown[1] == "50"
    assert not list((cgroup.ROOT / cgroup.PARENT).glob("run-*")), "removed at the end"
