"""The scoring session on the controller: pytest's side of an :class:`Evaluation`.

:class:`ScoringSession` is registered as a plugin (named ``scoring-session``) only on the
controller, never on pytest-xdist workers, so snapshots, scoring and the report happen once.
It feeds pytest's reports and the session's integrity signals to the evaluation
(:mod:`pytest_scoring.evaluation.scoring`), which does the rest without pytest.
"""

from __future__ import annotations

import contextlib
import gc
from collections.abc import Iterator
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING
from typing import Any

import pytest

from pytest_scoring.core.outcomes import OutcomeTally
from pytest_scoring.core.settings import ScoringSettings
from pytest_scoring.core.signals import EvaluatorSide
from pytest_scoring.core.signals import Signal
from pytest_scoring.core.signals import cap_signals
from pytest_scoring.core.signals import early_end_signal
from pytest_scoring.core.signals import interpreter_paths
from pytest_scoring.core.signals import make_signal
from pytest_scoring.evaluation.scoring import Evaluation
from pytest_scoring.evaluation.scoring import last_result
from pytest_scoring.kit.integrity import IntegrityWatch
from pytest_scoring.kit.integrity import ini_signals
from pytest_scoring.kit.integrity import relative_inside
from pytest_scoring.kit.integrity import repository_root
from pytest_scoring.kit.integrity import stop_reason
from pytest_scoring.process.witness import internal_error
from pytest_scoring.process.witness import witness_signals
from pytest_scoring.scorers.base import Scorer

if TYPE_CHECKING:
    from pytest_scoring.evaluation.reruns import Rerun
    from pytest_scoring.reference.expected import ExpectedTests

__all__ = [
    "PLUGIN_NAME",
    "ScoringSession",
    "XdistCollection",
    "last_result",
    "new_evaluation",
    "repository_root",
]

PLUGIN_NAME = "scoring-session"


class ScoringSession:
    """Collects outcomes during the session and scores it at the end."""

    def __init__(
        self,
        config: pytest.Config,
        evaluation: Evaluation,
        watch: IntegrityWatch,
        expected: ExpectedTests | None = None,
    ):
        """:param evaluation: from :func:`new_evaluation`, perhaps prepared already."""
        if evaluation.settings.retries:  # loaded before any test runs, and only when asked for
            import pytest_scoring.evaluation.reruns  # noqa: F401
        self.config = config
        self.repository = repository_root(config)
        tally = evaluation.tally
        if expected is not None:
            tally.expected, tally.expected_source = expected.outcomes, expected.describe()
        self.evaluation = evaluation
        #: The evaluation's tally, held here for the hook every phase report goes through.
        self.tally = tally
        self.watch = watch
        #: What ended the session, when pytest was interrupted or ``pytest.exit()`` called.
        self.stopped_by: pytest.ExceptionInfo[BaseException] | None = None

    @property
    def scorers(self) -> list[Scorer]:
        """The scorers the session runs (a conftest may add to them before it ends)."""
        return self.evaluation.scorers

    @pytest.hookimpl
    def pytest_report_header(self) -> list[str]:
        """What the configuration held that this session does not use (a fixture's sandbox)."""
        return [f"scoring: {note}" for note in self.evaluation.settings.notes]

    @pytest.hookimpl
    def pytest_sessionstart(self, session: pytest.Session) -> None:
        self.evaluation.start()
        self.config.add_cleanup(self.evaluation.close)  # no helper process outlives pytest

    @pytest.hookimpl
    def pytest_collectreport(self, report: pytest.CollectReport) -> None:
        self.tally.record_collection(report)

    @pytest.hookimpl
    def pytest_runtest_logreport(self, report: pytest.TestReport) -> None:
        self.tally.record_test(report)
        self.watch.check_report(report)

    @pytest.hookimpl
    def pytest_collection_finish(self, session: pytest.Session) -> None:
        self.tally.record_collected(item.nodeid for item in session.items)

    @pytest.hookimpl
    def pytest_keyboard_interrupt(self, excinfo: pytest.ExceptionInfo[BaseException]) -> None:
        # pytest stops itself after collection errors by raising Session.Interrupted (a
        # KeyboardInterrupt): that session ended as pytest meant it to, so it stays complete.
        interrupted = not isinstance(excinfo.value, pytest.Session.Interrupted)
        self.evaluation.interrupted = interrupted
        self.stopped_by = excinfo if interrupted else None

    @pytest.hookimpl
    def pytest_internalerror(self, excrepr: object) -> None:
        """pytest's session ends with an INTERNALERROR: it did not complete, and the test
        scores are ``"N"`` saying so, as by every route (docs/scoring.md#broken-sessions)."""
        lines = [line.strip() for line in str(excrepr).splitlines() if line.strip()]
        self.evaluation.interrupted = self.tally.broken = True
        self.evaluation.context.not_started = internal_error(lines[-1] if lines else None)

    # trylast: score after other plugins' sessionfinish (e.g. junitxml has its tally).
    @pytest.hookimpl(trylast=True)
    def pytest_sessionfinish(self, session: pytest.Session, exitstatus: int) -> None:
        with garbage_collection_paused():
            # pytest's own files under a tox or .venv environment inside the repository are
            # the evaluator's interpreter: what they do is never the repository's tampering.
            side = EvaluatorSide(paths=interpreter_paths(self.repository))
            self.evaluation.context.evaluator_side = side
            reruns = self._rerun(session, exitstatus)
            self.evaluation.context.integrity = cap_signals(
                [*self._integrity(session, side), *reruns], side
            )
            self.evaluation.score()
            self.evaluation.report(self._junit_xml())
        if self.evaluation.stopped is not None:
            session.exitstatus = pytest.ExitCode.INTERRUPTED
            return
        # pytest says 5 when it collected nothing; so do we (under pytest-xdist too), unless
        # the evaluator allows an empty session (issue 29). No ini twin: a repository must not
        # pass a CI gate by having no test.
        empty = self.tally.collected_nothing()
        if empty and not self.config.getoption("score_allow_empty"):
            session.exitstatus = pytest.ExitCode.NO_TESTS_COLLECTED
            return
        if empty and session.exitstatus == pytest.ExitCode.NO_TESTS_COLLECTED:
            session.exitstatus = pytest.ExitCode.OK
        if self.evaluation.below_fail_under() and session.exitstatus in (
            pytest.ExitCode.OK,
            pytest.ExitCode.NO_TESTS_COLLECTED,
        ):
            session.exitstatus = pytest.ExitCode.TESTS_FAILED

    def _rerun(self, session: pytest.Session, exitstatus: int) -> list[Signal]:
        """``--score-retries``: the tests that did not pass, run again in fresh copies of the
        repository after a session that ended as pytest meant it to; the reruns' signals."""
        retries = self.evaluation.settings.retries
        ended = exitstatus in (pytest.ExitCode.OK, pytest.ExitCode.TESTS_FAILED)
        if not retries or not ended or self.evaluation.interrupted:
            return []
        from pytest_scoring.evaluation.reruns import copies_of
        from pytest_scoring.evaluation.reruns import rerun_failures

        found: list[Signal] = []

        def take(rerun: Rerun) -> None:
            found.extend([*rerun.state.integrity, *witness_signals(rerun.state, rerun.ending)])

        fresh_copy = copies_of(self.evaluation, self.repository, self.config.rootpath)
        rerun_failures(self.evaluation, retries, fresh_copy, take)
        return found

    def _integrity(self, session: pytest.Session, side: EvaluatorSide) -> list[Signal]:
        """Every signal of the session: the watch's (workers' included), the ini's, the end's."""
        reason, file = stop_reason(session, self.stopped_by, self.repository)
        ended = early_end_signal(self.tally.not_run(), reason, file)
        without_set = self.tally.expected is None  # with a set, selection cannot change a score
        return cap_signals(
            [
                *self.watch.finish(),
                *ini_signals(self.config.inipath, self.repository, selection=without_set),
                *self._repository_choices(),
                *([ended] if ended else []),
            ],
            side,
        )

    def _repository_choices(self) -> list[Signal]:
        """A ``selection`` signal for each ini setting that only the command line may give
        (``score_strict = none`` in the repository's ini file weakens nothing), and for each
        server database the repository's files name (the evaluator did not choose it)."""
        inifile = self.config.inipath
        file = None if inifile is None else relative_inside(inifile, self.repository)
        settings = self.evaluation.settings
        ignored = [
            f"{name} = {value}: ignored, only the command line sets it"
            for name, value in settings.ignored_ini.items()
        ]
        named = [
            f"{database.named_by}: database {database.name} is named by the scored repository, "
            "not by the evaluator"
            for database in settings.databases
            if database.named_by
        ]
        if settings.db_reset and settings.databases and not settings.db_reset_servers:
            named.append(
                "score_db_reset = true: server databases not reset, only the command line "
                "resets them"
            )
        return [make_signal("selection", detail, file) for detail in [*ignored, *named]]

    def _junit_xml(self) -> Path | None:
        """The JUnit XML that pytest's own sessionfinish just wrote, if any."""
        xmlpath = getattr(self.config.option, "xmlpath", None)
        return Path(self.config.invocation_params.dir, xmlpath) if xmlpath else None

    @pytest.hookimpl
    def pytest_terminal_summary(self, terminalreporter: Any) -> None:
        """The scores, shorter under ``-q`` and ``-qq``; problems at every verbosity."""
        if self.evaluation.result is None:
            return
        verbosity = terminalreporter.verbosity
        if verbosity >= 0:
            terminalreporter.write_sep("-", "scores")
        if verbosity >= -1:
            for line in self.evaluation.score_lines(explained=verbosity >= 0):
                terminalreporter.write_line(line)
        for status in self.evaluation.status_lines("--score-fail-under"):
            if status.problem:
                terminalreporter.write_line(status.text, red=True)
            else:
                terminalreporter.write_line(status.text)


class XdistCollection:
    """Learns on the controller which test ids xdist's workers collected."""

    def __init__(self, tally: OutcomeTally):
        self.tally = tally

    @pytest.hookimpl
    def pytest_xdist_node_collection_finished(self, node: Any, ids: Sequence[str]) -> None:
        self.tally.record_collected(ids)


@contextlib.contextmanager
def garbage_collection_paused() -> Iterator[None]:
    """No automatic garbage collection while the session is scored and its report written.

    Scoring allocates tens of thousands of objects for a large suite (a record per test, the
    report's text), all kept until the report is written: each automatic collection they set
    off would only walk every object of the session again, for nothing (issue 17).
    Collections resume once the report is written.
    """
    was_enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if was_enabled:
            gc.enable()


def new_evaluation(
    config: pytest.Config, settings: ScoringSettings, scorers: Sequence[Scorer]
) -> Evaluation:
    """The session's evaluation, its tally naming tests relative to the repository."""
    prefix = id_prefix(config.rootpath, repository_root(config))
    tally = OutcomeTally(id_prefix=prefix, flaky_rule=settings.flaky)
    return Evaluation(settings, scorers, hooks=config.hook, hook_config=config, tally=tally)


def id_prefix(rootdir: Path, repository: Path) -> str:
    """What turns pytest's ids (relative to its rootdir) into ids relative to the repository."""
    relative = Path(rootdir).relative_to(repository).as_posix()
    return "" if relative == "." else f"{relative}/"
