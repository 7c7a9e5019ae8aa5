"""Every report says what produced it: the tool, the options and hashes of its inputs."""

from __future__ import annotations

import hashlib
import json
import shutil
from importlib.metadata import version
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner
from runs import AS_EVALUATOR
from runs import SYSTEM_PYTHON
from runs import pytest_version_of
from runs import system_python_with_pytest

from pytest_scoring.cli.main import main
from pytest_scoring.fs.guard import tree_digest

SELECTOR = {"rows": {"changed": {"has_one": ["role"]}}}
CONFIG = '[[scorers]]\ntype = "percent_passing_tests"\n'
JUNIT = """<?xml version="1.0" encoding="utf-8"?>
<testsuites><testsuite name="pytest" tests="2">
<testcase classname="test_app" name="test_ok" file="test_app.py"/>
<testcase classname="test_app" name="test_broken" file="test_app.py">
<failure message="no"/></testcase>
</testsuite></testsuites>
"""


def sha256(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def scores_json(report_root: Path) -> dict[str, Any]:
    (folder,) = report_root.glob("scan_id=*")
    return scores_json_of(folder)


def scored_session(pytester: pytest.Pytester, config: str) -> dict[str, Any]:
    pytester.makepyfile(test_app="def test_ok():\n    pass\n")
    (pytester.path / "scorers.toml").write_text(config)
    pytester.runpytest(
        "-p",
        "no:cacheprovider",
        "--score-config=scorers.toml",
        f"--score-selector={json.dumps(SELECTOR)}",
        "--score-fail-under=50",
    ).assert_outcomes(passed=1)
    provenance: dict[str, Any] = scores_json(pytester.path / "scores")["provenance"]
    return provenance


def test_a_session_report_names_the_tool_its_options_and_the_hashes_of_its_inputs(
    pytester: pytest.Pytester,
) -> None:
    provenance = scored_session(pytester, CONFIG)
    assert (provenance["tool"], provenance["version"]) == (
        "pytest-scoring",
        version("pytest-scoring"),
    )
    assert (provenance["route"], provenance["pytest"]) == ("plugin", pytest.__version__)
    options = provenance["options"]
    assert (options["selector"], options["fail_under"]) == (SELECTOR, 50.0)
    assert options["config"] == str(pytester.path / "scorers.toml")
    assert provenance["inputs"]["config"] == sha256(pytester.path / "scorers.toml")
    assert set(provenance["inputs"]) == {"config", "selector"}


def test_a_changed_configuration_changes_its_hash_and_nothing_else(
    pytester: pytest.Pytester,
) -> None:
    first = scored_session(pytester, CONFIG)
    for folder in (pytester.path / "scores").glob("scan_id=*"):
        shutil.rmtree(folder)
    second = scored_session(pytester, CONFIG + "# one more line\n")
    assert first["inputs"]["config"] != second["inputs"]["config"]
    assert first["inputs"]["selector"] == second["inputs"]["selector"]
    assert first["options"] == second["options"]


def test_the_reference_checkout_is_hashed_as_a_tree(
    pytester: pytest.Pytester, tmp_path_factory: pytest.TempPathFactory
) -> None:
    reference = tmp_path_factory.mktemp("reference")
    (reference / "test_app.py").write_text("def test_ok():\n    pass\n")
    pytester.makepyfile(test_app="def test_ok():\n    pass\n")
    pytester.runpytest("-p", "no:cacheprovider", f"--score-reference={reference}")
    first = scores_json(pytester.path / "scores")["provenance"]["inputs"]["reference"]
    (reference / "app.py").write_text("VERSION = 2\n")
    pytester.runpytest("-p", "no:cacheprovider", f"--score-reference={reference}")
    digests = {
        scores_json_of(folder)["provenance"]["inputs"]["reference"]
        for folder in (pytester.path / "scores").glob("scan_id=*")
    }
    assert first in digests and len(digests) == 2


def scores_json_of(folder: Path) -> dict[str, Any]:
    content: dict[str, Any] = json.loads((folder / "scores.json").read_text())
    return content


def test_a_junit_report_hashes_the_files_it_was_read_from(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    (tmp_path / "results.xml").write_text(JUNIT)
    (tmp_path / "expected.txt").write_text("test_app.py::test_ok\n")
    result = CliRunner().invoke(
        main,
        ["junit", "results.xml", "--expected-tests", "expected.txt", "--report", "reports"],
    )
    assert result.exit_code == 0, result.output
    provenance = scores_json(tmp_path / "reports")["provenance"]
    assert provenance["route"] == "junit"
    assert provenance["inputs"] == {
        "expected_tests": sha256(tmp_path / "expected.txt"),
        "junit_xml results.xml": sha256(tmp_path / "results.xml"),
    }


def test_run_hashes_the_repository_and_names_the_evaluators_paths(tmp_path: Path) -> None:
    repo, reference = tmp_path / "repo", tmp_path / "reference"
    for folder in (repo, reference):
        folder.mkdir()
        (folder / "test_app.py").write_text("def test_ok():\n    pass\n")
    report_root = tmp_path / "reports"
    arguments = [str(repo), "--reference", str(reference), "--report", str(report_root)]
    result = CliRunner().invoke(main, ["run", *arguments])
    assert result.exit_code == 0, result.output
    first = scores_json(report_root)["provenance"]
    assert first["route"] == "run"
    assert first["options"]["reference"] == str(reference)
    assert set(first["inputs"]) == {"reference", "repository"}
    assert first["inputs"]["reference"] == tree_digest(reference)  # its copy's manifest
    (repo / "test_app.py").write_text("def test_ok():\n    assert True\n")
    assert CliRunner().invoke(main, ["run", *arguments]).exit_code == 0
    digests = {
        scores_json_of(folder)["provenance"]["inputs"]["repository"]
        for folder in report_root.glob("scan_id=*")
    }
    assert first["inputs"]["repository"] in digests and len(digests) == 2


#: A repository that says it runs another pytest than it does: pytest's own attribute, and the
#: versions the probe took when it loaded (its globals, found through the garbage collector).
FORGES_THE_VERSION = """
import gc

import pytest

pytest.__version__ = "7.0.0-FORGED"
for found in gc.get_objects():
    if isinstance(found, dict) and isinstance(found.get("_VERSIONS"), dict):
        found["_VERSIONS"] = {**found["_VERSIONS"], "pytest": pytest.__version__}
"""


@pytest.mark.parametrize(
    "python",
    [
        None,
        pytest.param(
            SYSTEM_PYTHON,
            marks=pytest.mark.skipif(
                not system_python_with_pytest(), reason="needs /usr/bin/python3 with pytest"
            ),
        ),
    ],
    ids=["this-interpreter", "system-python"],
)
def test_under_run_a_forged_pytest_version_is_only_what_the_child_claimed(
    tmp_path: Path, python: Path | None
) -> None:
    repo = tmp_path / "repo"
    repo.mkdir()
    (repo / "test_app.py").write_text("def test_ok():\n    pass\n")
    (repo / "conftest.py").write_text(FORGES_THE_VERSION)
    interpreter = ["--python", str(python)] if python else AS_EVALUATOR
    result = CliRunner().invoke(
        main, ["run", str(repo), "--report", str(tmp_path / "r"), *interpreter]
    )
    assert result.exit_code == 0, result.output
    report = scores_json(tmp_path / "r")
    truth = pytest_version_of(python) if python else pytest.__version__
    assert (report["run"]["pytest"], report["provenance"]["pytest"]) == (truth, pytest.__version__)
    assert report["run"]["child_claimed"]["pytest"] == "7.0.0-FORGED"


def test_in_process_a_forged_pytest_version_is_not_the_provenances(
    pytester: pytest.Pytester,
) -> None:
    pytester.makepyfile(test_app="def test_ok():\n    pass\n")
    pytester.makeconftest(FORGES_THE_VERSION)
    # A process of its own: the conftest changes the pytest module of the process it runs in.
    pytester.runpytest_subprocess("--score", "-p", "no:cacheprovider").assert_outcomes(passed=1)
    provenance = scores_json(pytester.path / "scores")["provenance"]
    assert provenance["pytest"] == pytest.__version__
    (scan,) = (pytester.path / "scores").glob("scan_id=*/_scan.json")
    assert json.loads(scan.read_text())["packages"]["pytest"] == pytest.__version__
