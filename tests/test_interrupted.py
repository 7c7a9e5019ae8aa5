"""Sessions that end badly still leave a readable report, flagged incomplete when they should."""

from __future__ import annotations

import json
import os
import sqlite3
import subprocess
import sys
from pathlib import Path
from typing import Any

import pandas  # noqa: F401  # imported before in-process runs (see test_report.py)
import pytest
from runs import make_fifo
from runs import wait_for_ready

from pytest_scoring import results_df

INTERRUPTED = """
    def test_before():
        pass

    def test_ctrl_c():
        raise KeyboardInterrupt

    def test_never_runs():
        pass
"""

CRASHING_SCORER_CONFTEST = """
    import pytest

    class Crashing:
        name = type = "crashing"
        metrics = ()

        def score(self, context):
            raise ZeroDivisionError("scorer bug")

    @pytest.hookimpl
    def pytest_sessionstart(session):
        session.config.pluginmanager.get_plugin("scoring-session").scorers.append(Crashing())
"""


def only_report(pytester: pytest.Pytester) -> Path:
    (folder,) = (pytester.path / "scores").glob("scan_id=*")
    return folder


def completeness(folder: Path) -> tuple[Any, Any]:
    """The complete flag as scores.json and _summary.json say it."""
    scores = json.loads((folder / "scores.json").read_text())
    summary = json.loads((folder / "_summary.json").read_text())
    return scores["complete"], summary["complete"]


def test_a_session_stopped_by_ctrl_c_leaves_an_incomplete_readable_report(
    pytester: pytest.Pytester,
) -> None:
    pytester.makepyfile(INTERRUPTED)
    # no_reraise_ctrlc: let the in-process run end as a real Ctrl-C does, with exit status 2.
    result = pytester.runpytest("--score", no_reraise_ctrlc=True)
    assert result.ret == pytest.ExitCode.INTERRUPTED
    folder = only_report(pytester)
    assert completeness(folder) == (False, False)
    read_back = results_df(folder)
    assert read_back.complete is False
    # An incomplete session never passes: the two tests Ctrl-C kept from running count.
    assert read_back.scanners["all_tests_pass"]["value"].tolist() == ["I"]
    counts = json.loads((folder / "scores.json").read_text())["tests"]["counts"]
    assert (counts["passed"], counts["failed"], counts["not_run"]) == (1, 2, 2)


def test_a_crashing_scorer_leaves_the_other_scores_and_an_incomplete_report(
    pytester: pytest.Pytester,
) -> None:
    pytester.makeconftest(CRASHING_SCORER_CONFTEST)
    pytester.makepyfile("def test_ok(): pass")
    result = pytester.runpytest("--score")
    result.assert_outcomes(passed=1)
    assert result.ret == pytest.ExitCode.OK
    folder = only_report(pytester)
    assert completeness(folder) == (False, False)
    read_back = results_df(folder)
    assert read_back.scanners["crashing"]["scan_error"].tolist() == [
        "ZeroDivisionError: scorer bug"
    ]
    assert read_back.scanners["percent_passing_tests"]["value"].tolist() == [100]
    assert [error["scanner"] for error in read_back.errors] == ["crashing"]


@pytest.mark.parametrize(
    ("source", "args"),
    [
        ("def test_a(): assert False\ndef test_b(): pass", ["-x"]),
        ("import no_such_module_here\ndef test_a(): pass", []),
    ],
    ids=["stopped-by-x", "collection-error"],
)
def test_a_session_pytest_stops_early_is_scored_as_it_ended_and_complete(
    pytester: pytest.Pytester, source: str, args: list[str]
) -> None:
    pytester.makepyfile(source)
    pytester.runpytest("--score", *args)
    assert completeness(only_report(pytester)) == (True, True)


#: A test that waits for the test's word when asked to (``HOLD``: the FIFOs' folder): it says
#: it runs, then blocks until released.
WAITS_WHEN_ASKED = """
    import os
    import sqlite3

    def test_adds_a_user():
        with sqlite3.connect("app.db") as db:
            db.execute("INSERT INTO users (name) VALUES ('eve')")
        db.close()
        hold = os.environ.get("HOLD")
        if hold:
            with open(os.path.join(hold, "ready"), "w") as ready:
                ready.write("running")
            with open(os.path.join(hold, "go")) as go:
                go.read()
"""


def start_session(folder: Path, hold: Path | None) -> subprocess.Popen[str]:
    """``pytest --score --score-db-diff`` in ``folder``, as a process of its own."""
    environ = {**os.environ, **({"HOLD": str(hold)} if hold else {})}
    return subprocess.Popen(
        [sys.executable, "-m", "pytest", "--score", "--score-db-diff", "-p", "no:cacheprovider"],
        cwd=folder,
        env=environ,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )


def holding_folder(tmp_path: Path, name: str) -> Path:
    folder = tmp_path / name
    folder.mkdir()
    make_fifo(folder / "ready")
    make_fifo(folder / "go")
    return folder


@pytest.mark.slow
def test_what_a_killed_session_left_is_removed_by_the_next_never_a_live_ones(
    pytester: pytest.Pytester, tmp_path: Path
) -> None:
    pytester.makepyfile(test_app=WAITS_WHEN_ASKED)
    with sqlite3.connect(pytester.path / "app.db") as db:
        db.execute("CREATE TABLE users (id INTEGER PRIMARY KEY, name TEXT)")
    db.close()
    reports = pytester.path / "scores"
    # Killed mid-test: its snapshot copies stay behind.
    killed_hold = holding_folder(tmp_path, "killed")
    killed = start_session(pytester.path, killed_hold)
    wait_for_ready(killed_hold / "ready")
    killed.kill()
    killed.communicate()
    (stale_snapshots,) = reports.glob(".db-snapshots-*")
    # Killed while writing its report (made here as write_report names it).
    stale_report = reports / ".scan_id=killedwhilewritingitsrep.tmp"
    stale_report.mkdir()
    (stale_report / "scores.json").write_text("{")
    # An unfinished batch: its next run continues it.
    batch = reports / ".scan_id=unfinishedbatchxxxxxxxx.tmp"
    batch.mkdir(mode=0o700)
    (batch / "_scan.json").write_text(json.dumps({"metadata": {"batch_key": "k"}}))
    # Still running while the next session writes its report.
    live_hold = holding_folder(tmp_path, "live")
    live = start_session(pytester.path, live_hold)
    wait_for_ready(live_hold / "ready")
    live_snapshots = set(reports.glob(".db-snapshots-*")) - {stale_snapshots}
    next_session = start_session(pytester.path, None)
    output, _ = next_session.communicate()
    assert next_session.returncode == 0, output
    lines = [line for line in output.splitlines() if "killed runs" in line]
    assert lines == [
        f"removed what killed runs left in {reports}: {stale_report.name}, {stale_snapshots.name}"
    ]
    assert set(reports.glob(".db-snapshots-*")) == live_snapshots
    assert batch.is_dir() and not stale_report.exists()
    with (live_hold / "go").open("w") as go:
        go.write("go")
    output, _ = live.communicate()
    assert live.returncode == 0, output
    for report in reports.glob("scan_id=*"):
        assert (
            json.loads((report / "scores.json").read_text())["scores"]["db_change"]["value"] == "C"
        )
    assert list(reports.glob(".db-snapshots-*")) == []
