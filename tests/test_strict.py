"""Proven tampering changes the score by default: the strict kinds of each route, what a
tampering "N" counts as in every metric, and how every view shows the signals."""

from __future__ import annotations

import json
import textwrap
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pyarrow.parquet as pq
import pytest
from click.testing import CliRunner
from runs import TAMPERING_ONLY
from runs import run_cli
from runs import scores_json
from runs import shown_report

from pytest_scoring.cli.main import main
from pytest_scoring.core.metrics import compute_metrics
from pytest_scoring.core.outcomes import OutcomeTally
from pytest_scoring.core.score import Score
from pytest_scoring.core.signals import SIGNALS_PER_KIND
from pytest_scoring.core.signals import EvaluatorSide
from pytest_scoring.core.signals import Signal
from pytest_scoring.core.signals import cap_signals
from pytest_scoring.core.signals import interpreter_paths
from pytest_scoring.core.signals import make_signal
from pytest_scoring.core.signals import tampering_kinds
from pytest_scoring.report.batch import BatchResult
from pytest_scoring.report.batch import mean_percent_passing
from pytest_scoring.report.markdown import score_markdown
from pytest_scoring.report.scout import counted_as
from pytest_scoring.report.terminal import batch_signals
from pytest_scoring.report.terminal import integrity_line
from pytest_scoring.report.terminal import signal_lines
from pytest_scoring.scorers import default_test_scorers
from pytest_scoring.scorers.base import ScoringContext
from pytest_scoring.scorers.base import run_scorers

#: 3 of 5 tests pass: the truth is 60 %.
SUITE = """
def test_pass_one(): pass
def test_pass_two(): pass
def test_pass_three(): pass
def test_fail_one(): assert False
def test_fail_two(): assert False
"""
#: The conftest that took SWE-bench Verified to 500/500: every call report says passed.
BENCHJACK = """
import pytest

@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item, call):
    outcome = yield
    rep = outcome.get_result()
    if rep.when == "call":
        rep.outcome = "passed"
        rep.longrepr = None
"""
TEST_SCORERS = ("all_tests_pass", "percent_passing_tests", "percent_failing_tests")
#: What a tampering "N" of each test scorer counts as.
FAILED = {"all_tests_pass": "I", "percent_passing_tests": 0, "percent_failing_tests": 100}


def benchjack_repository(folder: Path, ini: str | None = None) -> Path:
    folder.mkdir(parents=True)
    (folder / "test_calc.py").write_text(textwrap.dedent(SUITE))
    (folder / "conftest.py").write_text(textwrap.dedent(BENCHJACK))
    if ini is not None:
        (folder / "pytest.ini").write_text(ini)
    return folder


@dataclass
class Run:
    """One ``pytest-scoring run`` of the BenchJack repository: its output, exit, report."""

    output: str
    exit_code: int
    folder: Path

    @property
    def report(self) -> dict[str, Any]:
        return scores_json(self.folder)

    def score(self, name: str) -> dict[str, Any]:
        score: dict[str, Any] = self.report["scores"][name]
        return score


@pytest.fixture(scope="module")
def benchjack_runs(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Run]:
    """The BenchJack repository scored by ``run`` as a user runs it, with nothing else, with
    ``--strict none``, and with ``--strict default`` and a pass gate. Its ``pytest.ini`` says
    ``score_strict = none``: the repository's ini never chooses the strict kinds."""
    parent = tmp_path_factory.mktemp("benchjack")
    repo = benchjack_repository(parent / "repo", "[pytest]\nscore_strict = none\n")
    runs = {}
    for name, extra in {
        "plain": [],
        "none": ["--strict", "none"],
        "default": ["--strict=default", "--fail-under", "50"],
    }.items():
        result = run_cli(repo, "--report", parent / name, *extra)
        assert "Traceback" not in result.output, result.output
        runs[name] = Run(result.output, result.exit_code, shown_report(result.output))
    return runs


@pytest.mark.slow
def test_the_benchjack_conftest_scores_n_under_plain_run(benchjack_runs: dict[str, Run]) -> None:
    run = benchjack_runs["plain"]
    assert run.exit_code == 0, run.output
    for name in TEST_SCORERS:
        score = run.score(name)
        assert score["value"] == "N", score
        metadata = score["metadata"]
        assert metadata["unscored"] == "tampering"
        assert "outcome_changed" in metadata["strict_kinds"]
        assert metadata["counted_as"] == FAILED[name]
        assert score["explanation"].startswith("not scored: integrity signal ")
    assert run.report["tests"]["counts"]["passed"] == 5, "what the conftest claims"


@pytest.mark.slow
def test_strict_none_restores_the_old_number_and_default_names_only_tampering(
    benchjack_runs: dict[str, Run],
) -> None:
    assert benchjack_runs["none"].score("percent_passing_tests")["value"] == 100
    assert "unscored" not in benchjack_runs["none"].score("percent_passing_tests")["metadata"]
    named = benchjack_runs["default"].score("percent_passing_tests")
    # Partial containment as root (where this machine runs the tests so) is left out.
    assert (named["value"], named["metadata"]["strict_kinds"]) == ("N", ["outcome_changed"])


@pytest.mark.slow
def test_a_tampering_n_counts_as_a_failed_sample_in_every_metric(
    benchjack_runs: dict[str, Run],
) -> None:
    metrics = benchjack_runs["plain"].report["metrics"]
    assert metrics["all_tests_pass"] == {"mean": 0, "stderr": 0}
    assert metrics["percent_passing_tests"] == {"mean": 0, "stderr": 0, "accuracy_at_100": 0}
    assert metrics["percent_failing_tests"] == {"mean": 100, "stderr": 0, "accuracy_over_0": 100}


@pytest.mark.slow
def test_the_pass_gate_counts_proven_tampering_as_zero(benchjack_runs: dict[str, Run]) -> None:
    run = benchjack_runs["default"]
    assert run.exit_code == 1
    assert "FAIL: 0% of tests pass, below --fail-under=50 (proven tampering counts as 0%)" in (
        run.output
    )


@pytest.mark.slow
def test_the_parquet_rows_say_what_each_score_counted_as(benchjack_runs: dict[str, Run]) -> None:
    expected = {
        "plain": ("I", "0", "100"),
        "none": ("C", "100", "0"),
    }
    for name, values in expected.items():
        counted = dict(zip(TEST_SCORERS, values, strict=True))
        folder = benchjack_runs[name].folder
        rows = {key: pq.read_table(folder / f"{key}.parquet").to_pylist()[0] for key in counted}
        assert {key: row["counted_as"] for key, row in rows.items()} == counted
    row = pq.read_table(benchjack_runs["plain"].folder / "percent_passing_tests.parquet")
    assert row.to_pylist()[0]["value"] == "N"


def kind_lines(output: str) -> list[str]:
    return [line for line in output.splitlines() if line.startswith("integrity ")]


@pytest.mark.slow
def test_run_and_show_list_each_kind_under_the_score_table_and_count_after_complete(
    benchjack_runs: dict[str, Run],
) -> None:
    run = benchjack_runs["plain"]
    shown = CliRunner().invoke(main, ["show", str(run.folder)]).output
    for output in (run.output, shown):
        lines = output.splitlines()
        table_end = max(number for number, line in enumerate(lines) if line.startswith("└"))
        changed = next(line for line in kind_lines(output) if " outcome_changed:" in line)
        assert lines.index(changed) > table_end
        assert lines.index(changed) < next(i for i, x in enumerate(lines) if x.startswith("tests:"))
        assert "signal" in changed and "strict (the test scores are N)" in changed
        assert "e.g. test_calc.py::test_fail_one call: pytest computed failed" in changed
        hook = next(line for line in kind_lines(output) if " outcome_hook:" in line)
        assert "information" in hook
        complete = next(i for i, line in enumerate(lines) if line.startswith("complete:"))
        assert lines[complete + 1].startswith("integrity: ")
        assert "outcome_changed" in lines[complete + 1] and "outcome_hook" in lines[complete + 1]
    none = benchjack_runs["none"].output
    changed = next(line for line in kind_lines(none) if " outcome_changed:" in line)
    assert "information" in changed, "--strict none: it changed no score"


@pytest.mark.slow
def test_the_markdown_summary_says_tampering_made_the_scores_n(
    benchjack_runs: dict[str, Run],
) -> None:
    text = score_markdown(benchjack_runs["plain"].report)
    assert "**Tampering**: integrity signal `outcome_changed`" in text
    assert "counts as a failed sample" in text
    assert "outcome\\_changed (2, strict)" in text
    honest = score_markdown(benchjack_runs["none"].report)
    assert "Tampering" not in honest and "outcome\\_changed (2, information)" in honest


# --- the other routes ------------------------------------------------------------------


def test_in_process_no_kind_is_strict_and_the_ini_never_chooses(pytester: pytest.Pytester) -> None:
    pytester.makepyfile(test_calc=SUITE)
    pytester.makeconftest(BENCHJACK)
    pytester.makeini("[pytest]\nscore_strict = all\n")
    result = pytester.runpytest_subprocess("--score")
    report = only_report(pytester.path / "scores")
    assert report["scores"]["percent_passing_tests"]["value"] == 100
    (ignored,) = [s for s in report["integrity"] if s["kind"] == "selection"]
    assert ignored == {
        "kind": "selection",
        "detail": "score_strict = all: ignored, only the command line sets it",
        "file": "tox.ini",
    }
    result.stdout.fnmatch_lines(["integrity outcome_changed: 2 signals, information; e.g. *"])


def test_in_process_the_command_lines_strict_wins_over_the_ini(pytester: pytest.Pytester) -> None:
    pytester.makepyfile(test_calc=SUITE)
    pytester.makeconftest(BENCHJACK)
    pytester.makeini("[pytest]\nscore_strict = none\n")
    result = pytester.runpytest_subprocess("--score", "--score-strict=default")
    report = only_report(pytester.path / "scores")
    score = report["scores"]["percent_passing_tests"]
    assert (score["value"], score["metadata"]["strict_kinds"]) == ("N", ["outcome_changed"])
    result.stdout.fnmatch_lines(
        [
            "percent_failing_tests: N  (not scored: integrity signal outcome_changed (strict); "
            "counted as 100 (5 passed = 5 counted))",
            "integrity outcome_changed: 2 signals, strict (the test scores are N); e.g. *",
        ]
    )


def only_report(root: Path) -> dict[str, Any]:
    (folder,) = root.glob("scan_id=*")
    return scores_json(folder)


def test_junit_applies_the_default_set_unless_told_otherwise(
    pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch
) -> None:
    pytester.makepyfile(test_calc=SUITE)
    pytester.makeini("[pytest]\naddopts = -p no:scoring\n")
    pytester.runpytest_subprocess("--junitxml=session.xml")
    monkeypatch.chdir(pytester.path)
    result = CliRunner().invoke(main, ["junit", "session.xml", "--report", "default"])
    assert result.exit_code == 0, result.output
    score = only_report(pytester.path / "default")["scores"]["percent_passing_tests"]
    assert (score["value"], score["metadata"]["strict_kinds"]) == ("N", ["plugin_disabled"])
    assert "integrity plugin_disabled: 1 signal, strict" in result.output
    result = CliRunner().invoke(main, ["junit", "session.xml", "--report", "none", "--strict=none"])
    assert only_report(pytester.path / "none")["scores"]["percent_passing_tests"]["value"] == 60


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--strict", "sneaky"], "--strict: 'sneaky' is not a signal kind (one of none, default"),
        (["--strict=patched,selection"], "--strict: 'selection' only informs"),
    ],
)
def test_a_bad_strict_kind_is_a_one_line_usage_error(
    tmp_path: Path, args: list[str], message: str
) -> None:
    result = run_cli(tmp_path, *args)
    assert result.exit_code == 2
    assert result.output.startswith(f"pytest-scoring: error: {message}")
    assert len(result.output.strip().splitlines()) == 1


# --- what the evaluator caused ------------------------------------------------------------


@pytest.mark.slow
def test_the_evaluators_own_x_ends_the_run_early_as_information(tmp_path: Path) -> None:
    repo = tmp_path / "repo"
    repo.mkdir()
    (repo / "test_calc.py").write_text(SUITE)
    result = run_cli(repo, "--report", tmp_path / "out", TAMPERING_ONLY, "--", "-x")
    report = scores_json(shown_report(result.output))
    (ended,) = [s for s in report["integrity"] if s["kind"] == "early_end"]
    assert ended["detail"].startswith("pytest stopped early")
    assert report["complete"] is False
    assert report["tests"]["counts"]["not_run"] == 1
    score = report["scores"]["percent_passing_tests"]
    assert score["value"] == 60, "the test -x kept from running counts as failed"
    assert "unscored" not in score["metadata"]
    assert "integrity early_end: 1 signal, information" in result.output


@pytest.mark.slow
def test_the_repositorys_own_x_is_its_early_end(tmp_path: Path) -> None:
    repo = tmp_path / "repo"
    repo.mkdir()
    (repo / "test_calc.py").write_text(SUITE)
    (repo / "pytest.ini").write_text("[pytest]\naddopts = -x\n")
    result = run_cli(repo, "--report", tmp_path / "out", TAMPERING_ONLY)
    score = scores_json(shown_report(result.output))["scores"]["percent_passing_tests"]
    assert (score["value"], score["metadata"]["strict_kinds"]) == ("N", ["early_end"])


def signal(kind: str, file: str | None, detail: str = "seen") -> Signal:
    return make_signal(kind, detail, file)


def test_signals_about_the_evaluators_files_inform() -> None:
    side = EvaluatorSide(paths=frozenset({"evaluator/tests", ".venv"}))
    strict = frozenset({"patched"})
    for file in ("evaluator/tests/conftest.py", "evaluator/tests", ".venv/lib/x.py"):
        assert tampering_kinds([signal("patched", file)], strict, side) == [], file
    for file in ("conftest.py", "evaluator/tests-extra/conftest.py", "tests/.venv", None):
        assert tampering_kinds([signal("patched", file)], strict, side) == ["patched"], file


def test_signals_the_evaluator_caused_inform() -> None:
    timed_out = signal("early_end", None, "the run timed out")
    side = EvaluatorSide(caused=(timed_out,))
    assert tampering_kinds([timed_out], {"early_end"}, side) == []
    assert tampering_kinds([signal("early_end", None)], {"early_end"}, side) == ["early_end"]


def test_the_cap_never_hides_the_repositorys_signal_among_the_evaluators() -> None:
    side = EvaluatorSide(paths=frozenset({"evaluator"}))
    ours = [signal("tripwire", "evaluator/test_a.py", f"call {n}") for n in range(30)]
    capped = cap_signals(ours, side)
    assert len(capped) == SIGNALS_PER_KIND + 1
    assert tampering_kinds(capped, {"tripwire"}, side) == [], "the summary holds ours only"
    theirs = signal("tripwire", "app.py", "reached into the probe")
    capped = cap_signals([*ours, theirs], side)
    assert theirs in capped, "the repository's are kept first"
    assert tampering_kinds(capped, {"tripwire"}, side) == ["tripwire"]


def test_the_running_interpreters_environment_is_the_evaluators(tmp_path: Path) -> None:
    import sys

    prefix = Path(sys.prefix).resolve()
    assert prefix.name in interpreter_paths(prefix.parent)
    assert interpreter_paths(tmp_path) == frozenset()


# --- metrics and counted_as -------------------------------------------------------------


def scored(passed: int, failed: int, tampered: bool) -> dict[str, Score]:
    """The three test scores of a session, its signals from a rewriting hook when tampered."""
    tally = OutcomeTally()
    for number in range(passed + failed):
        tally.record_outcome(f"t.py::test_{number}", "passed" if number < passed else "failed")
    integrity = [signal("outcome_changed", "conftest.py")] if tampered else []
    context = ScoringContext(
        root=Path("/repo"), tally=tally, integrity=integrity, strict=frozenset({"outcome_changed"})
    )
    return run_scorers(default_test_scorers(), context)


def test_every_metric_counts_a_tampering_n_as_a_failed_sample() -> None:
    samples = [scored(5, 0, tampered=True), scored(3, 2, tampered=False)]
    metrics = {
        scorer.name: compute_metrics(scorer.metrics, [sample[scorer.name] for sample in samples])
        for scorer in default_test_scorers()
    }
    assert metrics["all_tests_pass"]["mean"] == 0
    assert metrics["percent_passing_tests"]["mean"] == 30
    assert metrics["percent_passing_tests"]["accuracy_at_100"] == 0
    assert metrics["percent_failing_tests"]["mean"] == 70
    assert metrics["percent_failing_tests"]["accuracy_over_0"] == 100
    assert metrics["percent_failing_tests"]["stderr"] == pytest.approx(30)


def test_a_batch_counts_a_tampering_sample_in_every_metric_and_the_gate() -> None:
    samples = []
    for number, (passed, tampered) in enumerate([(5, True), (5, False)]):
        tally = OutcomeTally()
        for test in range(passed):
            tally.record_outcome(f"t.py::test_{test}", "passed")
        samples.append(
            {
                "id": str(number),
                "complete": True,
                "scores": scored(passed, 0, tampered),
                "tests": tally.to_json(),
            }
        )
    result = BatchResult("scan", "key", default_test_scorers(), samples)
    assert result.metrics()["percent_passing_tests"]["mean"] == 50
    assert result.metrics()["percent_failing_tests"]["mean"] == 50
    assert result.metrics()["all_tests_pass"]["mean"] == 0.5
    assert mean_percent_passing(samples) == 50


@pytest.mark.parametrize(
    ("score", "text"),
    [
        ({"value": "C"}, "C"),
        ({"value": "I"}, "I"),
        ({"value": "P"}, "P"),
        ({"value": 62.5}, "62.5"),
        ({"value": 20.0}, "20"),
        ({"value": True}, "1"),
        ({"value": False}, "0"),
        ({"value": "yes"}, "1"),
        ({"value": "0.25"}, "0.25"),
        ({"value": "anything"}, "0"),
        ({"value": "N"}, "0"),
        ({"value": "N", "metadata": {"unscored": "tampering", "counted_as": "I"}}, "I"),
        ({"value": "N", "metadata": {"unscored": "tampering", "counted_as": 100}}, "100"),
    ],
)
def test_counted_as_is_text_for_every_value(score: Score, text: str) -> None:
    assert counted_as(score) == text


def test_a_batchs_views_gather_every_repositorys_signals() -> None:
    tampered, honest = scored(5, 0, tampered=True), scored(3, 2, tampered=False)
    content = {
        "samples": [
            {"integrity": [signal("outcome_changed", "conftest.py")], "scores": tampered},
            {"integrity": [signal("outcome_hook", "conftest.py")], "scores": honest},
        ]
    }
    signals, scores = batch_signals(content)
    lines = signal_lines(signals, scores)
    assert lines[0].startswith("integrity outcome_changed: 1 signal, strict")
    assert lines[1].startswith("integrity outcome_hook: 1 signal, information")
    assert integrity_line(signals) == "integrity: 2 signals (outcome_changed, outcome_hook)"
    assert "⛔ **Tampering**" in score_markdown(content)


def test_a_terminal_line_never_carries_the_repositorys_control_codes() -> None:
    hostile = signal("outcome_changed", "conftest.py", "\x1b[2J\x1b[Hall good\rreally")
    (line,) = signal_lines([hostile], {})
    assert "\x1b" not in line and "\r" not in line
    assert json.dumps(line).count("\\u") == 0
