"""``run``'s children get one pinned environment, whatever the evaluator's own holds, unless
the evaluator sets a variable itself (``--env``, the configuration's ``env``)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from runs import AS_EVALUATOR
from runs import GENEROUS
from runs import only_report
from runs import run_cli

#: The repository's test asserts what it was given; ``{hash_abc}`` is ``hash("abc")`` under
#: ``PYTHONHASHSEED=0``, as the test of this file measures it.
PINNED_TEST = """
import locale, os, sys, time
from pathlib import Path

def test_pinned():
    assert os.environ["TZ"] == "UTC" and time.strftime("%Z") == "UTC"
    assert os.environ["LC_ALL"] == os.environ["LANG"] == "C.UTF-8"
    assert locale.setlocale(locale.LC_ALL, "") == "C.UTF-8"
    assert os.environ["PYTHONHASHSEED"] == "0" and hash("abc") == {hash_abc}
    assert sys.flags.dont_write_bytecode
    assert os.umask(0o022) == 0o022

def test_layout():
    home, cwd = Path(os.environ["HOME"]), Path.cwd()
    assert home.name == "home" and cwd.parent.name == "repo" and cwd.name == "pinned"
    assert home.parent == cwd.parent.parent

def test_no_bytecode_written():
    assert not list(Path(__file__).parent.rglob("*.pyc"))
"""

OVERRIDDEN_TEST = """
import os, time

def test_tokyo():
    assert os.environ["TZ"] == "Asia/Tokyo" and time.strftime("%Z") == "JST"

def test_seed_and_locale():
    assert os.environ["PYTHONHASHSEED"] == "7"
    assert os.environ["LC_ALL"] == "C"
    assert os.environ["FROM_CONFIG"] == "yes"
"""


def _hash_abc_with_seed_0() -> int:
    environment = {**os.environ, "PYTHONHASHSEED": "0"}
    command = [sys.executable, "-c", "print(hash('abc'))"]
    return int(subprocess.run(command, env=environment, capture_output=True, check=True).stdout)


def _repo(tmp_path: Path, name: str, text: str) -> Path:
    repo = tmp_path / name
    repo.mkdir()
    (repo / "test_env.py").write_text(text)
    return repo


@pytest.mark.slow
def test_the_children_get_the_pinned_environment_whatever_the_evaluators(tmp_path: Path) -> None:
    repo = _repo(tmp_path, "pinned", PINNED_TEST.format(hash_abc=_hash_abc_with_seed_0()))
    evaluator = {
        **os.environ,
        "TZ": "America/New_York",
        "LC_ALL": "POSIX",
        "LANG": "POSIX",
        "PYTHONHASHSEED": "random",
    }
    argv = [sys.executable, "-m", "pytest_scoring", "run", str(repo)]
    argv += ["--report", str(tmp_path / "out"), *AS_EVALUATOR]
    ended = subprocess.run(
        argv, env=evaluator, capture_output=True, text=True, timeout=GENEROUS, check=False
    )
    assert ended.returncode == 0, ended.stdout + ended.stderr
    report = only_report(tmp_path / "out")
    assert report["tests"]["counts"]["passed"] == 3, json.dumps(report["tests"], indent=1)
    assert report["run"]["pinned"]["TZ"] == "UTC"
    assert report["run"]["umask"] == "0022"
    assert report["run"]["env"] == []


@pytest.mark.slow
def test_the_evaluator_overrides_the_pinned_variables_with_env_and_its_configuration(
    tmp_path: Path,
) -> None:
    repo = _repo(tmp_path, "overridden", OVERRIDDEN_TEST)
    config = tmp_path / "scorers.yaml"
    config.write_text(
        "scorers:\n  - type: percent_passing_tests\n"
        "env:\n  LC_ALL: C\n  FROM_CONFIG: 'yes'\n  TZ: Europe/Paris\n"
    )
    args = ["--env", "TZ=Asia/Tokyo", "--env", "PYTHONHASHSEED=7", "--config", config]
    result = run_cli(repo, "--report", tmp_path / "out", *args, *AS_EVALUATOR)
    assert result.exit_code == 0, result.output
    report = only_report(tmp_path / "out")
    assert report["scores"]["percent_passing_tests"]["value"] == 100, result.output
    assert report["run"]["pinned"]["TZ"] == "Asia/Tokyo"
    assert report["run"]["env"] == ["FROM_CONFIG", "LC_ALL", "PYTHONHASHSEED", "TZ"]


@pytest.mark.parametrize("value", ["TZ", "=UTC", "1TZ=UTC", "T Z=UTC"])
def test_an_env_that_is_not_name_equals_value_is_bad_input(tmp_path: Path, value: str) -> None:
    repo = _repo(tmp_path, "repo", "def test_one():\n    pass\n")
    result = run_cli(repo, "--report", tmp_path / "out", "--env", value)
    assert result.exit_code == 2
    assert f"--env: {value!r} is not NAME=VALUE" in result.output
    assert "Traceback" not in result.output
    assert not (tmp_path / "out").exists()


def test_a_configuration_env_that_is_not_a_table_of_text_is_bad_input(tmp_path: Path) -> None:
    repo = _repo(tmp_path, "repo", "def test_one():\n    pass\n")
    config = tmp_path / "scorers.toml"
    config.write_text('env = {TZ = 1}\n[[scorers]]\ntype = "percent_passing_tests"\n')
    result = run_cli(repo, "--report", tmp_path / "out", "--config", config)
    assert result.exit_code == 2
    assert "scorers.toml: env: expected a table of NAME" in result.output
    assert "Traceback" not in result.output
