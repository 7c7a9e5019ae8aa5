"""What a pytest process imports (issue 17): the plugin installed costs a plain run next to
nothing, and a scored run leaves pyarrow to the report's helper process.

The cost itself is measured by ``bench/bench_plugin.py`` (docs/benchmarks.md), never here.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pyarrow.parquet as pq
import pytest

#: A conftest that writes, once pytest is done (after the report), the modules it imported.
RECORDING_CONFTEST = """
import json
import sys


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


def imported_by(folder: Path, *args: str) -> list[str]:
    """The modules a pytest run in ``folder`` imported."""
    (folder / "conftest.py").write_text(RECORDING_CONFTEST)
    (folder / "test_some.py").write_text("def test_one():\n    pass\n")
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
    assert [name for name in modules if name.startswith(SCORING_MACHINERY)] == []
    assert "pyarrow" not in modules


@pytest.mark.slow
def test_a_scored_run_writes_its_parquet_files_without_importing_pyarrow(tmp_path: Path) -> None:
    modules = imported_by(tmp_path, "--score", "--score-db-diff")
    assert "pytest_scoring.report.writer" in modules
    assert [name for name in modules if name.split(".")[0] in ("pyarrow", "pandas")] == []
    (folder,) = (tmp_path / "scores").glob("scan_id=*")
    rows = pq.read_table(folder / "percent_passing_tests.parquet").to_pylist()
    assert [row["value"] for row in rows] == ["100"]
