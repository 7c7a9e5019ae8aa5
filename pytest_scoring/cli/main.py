"""The ``pytest-scoring`` command line (docs/cli.md).

Each command is a thin wrapper over a library function. User errors (any
:class:`~pytest_scoring.errors.ScoringError`) become a one-line message and exit status 2,
never a traceback.
"""

from __future__ import annotations

import functools
import os
import sys
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING
from typing import Any
from typing import Final
from typing import TypeVar

import click

from pytest_scoring.cli.output import EXIT_BAD_INPUT
from pytest_scoring.cli.output import console
from pytest_scoring.cli.output import exit_if_below
from pytest_scoring.cli.output import exit_if_empty
from pytest_scoring.cli.output import print_report
from pytest_scoring.core.settings import DEFAULT_REPORT_ROOT
from pytest_scoring.core.settings import EVIDENCE_LEVELS
from pytest_scoring.errors import DatabaseError
from pytest_scoring.errors import OptionError
from pytest_scoring.errors import ScoringError

# Imported now, when the command line loads: the children of ``run`` get the environment as
# it is before anything else runs (docs/security.md).
from pytest_scoring.process import environment  # noqa: F401

if TYPE_CHECKING:
    from pytest_scoring.core.signals import StrictKinds

CONTEXT_SETTINGS = {"help_option_names": ["-h", "--help"]}
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


#: ``--report DIR`` of the commands that write a report.
report_root_option = click.option(
    "--report",
    "report_root",
    default=DEFAULT_REPORT_ROOT,
    show_default=True,
    type=click.Path(path_type=Path, file_okay=False),
    help="Report root; the report goes into a new scan_id=… folder under it",
)
#: ``--fail-under PCT`` of the commands that score tests.
fail_under_option = click.option(
    "--fail-under",
    type=click.FloatRange(0, 100),
    metavar="PCT",
    help="Exit status 1 if the pass percentage is below PCT",
)


#: ``--expected-tests SOURCE`` of the commands that score tests (docs/scoring.md).
expected_tests_option = click.option(
    "--expected-tests",
    metavar="SOURCE",
    help="The tests that count: a file of ids, a JSON object of outcomes, or a folder run once",
)
#: ``--strict[=none|default|all|KIND,…]`` of the commands that score tests.
strict_option = click.option(
    "--strict",
    is_flag=False,
    flag_value="",
    default=None,
    metavar="[KINDS]",
    help="Integrity signal kinds that make the test scores N: none, default, all or KIND,… "
    "(not given: default, and containment as root; alone: default,containment)",
)


#: ``--evidence none|diffs|all``: what the report keeps for ``rescore``.
evidence_option = click.option(
    "--evidence",
    type=click.Choice(EVIDENCE_LEVELS),
    default=None,
    help="What the report keeps for rescore: none, diffs (the default: outcomes and database "
    "diffs) or all (also the final databases)",
)


def strict_kinds(text: str | None) -> StrictKinds:
    """The kinds ``--strict`` names (not given: ``default``); a bad one is an
    :class:`OptionError`."""
    from pytest_scoring.core.signals import DEFAULT_STRICT
    from pytest_scoring.core.signals import parse_strict

    if text is None:
        return DEFAULT_STRICT
    try:
        return parse_strict(text)
    except ValueError as error:
        raise OptionError(f"--strict: {error}") from None


@main.command()
@click.argument("report", required=False, default=DEFAULT_REPORT_ROOT, type=click.Path())
@click.option(
    "--html",
    "as_html",
    is_flag=True,
    help="Print the path of the report's page (index.html), written anew from its JSON files",
)
@click.option("--open", "open_page", is_flag=True, help="Open the report's page in a web browser")
@click.option("--markdown", "as_markdown", is_flag=True, help="Print the score table as Markdown")
@reports_user_errors
def show(report: str, as_html: bool, open_page: bool, as_markdown: bool) -> None:
    """Show one report: each score, its metrics, the test counts, the complete flag.

    REPORT is a scan_id=… folder, a file in one (its scores.json…), or a report root
    whose newest report is shown (default ./scores). --html prints the path of its page,
    --open opens the page, --markdown prints the table for a CI summary.

    Example: pytest-scoring show scores/ --open
    """
    from pytest_scoring.report.reader import find_report
    from pytest_scoring.report.reader import read_scores

    folder = find_report(report)
    content = read_scores(folder)
    if as_markdown:
        from pytest_scoring.report.markdown import score_markdown

        click.echo(score_markdown(content, folder), nl=False)
    if as_html or open_page:
        _show_page(folder, open_page)
    if not (as_markdown or as_html or open_page):
        print_report(content, folder)


def _show_page(folder: Path, open_page: bool) -> None:
    """Write the report's page anew (reports of older versions get one too), print its path
    and, when asked, open it in the default browser."""
    import webbrowser

    from pytest_scoring.report.writer import rebuild_page

    page = rebuild_page(folder).absolute()
    click.echo(str(page))
    if open_page and not webbrowser.open(page.as_uri()):
        click.echo(f"no web browser found: open {page} yourself", err=True)


def _publish_step_summary(folder: Path) -> None:
    """Append the score table to GitHub's step summary when running there (``junit``; ``run``
    publishes it in its evaluation, as the plugin does)."""
    from pytest_scoring.report import GITHUB_SUMMARY_ENV
    from pytest_scoring.report.markdown import publish_markdown
    from pytest_scoring.report.markdown import score_markdown
    from pytest_scoring.report.reader import read_scores

    if os.environ.get(GITHUB_SUMMARY_ENV):
        publish_markdown(score_markdown(read_scores(folder), folder), None)


@main.command(name="list")
@click.argument("report_root", required=False, default=DEFAULT_REPORT_ROOT, type=click.Path())
@reports_user_errors
def list_command(report_root: str) -> None:
    """List the reports under REPORT_ROOT (default ./scores), newest first.

    Example: pytest-scoring list scores/
    """
    from pytest_scoring.report.reader import list_reports
    from pytest_scoring.report.terminal import reports_table

    infos = list_reports(report_root)
    if not infos:
        click.echo(f"no reports under {report_root}")
        return
    console().print(reports_table(infos))


@main.command()
@click.argument("files", nargs=-1, required=True, type=click.Path(path_type=Path))
@report_root_option
@fail_under_option
@expected_tests_option
@strict_option
@reports_user_errors
def junit(
    files: tuple[Path, ...],
    report_root: Path,
    fail_under: float | None,
    expected_tests: str | None,
    strict: str | None,
) -> None:
    """Score JUnit XML files written by any test runner into a report.

    Several files (Maven Surefire writes one per class) are one repository's suite; the
    current folder is the repository (its ini and conftest.py files give integrity signals).

    Example: pytest-scoring junit target/surefire-reports/*.xml --fail-under 90
    """
    from pytest_scoring.core.score import is_tampering
    from pytest_scoring.reference.expected import load_expected_tests
    from pytest_scoring.report.junit import read_junit
    from pytest_scoring.report.junit import score_junit
    from pytest_scoring.report.terminal import score_line
    from pytest_scoring.report.terminal import signal_lines
    from pytest_scoring.report.writer import remove_report_leftovers
    from pytest_scoring.report.writer import write_report
    from pytest_scoring.scorers.tests import percent_passing

    kinds = strict_kinds(strict)
    reading = read_junit(files, Path.cwd())
    tally = reading.tally
    inputs = {f"junit_xml {path}": path for path in files}
    if expected_tests is not None:
        expected = load_expected_tests(
            Path.cwd() / expected_tests,
            "--expected-tests",
            route="evaluator",  # nothing of the repository runs here
            never_inside=[Path.cwd(), report_root],
        )
        tally.expected, tally.expected_source = expected.outcomes, expected.describe()
        inputs["expected_tests"] = Path.cwd() / expected_tests
    # No process of the repository runs here: partial containment cannot be.
    result = score_junit(reading, Path.cwd(), kinds.for_run(as_root=False), inputs)
    leftovers = remove_report_leftovers(report_root)
    path = write_report(result, report_root)
    for name, score in result.scores.items():
        click.echo(score_line(name, score))
    for line in signal_lines(result.integrity, result.scores):
        click.echo(line)
    for cut in reading.cuts:
        click.echo(f"JUnit XML {cut.describe()}", err=True)
    click.echo(f"score report: {path}")
    if leftovers is not None:
        click.echo(leftovers)
    _publish_step_summary(path)
    tampered = any(is_tampering(score) for score in result.scores.values())
    percent = 0.0 if tampered else percent_passing(tally)
    exit_if_below(percent, fail_under, result.complete, tampered=tampered)


def _check_path_maps(
    ctx: click.Context, param: click.Parameter, values: tuple[str, ...]
) -> tuple[str, ...]:
    """``--path-map SANDBOX=LOCAL``, checked as the plugin's ``--score-path-map`` is."""
    import argparse

    from pytest_scoring.evaluation.flags import path_map_type

    for value in values:
        try:
            path_map_type(value)
        except argparse.ArgumentTypeError as error:
            raise click.BadParameter(str(error), ctx, param) from None
    return values


#: Where ``run`` keeps what follows ``--`` (pytest's arguments) in click's context.
PYTEST_ARGS: Final = "pytest_scoring.pytest_args"


class RunCommand(click.Command):
    """``run``: everything after ``--`` goes to pytest as it is, apart from the REPOs."""

    def parse_args(self, ctx: click.Context, args: list[str]) -> list[str]:
        if "--" in args:
            at = args.index("--")
            args, ctx.meta[PYTEST_ARGS] = args[:at], tuple(args[at + 1 :])
        return super().parse_args(ctx, args)

    def collect_usage_pieces(self, ctx: click.Context) -> list[str]:
        return [*super().collect_usage_pieces(ctx), "[-- PYTEST_ARGS...]"]


@main.command(cls=RunCommand)
@click.argument("repos", metavar="REPO...", nargs=-1, required=True)
@click.option(
    "--reference", type=click.Path(path_type=Path), help="Reference checkout; adds db_diff_change"
)
@click.option(
    "--tests-from",
    metavar="PATH",
    type=click.Path(path_type=Path),
    help="Run the tests of PATH (a tree laid out like REPO), not REPO's: its test folders, "
    "conftest.py files and pytest configuration replace REPO's in the copy",
)
@click.option(
    "--config",
    metavar="FILE[#NAME]",
    help="Scorer configuration file (TOML, JSON or YAML); FILE#NAME: the scorer: block of "
    "fixture NAME of a fixtures file",
)
@click.option(
    "--path-map",
    "path_maps",
    multiple=True,
    metavar="SANDBOX=LOCAL",
    callback=_check_path_maps,
    help="Read the sandbox path SANDBOX (e.g. /repo) as the folder LOCAL, relative to REPO "
    "(repeatable)",
)
@click.option("--selector", metavar="JSON|@FILE", help="Selector for db_change / db_diff_change")
@click.option(
    "--report",
    "report_root",
    type=click.Path(path_type=Path, file_okay=False),
    help="Report root outside REPO (default ./scores); the report goes into a new scan_id=… folder",
)
@click.option(
    "--timeout",
    default=3600.0,
    show_default=True,
    type=click.FloatRange(0, min_open=True),
    metavar="S",
    help="Wall-clock limit in seconds; the reference rerun gets 80% of it (at most 600 s)",
)
@fail_under_option
@expected_tests_option
@strict_option
@click.option(
    "--user",
    "users",
    multiple=True,
    metavar="NAME",
    help="User the repository's processes run as (root only; default: a user id of the run's "
    "own); with --jobs N, give it once per job",
)
@click.option(
    "--jobs",
    default=1,
    show_default=True,
    type=click.IntRange(min=1),
    metavar="N",
    help="Repositories scored at the same time, each in its own worker",
)
@click.option(
    "--plugin",
    "plugins",
    multiple=True,
    metavar="MODULE",
    help="Module or .py file whose pytest_scoring_* hooks add scorer types (repeatable)",
)
@click.option(
    "--python",
    metavar="PATH",
    help="Interpreter of the repository's tests; it needs only pytest (default: this one)",
)
@click.option(
    "--black-box",
    is_flag=True,
    help="With --tests-from: the test process loads no file of REPO (its code runs only in "
    "subprocesses the tests start); a test run that does scores N",
)
@click.option(
    "--expected-tests-drop-failing",
    is_flag=True,
    help="With --tests-from and an --expected-tests folder: leave out the tests that fail "
    "there, instead of refusing",
)
@click.option(
    "--allow-empty",
    is_flag=True,
    help="Exit status 0, not 5, when no test was collected (for a batch: in every repository)",
)
@click.option("--keep", is_flag=True, help="Keep the private area with the copy of REPO")
@evidence_option
@click.option(
    "--retries",
    default=0,
    show_default=True,
    type=click.IntRange(min=0),
    metavar="N",
    help="Run each test that did not pass again, up to N times, each in a fresh contained "
    "pytest process; a test whose attempts differ is flaky",
)
@click.option(
    "--flaky",
    default="fail",
    show_default=True,
    type=click.Choice(["fail", "pass", "exclude"]),
    help="How a flaky test counts: fail (it must pass every attempt), pass (one passing "
    "attempt is enough), exclude (left out of total, listed)",
)
@click.option(
    "--env",
    "env",
    multiple=True,
    metavar="NAME=VALUE",
    help="Set a variable of the children's environment, over the pinned one (TZ=UTC, "
    "LC_ALL=C.UTF-8, PYTHONHASHSEED=0…) (repeatable)",
)
@click.option(
    "--db-url",
    "db_urls",
    multiple=True,
    metavar="URL",
    help="Also score the PostgreSQL database of URL, the application's; the run receives it "
    "in DATABASE_URL (repeatable)",
)
@click.option(
    "--db-admin-url",
    metavar="URL",
    help="The evaluator's own, more privileged URL on the server of --db-url; never given to a run",
)
@click.option(
    "--limit",
    "limits",
    multiple=True,
    metavar="KIND=SIZE",
    help="Resource limit of the children: fsize, as, data, nofile, nproc, disk or tests, "
    "e.g. disk=20G; KIND=none lifts one (repeatable)",
)
@click.pass_context
@reports_user_errors
def run(
    ctx: click.Context,
    repos: tuple[str, ...],
    reference: Path | None,
    tests_from: Path | None,
    config: str | None,
    path_maps: tuple[str, ...],
    selector: str | None,
    report_root: Path | None,
    timeout: float,
    fail_under: float | None,
    expected_tests: str | None,
    strict: str | None,
    users: tuple[str, ...],
    jobs: int,
    plugins: tuple[str, ...],
    python: str | None,
    black_box: bool,
    expected_tests_drop_failing: bool,
    allow_empty: bool,
    keep: bool,
    evidence: str | None,
    retries: int,
    flaky: str,
    env: tuple[str, ...],
    db_urls: tuple[str, ...],
    db_admin_url: str | None,
    limits: tuple[str, ...],
) -> None:
    """Score the repository REPO from outside, as the trusted evaluator.

    pytest runs in a private copy of REPO, in a contained child (as a user id of its own when
    run as root); the evaluator takes the snapshots, scores and writes its own report.
    Arguments after -- go to pytest, except --score-* options, which are the evaluator's.
    Shows progress while the runs go on, then the scores.

    Several REPOs (or @FILE, a file listing one per line) are one batch: one scan with one
    sample per repository, --jobs at a time; run again, it keeps what is already scored.

    Example: pytest-scoring run examples/solution-attack --reference examples/reference
    --config examples/scorers.yaml -- --score-deterministic -x

    Example: pytest-scoring run REPO --config fixtures.yaml#database-auth/change-password
    --path-map /repo=.

    Example: pytest-scoring run @outputs.txt --reference examples/reference --jobs 4

    Example: pytest-scoring run REPO --tests-from reference/ --expected-tests ids.txt
    """
    from pytest_scoring.cli.request import RunRequest
    from pytest_scoring.core.determinism import check_flaky_rule
    from pytest_scoring.core.determinism import env_assignments
    from pytest_scoring.evaluation.options import parse_limits

    strict_kinds(strict)
    pytest_args = ctx.meta.get(PYTEST_ARGS, ())
    batch = len(repos) > 1 or repos[0].startswith("@")
    if batch:
        from pytest_scoring.cli.batch import repository_list

        repositories = repository_list(repos, Path.cwd())
    elif len(users) > 1:
        raise OptionError("--user: one repository runs as one user; give it once")
    else:
        repositories = [Path(repos[0])]
    request = RunRequest(
        repositories[0],
        report_root,
        timeout,
        reference,
        config,
        selector,
        fail_under,
        pytest_args,
        path_maps,
        strict,
        expected_tests,
        user=None if batch or not users else users[0],
        plugins=plugins,
        python=python,
        keep=keep,
        limits=parse_limits(limits),
        tests_from=tests_from,
        black_box=black_box,
        allow_empty=allow_empty,
        expected_tests_drop_failing=expected_tests_drop_failing,
        evidence=evidence,
        env=env_assignments(env, "--env"),
        retries=retries,
        flaky=check_flaky_rule(flaky, "--flaky"),
        db_urls=db_urls,
        db_admin_url=db_admin_url,
    )
    from pytest_scoring.cli.routes import run_batch_route
    from pytest_scoring.cli.routes import run_one_route

    try:
        if batch:
            run_batch_route(repositories, request, jobs, users)
        else:
            run_one_route(request)
    except ScoringError as error:  # said with the flags the user typed (issue 29)
        error.args = (request.as_typed(str(error)),)
        raise


@main.command()
@click.argument(
    "reports", metavar="REPORT...", nargs=-1, required=True, type=click.Path(path_type=Path)
)
@click.option(
    "--config", type=click.Path(path_type=Path), metavar="FILE", help="Scorer configuration file"
)
@click.option("--selector", metavar="JSON|@FILE", help="Selector for db_change")
@expected_tests_option
@strict_option
@report_root_option
@click.option(
    "--jobs",
    type=click.IntRange(1),
    default=1,
    show_default=True,
    help="Samples re-scored at a time",
)
@fail_under_option
@click.option(
    "--allow-empty", is_flag=True, help="Exit status 0, not 5, when no report collected a test"
)
@reports_user_errors
def rescore(
    reports: tuple[Path, ...],
    config: Path | None,
    selector: str | None,
    expected_tests: str | None,
    strict: str | None,
    report_root: Path,
    jobs: int,
    fail_under: float | None,
    allow_empty: bool,
) -> None:
    """Score finished reports again from their evidence, into new report folders.

    The repositories are not needed: the tests are scored under a new expected set or strict
    set, db_change and db_diff_change under a new selector, composite formulas anew; what the
    evidence cannot decide scores N. The reports given are never changed. Several reports, or
    a batch's report, give one batch. A REPORT that is an Inspect eval log (LOG.eval) is
    scored from its samples' stores, one sample per Inspect sample.

    Exit statuses as run's: 1 below --fail-under, 5 when no report collected a test.

    Example: pytest-scoring rescore scores/scan_id=… --config stricter.yaml

    Example: pytest-scoring rescore logs/…_refactor_….eval --selector @new.json
    """
    from pytest_scoring.cli.rescoring import rescore_reports

    kinds = None if strict is None else strict_kinds(strict)
    from pytest_scoring.report.batch import collected_nothing
    from pytest_scoring.report.batch import mean_percent_passing
    from pytest_scoring.report.batch import tampered

    done = rescore_reports(reports, config, selector, expected_tests, kinds, report_root, jobs)
    for line in done.lines:
        click.echo(line)
    samples = done.samples  # exit statuses as run's (5: nothing collected; 1: below PCT)
    empty = all(collected_nothing(sample) and not tampered(sample) for sample in samples)
    exit_if_empty(empty, allow_empty, f"any of the {len(samples)} reports")
    complete = all(sample.get("complete") for sample in samples)
    count = len(samples) if done.batch else None
    some_tampered = any(tampered(sample) for sample in samples)
    exit_if_below(mean_percent_passing(samples), fail_under, complete, count, some_tampered)


@main.command()
@click.argument("diff_file", metavar="DIFF_FILE")
@click.argument("selector_file", metavar="SELECTOR_FILE")
@reports_user_errors
def match(diff_file: str, selector_file: str) -> None:
    """Tell whether a selector matches a diff: exit 0 on a match, 1 otherwise.

    DIFF_FILE is a diff (diff.json, or `diff --json` output) or a report's
    diff_of_diffs.json (its after_only and from_tests parts are matched, as
    db_diff_change does); "-" reads standard input.

    Example: pytest-scoring match scores/scan_id=…/diff.json selector.json
    """
    from pytest_scoring.selector.files import match_files

    verdict = match_files(diff_file, selector_file)
    for warning in verdict.warnings:
        click.echo(f"pytest-scoring: warning: {warning}", err=True)
    click.echo("match" if verdict.matched else "no match")
    sys.exit(0 if verdict.matched else 1)


@main.command()
@click.argument("before", type=click.Path(path_type=Path))
@click.argument("after", type=click.Path(path_type=Path))
@click.option("--json", "as_json", is_flag=True, help="Print the diff as JSON (docs/databases.md).")
@click.option(
    "--max-rows",
    type=click.IntRange(min=0),
    default=1000,
    show_default=True,
    help="Example rows kept per list; counts stay exact.",
)
@reports_user_errors
def diff(before: Path, after: Path, as_json: bool, max_rows: int) -> None:
    """Diff two SQLite databases, or two folders of them: exit 0 equal, 1 different.

    Databases are read in place, read-only. A database that cannot be read gets an
    error entry and the exit status is 2.

    Example: pytest-scoring diff before.db after.db --json
    """
    import json

    from pytest_scoring.db.diff import diff_paths
    from pytest_scoring.db.diff_shape import diff_errors
    from pytest_scoring.db.diff_shape import has_changes
    from pytest_scoring.db.diff_shape import summary_table

    result = diff_paths(before, after, max_rows)
    if as_json:
        click.echo(json.dumps(result, indent=2))
    else:
        console().print(summary_table(result))
    errors = diff_errors(result)
    if errors:
        raise DatabaseError("; ".join(errors))
    sys.exit(1 if has_changes(result) else 0)
