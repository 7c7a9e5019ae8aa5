"""What a pytest process imports (issue 17): the plugin installed costs a plain run next to
nothing, a scored run leaves pyarrow to the report's helper process and loads only the parts
it uses, while what decides a score is loaded before any test runs.

The cost itself is measured by ``bench/bench_plugin.py`` (docs/benchmarks.md), never here.
"""

from __future__ import annotations

import gc
import io
import json
import os
import sqlite3
import subprocess
import sys
from pathlib import Path

import pyarrow.parquet as pq
import pytest

from pytest_scoring.report.parquet import json_lines
from pytest_scoring.report.parquet import write_parquet
from pytest_scoring.report.parquet_helper import HELPER_NICENESS

#: A conftest that writes the modules imported when the session starts (before any test
#: runs) and once pytest is done (after the report).
RECORDING_CONFTEST = """
import json
import sys


def pytest_sessionstart(session):
    with open("started.json", "w") as file:
        json.dump(sorted(sys.modules), file)


def pytest_unconfigure(config):
    with open("modules.json", "w") as file:
        json.dump(sorted(sys.modules), file)
"""
#: Our modules that only a scored session needs.
SCORING_MACHINERY = (
    "pytest_scoring.evaluation",
    "pytest_scoring.report",
    "pytest_scoring.db",
    "pytest_scoring.plugin.session",
    "pytest_scoring.scorers.tests",
)
#: The evaluator's modules every run with the plugin installed reads: its options and hooks.
EVERY_RUN = (
    "pytest_scoring.evaluation",
    "pytest_scoring.evaluation.flags",
    "pytest_scoring.evaluation.hookspecs",
    "pytest_scoring.evaluation.settings",
)
#: Our modules that a scored session without a reference, a selector, a batch or a summary
#: never uses: starting the repository's processes, the selector language, reading reports.
UNUSED_BY_A_PLAIN_SCORED_RUN = (
    "pytest_scoring.process.children",
    "pytest_scoring.process.supervisor",
    "pytest_scoring.kit.supervise",
    "pytest_scoring.process.stream",
    "pytest_scoring.kit.launch",
    "pytest_scoring.kit.probe",
    "pytest_scoring.selector",
    "pytest_scoring.report.samples",
    "pytest_scoring.report.reader",
    "pytest_scoring.report.markdown",
    "pytest_scoring.report.inputs",
    "pytest_scoring.db.diff_store",
    "pytest_scoring.fs.guard",
)
#: Our modules that decide the scores of ``--score --score-db-diff``: loaded before any test
#: of the repository runs, so that none can be replaced by a module the repository planted.
DECIDING = (
    "pytest_scoring.core.outcomes",
    "pytest_scoring.scorers.tests",
    "pytest_scoring.scorers.db_change",
    "pytest_scoring.db.snapshot",
    "pytest_scoring.db.diff",
    "pytest_scoring.evaluation.scoring",
)
#: A test that adds a user to ``app.db``.
ADDS_A_USER = """
import sqlite3


def test_sign_up():
    with sqlite3.connect("app.db") as db:
        db.execute("INSERT INTO users (name) VALUES ('eve')")
    db.close()
"""


def imported_by(folder: Path, *args: str, test: str = "def test_one():\n    pass\n") -> list[str]:
    """The modules a pytest run in ``folder`` imported (``started.json``: those imported
    when its session started)."""
    (folder / "conftest.py").write_text(RECORDING_CONFTEST)
    (folder / "test_some.py").write_text(test)
    result = subprocess.run(
        [sys.executable, "-m", "pytest", "-p", "no:cacheprovider", *args],
        cwd=folder,
        env={**os.environ, "PYTHONDONTWRITEBYTECODE": "1"},
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert result.returncode == 0, result.stdout + result.stderr
    modules: list[str] = json.loads((folder / "modules.json").read_text())
    return modules


@pytest.mark.slow
def test_a_run_without_scoring_imports_no_scoring_machinery(tmp_path: Path) -> None:
    modules = imported_by(tmp_path)
    assert "pytest_scoring.plugin" in modules  # the plugin is installed and loaded
    machinery = [name for name in modules if name.startswith(SCORING_MACHINERY)]
    assert [name for name in machinery if name not in EVERY_RUN] == []
    assert "pyarrow" not in modules


@pytest.mark.slow
def test_a_scored_run_writes_its_parquet_files_without_importing_pyarrow(tmp_path: Path) -> None:
    modules = imported_by(tmp_path, "--score", "--score-db-diff")
    assert "pytest_scoring.report.writer" in modules
    assert [name for name in modules if name.split(".")[0] in ("pyarrow", "pandas")] == []
    (folder,) = (tmp_path / "scores").glob("scan_id=*")
    rows = pq.read_table(folder / "percent_passing_tests.parquet").to_pylist()
    assert [row["value"] for row in rows] == ["100"]


def ours(modules: list[str], names: tuple[str, ...]) -> list[str]:
    return [name for name in modules if name.startswith(names)]


def started_with(folder: Path) -> list[str]:
    """The modules imported when the last run's session started."""
    modules: list[str] = json.loads((folder / "started.json").read_text())
    return modules


def scores(folder: Path) -> dict[str, object]:
    (report,) = (folder / "scores").glob("scan_id=*")
    return {
        name: score["value"]
        for name, score in json.loads((report / "scores.json").read_text())["scores"].items()
    }


def make_database(folder: Path) -> None:
    with sqlite3.connect(folder / "app.db") as db:
        db.execute("CREATE TABLE users (id INTEGER PRIMARY KEY, name TEXT)")
    db.close()


@pytest.mark.slow
def test_a_scored_run_loads_only_the_parts_it_uses_and_those_before_any_test(
    tmp_path: Path,
) -> None:
    make_database(tmp_path)
    modules = imported_by(tmp_path, "--score", "--score-db-diff", test=ADDS_A_USER)
    assert ours(modules, UNUSED_BY_A_PLAIN_SCORED_RUN) == []
    assert set(DECIDING) <= set(started_with(tmp_path))
    assert scores(tmp_path)["db_change"] == "C"


@pytest.mark.slow
def test_a_run_with_a_selector_loads_the_selector_language_before_any_test(
    tmp_path: Path,
) -> None:
    make_database(tmp_path)
    selector = json.dumps({"rows": {"added": {"has_one": {"name": "eve"}}}})
    imported_by(tmp_path, "--score", f"--score-selector={selector}", test=ADDS_A_USER)
    assert "pytest_scoring.selector.language" in started_with(tmp_path)
    assert scores(tmp_path)["db_change"] == "C"


#: Starts a report helper, as a session does, and prints its priority and the session's once
#: the helper has lowered its own (its first step), or after two minutes.
HELPER_PRIORITY_SCRIPT = """
import os, time
from pathlib import Path
from pytest_scoring.report.parquet_helper import HELPER_NICENESS, ParquetHelper

def children():
    found = set()
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            # "pid (command) state ppid ...": the command may hold spaces
            if int(stat.read_text().rsplit(")", 1)[1].split()[1]) == os.getpid():
                found.add(int(stat.parent.name))
        except OSError:
            pass
    return found

before = children()
helper = ParquetHelper.start()
(pid,) = children() - before
session = os.getpriority(os.PRIO_PROCESS, 0)
deadline = time.monotonic() + 120
while os.getpriority(os.PRIO_PROCESS, pid) == session and time.monotonic() < deadline:
    time.sleep(0.05)
print(session, os.getpriority(os.PRIO_PROCESS, pid))
helper.close()
"""


@pytest.mark.skipif(not Path("/proc/self/stat").exists(), reason="reads Linux's /proc")
def test_the_report_helper_takes_only_spare_cpu() -> None:
    """The helper imports pyarrow at a lower priority than the session: on a machine whose
    cores are all busy, it does not take the tests' CPU time."""
    done = subprocess.run(
        [sys.executable, "-c", HELPER_PRIORITY_SCRIPT],
        capture_output=True,
        text=True,
        timeout=300,
        check=True,
    )
    session, helper = map(int, done.stdout.split())
    assert helper == min(19, session + HELPER_NICENESS)


@pytest.mark.parametrize("enabled", [True, False])
def test_scoring_leaves_garbage_collection_as_the_suite_had_it(
    pytester: pytest.Pytester, enabled: bool
) -> None:
    """Collection pauses while the report is written, then is as the suite left it: on for
    pytest's own ``pytest.main`` callers, still off for a suite that turned it off."""
    pytester.makepyfile("def test_one():\n    pass\n")
    was_enabled = gc.isenabled()
    (gc.enable if enabled else gc.disable)()
    try:
        pytester.runpytest_inprocess("--score", "-p", "no:cacheprovider").assert_outcomes(passed=1)
        assert gc.isenabled() is enabled
    finally:
        (gc.enable if was_enabled else gc.disable)()


#: Writes one table as the helper does, then prints whether numpy got imported and the
#: file's bytes in hex.
HELPER_WRITE_SCRIPT = """
import io, sys
from pytest_scoring.report.parquet_helper import without_numpy
from pytest_scoring.report.parquet import json_lines, write_parquet

without_numpy()
written = io.BytesIO()
write_parquet(written, json_lines(ROWS))
print(sys.modules.get("numpy") is not None, written.getvalue().hex())
sys.stdout.flush()
"""


def test_the_report_helper_writes_the_same_files_without_importing_numpy() -> None:
    """pyarrow imports numpy when it is installed, which was most of the helper's CPU time on
    the core beside the tests'; the helper keeps it out, and its Parquet files are the same
    bytes as a session's own."""
    rows = [{"transcript_id": "t", "scanner_name": "tests", "value": "1", "scan_error": None}]
    script = f"ROWS = {rows!r}\n{HELPER_WRITE_SCRIPT}"
    done = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, timeout=300, check=True
    )
    numpy_imported, helper_bytes = done.stdout.split()
    assert numpy_imported == "False"
    expected = io.BytesIO()
    write_parquet(expected, json_lines(rows))
    assert bytes.fromhex(helper_bytes) == expected.getvalue()
    assert pq.read_table(io.BytesIO(expected.getvalue())).num_rows == 1
