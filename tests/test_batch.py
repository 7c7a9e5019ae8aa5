"""``pytest-scoring run REPO REPO …``: many repositories in one scan, scored as ``run`` scores one.

Each test builds small repositories of its own and scores them with the real command: workers,
supervisors and pytest children, the report read back as files, by ``results_df`` and by
Inspect Scout's own reader.
"""

from __future__ import annotations

import contextlib
import json
import signal
import statistics
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner
from processes import wait_until
from runs import TAMPERING_ONLY
from runs import run_cli
from runs import scores_json
from runs import shown_report
from runs import start_run

from pytest_scoring import results_df
from pytest_scoring.cli.main import main
from pytest_scoring.report.inputs import transcript_id
from pytest_scoring.report.provenance import path_digest

# inspect_scout inside a test adds a metadata finder that hides our entry point from later runs.
with contextlib.suppress(ImportError):
    import inspect_scout  # noqa: F401

ALL_PASS = """
def test_one():
    pass

def test_two():
    pass
"""
HALF_PASS = """
def test_ok():
    pass

def test_broken():
    assert False
"""
WAITS_FOR = """
import time
from pathlib import Path

def test_waits():
    Path({ready!r}).write_text("")
    while not Path({go!r}).exists():
        time.sleep(0.05)
"""


def make_repo(parent: Path, name: str, tests: str, files: dict[str, str] | None = None) -> Path:
    folder = parent / name
    folder.mkdir(parents=True)
    (folder / "test_app.py").write_text(tests)
    for file_name, content in (files or {}).items():
        (folder / file_name).write_text(content)
    return folder


def batch(*args: str | Path) -> dict[str, Any]:
    """Run a batch in process; its ``scores.json`` and output (partial containment as root
    accepted: these tests are about batches)."""
    result = run_cli(TAMPERING_ONLY, *args)
    assert "Traceback" not in result.output, result.output
    report = shown_report(result.output)
    return {
        "exit": result.exit_code,
        "output": result.output,
        "report": report,
        **scores_json(report),
    }


def by_repository(report: dict[str, Any]) -> dict[str, dict[str, Any]]:
    return {Path(sample["repository"]).name: sample for sample in report["samples"]}


def values(sample: dict[str, Any]) -> dict[str, Any]:
    return {name: score["value"] for name, score in sample["scores"].items()}


@pytest.mark.slow
def test_several_repositories_are_one_scan_with_a_sample_each(tmp_path: Path) -> None:
    repos = [
        make_repo(tmp_path, "first", ALL_PASS),
        make_repo(tmp_path, "second", HALF_PASS),
        make_repo(tmp_path, "third", ALL_PASS),
    ]
    report = batch(*repos, "--jobs", "2", "--report", tmp_path / "out")
    assert report["exit"] == 0, report["output"]
    assert report["format_version"] == 2
    assert "scores" not in report and "tests" not in report
    assert [sample["repository"] for sample in report["samples"]] == [str(r) for r in repos]
    for repo, sample in zip(repos, report["samples"], strict=True):
        assert sample["id"] == transcript_id(repo, path_digest(repo))
        assert sample["complete"] is True
        assert sample["provenance"]["inputs"]["repository"] == path_digest(repo)
        assert (report["report"] / "samples" / sample["id"] / "sample.json").is_file()
    percents = [values(sample)["percent_passing_tests"] for sample in report["samples"]]
    assert percents == [100, 50, 100]
    metrics = report["metrics"]["percent_passing_tests"]
    assert metrics["mean"] == pytest.approx(statistics.mean(percents))
    assert metrics["stderr"] == pytest.approx(statistics.stdev(percents) / 3**0.5)
    assert metrics["accuracy_at_100"] == pytest.approx(200 / 3)
    assert report["metrics"]["all_tests_pass"]["mean"] == pytest.approx(2 / 3)
    assert "[3/3]" in report["output"] and "repositories: 3" in report["output"]


@pytest.mark.slow
def test_readers_see_one_transcript_per_repository(tmp_path: Path) -> None:
    repos = [make_repo(tmp_path, "first", ALL_PASS), make_repo(tmp_path, "second", HALF_PASS)]
    report = batch(*repos, "--report", tmp_path / "out")
    ids = [sample["id"] for sample in report["samples"]]
    ours = results_df(report["report"])
    frame = ours.scanners["percent_passing_tests"]
    assert frame["transcript_id"].tolist() == ids
    assert frame["value"].tolist() == [100, 50]
    assert ours.summary["scanners"]["percent_passing_tests"]["scans"] == 2
    scout = pytest.importorskip("inspect_scout")
    results = scout.scan_results_df(str(report["report"]))
    assert results.complete is True
    assert sorted(results.scanners["all_tests_pass"]["transcript_id"]) == sorted(ids)
    packed = scout.scan_results_df(str(report["report"]), rows="transcripts")
    assert len(packed.scanners["percent_failing_tests"]) == 2
    listed = CliRunner().invoke(main, ["list", str(tmp_path / "out")])
    assert "2 repositories" in listed.output
    assert "percent_passing_tests: mean=75" in listed.output


@pytest.mark.slow
def test_a_second_run_keeps_what_is_scored_and_rescores_what_changed(tmp_path: Path) -> None:
    first, second = make_repo(tmp_path, "first", ALL_PASS), make_repo(tmp_path, "second", HALF_PASS)
    out = tmp_path / "out"
    earlier = batch(first, second, "--report", out)
    again = batch(first, second, "--report", out)
    assert again["scan_id"] != earlier["scan_id"]
    assert again["batch"]["kept"] == 2 and again["batch"]["scored"] == 0
    assert {sample["kept_from"] for sample in again["samples"]} == {earlier["scan_id"]}
    assert [s["id"] for s in again["samples"]] == [s["id"] for s in earlier["samples"]]
    (second / "test_app.py").write_text(ALL_PASS)
    changed = batch(first, second, "--report", out)
    assert changed["batch"]["kept"] == 1
    kept, rescored = changed["samples"]
    assert kept["kept_from"] == again["scan_id"] and "kept_from" not in rescored
    assert rescored["id"] != earlier["samples"][1]["id"]
    assert values(rescored)["percent_passing_tests"] == 100
    other_options = batch(first, second, "--report", out, "--strict")
    assert other_options["batch"]["kept"] == 0


@pytest.mark.slow
def test_a_failing_and_a_hanging_repository_score_n_and_the_others_go_on(tmp_path: Path) -> None:
    fine = make_repo(tmp_path, "fine", ALL_PASS)
    refused = make_repo(
        tmp_path, "refused", ALL_PASS, {"pytest.ini": "[pytest]\naddopts = --bogus\n"}
    )
    hanging = make_repo(
        tmp_path, "hanging", "import time\n\ndef test_hangs():\n    time.sleep(3600)\n"
    )
    report = batch(refused, hanging, fine, "--report", tmp_path / "out", "--timeout", "30")
    assert report["exit"] == 0, report["output"]
    samples = by_repository(report)
    assert values(samples["fine"])["percent_passing_tests"] == 100
    for name, reason in (("refused", "pytest did not run"), ("hanging", "timed out after 30 s")):
        sample = samples[name]
        assert set(values(sample).values()) == {"N"}, name
        assert all(reason in score["explanation"] for score in sample["scores"].values())
        assert sample["complete"] is False
    assert report["complete"] is True
    assert "refused: every score is N: pytest did not run" in report["output"]


@pytest.mark.slow
def test_a_worker_that_dies_leaves_its_repository_n(tmp_path: Path) -> None:
    plugin = tmp_path / "crash.py"
    plugin.write_text(
        "import os\n\n"
        "def pytest_scoring_session_scored(config, result, report_path):\n"
        "    if result.repository.endswith('doomed'):\n"
        "        os._exit(3)\n"
    )
    doomed, fine = make_repo(tmp_path, "doomed", ALL_PASS), make_repo(tmp_path, "fine", ALL_PASS)
    report = batch(doomed, fine, "--report", tmp_path / "out", "--plugin", plugin)
    samples = by_repository(report)
    assert set(values(samples["doomed"]).values()) == {"N"}
    explanation = samples["doomed"]["scores"]["percent_passing_tests"]["explanation"]
    assert "the evaluator's worker ended without a result (exit 3)" in explanation
    assert values(samples["fine"])["percent_passing_tests"] == 100


@pytest.mark.slow
def test_fail_under_applies_to_the_mean_over_the_repositories(tmp_path: Path) -> None:
    repos = [make_repo(tmp_path, "first", ALL_PASS), make_repo(tmp_path, "second", HALF_PASS)]
    below = run_cli(*repos, "--report", tmp_path / "out", "--fail-under", "80", TAMPERING_ONLY)
    assert below.exit_code == 1
    assert "FAIL: 75% of tests pass on average over 2 repositories, below --fail-under=80" in (
        below.output
    )
    reached = run_cli(*repos, "--report", tmp_path / "out", "--fail-under", "75", TAMPERING_ONLY)
    assert reached.exit_code == 0, reached.output


@pytest.mark.slow
def test_junit_xml_and_the_step_summary_cover_every_repository(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from junitparser import JUnitXml

    summary = tmp_path / "summary.md"
    monkeypatch.setenv("GITHUB_STEP_SUMMARY", str(summary))
    repos = [make_repo(tmp_path, "first", ALL_PASS), make_repo(tmp_path, "second", HALF_PASS)]
    junit = tmp_path / "junit.xml"
    report = batch(*repos, "--report", tmp_path / "out", "--", f"--junitxml={junit}")
    suites = list(JUnitXml.fromfile(str(junit)))
    properties = [{p.name: p.value for p in suite.properties()} for suite in suites]
    assert [props["repository"] for props in properties] == [str(repo) for repo in repos]
    assert [props["score:percent_passing_tests"] for props in properties] == ["100", "50"]
    assert sum(suite.tests for suite in suites) == 4
    text = summary.read_text()
    assert text.count("### Scores") == 1 and "2 repositories" in text
    assert f"`{repos[1]}` | ❌ I | 50 | 50 |" in text and "mean=75" in text
    sample = report["samples"][0]
    assert (report["report"] / "samples" / sample["id"] / "junit.xml").is_file()


@pytest.mark.slow
def test_interrupting_a_batch_leaves_a_report_and_the_next_run_goes_on(
    tmp_path: Path, drop: Path
) -> None:
    done = make_repo(tmp_path, "done", ALL_PASS)
    ready, go = drop / "ready", drop / "go"  # the jobs' users write and read there
    stopped = make_repo(tmp_path, "stopped", WAITS_FOR.format(ready=str(ready), go=str(go)))
    waiting = make_repo(tmp_path, "waiting", ALL_PASS)
    out = tmp_path / "out"
    process = start_run(TAMPERING_ONLY, done, stopped, waiting, "--report", out)  # as batch()
    wait_until(ready.exists, "the second repository's test to start")
    process.send_signal(signal.SIGINT)
    output, _ = process.communicate()
    assert process.returncode == 130, output
    interrupted = scores_json(shown_report(output))
    assert interrupted["complete"] is False
    samples = by_repository(interrupted)
    assert samples["done"]["complete"] is True
    assert samples["stopped"]["complete"] is False
    assert values(samples["waiting"]) == dict.fromkeys(values(samples["done"]), "N")
    assert "not scored: the batch was interrupted" in json.dumps(samples["waiting"])
    go.write_text("")
    resumed = batch(done, stopped, waiting, "--report", out)
    assert resumed["batch"] == {"jobs": 1, "repositories": 3, "scored": 2, "kept": 1}
    assert by_repository(resumed)["done"]["kept_from"] == interrupted["scan_id"]
    assert resumed["complete"] is True


@pytest.mark.slow
def test_a_killed_batch_is_continued_in_its_own_folder(tmp_path: Path, drop: Path) -> None:
    done = make_repo(tmp_path, "done", ALL_PASS)
    ready, go = drop / "ready", drop / "go"  # the jobs' users write and read there
    killed = make_repo(tmp_path, "killed", WAITS_FOR.format(ready=str(ready), go=str(go)))
    out = tmp_path / "out"
    process = start_run(TAMPERING_ONLY, done, killed, "--report", out)  # as batch()
    wait_until(ready.exists, "the second repository's test to start")
    process.kill()
    process.wait()  # not communicate(): the orphaned worker's fork server still holds stdout
    assert process.stdout is not None
    process.stdout.close()
    (building,) = out.glob(".scan_id=*.tmp")
    go.write_text("")  # the orphaned worker finishes its repository
    wait_until(lambda: len(list((building / "samples").glob("[!.]*"))) == 2, "both samples")
    report = batch(done, killed, "--report", out)
    assert f".scan_id={report['scan_id']}.tmp" == building.name
    assert report["batch"]["kept"] == 2 and report["complete"] is True
    assert not list(out.glob(".scan_id=*"))


@pytest.mark.parametrize(
    ("arguments", "message"),
    [
        (["{first}", "{tmp}/missing"], "REPO 2: {tmp}/missing is not a folder"),
        (["{first}", "{tmp}/./first"], "REPO 2: {tmp}/first is given twice (first as REPO 1)"),
        (["@{tmp}/list.txt"], "@{tmp}/list.txt, line 4: {tmp}/gone is not a folder"),
        (["@{tmp}/nothing.txt"], "@{tmp}/nothing.txt: cannot read the list of repositories"),
        (["{first}", "--user", "nobody", "--user", "root"], "--user: one repository runs as"),
    ],
)
def test_bad_repository_lists_are_one_line_before_anything_runs(
    tmp_path: Path, arguments: list[str], message: str
) -> None:
    first = make_repo(tmp_path, "first", ALL_PASS)
    (tmp_path / "list.txt").write_text(f"# outputs\n{first}\n\n{tmp_path}/gone\n")
    filled = [argument.format(tmp=tmp_path, first=first) for argument in arguments]
    result = run_cli(*filled, "--report", tmp_path / "out")
    assert result.exit_code == 2
    assert message.format(tmp=tmp_path) in result.output
    assert len(result.output.strip().splitlines()) == 1
    assert not (tmp_path / "out").exists()


def test_a_list_file_names_repositories_one_a_line(tmp_path: Path) -> None:
    from pytest_scoring.cli.batch import repository_list

    first, second = make_repo(tmp_path, "first", ALL_PASS), make_repo(tmp_path, "second", ALL_PASS)
    (tmp_path / "list.txt").write_text("# agent outputs\nfirst\n\n  second  \n")
    assert repository_list(["@list.txt"], tmp_path) == [first, second]
