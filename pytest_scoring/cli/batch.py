"""Backend of ``pytest-scoring run REPO REPO …``: many repositories in one scan (docs/cli.md).

Each repository is scored exactly as ``run`` scores one (:mod:`pytest_scoring.cli.runner`): a
private area and copy of its own, its children under a supervisor, as an unprivileged user.
The batch adds:

1. checks before anything runs: every REPO is a folder, none is given twice, the options hold
   for every repository; the scorers are built once;
2. work done once (:mod:`pytest_scoring.evaluation.shared`): the reference copied and its
   databases snapshotted, its baseline run, the expected set read, one children's user per
   job checked;
3. the batch's folder (:mod:`pytest_scoring.report.samples`): a new one, or the unfinished one
   of an earlier run of the same batch, with the samples of earlier runs whose inputs match;
4. the other repositories scored ``--jobs`` at a time, each in a worker process of its own
   (:mod:`pytest_scoring.cli.workers`); a repository whose worker fails or runs past its limit
   gets ``"N"`` for every scorer, and the others go on;
5. the report (:mod:`pytest_scoring.report.batch`): ``scores.json`` format 2 with one sample
   per repository, the Scout files with one transcript each, the page, the Markdown summary
   and the JUnit XML of all repositories.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import sys
from collections import deque
from collections.abc import Iterator
from collections.abc import Sequence
from dataclasses import dataclass
from dataclasses import field
from dataclasses import replace
from multiprocessing.connection import wait
from pathlib import Path
from typing import Any
from typing import Final

from pytest_scoring.cli.progress import BatchDisplay
from pytest_scoring.cli.request import RunRequest
from pytest_scoring.cli.request import preload
from pytest_scoring.cli.request import prepare
from pytest_scoring.cli.runner import REFERENCE_SHARE
from pytest_scoring.cli.runner import BatchJob
from pytest_scoring.cli.runner import load_expected_set
from pytest_scoring.cli.workers import Answer
from pytest_scoring.cli.workers import Job
from pytest_scoring.cli.workers import Worker
from pytest_scoring.cli.workers import fork_server
from pytest_scoring.core.settings import ScoringSettings
from pytest_scoring.errors import OptionError
from pytest_scoring.errors import ScoringError
from pytest_scoring.evaluation.area import make_runnable
from pytest_scoring.evaluation.area import new_area
from pytest_scoring.evaluation.area import user_cannot_run
from pytest_scoring.evaluation.area import user_pool
from pytest_scoring.evaluation.assemble import build_scorers
from pytest_scoring.evaluation.assemble import check_scorer_settings
from pytest_scoring.evaluation.hooks import evaluator_plugins
from pytest_scoring.evaluation.options import ParsedArguments
from pytest_scoring.evaluation.shared import JobUser
from pytest_scoring.evaluation.shared import SharedWork
from pytest_scoring.evaluation.shared import job_users
from pytest_scoring.evaluation.shared import share_reference
from pytest_scoring.fs.guard import FileGuard
from pytest_scoring.process.children import ChildRunner
from pytest_scoring.reference.baseline import Baseline
from pytest_scoring.reference.child import reference_timeout
from pytest_scoring.reference.rerun import compute_baseline
from pytest_scoring.report import GITHUB_SUMMARY_ENV
from pytest_scoring.report.batch import BatchResult
from pytest_scoring.report.batch import unscored_sample
from pytest_scoring.report.batch import write_batch_report
from pytest_scoring.report.batch import write_unscored_sample
from pytest_scoring.report.inputs import SampleInputs
from pytest_scoring.report.inputs import batch_key
from pytest_scoring.report.inputs import options_digest
from pytest_scoring.report.inputs import transcript_id
from pytest_scoring.report.markdown import publish_markdown
from pytest_scoring.report.markdown import score_markdown
from pytest_scoring.report.provenance import path_digest
from pytest_scoring.report.samples import JUNIT_FILE
from pytest_scoring.report.samples import SAMPLES_DIR
from pytest_scoring.report.samples import BatchFolder
from pytest_scoring.report.samples import SampleTarget
from pytest_scoring.report.samples import open_batch_folder
from pytest_scoring.report.scout import ScanWriter
from pytest_scoring.report.terminal import shown_value
from pytest_scoring.scorers.base import Scorer
from pytest_scoring.scorers.db_diff_change import DiffChangeScorer

#: Seconds the batch waits for its workers' messages before it looks at the time again.
TICK: Final = 0.5


def repository_list(arguments: Sequence[str], base: Path) -> list[Path]:
    """The repositories ``REPO …`` names, ``@FILE`` arguments read as one path a line.

    In a list file, blank lines and lines starting with ``#`` are skipped; relative paths are
    relative to ``base`` (where ``run`` was started), as on the command line.

    :raises OptionError: naming the argument (or file and line) of a path that is not a
        folder, is given twice, or a list file that cannot be read.
    """
    found: dict[Path, str] = {}
    for path, where in _named(arguments, base):
        if not path.is_dir():
            raise OptionError(f"{where}: {path} is not a folder")
        resolved = path.resolve()
        if resolved in found:
            raise OptionError(f"{where}: {path} is given twice (first as {found[resolved]})")
        found[resolved] = where
    if not found:
        raise OptionError("REPO: no repository given (the list files are empty)")
    return list(found)


def _named(arguments: Sequence[str], base: Path) -> Iterator[tuple[Path, str]]:
    for number, argument in enumerate(arguments, start=1):
        if not argument.startswith("@"):
            yield base / argument, f"REPO {number}"
            continue
        listed = base / argument[1:]
        try:
            lines = listed.read_text(encoding="utf-8").splitlines()
        except (OSError, UnicodeDecodeError) as error:
            reason = getattr(error, "strerror", None) or str(error)
            raise OptionError(
                f"{argument}: cannot read the list of repositories ({reason})"
            ) from None
        for line_number, line in enumerate(lines, start=1):
            if line.strip() and not line.lstrip().startswith("#"):
                yield base / line.strip(), f"{argument}, line {line_number}"


@dataclass
class BatchRequest:
    """What a batch was asked to do: the repositories, and ``run``'s request for each."""

    repositories: list[Path]
    #: ``run``'s options, as for the first repository (``repo`` is replaced for each).
    template: RunRequest
    jobs: int = 1
    #: ``--user`` names: every job's user, or none.
    users: Sequence[str] = ()

    def request(self, repository: Path) -> RunRequest:
        return replace(self.template, repo=repository)


@dataclass
class RepositoryRun:
    """One repository of the batch: its request, its transcript id and inputs, its sample."""

    request: RunRequest
    id: str
    inputs: SampleInputs
    #: Where its sample goes, once the batch's folder is known.
    target: SampleTarget | None = None
    sample: dict[str, Any] | None = None
    #: ``kept`` from an earlier run of the batch (scan id), when it was not scored now.
    kept_from: str | None = None
    notes: list[str] = field(default_factory=list)
    pytest_error: str | None = None

    @property
    def name(self) -> str:
        return str(self.request.repo)


@dataclass
class BatchOutcome:
    """How a batch went: its result and report, what the user must be told."""

    result: BatchResult
    report: Path | None
    runs: list[RepositoryRun]
    interrupted: bool
    notices: list[str]
    report_error: str | None = None

    def pytest_refused_everywhere(self) -> str | None:
        """pytest's message when it refused to run in every repository of the batch (the
        arguments are at fault, not one repository), else None."""
        errors = [run.pytest_error for run in self.runs]
        return errors[0] if all(errors) else None

    def summary_lines(self) -> list[str]:
        """What went wrong or was partial, per repository, then for the batch."""
        lines = [f"{run.name}: {note}" for run in self.runs for note in run.notes]
        lines += self.notices
        if self.interrupted:
            lines.append("interrupted: the report holds the repositories scored so far")
        if self.report_error is not None:
            lines.append(self.report_error)
        return lines


def run_batch(request: BatchRequest, display: BatchDisplayFactory) -> BatchOutcome:
    """Score every repository of ``request`` into one scan.

    :param display: makes the progress display, given the counts to score and kept.
    :raises ScoringError: for bad input, before any repository's code runs.
    """
    preload()
    checked = [prepare(request.request(repository)) for repository in request.repositories]
    parsed, settings = checked[0]
    plugins = evaluator_plugins(request.template.plugins)
    scorers = build_scorers(plugins.hook, parsed.options, settings)
    check_scorer_settings(settings, scorers)
    if settings.databases:
        raise OptionError(
            "--db-url: a batch's repositories would share the database; score one "
            "repository at a time"
        )
    pool = user_pool()
    try:
        users = job_users(request.jobs, request.users, pool)
        area = new_area(settings.report_root, *request.repositories)
    except BaseException:
        if pool is not None:
            pool.close()
        raise
    try:
        template = request.template
        runner = ChildRunner(
            python=template.python or sys.executable,
            limits=template.limits,
            area=area,
            private_folders=True,
            time_limit=REFERENCE_SHARE * template.timeout,
            guard=FileGuard(),
            users=pool if any(job.user is not None for job in users) else None,
            pinned={**settings.environment, **template.env},
        )
        notices: list[str] = []
        users = _checked_users(users, runner, notices)
        shared = _shared_work(settings, scorers, runner, request)
        options = _options_digest(request.template, parsed, settings)
        reference = shared.reference.digest if shared.reference else None
        runs = _repository_runs(request, options, reference)
        key = batch_key(options, reference)
        folder = open_batch_folder(settings.report_root, key, _wanted(runs))
        try:
            outcome = _score_all(request, runs, folder, key, scorers, shared, users, display)
        finally:
            folder.release()
        outcome.notices[:0] = [*notices, *([folder.leftovers] if folder.leftovers else [])]
        _publish(outcome, settings.markdown, parsed.junit_xml)
        if request.template.keep:
            outcome.notices.append(f"the shared private area is kept: {area}")
        return outcome
    finally:
        if not request.template.keep:
            shutil.rmtree(area, ignore_errors=True)
        if pool is not None:
            pool.close()


class BatchDisplayFactory:
    """Makes the display of a batch (given the repositories to score and those kept)."""

    def __init__(self, console: Any):
        self.console = console

    def __call__(self, total: int, kept: int) -> BatchDisplay:
        return BatchDisplay(self.console, total, kept)


def _shared_work(
    settings: ScoringSettings,
    scorers: Sequence[Scorer],
    runner: ChildRunner,
    request: BatchRequest,
) -> SharedWork:
    """What depends only on the reference and the options, made once for the batch: the
    reference copied and snapshotted, its baseline run, the expected set read."""
    reference = baseline = None
    if settings.reference is not None:
        snapshot = not settings.db_exclude  # with exclusions, the list depends on REPO
        reference = share_reference(runner, settings.reference, settings.db_patterns, snapshot)
        if any(isinstance(s, DiffChangeScorer) and s.count_test_changes for s in scorers):
            baseline = _baseline(settings, runner, reference.pristine, request.repositories)
    expected = None
    if settings.expected_source is not None:
        drop_failing = request.template.expected_tests_drop_failing
        expected = load_expected_set(settings, drop_failing, runner, request.repositories)
    assert runner.guard is not None
    return SharedWork(
        environment=runner.environment,
        reference=reference,
        expected=expected,
        baseline=baseline,
        fingerprints=runner.guard.fingerprints(),
        python=runner.python,
    )


def _baseline(
    settings: ScoringSettings, runner: ChildRunner, pristine: Path, repositories: Sequence[Path]
) -> Baseline:
    """The baseline run of the reference's pristine copy, as each repository's run would
    start it (the evaluator's cache is read and written the same way)."""
    timeout = min(reference_timeout(), runner.time_limit or float("inf"))
    same = settings.tests_from_is_reference()  # then each job reads PATH from the copy too
    checkout = replace(settings, reference=pristine, tests_from=pristine if same else None)
    folder = runner.folder("baseline")
    return compute_baseline(checkout, runner, folder, timeout, never_inside=repositories)


def _checked_users(users: list[JobUser], runner: ChildRunner, notices: list[str]) -> list[JobUser]:
    """Each job's user, once checked that it can run the interpreter with pytest (the first
    with a user id of the pool, and a copy of the interpreter made should they need one)."""
    problem = None
    if runner.users is not None:
        runner.user = users[0].user
        problem = make_runnable(runner).problem
    checked = []
    for index, job_user in enumerate(users):
        found = problem
        if found is None and index and job_user.user is not None:
            runner.user = job_user.user
            found = user_cannot_run(runner)
        if found is not None:
            notices.append(f"{found}; its job's tests run as the evaluator's user instead")
            job_user = JobUser(None, found)
        checked.append(job_user)
    runner.user = None
    if problem is not None:
        runner.users = None  # the baseline and the expected-tests folder too
    return checked


def _options_digest(
    template: RunRequest, parsed: ParsedArguments, settings: ScoringSettings
) -> str:
    """The hash of everything the scores depend on beside the repository and the reference."""
    described = {
        **vars(parsed.options.namespace),
        "pytest_args": parsed.pytest_args,
        "timeout": template.timeout,
        "python": template.python,
        "plugins": list(template.plugins),
        "limits": template.limits.to_spec(),
        "selector": settings.selector,
        "as_root": os.geteuid() == 0,
        "env": dict(template.env),
        "retries": settings.retries,
        "flaky": settings.flaky,
    }
    files = [settings.config_file, settings.expected_source]
    files += [Path(plugin) for plugin in template.plugins if plugin.endswith(".py")]
    return options_digest(described, [path for path in files if path is not None])


def _repository_runs(
    request: BatchRequest, options: str, reference: str | None
) -> list[RepositoryRun]:
    runs = []
    for repository in request.repositories:
        content = path_digest(repository)
        inputs = SampleInputs(repository=content, options=options, reference=reference)
        identity = transcript_id(repository, content)
        runs.append(RepositoryRun(request.request(repository), identity, inputs))
    return runs


def _wanted(runs: Sequence[RepositoryRun]) -> dict[str, SampleInputs]:
    return {run.id: run.inputs for run in runs}


def _score_all(
    request: BatchRequest,
    runs: list[RepositoryRun],
    folder: BatchFolder,
    key: str,
    scorers: Sequence[Scorer],
    shared: SharedWork,
    users: list[JobUser],
    display: BatchDisplayFactory,
) -> BatchOutcome:
    """Keep what earlier runs scored, score the rest in workers, write the report."""
    result = BatchResult(folder.scan_id, key, scorers, samples=[])
    folder.write_spec(ScanWriter(result.scan()).spec())
    for run in runs:
        run.target = folder.target(run.id, run.inputs)
        if run.id in folder.kept:
            run.kept_from = folder.kept_from.get(run.id, folder.scan_id)
            run.sample = {**folder.kept[run.id], "kept_from": run.kept_from}
    pending = [run for run in runs if run.sample is None]
    with display(len(pending), len(runs) - len(pending)) as shown:
        interrupted = _score_in_workers(pending, shared, users, request.jobs, shown)
    for run in pending:
        if run.sample is None and run.target is not None:
            reason = _unscored_reason(run, interrupted)
            run.sample = unscored_sample(run.request.repo, run.target, scorers, reason)
            with contextlib.suppress(ScoringError):
                write_unscored_sample(run.target, run.sample)
    result.samples = [run.sample for run in runs if run.sample is not None]
    result.complete = not interrupted
    if interrupted:
        result.errors.append({"scanner": "", "error": "the batch was interrupted", "traceback": ""})
    result.batch = {
        "jobs": request.jobs,
        "repositories": len(runs),
        "scored": len(pending),
        "kept": len(runs) - len(pending),
    }
    outcome = BatchOutcome(result, None, runs, interrupted, [])
    try:
        outcome.report = write_batch_report(folder, result, folder.path.parent)
    except ScoringError as error:
        outcome.report_error = f"score report NOT written: {error}"
    return outcome


def _unscored_reason(run: RepositoryRun, interrupted: bool) -> str:
    """Why a repository has no sample: what its worker said, else why it never started."""
    if run.notes:
        return run.notes[0]
    return "not scored: the batch was interrupted" if interrupted else "not scored"


def _score_in_workers(
    pending: Sequence[RepositoryRun],
    shared: SharedWork,
    users: Sequence[JobUser],
    jobs: int,
    shown: BatchDisplay,
) -> bool:
    """Score ``pending`` in workers, ``jobs`` at a time; True when Ctrl-C stopped the batch."""
    if not pending:
        return False
    context = fork_server()
    waiting = deque(pending)
    running: dict[int, tuple[Worker, RepositoryRun]] = {}
    with _interrupts_counted() as interrupts:
        forwarded = 0
        while waiting or running:
            for slot in range(jobs):
                if slot not in running and waiting and not interrupts:
                    run = waiting.popleft()
                    assert run.target is not None
                    job = Job(run.request, BatchJob(shared, users[slot], run.target))
                    running[slot] = (Worker(context, job), run)
                    shown.running(run.name, None, False)
            if not running:
                break
            workers = [worker for worker, _ in running.values()]
            wait([w.connection for w in workers] + [w.process.sentinel for w in workers], TICK)
            if len(interrupts) > forwarded:
                for worker in workers:
                    worker.interrupt()
                forwarded = len(interrupts)
            for slot, (worker, run) in list(running.items()):
                worker.receive()
                if worker.past_limit() and worker.answer is None:
                    worker.kill()
                if worker.finished():
                    del running[slot]
                    _take_answer(run, worker.outcome(), shown)
                else:
                    shown.running(run.name, worker.progress, worker.scoring)
    return bool(interrupts)


def _take_answer(run: RepositoryRun, answer: Answer, shown: BatchDisplay) -> None:
    run.notes, run.pytest_error = answer.notes, answer.pytest_error
    if answer.sample is not None:
        run.sample = answer.sample
        shown.finished(run.name, _scores_line(run.name, answer.sample), True)
    else:
        reason = answer.notes[0] if answer.notes else "no result"
        shown.finished(run.name, f"{run.name}: not scored ({reason})", False)


def _scores_line(name: str, sample: dict[str, Any]) -> str:
    values = ", ".join(
        f"{scorer}={shown_value(score)}" for scorer, score in (sample.get("scores") or {}).items()
    )
    return f"{name}: {values}"


@contextlib.contextmanager
def _interrupts_counted() -> Iterator[list[int]]:
    """Count Ctrl-C (SIGINT) instead of raising: the batch passes each on to its workers,
    and stops starting new ones."""
    count: list[int] = []
    previous = signal.signal(signal.SIGINT, lambda number, frame: count.append(number))
    try:
        yield count
    finally:
        signal.signal(signal.SIGINT, previous)


def _publish(outcome: BatchOutcome, markdown: Path | None, junit_xml: Path | None) -> None:
    """The Markdown summary (``--score-markdown``, GitHub's step summary) and the JUnit XML of
    all repositories (``--junitxml``), once for the batch."""
    from pytest_scoring.report.junit_write import merge_junit

    report = outcome.report
    if report is None:
        return
    if markdown is not None or os.environ.get(GITHUB_SUMMARY_ENV):
        try:
            publish_markdown(score_markdown(outcome.result.scores_json(), report), markdown)
        except ScoringError as error:
            outcome.notices.append(f"score summary NOT written: {error}")
    if junit_xml is not None:
        parts = [(run.name, report / SAMPLES_DIR / run.id / JUNIT_FILE) for run in outcome.runs]
        try:
            merge_junit(parts, junit_xml)
        except ScoringError as error:
            outcome.notices.append(f"scores NOT added to JUnit XML: {error}")
