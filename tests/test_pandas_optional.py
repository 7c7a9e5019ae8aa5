"""pandas is optional (``pytest-scoring[pandas]``): installing the plugin changes no suite's
outcomes, and only ``results_df`` needs pandas, saying so when it is missing."""

from __future__ import annotations

import importlib.metadata
import subprocess
import sys
from pathlib import Path

import pytest

SUITE = """
import pytest

def test_plain():
    assert True

def test_needs_pandas():
    pd = pytest.importorskip("pandas")
    assert pd.DataFrame({"a": [1]}).shape == (1, 1)
"""


def test_installing_the_plugin_does_not_pull_pandas() -> None:
    requirements = importlib.metadata.requires("pytest-scoring") or []
    pandas = [line for line in requirements if line.startswith("pandas")]
    assert pandas and all('extra == "pandas"' in line for line in pandas)


@pytest.fixture
def without_pandas(tmp_path: Path) -> dict[str, str]:
    """An environment where ``import pandas`` fails, as where pandas is not installed."""
    blocker = tmp_path / "blocker" / "pandas"
    blocker.mkdir(parents=True)
    (blocker / "__init__.py").write_text(
        "raise ModuleNotFoundError('No module named pandas', name='pandas')\n"
    )
    return {"PYTHONPATH": str(blocker.parent), "PYTHONDONTWRITEBYTECODE": "1"}


def run(cwd: Path, env: dict[str, str], *args: str) -> subprocess.CompletedProcess[str]:
    import os

    return subprocess.run(
        [sys.executable, *args],
        cwd=cwd,
        env={**os.environ, **env},
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )


@pytest.mark.slow
@pytest.mark.parametrize(
    "plugin", [["-p", "no:scoring"], [], ["--score"]], ids=["not loaded", "installed", "scoring"]
)
def test_a_pandas_only_test_stays_skipped_with_the_plugin(
    tmp_path: Path, without_pandas: dict[str, str], plugin: list[str]
) -> None:
    suite = tmp_path / "suite"
    suite.mkdir()
    (suite / "test_suite.py").write_text(SUITE)
    result = run(suite, without_pandas, "-m", "pytest", "-p", "no:cacheprovider", *plugin)
    assert result.returncode == 0, result.stdout + result.stderr
    assert "1 passed, 1 skipped" in result.stdout
    assert ("percent_passing_tests: 100" in result.stdout) == ("--score" in plugin)


@pytest.mark.slow
def test_results_df_says_pandas_is_missing(tmp_path: Path, without_pandas: dict[str, str]) -> None:
    code = "import pytest_scoring; pytest_scoring.results_df('.')"
    result = run(tmp_path, without_pandas, "-c", code)
    assert result.returncode == 1
    assert result.stderr.strip().splitlines()[-1] == (
        "ModuleNotFoundError: results_df needs pandas, which is not installed: "
        "pip install 'pytest-scoring[pandas]'"
    )
