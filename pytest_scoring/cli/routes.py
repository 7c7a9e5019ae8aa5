"""The two routes of ``pytest-scoring run`` once its options are read (docs/cli.md): one
repository and its report (format 1), or a batch of many in one scan (format 2). Each shows
the report, then what went wrong or was partial, and exits as ``run`` documents.
"""

from __future__ import annotations

import sys
from pathlib import Path

import click

from pytest_scoring.cli.output import EXIT_BAD_INPUT
from pytest_scoring.cli.output import EXIT_INTERRUPTED
from pytest_scoring.cli.output import console
from pytest_scoring.cli.output import exit_if_below
from pytest_scoring.cli.output import exit_if_empty
from pytest_scoring.cli.output import show_report
from pytest_scoring.cli.request import RunRequest
from pytest_scoring.errors import ScoringError


def run_one_route(request: RunRequest) -> None:
    """``run REPO``: one repository, one report (format 1)."""
    from pytest_scoring.cli.progress import ProgressDisplay
    from pytest_scoring.cli.runner import run_repository

    timeout, fail_under = request.timeout, request.fail_under
    with ProgressDisplay(console(), request.repo) as progress:
        result = run_repository(request, progress.update, progress.say)
    if result.pytest_error is not None:
        click.echo(result.pytest_error, err=True)
    if result.report is None:
        raise ScoringError(result.evaluation.report_error or "no report was written")
    show_report(str(result.report))
    for line in result.summary_lines(timeout):
        click.echo(line)
    if result.pytest_error is not None:
        sys.exit(EXIT_BAD_INPUT)
    if result.interrupted:
        sys.exit(EXIT_INTERRUPTED)
    # A repository caught hiding its tests is scored N for that, not let off as empty.
    empty = result.evaluation.tally.collected_nothing() and not result.tampered
    exit_if_empty(empty, request.allow_empty, str(request.repo))
    complete = result.evaluation.context.complete
    exit_if_below(result.percent_passing(), fail_under, complete, tampered=result.tampered)


def run_batch_route(
    repositories: list[Path],
    request: RunRequest,
    jobs: int,
    users: tuple[str, ...],
) -> None:
    """``run REPO REPO …``: one scan of many repositories (format 2)."""
    from pytest_scoring.cli.batch import BatchDisplayFactory
    from pytest_scoring.cli.batch import BatchRequest
    from pytest_scoring.cli.batch import run_batch
    from pytest_scoring.report.batch import collected_nothing
    from pytest_scoring.report.batch import mean_percent_passing
    from pytest_scoring.report.batch import tampered

    batch = BatchRequest(repositories, request, jobs, users)
    outcome = run_batch(batch, BatchDisplayFactory(console()))
    if outcome.report is not None:
        show_report(str(outcome.report))
    for line in outcome.summary_lines():
        click.echo(line)
    if (error := outcome.pytest_refused_everywhere()) is not None:
        click.echo(error, err=True)
        sys.exit(EXIT_BAD_INPUT)
    if outcome.interrupted:
        sys.exit(EXIT_INTERRUPTED)
    if outcome.report is None:
        raise ScoringError(outcome.report_error or "no report was written")
    samples = outcome.result.samples
    everywhere = all(collected_nothing(s) and not tampered(s) for s in samples)
    exit_if_empty(everywhere, request.allow_empty, f"any of the {len(samples)} repositories")
    some_tampered = any(tampered(sample) for sample in samples)
    percent = mean_percent_passing(samples)
    exit_if_below(percent, request.fail_under, True, len(samples), tampered=some_tampered)
