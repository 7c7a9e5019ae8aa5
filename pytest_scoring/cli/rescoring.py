"""The backend of ``rescore``: the evaluator's scorers on each report's evidence (issue 28)."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from pytest_scoring.core.settings import ScoringSettings
from pytest_scoring.core.signals import StrictKinds
from pytest_scoring.evaluation.assemble import build_scorers
from pytest_scoring.evaluation.hooks import evaluator_plugins
from pytest_scoring.evaluation.rescore import RescoreOptions
from pytest_scoring.evaluation.rescore import read_evidence
from pytest_scoring.evaluation.rescore import rescore
from pytest_scoring.evaluation.settings import load_json_argument
from pytest_scoring.reference.expected import load_expected_tests
from pytest_scoring.report.terminal import score_line
from pytest_scoring.report.writer import write_report


def rescore_reports(
    reports: Sequence[Path],
    config: Path | None,
    selector: str | None,
    expected_tests: str | None,
    strict: StrictKinds | None,
    report_root: Path,
) -> list[str]:
    """Re-score each report into a new folder under ``report_root``; the lines to print.

    :raises ScoringError: naming the flag or report that is wrong, before anything is written.
    """
    cwd = Path.cwd()
    settings = ScoringSettings(
        root=cwd,
        enabled=True,
        selector=None if selector is None else load_json_argument(selector, "--selector", cwd),
        config_file=None if config is None else cwd / config,
        report_root=report_root,
    )
    scorers = build_scorers(evaluator_plugins().hook, None, settings)
    options = RescoreOptions(settings, strict=strict)
    if expected_tests is not None:
        # A folder runs as the evaluator's own, never where a report's repository wrote.
        expected = load_expected_tests(cwd / expected_tests, "--expected-tests", route="evaluator")
        options.expected, options.expected_source = expected.outcomes, expected.describe()
        settings.expected_source = cwd / expected_tests
    evidence = [read_evidence(Path(report)) for report in reports]
    lines = []
    for report in evidence:
        result = rescore(report, scorers, options)
        lines += [score_line(name, score) for name, score in result.scores.items()]
        lines.append(f"score report: {write_report(result, report_root)}")
    return lines
