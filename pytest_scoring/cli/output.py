"""What the commands print and exit with: exit statuses, the console, a report as shown."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import click

#: Exit status for bad input, for every command.
EXIT_BAD_INPUT = 2
#: Exit status of ``run`` when no test was collected (pytest's own), unless ``--allow-empty``.
EXIT_NO_TESTS = 5
#: Exit status of ``run`` stopped by Ctrl-C (128 + SIGINT, as a shell reports it).
EXIT_INTERRUPTED = 130


def exit_if_empty(empty: bool, allow_empty: bool, what: str) -> None:
    """Say so and exit with status 5 when no test was collected, as pytest does, unless
    ``--allow-empty``: a CI gate must not pass a repository without tests.

    :param what: the repository (or the batch's repositories) that collected nothing.
    """
    if empty and not allow_empty:
        click.echo(
            f"pytest-scoring: no tests collected in {what} (exit status 5; --allow-empty "
            "accepts an empty session)",
            err=True,
        )
        sys.exit(EXIT_NO_TESTS)


def exit_if_below(
    percent: float,
    fail_under: float | None,
    complete: bool = True,
    samples: int | None = None,
    tampered: bool = False,
) -> None:
    """Say so and exit with status 1 when ``--fail-under`` is given and not reached (an
    incomplete session never reaches it).

    :param samples: for a batch, how many repositories ``percent`` is the mean over.
    :param tampered: proven tampering made ``percent`` 0 (or, in a batch, counted some
        repositories as 0).
    """
    if fail_under is not None and (percent < fail_under or not complete):
        from pytest_scoring.report.terminal import fail_under_line

        line = fail_under_line(percent, fail_under, "--fail-under", complete, samples, tampered)
        click.echo(line)
        sys.exit(1)


#: Table width when the output is not a terminal (a pipe or a file): wide enough not to fold.
PIPED_WIDTH = 160


def console() -> Any:
    from rich.console import Console

    console = Console()
    if not console.is_terminal:
        console.width = PIPED_WIDTH
    return console


def print_report(content: dict[str, Any], folder: Path) -> None:
    from pytest_scoring.report import terminal

    shown = console()
    if isinstance(content.get("samples"), list):  # a batch (format 2)
        signals, scores = terminal.batch_signals(content)
        shown.print(terminal.samples_table(content))
        _print_plain(shown, terminal.signal_lines(signals, scores))
        shown.print(terminal.metrics_table(content))
        shown.print(terminal.samples_line(content))
    else:
        found, given = content.get("integrity"), content.get("scores")
        signals = found if isinstance(found, list) else []
        scores = given if isinstance(given, dict) else {}
        shown.print(terminal.score_table(content))
        _print_plain(shown, terminal.signal_lines(signals, scores))
        dropped = terminal.dropped_line(content.get("tests"))
        flaky = terminal.flaky_line(content.get("tests"))
        lines = [terminal.counts_line(content), *(line for line in (dropped, flaky) if line)]
        _print_plain(shown, lines)
    shown.print(f"complete: {'yes' if content.get('complete') else 'no'}")
    _print_plain(shown, [terminal.integrity_line(signals)])
    shown.print(f"report: {folder}")


def _print_plain(shown: Any, lines: list[str]) -> None:
    """Lines holding the scored repository's text: never read as rich markup."""
    for line in lines:
        shown.print(line, markup=False, highlight=False, soft_wrap=True)


def show_report(report: str) -> None:
    """Print the report ``report`` names (a ``scan_id=…`` folder, a file in one, or a root)."""
    from pytest_scoring.report.reader import find_report
    from pytest_scoring.report.reader import read_scores

    folder = find_report(report)
    print_report(read_scores(folder), folder)
