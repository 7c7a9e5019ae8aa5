"""The ``pytest-scoring`` command line (SPEC 3.2).

Each command is a thin wrapper over a library function. User errors (any
:class:`~pytest_scoring.errors.ScoringError`) become a one-line message and exit status 2,
never a traceback.
"""

from __future__ import annotations

import functools
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any
from typing import TypeVar

import click

from pytest_scoring.errors import ScoringError
from pytest_scoring.settings import DEFAULT_REPORT_ROOT

CONTEXT_SETTINGS = {"help_option_names": ["-h", "--help"]}
#: Exit status for bad input, for every command.
EXIT_BAD_INPUT = 2

F = TypeVar("F", bound=Callable[..., Any])


def reports_user_errors(command: F) -> F:
    """Turn a :class:`ScoringError` raised by ``command`` into a message and exit status 2."""

    @functools.wraps(command)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        try:
            return command(*args, **kwargs)
        except ScoringError as error:
            click.echo(f"pytest-scoring: error: {error}", err=True)
            sys.exit(EXIT_BAD_INPUT)

    return wrapper  # type: ignore[return-value]


@click.group(context_settings=CONTEXT_SETTINGS)
@click.version_option(package_name="pytest-scoring")
def main() -> None:
    """Score a repository: tests, database changes, reports Inspect tools read."""


def _console() -> Any:
    from rich.console import Console

    return Console(soft_wrap=True)


@main.command()
@click.argument("report", required=False, default=DEFAULT_REPORT_ROOT, type=click.Path())
@reports_user_errors
def show(report: str) -> None:
    """Show one report: each score, its metrics, the test counts, the complete flag.

    REPORT is a scan_id=… folder, or a report root whose newest report is shown
    (default ./scores).

    Example: pytest-scoring show scores/
    """
    from pytest_scoring.reader import find_report
    from pytest_scoring.reader import read_scores
    from pytest_scoring.report import counts_line
    from pytest_scoring.report import score_table

    folder = find_report(report)
    content = read_scores(folder)
    console = _console()
    console.print(score_table(content))
    console.print(counts_line(content))
    console.print(f"complete: {'yes' if content.get('complete') else 'no'}")
    console.print(f"report: {folder}")


@main.command(name="list")
@click.argument("report_root", required=False, default=DEFAULT_REPORT_ROOT, type=click.Path())
@reports_user_errors
def list_command(report_root: str) -> None:
    """List the reports under REPORT_ROOT (default ./scores), newest first.

    Example: pytest-scoring list scores/
    """
    from pytest_scoring.reader import list_reports
    from pytest_scoring.report import reports_table

    infos = list_reports(report_root)
    if not infos:
        click.echo(f"no reports under {report_root}")
        return
    _console().print(reports_table(infos))


@main.command()
@click.argument("files", nargs=-1, required=True, type=click.Path(path_type=Path))
@click.option(
    "--report",
    "report_root",
    default=DEFAULT_REPORT_ROOT,
    show_default=True,
    type=click.Path(path_type=Path, file_okay=False),
    help="Report root; the report goes into a new scan_id=… folder under it",
)
@click.option(
    "--fail-under",
    type=click.FloatRange(0, 100),
    metavar="PCT",
    help="Exit status 1 if the pass percentage is below PCT",
)
@reports_user_errors
def junit(files: tuple[Path, ...], report_root: Path, fail_under: float | None) -> None:
    """Score JUnit XML files written by any test runner into a report.

    Several files (Maven Surefire writes one per class) are one repository's suite.

    Example: pytest-scoring junit target/surefire-reports/*.xml --fail-under 90
    """
    from pytest_scoring.junit import read_junit
    from pytest_scoring.junit import score_tally
    from pytest_scoring.report import write_report
    from pytest_scoring.scorers.tests import percent_passing

    tally = read_junit(files)
    result = score_tally(tally, Path.cwd())
    path = write_report(result, report_root)
    for name, score in result.scores.items():
        click.echo(f"{name}: {score['value']}  ({score.get('explanation') or ''})")
    click.echo(f"score report: {path}")
    if fail_under is not None and percent_passing(tally) < fail_under:
        percent = percent_passing(tally)
        click.echo(f"FAIL: {percent}% of tests pass, below --fail-under={fail_under:g}")
        sys.exit(1)
