"""Honest denominators: every ``"N"`` says what caused it (``metadata.unscored``), and a batch
reports each scorer's metrics over ``all`` samples and over the ``scored`` ones (all but the
evaluator's failures), with the count of each kind; no metric rewards a sample for not being
scored."""

from __future__ import annotations

from pathlib import Path

import pytest
from runs import AS_EVALUATOR
from runs import only_report
from runs import run_cli

#: A scorer of the evaluator's (``--plugin``) that fails on a repository holding ``CRASH``:
#: the evaluator's failure, ``unscored: "infrastructure"``.
PLUGIN = """
import pytest
from pytest_scoring import make_score, mean

class Marker:
    type = "marker"
    name = "marker"
    metrics = (mean,)

    def score(self, context):
        if (context.root / "CRASH").exists():
            raise RuntimeError("the evaluator's scorer failed")
        return make_score(1, self.type, explanation="scored")

@pytest.hookimpl
def pytest_scoring_scorers(config):
    return {"marker": Marker}
"""
CONFIG = "scorers:\n  - type: percent_passing_tests\n  - type: marker\n"
#: The conftest that took SWE-bench Verified to 500/500: proven tampering.
BENCHJACK = """
import pytest

@pytest.hookimpl(wrapper=True)
def pytest_runtest_makereport(item, call):
    report = yield
    report.outcome = "passed"
    return report
"""
TESTS = "def test_ok():\n    pass\n\ndef test_bad():\n    assert 0\n"


def _repo(root: Path, name: str, files: dict[str, str]) -> Path:
    folder = root / name
    folder.mkdir(parents=True)
    for relpath, text in files.items():
        (folder / relpath).write_text(text)
    return folder


@pytest.mark.slow
def test_a_batch_reports_all_and_scored_with_the_count_of_each_kind_of_n(tmp_path: Path) -> None:
    repos = tmp_path / "repos"
    honest = _repo(repos, "honest", {"test_app.py": "def test_ok():\n    pass\n"})
    tampered = _repo(repos, "tampered", {"test_app.py": TESTS, "conftest.py": BENCHJACK})
    crashing = _repo(repos, "crashing", {"test_app.py": "def test_ok():\n    pass\n", "CRASH": ""})
    plugin, config = tmp_path / "marker_plugin.py", tmp_path / "scorers.yaml"
    plugin.write_text(PLUGIN)
    config.write_text(CONFIG)
    args = ["--config", config, "--plugin", plugin, "--report", tmp_path / "out", *AS_EVALUATOR]
    result = run_cli(honest, tampered, crashing, *args)
    assert result.exit_code == 0, result.output
    report = only_report(tmp_path / "out")
    by_name = {Path(sample["repository"]).name: sample for sample in report["samples"]}
    passing = by_name["tampered"]["scores"]["percent_passing_tests"]
    assert passing["value"] == "N" and passing["metadata"]["unscored"] == "tampering"
    marker = by_name["crashing"]["scores"]["marker"]
    assert marker["value"] == "N" and marker["metadata"]["unscored"] == "infrastructure"

    tests = report["denominators"]["percent_passing_tests"]
    assert tests["unscored"] == {"tampering": 1, "repository": 0, "infrastructure": 0}
    # Tampering counts as a failed sample in both: 100, 0, 100.
    assert tests["all"]["samples"] == tests["scored"]["samples"] == 3
    assert tests["all"]["mean"] == tests["scored"]["mean"] == pytest.approx(200 / 3)

    marked = report["denominators"]["marker"]
    assert marked["unscored"] == {"tampering": 0, "repository": 0, "infrastructure": 1}
    assert marked["all"] == {"samples": 3, "mean": pytest.approx(2 / 3)}
    assert marked["scored"]["samples"] == 2
    assert marked["scored"]["mean"] == 1.0
    assert report["metrics"]["marker"]["mean"] == marked["all"]["mean"]


@pytest.mark.slow
def test_a_run_past_its_timeout_is_the_repositorys_n_in_a_batch(tmp_path: Path) -> None:
    repos = tmp_path / "repos"
    hanging = _repo(
        repos, "hanging", {"test_app.py": "import time\n\ndef test_hang():\n    time.sleep(600)\n"}
    )
    honest = _repo(repos, "honest", {"test_app.py": "def test_ok():\n    pass\n"})
    args = ["--report", tmp_path / "out", "--timeout", "20", *AS_EVALUATOR]
    result = run_cli(hanging, honest, *args)
    report = only_report(tmp_path / "out")
    by_name = {Path(sample["repository"]).name: sample for sample in report["samples"]}
    for score in by_name["hanging"]["scores"].values():
        assert score["value"] == "N", result.output
        assert score["metadata"]["unscored"] == "repository"
    counts = report["denominators"]["percent_passing_tests"]
    assert counts["unscored"]["repository"] == 1
    assert counts["scored"]["samples"] == 2  # the repository's N still counts, as 0
