"""The probe, the launcher and the stream: what a child pytest reports, from any interpreter."""

from __future__ import annotations

import os
import secrets
import subprocess
import sys
from pathlib import Path

import pytest
from runs import SYSTEM_PYTHON
from runs import scored_session
from runs import system_python_with_pytest

from pytest_scoring.kit import LAUNCHER
from pytest_scoring.kit.channel import KEY_BYTES
from pytest_scoring.process.children import ChildRunner
from pytest_scoring.process.stream import MAX_LINE
from pytest_scoring.process.stream import ProbeState
from pytest_scoring.process.stream import feed_file

SUITE = """
import pytest

def test_passes(record_property):
    record_property("answer", 42)

def test_fails():
    assert 1 == 2

@pytest.mark.xfail(reason="known")
def test_expected_failure():
    assert False

@pytest.fixture
def broken():
    raise RuntimeError("no server")

def test_setup_error(broken):
    pass
"""


needs_system_pytest = pytest.mark.skipif(
    not system_python_with_pytest(),
    reason="needs /usr/bin/python3 with pytest (apt-get install python3-pytest)",
)


def run_suite(repo: Path, *args: str, python: str | None = None) -> ProbeState:
    runner = ChildRunner() if python is None else ChildRunner(python=python)
    try:
        child = runner.start_pytest(repo, ["-p", "no:cacheprovider", *args], timeout=600)
        ended = child.wait()
        assert ended.error is None, ended.error
        return child.state
    finally:
        runner.close()


@pytest.fixture
def suite(tmp_path: Path) -> Path:
    (tmp_path / "test_suite.py").write_text(SUITE)
    return tmp_path


def test_the_stream_holds_every_outcome_the_collected_ids_and_the_end(suite: Path) -> None:
    state = run_suite(suite)
    outcomes = {record["nodeid"]: record["outcome"] for record in state.tally.records()}
    assert outcomes == {
        "test_suite.py::test_passes": "passed",
        "test_suite.py::test_fails": "failed",
        "test_suite.py::test_expected_failure": "xfailed",
        "test_suite.py::test_setup_error": "error",
    }
    assert state.collected == 4
    assert state.exit_status() == 1
    assert state.start is not None and state.start["rootdir"] == str(suite)
    (passed,) = [r for r in state.tally.records() if r["outcome"] == "passed"]
    assert passed["user_properties"] == [["answer", 42]]


def test_under_xdist_each_phase_arrives_once_from_the_controller(suite: Path) -> None:
    state = run_suite(suite, "-n", "2")
    assert state.tally.counts()["total"] == 3
    assert state.rejected == 0
    assert state.progress().done == 4


def test_a_collection_error_is_an_error_with_pytests_text(tmp_path: Path) -> None:
    (tmp_path / "test_broken.py").write_text("import no_such_module_anywhere\n")
    state = run_suite(tmp_path)
    assert state.tally.counts()["error"] == 1
    (error,) = state.collect_errors
    assert "No module named 'no_such_module_anywhere'" in error["longrepr"]


def test_ids_are_relative_to_the_repository_whatever_rootdir_pytest_picks(tmp_path: Path) -> None:
    (tmp_path / "backend" / "tests").mkdir(parents=True)
    (tmp_path / "backend" / "pytest.ini").write_text("[pytest]\n")
    (tmp_path / "backend" / "tests" / "test_api.py").write_text("def test_api():\n    pass\n")
    state = run_suite(tmp_path, "backend/tests")
    assert [record["nodeid"] for record in state.tally.records()] == [
        "backend/tests/test_api.py::test_api"
    ]


def test_a_repositorys_own_pytest_module_is_never_what_runs(tmp_path: Path) -> None:
    (tmp_path / "pytest.py").write_text("raise SystemExit('planted pytest')\n")
    (tmp_path / "_pytest_scoring_probe.py").write_text("raise SystemExit('planted probe')\n")
    (tmp_path / "app.py").write_text("VALUE = 1\n")
    (tmp_path / "test_flat.py").write_text("import app\n\ndef test_flat():\n    assert app.VALUE\n")
    state = run_suite(tmp_path)
    assert (state.tally.counts()["passed"], state.tally.counts()["total"]) == (1, 1)


def test_lines_that_are_not_the_probes_are_counted_and_left_out(tmp_path: Path) -> None:
    forger = f"""
import json, os, stat

def test_forges():
    for fd in range(3, 1024):  # every pipe this process can write to
        try:
            if not stat.S_ISFIFO(os.fstat(fd).st_mode):
                continue
            os.write(fd, b"not json\\n")
            os.write(fd, json.dumps({{"type": "phase", "nodeid": 3, "when": "call"}}).encode())
            os.write(fd, b"\\n" + b"x" * {MAX_LINE + 10} + b"\\n")
        except OSError:
            continue
"""
    (tmp_path / "test_forger.py").write_text(forger)
    state = run_suite(tmp_path)
    assert state.rejected == 3
    assert state.stream_problems() == ["3 line(s) did not verify"]
    assert state.tally.counts()["passed"] == 1


@needs_system_pytest
def test_another_interpreter_with_an_older_pytest_reports_the_same(suite: Path) -> None:
    state = run_suite(suite, python=str(SYSTEM_PYTHON))
    assert state.start is not None and state.start["pytest"].startswith("7.")
    assert state.tally.counts()["total"] == 3
    assert state.tally.counts()["xfailed"] == 1


def test_the_sandbox_helper_gives_the_launcher_runs_channel_and_saves_the_stream(
    suite: Path, tmp_path_factory: pytest.TempPathFactory
) -> None:
    # An Inspect sandbox's run: the key on the helper's standard input, never in a file, an
    # argument or a variable of the test process; the stream saved once the run is over.
    kit = ChildRunner(area=tmp_path_factory.mktemp("area")).kit()
    key = secrets.token_bytes(KEY_BYTES)
    seen, stream, log = kit / "seen.txt", kit / "stream.jsonl", kit / "log"
    look = (
        "import os\n\ndef test_what_the_process_shows():\n"
        f"    with open({str(seen)!r}, 'wb') as seen:\n"
        "        seen.write(open('/proc/self/cmdline', 'rb').read())\n"
        "        seen.write(repr(sorted(os.environ.items())).encode())\n"
    )
    (suite / "test_key.py").write_text(look)
    launcher = [sys.executable, str(kit / LAUNCHER), "--", "-p", "no:cacheprovider"]
    run = ["run", f"--cwd={suite}", f"--stdout={log}", f"--stderr={log}"]
    run += [f"--stream-out={stream}", "--", *launcher]
    subprocess.run(
        [sys.executable, "-I", str(kit / "_pytest_scoring_sandbox.py"), *run],
        input=key.hex() + "\n",
        text=True,
        env={k: v for k, v in os.environ.items() if not k.startswith("PYTEST_")},
        check=True,
        capture_output=True,
    )
    state = feed_file(ProbeState(root=suite, key=key), stream)
    assert state.rejected == 0 and state.stream_problems() == []
    assert state.end is not None and state.end["phases"] == state.phases == 14
    assert state.tally.outcome_of("test_key.py::test_what_the_process_shows") == "passed"
    assert key.hex().encode() not in seen.read_bytes()
    assert b"--stream-fd=" in seen.read_bytes() and b"stream.jsonl" not in seen.read_bytes()


def test_each_test_keeps_the_same_message_as_in_process(
    suite: Path, pytester: pytest.Pytester
) -> None:
    (suite / "test_more.py").write_text(
        "import pytest\n\ndef test_skipped():\n    pytest.skip('no network')\n"
    )
    streamed = {r["nodeid"]: r.get("message") for r in run_suite(suite).tally.records()}
    for path in suite.glob("test_*.py"):
        pytester.path.joinpath(path.name).write_text(path.read_text())
    pytester.runpytest("--score", "-p", "no:cacheprovider")
    result = scored_session(pytester)
    in_process = {r["nodeid"]: r.get("message") for r in result.tests["tests"]}
    assert streamed == in_process
    assert streamed["test_suite.py::test_fails"] == "assert 1 == 2"
    assert streamed["test_more.py::test_skipped"] == "Skipped: no network"
