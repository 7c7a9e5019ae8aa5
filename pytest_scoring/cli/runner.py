"""Backend of ``pytest-scoring run``: the evaluator scores a repository from outside (docs/cli.md).

The outer process is the evaluator and owns everything that decides a score; the scored
repository's code runs only in children that a supervisor contains (docs/security.md):

1. the options are read from the evaluator's command line alone, the scorers built, every
   module the evaluator will use imported;
2. a private area is made; the reference checkout is copied there, then REPO, before any code
   of REPO runs; the children's user (``--user``, by default a user id of the run's own when
   root) owns the copy of REPO, never the evaluator's files; the reference rerun, the baseline
   and an expected-tests folder each run as a user of their own;
3. the scorers start (database snapshots, the reference rerun), then pytest runs in the copy
   through the supervisor, the launcher and the probe, whose stream gives the outcomes and
   the progress;
4. once the supervisor says every process of the child's tree is gone, the evaluator checks
   its files' fingerprints, scores (within what is left of the timeout), writes its own report
   folder (naming REPO, never the copy) and adds the JUnit properties.
"""

from __future__ import annotations

import getpass
import os
import re
import shutil
import sys
import time
from collections.abc import Callable
from collections.abc import Mapping
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from typing import Final

from pytest_scoring.cli.request import RunRequest
from pytest_scoring.cli.request import database_roles
from pytest_scoring.cli.request import preload
from pytest_scoring.cli.request import prepare
from pytest_scoring.core.determinism import PINNED_ENVIRONMENT
from pytest_scoring.core.determinism import PINNED_UMASK
from pytest_scoring.core.outcomes import OutcomeTally
from pytest_scoring.core.settings import ScoringSettings
from pytest_scoring.core.signals import EvaluatorSide
from pytest_scoring.core.signals import Signal
from pytest_scoring.core.signals import cap_signals
from pytest_scoring.core.signals import early_end_signal
from pytest_scoring.core.signals import make_signal
from pytest_scoring.evaluation.area import EvaluatorsTests
from pytest_scoring.evaluation.area import copy_reference
from pytest_scoring.evaluation.area import copy_repository
from pytest_scoring.evaluation.area import copy_tests_from
from pytest_scoring.evaluation.area import interpreter_versions
from pytest_scoring.evaluation.area import make_runnable
from pytest_scoring.evaluation.area import new_area
from pytest_scoring.evaluation.area import requested_user
from pytest_scoring.evaluation.area import user_pool
from pytest_scoring.evaluation.assemble import build_scorers
from pytest_scoring.evaluation.assemble import check_scorer_settings
from pytest_scoring.evaluation.hooks import evaluator_plugins
from pytest_scoring.evaluation.options import ParsedArguments
from pytest_scoring.evaluation.reruns import Rerun
from pytest_scoring.evaluation.reruns import RerunCopy
from pytest_scoring.evaluation.reruns import rerun_failures
from pytest_scoring.evaluation.scoring import Evaluation
from pytest_scoring.evaluation.scoring import ScoringTimedOut
from pytest_scoring.evaluation.scoring import scoring_deadline
from pytest_scoring.evaluation.shared import JobUser
from pytest_scoring.evaluation.shared import SharedReference
from pytest_scoring.evaluation.shared import SharedWork
from pytest_scoring.fs.guard import FileGuard
from pytest_scoring.fs.witness import FilesWitness
from pytest_scoring.kit.integrity import STOPPED_EARLY
from pytest_scoring.kit.launch import NO_PYTEST
from pytest_scoring.process.children import BlackBox
from pytest_scoring.process.children import ChildRunner
from pytest_scoring.process.children import grace_period
from pytest_scoring.process.children import read_tail
from pytest_scoring.process.stream import ProbeState
from pytest_scoring.process.supervisor import ChildExit
from pytest_scoring.process.users import UserPool
from pytest_scoring.process.witness import INTERNAL_ERROR
from pytest_scoring.process.witness import ChildEnding
from pytest_scoring.process.witness import NotStarted
from pytest_scoring.process.witness import black_box_refusal
from pytest_scoring.process.witness import internal_error
from pytest_scoring.process.witness import internal_error_line
from pytest_scoring.process.witness import not_started
from pytest_scoring.process.witness import witness_signals
from pytest_scoring.reference.baseline import BaselineRun
from pytest_scoring.reference.expected import ExpectedTests
from pytest_scoring.reference.expected import load_expected_tests
from pytest_scoring.reference.expected import refuse_dropped
from pytest_scoring.report.provenance import path_digest
from pytest_scoring.report.samples import JUNIT_FILE
from pytest_scoring.report.samples import SampleTarget
from pytest_scoring.scorers.tests import counted_percent_passing
from pytest_scoring.scorers.tests import tampering

#: Share of ``--timeout`` the reference rerun may take, leaving time to score and report.
REFERENCE_SHARE: Final = 0.8
#: pytest's exit status for a usage error (a bad option in the arguments or the ini files).
PYTEST_USAGE_ERROR: Final = 4
#: pytest's exit statuses of a session that ended as pytest meant it to.
PYTEST_ENDED: Final = frozenset({0, 1, 2, 5})
#: How much of pytest's output a message about it shows.
OUTPUT_SHOWN: Final = 8_000


@dataclass
class RunResult:
    """How a run went: its report, how the child ended, what the user must be told."""

    evaluation: Evaluation
    ended: ChildExit
    state: ProbeState
    report: Path | None
    #: One-line notices, in order (partial containment, missing dependencies…).
    notices: list[str]
    #: pytest's own output when it refused to run (a usage error), shown verbatim.
    pytest_error: str | None = None

    @property
    def timed_out(self) -> bool:
        return self.ended.timed_out

    @property
    def interrupted(self) -> bool:
        stopped = self.evaluation.stopped or ""
        return self.ended.interrupted or stopped.startswith("scoring was interrupted")

    def percent_passing(self) -> float:
        """What ``--fail-under`` compares: proven tampering counts as 0 %."""
        return counted_percent_passing(self.evaluation.context)

    @property
    def tampered(self) -> bool:
        """Tampering was proven: the test scores are ``"N"``."""
        return bool(tampering(self.evaluation.context))

    def summary_lines(self, timeout: float) -> list[str]:
        """What went wrong or was partial, one line (or block) each, for after the scores."""
        evaluation, extra = (
            self.evaluation,
            self.evaluation.result.extra if self.evaluation.result else {},
        )
        lines = []
        if self.ended.timed_out:
            lines.append(f"timed out after {timeout:g} s: the report holds what ran")
        elif self.ended.interrupted:
            lines.append("interrupted: the report holds what ran")
        if evaluation.stopped is not None:
            lines.append(f"{evaluation.stopped}: the report holds what was scored")
        if evaluation.withheld is not None:
            lines.append(f"every score is N: {evaluation.withheld}")
        if extra.get("containment") == "partial":
            lines.append(f"containment: partial ({extra.get('containment_reason')})")
        lines += self.notices
        problems = (evaluation.leftovers, evaluation.report_error, evaluation.junit_error)
        for problem in (*problems, evaluation.junit_cut):
            if problem is not None:
                lines.append(problem)
        return lines


@dataclass(frozen=True)
class Measured:
    """What the evaluator measured of the run before any code of the repository ran."""

    #: The repository's hash (for the report's provenance).
    digest: str
    #: The children's interpreter's ``python`` and ``pytest`` versions.
    versions: dict[str, str | None]


@dataclass(frozen=True)
class BatchJob:
    """What a batch gives one repository's run (docs/cli.md#many-repositories): the work done
    once for all, the job's own children's user, and where the repository's sample goes."""

    shared: SharedWork
    user: JobUser
    target: SampleTarget


def run_repository(
    request: RunRequest,
    on_progress: Callable[[ProbeState, bool], Any] = lambda state, done: None,
    say: Callable[[str], Any] = lambda line: None,
    job: BatchJob | None = None,
) -> RunResult:
    """Score ``request.repo`` from outside: copies, a contained child, scoring, the report.

    :param on_progress: called with the probe's state while the tests run, and whether
        they are over.
    :param say: shown at once (a notice that the run goes on with partial containment).
    :param job: in a batch, the shared work and the job's user (already checked), and the
        sample folder written instead of a report folder.
    :raises ScoringError: for bad input, before any child starts.
    """
    preload()
    parsed, settings = prepare(request)
    plugins = evaluator_plugins(request.plugins)
    scorers = build_scorers(plugins.hook, parsed.options, settings)
    check_scorer_settings(settings, scorers)
    database_problems = database_roles(settings)  # before the first snapshot
    users = user_pool() if job is None or job.user.user is not None else None
    try:
        runner, problem = _runner(request, settings, users, job)
    except BaseException:
        if users is not None:
            users.close()
        raise
    area = runner.area
    assert area is not None
    try:
        ready = make_runnable(runner) if job is None and runner.users is not None else None
        if ready is not None and ready.problem is not None:
            say(f"pytest-scoring: {ready.problem}; the tests run as {getpass.getuser()} instead")
            runner.user, runner.users, problem = None, None, ready.problem
        # Measured before any code of the repository runs: the child's own word is its claim.
        # The check of the session's user found them already, where it ran.
        versions = (ready and ready.versions) or interpreter_versions(runner)
        expected = job.shared.expected if job else None
        tally = _tally(settings, runner, expected, request.expected_tests_drop_failing)
        shared_reference = job.shared.reference if job else None
        # Hashed before it is copied, for the report's provenance (a batch has done it).
        digest = job.target.inputs["repository"] if job else path_digest(request.repo)
        names, placed = _place_copies(request, settings, runner, shared_reference)
        evaluation = Evaluation(
            settings,
            scorers,
            hooks=plugins.hook,
            hook_config=parsed.options,
            children=runner,
            tally=tally,
        )
        evaluation.names = names
        if placed is not None:
            placed.give(evaluation.context.inputs)
        if job is not None:
            _use_shared_work(evaluation, job.shared)
        problems = [*([problem] if problem else []), *database_problems]
        try:
            measured = Measured(digest, versions)
            return _run(request, parsed, evaluation, problems, on_progress, measured, job)
        finally:
            evaluation.close()  # its helper process, when the run ends before its report
    finally:
        if request.keep:
            say(f"pytest-scoring: the private area is kept: {area}")
        else:
            shutil.rmtree(area, ignore_errors=True)
        if users is not None:
            users.close()


def _runner(
    request: RunRequest, settings: ScoringSettings, users: UserPool | None, job: BatchJob | None
) -> tuple[ChildRunner, str | None]:
    """The run's children (their private area, the session's user, the interpreter), and why
    containment is partial, if it is.

    :raises OptionError: for a ``--user`` that cannot be used (another run holds it).
    """
    if job is not None:
        user, problem = job.user.user, job.user.problem
    else:
        user, problem = requested_user(request.user, users)
    runner = ChildRunner(
        python=request.python or sys.executable,
        user=user,
        limits=request.limits,
        area=new_area(settings.report_root, request.repo),
        private_folders=True,
        time_limit=REFERENCE_SHARE * request.timeout,
        guard=FileGuard(job.shared.fingerprints if job else None),
        # The session as the evaluator (--user root): the other runs are the evaluator's too.
        users=users if user is not None else None,
        # --env wins over the configuration, which wins over the databases' URLs.
        pinned={**database_urls(settings), **settings.environment, **request.env},
    )
    if job is not None:  # the interpreter the jobs' users can run, and its environment
        runner.environment = dict(job.shared.environment)
        runner.python = job.shared.python or runner.python
    runner.environment = without_libpq(runner.environment)
    return runner, problem


def database_urls(settings: ScoringSettings) -> dict[str, str]:
    """Each server database's URL, in the variable its run receives it through (the
    application's: the evaluator's own URL never reaches a child)."""
    return {database.env: database.url for database in settings.databases}


def without_libpq(environment: Mapping[str, str]) -> dict[str, str]:
    """``environment`` without libpq's variables (``PGPASSWORD``, ``PGHOST``, ``PGSERVICEFILE``…):
    the evaluator's own may reach its server as the admin. One the evaluator gives with
    ``--env`` is pinned over this, so it still reaches the children."""
    return {name: value for name, value in environment.items() if not name.startswith("PG")}


def _tally(
    settings: ScoringSettings,
    runner: ChildRunner,
    expected: ExpectedTests | None = None,
    drop_failing: bool = False,
) -> OutcomeTally:
    """The run's tally, with the expected set (``--expected-tests``) when one is given: a
    folder runs here, on the evaluator's side, never inside the scored repository's pytest.

    :param runner: where a folder's run gets its user.
    :param expected: the set, when a batch has read it already.
    :param drop_failing: ``--expected-tests-drop-failing``.
    :raises OptionError: for a set that cannot be read or run.
    """
    tally = OutcomeTally(flaky_rule=settings.flaky)
    if expected is None and settings.expected_source is not None:
        expected = load_expected_set(settings, drop_failing, runner)
    if expected is not None:
        tally.expected, tally.expected_source = expected.outcomes, expected.describe()
    return tally


def _place_copies(
    request: RunRequest,
    settings: ScoringSettings,
    runner: ChildRunner,
    shared: SharedReference | None = None,
) -> tuple[dict[str, str], EvaluatorsTests | None]:
    """Copy the reference and ``--tests-from`` PATH, then REPO (with PATH's tests put in),
    into the private area; the settings point at the copies.

    :param shared: the reference's pristine copy a batch made for all its repositories.
    :returns: each copy's path and the name the report uses for it; what PATH's tests did.
    """
    names = {}
    reference = settings.reference
    if settings.reference is not None:
        pristine = shared.pristine if shared else copy_reference(runner, settings.reference)
        names[str(pristine)] = str(settings.reference)
        settings.reference = pristine
    tests_from = None
    if settings.tests_from is not None:
        public = str(settings.tests_from)
        if settings.tests_from == reference and settings.reference is not None:
            path = settings.reference  # PATH is the reference: its pristine copy serves both
        else:
            path = copy_tests_from(runner, settings.tests_from)
            names[str(path)] = public
        settings.tests_from, tests_from = path, (path, public)
    copy, placed = copy_repository(runner, request.repo, tests_from)
    names[str(copy)] = str(request.repo)
    assert runner.area is not None
    names[str(runner.area)] = "<private area>"
    settings.root, settings.repository = copy, request.repo
    settings.scratch = runner.folder("snapshots")
    return names, placed


def load_expected_set(
    settings: ScoringSettings,
    drop_failing: bool,
    runner: ChildRunner,
    never_inside: Sequence[Path] = (),
) -> ExpectedTests:
    """``--expected-tests``; with ``--tests-from``, a source folder's set may drop the tests
    that fail there only with ``--expected-tests-drop-failing``.

    :param runner: where a folder's run gets its user.
    :param never_inside: more folders a scored repository can write (a batch's others).
    :raises OptionError: for a set that cannot be read or run, or drops tests it may not.
    """
    assert settings.expected_source is not None
    expected = load_expected_tests(
        settings.expected_source,
        "--expected-tests",
        runner,
        route=settings.cache_route,
        never_inside=[*settings.scored_places(), *never_inside],
    )
    if settings.tests_from is not None and not drop_failing:
        refuse_dropped(expected, "--expected-tests")
    return expected


def _use_shared_work(evaluation: Evaluation, shared: SharedWork) -> None:
    """Let ``db_diff_change`` start from what the batch made once: the snapshot of the
    reference (when the same databases would be found in this repository's copy of it, no
    folder being excluded) and the baseline run."""
    reference, inputs = shared.reference, evaluation.context.inputs
    excluded = evaluation.settings.excluded_folders
    if reference and reference.initial is not None and not excluded(reference.pristine):
        inputs.initial_reference = reference.initial
    if shared.baseline is not None:
        inputs.baseline = BaselineRun.made(shared.baseline)


def _run(
    request: RunRequest,
    parsed: ParsedArguments,
    evaluation: Evaluation,
    problems: list[str],
    on_progress: Callable[[ProbeState, bool], Any],
    measured: Measured,
    job: BatchJob | None = None,
) -> RunResult:
    """Start the scorers, run the tests in a contained child, score, report."""
    runner, settings = evaluation.context.children, evaluation.settings
    deadline = time.monotonic() + request.timeout
    junit_target = parsed.junit_xml
    if job is not None:
        junit_target = job.target.prepare() / JUNIT_FILE if junit_target else None
    evaluation.start(report_folder=job is None)  # a batch's sample has no Parquet files
    args, junit_inside = _junit_args(parsed, runner)
    installed = evaluation.context.inputs.tests_from
    witness = None
    if installed is not None:  # PATH's configuration, rootdir and test files come first
        args = [*installed.args, *args]
        witness = FilesWitness.start(settings.root, installed.evaluators)
    child = runner.start_pytest(
        settings.root,
        args,
        request.timeout,
        deterministic=settings.deterministic,
        ignored_options=parsed.ignored,
        tally=evaluation.tally,
        black_box=_black_box(request, evaluation),
    )
    ended = child.wait(on_progress)
    state, ending = child.state, child.ending(ended)
    # Every process of the child's tree is gone by now: what the witness saw is final.
    witnessed = witness.signals() if witness is not None else []
    exceeded = runner.disk_exceeded()  # measured once more now the tests are over
    if exceeded is not None:
        evaluation.withheld, evaluation.withheld_as = exceeded, "repository"
    problems = _containment(problems, runner)
    trusted = frozenset(installed.evaluators) if installed is not None else frozenset()
    integrity, side = _integrity(
        state, ended, ending, evaluation.tally, problems, parsed.stops_early, trusted, witnessed
    )
    reruns = 0
    if settings.retries and _may_rerun(ended, state, exceeded):
        reruns, integrity, side = _rerun(request, parsed, evaluation, deadline, integrity, side)
    evaluation.context.integrity, evaluation.context.evaluator_side = integrity, side
    evaluation.context.not_started = _renamed_reason(
        not_started(state, ending) or _internal_error(state, ending), evaluation.names
    )
    # The evaluator's own stop (its -x) leaves tests unrun: the run is not complete either.
    stopped_by_evaluator = any(signal["kind"] == "early_end" for signal in side.caused)
    evaluation.interrupted = not session_complete(ended, state) or stopped_by_evaluator
    # Without --strict, containment is strict where the repository's processes ran as root;
    # the report's options say which kinds were strict.
    settings.strict = settings.strict.for_run(as_root=runner.user is None and os.geteuid() == 0)
    evaluation.context.strict = settings.strict.kinds
    if state.refused is not None:  # --black-box: the refusal ended the session, not tampering
        evaluation.context.not_started = black_box_refusal(state.refused)
        kept = [signal for signal in integrity if signal["kind"] != "early_end"]
        evaluation.context.integrity = kept
    if state.past_max_tests:
        evaluation.context.not_started = NotStarted(
            f"the session ran more than {runner.limits.tests:,} tests, the most the evaluator "
            "records (--limit tests=N raises it)",
            unscored="repository",
        )
    pytest_error = _pytest_error(ended, state, child.log, evaluation.names)
    if job is not None:  # a repository that hung or did not run scores "N" in a batch
        failure = _run_failure(ended, pytest_error, request.timeout)
        if evaluation.withheld is None and failure is not None:  # what the repository did
            evaluation.withheld, evaluation.withheld_as = failure, "repository"
    _score_in_time(evaluation, max(deadline - time.monotonic(), grace_period(request.timeout)))
    result = evaluation.result
    assert result is not None
    problems = _containment(problems, runner)
    result.extra.update(
        containment="partial" if problems else "full",
        containment_reason="; ".join(problems) or None,
        run=_run_section(request.python or sys.executable, runner, ended, state, measured.versions),
    )
    if settings.retries:
        result.extra["run"].update(retries=settings.retries, reruns=reruns, flaky=settings.flaky)
    if installed is not None:
        result.extra["tests_from"] = installed.to_json()
    result.provenance["inputs"] = {**result.provenance["inputs"], "repository": measured.digest}
    sample = job.target if job else None
    report = evaluation.report(junit_target, sample=sample, junit_source=junit_inside)
    return RunResult(
        evaluation,
        ended,
        state,
        report,
        notices=_notices(runner, state),
        pytest_error=pytest_error,
    )


def _internal_error(state: ProbeState, ending: ChildEnding) -> NotStarted | None:
    """pytest ended its session with an INTERNALERROR (its exit status and the probe's end
    record both say 3): the session is incomplete and the test scores ``"N"``, as by every
    route."""
    if ending.exit_code != INTERNAL_ERROR or state.exit_status() not in (INTERNAL_ERROR, None):
        return None
    if state.start is None:
        return None
    state.tally.broken = True
    return internal_error(internal_error_line(ending.output))


def _may_rerun(ended: ChildExit, state: ProbeState, exceeded: str | None) -> bool:
    """Reruns follow a session that ended as pytest meant it to, within every limit."""
    within = exceeded is None and state.refused is None and not state.past_max_tests
    return within and session_complete(ended, state)


def _rerun(
    request: RunRequest,
    parsed: ParsedArguments,
    evaluation: Evaluation,
    deadline: float,
    integrity: list[Signal],
    side: EvaluatorSide,
) -> tuple[int, list[Signal], EvaluatorSide]:
    """``--retries``: the tests that did not pass, run again in fresh copies; every rerun's
    signals join the session's (docs/scoring.md#reruns).

    :returns: how many reruns ran, and the signals and the evaluator's side with theirs.
    """
    settings, found, caused = evaluation.settings, list(integrity), list(side.caused)

    def take(rerun: Rerun) -> None:
        signals, its_side = _integrity(
            rerun.state,
            rerun.ended,
            rerun.ending,
            rerun.state.tally,
            [],
            parsed.stops_early,
            rerun.trusted,
            rerun.witnessed,
        )
        found.extend(signals)
        caused.extend(its_side.caused)

    tests_from = None
    if settings.tests_from is not None:
        path = settings.tests_from
        tests_from = (path, evaluation.names.get(str(path), str(path)))

    def fresh_copy(attempt: int) -> RerunCopy:
        runner = evaluation.context.children
        path, placed = copy_repository(runner, request.repo, tests_from, f"rerun-{attempt}")
        if placed is None:
            return RerunCopy(path, parsed.pytest_args)
        installed = placed.installed
        black_box = None
        if request.black_box:
            evaluator = [path / relpath for relpath in installed.evaluators]
            black_box = BlackBox(evaluator, [request.repo])
        return RerunCopy(
            path,
            [*installed.args, *parsed.pytest_args],
            frozenset(installed.evaluators),
            FilesWitness.start(path, installed.evaluators),
            black_box,
        )

    latest = deadline - grace_period(request.timeout)
    done = rerun_failures(evaluation, settings.retries, fresh_copy, take, latest, parsed.ignored)
    side = EvaluatorSide(paths=side.paths, caused=tuple(caused))
    return done, cap_signals(found, side), side


def _black_box(request: RunRequest, evaluation: Evaluation) -> BlackBox | None:
    """``--black-box``: the files of the copy the test process may load (the evaluator's),
    and REPO itself, which it may not load either."""
    if not request.black_box:
        return None
    root = evaluation.settings.root
    return BlackBox([root / relpath for relpath in evaluator_files(evaluation)], [request.repo])


def evaluator_files(evaluation: Evaluation) -> list[str]:
    """What ``--tests-from`` put into the copy (relative paths; a folder ends with ``/``)."""
    installed = evaluation.context.inputs.tests_from
    return [] if installed is None else list(installed.evaluators)


def _run_failure(ended: ChildExit, pytest_error: str | None, timeout: float) -> str | None:
    """Why a repository's run gave nothing to score: it timed out, or pytest did not run."""
    if ended.timed_out:
        return f"the run timed out after {timeout:g} s"
    if pytest_error is not None:
        lines = [line.strip() for line in pytest_error.splitlines() if line.strip()]
        return f"pytest did not run: {lines[-1] if lines else ended.describe()}"
    return None


def _containment(problems: list[str], runner: ChildRunner) -> list[str]:
    return list(dict.fromkeys([*problems, *runner.containment_problems()]))


def _integrity(
    state: ProbeState,
    ended: ChildExit,
    ending: ChildEnding,
    tally: OutcomeTally,
    problems: list[str],
    stops_early: bool,
    trusted: frozenset[str] = frozenset(),
    witnessed: Sequence[Signal] = (),
) -> tuple[list[Signal], EvaluatorSide]:
    """The run's integrity signals (the probe's, what its stream and the child's exit show was
    done to them, how the session ended, partial containment), and which of them the evaluator
    caused.

    :param stops_early: the evaluator's own pytest arguments may stop the session early.
    :param trusted: files and folders of the copy that are the evaluator's (``--tests-from``).
    :param witnessed: what was done to those files while the tests ran.
    """
    signals = [*state.integrity, *witness_signals(state, ending), *witnessed]
    if tally.expected is not None:  # with a set, selection cannot change a score
        signals = [signal for signal in signals if signal["kind"] != "selection"]
    reason, file = state.stop()
    if not state.finished_session():
        reason = "the run timed out" if ended.timed_out else f"pytest {ended.describe()}"
    early = early_end_signal(tally.not_run(), reason, file)
    containment = [make_signal("containment", problem) for problem in problems]
    found = [*signals, *([early] if early else []), *containment]
    caused = [signal for signal in found if _ended_by_evaluator(signal, ended, stops_early)]
    side = EvaluatorSide(paths=trusted, caused=tuple(caused))
    return cap_signals(found, side), side


#: Kinds that say how a session ended, which the evaluator's own stop explains.
ENDING_KINDS: Final = frozenset({"early_end", "exit_mismatch"})


def _ended_by_evaluator(signal: Signal, ended: ChildExit, stops_early: bool) -> bool:
    """The evaluator itself ended the session: its deadline, its Ctrl-C, or pytest stopping
    as the evaluator's own ``-x``/``--maxfail`` asked. Then the signal informs: the tests
    that did not run still count as failed. A ``pytest.exit()`` in the repository (its file
    named) is always the repository's."""
    if signal["kind"] not in ENDING_KINDS or signal["file"] is not None:
        return False
    if ended.timed_out or ended.interrupted:
        return True
    stopped = signal["kind"] == "early_end" and signal["detail"].startswith(STOPPED_EARLY)
    return stops_early and stopped


def _score_in_time(evaluation: Evaluation, seconds: float) -> None:
    """Score within ``seconds``; Ctrl-C or the deadline still leaves a result to report."""
    try:
        with scoring_deadline(seconds):
            evaluation.score()
    except ScoringTimedOut:
        evaluation.stopped = evaluation.stopped or "scoring ran past the timeout"
    except KeyboardInterrupt:
        evaluation.stopped = evaluation.stopped or "scoring was interrupted (Ctrl-C)"
    if evaluation.result is None:  # stopped between two scorers, outside any of them
        evaluation.score()


def _run_section(
    python: str,
    runner: ChildRunner,
    ended: ChildExit,
    state: ProbeState,
    versions: dict[str, str | None],
) -> dict[str, Any]:
    """How the child ran, for ``scores.json``: what the evaluator measured (``python``: the
    interpreter named, which the children may have run a copy of), and apart from it what the
    child's pytest said of itself (the repository's code can change that)."""
    user = runner.user.name if runner.user is not None else getpass.getuser()
    start = state.start or {}
    return {
        "python": python,
        "user": user,
        "pytest": versions["pytest"],
        "python_version": versions["python"],
        "exit_code": ended.exit_code,
        "signal": ended.signal,
        "timed_out": ended.timed_out,
        "interrupted": ended.interrupted,
        "duration": ended.duration,
        "cpu_time": ended.cpu_time,
        "probe_lines_rejected": state.rejected,
        "child_claimed": {key: start.get(key) for key in versions} if state.start else None,
        **pinned_section(runner),
    }


def pinned_section(runner: ChildRunner) -> dict[str, Any]:
    """What the children's environment was pinned to (``run.pinned``, ``run.umask``) and
    the names the evaluator set (``run.env``: their values may be secrets, never written)."""
    if runner.pinned is None:
        return {}
    environment = runner.child_environment()
    return {
        "pinned": {name: environment[name] for name in PINNED_ENVIRONMENT},
        "umask": f"{PINNED_UMASK:04o}",
        "env": sorted(runner.pinned),
    }


def _junit_args(parsed: ParsedArguments, runner: ChildRunner) -> tuple[list[str], Path | None]:
    """The child's arguments: ``--junitxml`` goes to a file in a folder the child may write."""
    if parsed.junit_xml is None:
        return parsed.pytest_args, None
    inside = runner.workspace("junit") / "junit.xml"
    return [*parsed.pytest_args, f"--junitxml={inside}"], inside


MISSING_MODULE: Final = re.compile(r"No module named '([^']+)'")


def _notices(runner: ChildRunner, state: ProbeState) -> list[str]:
    """What the user must read beside the scores: modules the tests could not import."""
    missing = sorted(
        {
            match.group(1).split(".")[0]
            for error in state.collect_errors
            for match in MISSING_MODULE.finditer(error["longrepr"])
        }
    )
    if not missing:
        return []
    names = ", ".join(missing)
    first = next(e for e in state.collect_errors if MISSING_MODULE.search(e["longrepr"]))
    shown = "\n".join(first["longrepr"].strip().splitlines()[-15:])
    return [
        f"the tests could not import {names} with {runner.python}: that interpreter lacks "
        f"the repository's dependencies (give one that has them with --python PATH)",
        f"pytest's error ({first['nodeid']}):\n{shown}",
    ]


def _pytest_error(
    ended: ChildExit, state: ProbeState, log: Path, names: dict[str, str]
) -> str | None:
    """pytest's own output when it refused to run: a usage error, no pytest, no interpreter."""
    if ended.error is not None:
        return ended.error
    if state.start is not None or ended.exit_code not in (PYTEST_USAGE_ERROR, NO_PYTEST):
        return None
    return _renamed(read_tail(log, OUTPUT_SHOWN).strip(), names)


def _renamed(text: str, names: dict[str, str]) -> str:
    """``text`` naming REPO and the reference where it names their private copies."""
    for private, public in names.items():
        text = text.replace(private, public)
    return text


def _renamed_reason(found: NotStarted | None, names: dict[str, str]) -> NotStarted | None:
    if found is None:
        return None
    return NotStarted(_renamed(found.reason, names), found.unscored)


def session_complete(ended: ChildExit, state: ProbeState) -> bool:
    """The session ended as pytest meant it to: the probe's end line, pytest's own exit
    status, no interrupt, no timeout, no signal."""
    status = state.exit_status()
    return (
        state.finished_session()
        and not state.interrupted()
        and status in PYTEST_ENDED
        and ended.exit_code == status
        and not (ended.timed_out or ended.interrupted or ended.signal or ended.error)
    )
