"""The scoring session on the controller: tally, start scorers, score, report, summarise.

:class:`ScoringSession` is registered as a plugin (named ``scoring-session``) only on the
controller, never on pytest-xdist workers, so snapshots, scoring and the report happen once.
"""

from __future__ import annotations

import json
import os
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING
from typing import Any
from typing import Protocol
from typing import runtime_checkable

import pytest

from pytest_scoring.errors import ScoringError
from pytest_scoring.plugin.integrity import IntegrityWatch
from pytest_scoring.plugin.integrity import Signal
from pytest_scoring.plugin.integrity import cap_signals
from pytest_scoring.plugin.integrity import early_end_signal
from pytest_scoring.plugin.integrity import ini_signals
from pytest_scoring.plugin.integrity import stop_reason
from pytest_scoring.plugin.options import ScoringSettings
from pytest_scoring.report.markdown import GITHUB_SUMMARY_ENV
from pytest_scoring.report.markdown import publish_markdown
from pytest_scoring.report.markdown import score_markdown
from pytest_scoring.report.result import SessionResult
from pytest_scoring.report.terminal import fail_under_line
from pytest_scoring.report.terminal import score_line
from pytest_scoring.report.writer import write_report
from pytest_scoring.scorers.base import Scorer
from pytest_scoring.scorers.base import ScoringContext
from pytest_scoring.scorers.base import run_scorers
from pytest_scoring.scorers.outcomes import OutcomeTally
from pytest_scoring.scorers.tests import percent_passing

if TYPE_CHECKING:
    from pytest_scoring.reference.expected import ExpectedTests

PLUGIN_NAME = "scoring-session"

_last_result: SessionResult | None = None


def last_result() -> SessionResult | None:
    """The result of the last session scored in this process (``pytest.main`` callers)."""
    return _last_result


@runtime_checkable
class StartsWithSession(Protocol):
    """A scorer that must act when the session starts (take snapshots, launch a rerun)."""

    def start(self, context: ScoringContext) -> None: ...


class ScoringSession:
    """Collects outcomes during the session and scores it at the end."""

    def __init__(
        self,
        config: pytest.Config,
        settings: ScoringSettings,
        scorers: Sequence[Scorer],
        watch: IntegrityWatch,
        expected: ExpectedTests | None = None,
    ):
        self.config = config
        self.settings = settings
        self.scorers = list(scorers)
        self.repository = repository_root(config)
        self.tally = OutcomeTally(id_prefix=_id_prefix(config.rootpath, self.repository))
        if expected is not None:
            self.tally.expected, self.tally.expected_source = expected.outcomes, expected.describe()
        self.context = ScoringContext(
            root=settings.root, tally=self.tally, settings=settings, strict=settings.strict
        )
        self.watch = watch
        self.interrupted = False
        #: What ended the session, when pytest was interrupted or ``pytest.exit()`` called.
        self.stopped_by: pytest.ExceptionInfo[BaseException] | None = None
        self.result: SessionResult | None = None
        self.report_path: Path | None = None
        self.report_error: str | None = None
        self.summary_error: str | None = None
        self.junit_error: str | None = None

    @pytest.hookimpl
    def pytest_report_header(self) -> list[str]:
        """What the configuration held that this session does not use (a fixture's sandbox)."""
        return [f"scoring: {note}" for note in self.settings.notes]

    @pytest.hookimpl
    def pytest_sessionstart(self, session: pytest.Session) -> None:
        for scorer in self.scorers:
            if isinstance(scorer, StartsWithSession):
                self._start(scorer)

    def _start(self, scorer: Scorer) -> None:
        try:
            scorer.start(self.context)  # type: ignore[attr-defined]
        except ScoringError as error:
            # The scorer will see the missing resource and score "N" with this reason.
            self.context.errors.append(
                {"scanner": scorer.name, "error": str(error), "traceback": ""}
            )

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
        self.interrupted = not isinstance(excinfo.value, pytest.Session.Interrupted)
        self.stopped_by = excinfo if self.interrupted else None

    # trylast: score after other plugins' sessionfinish (e.g. junitxml has its tally).
    @pytest.hookimpl(trylast=True)
    def pytest_sessionfinish(self, session: pytest.Session, exitstatus: int) -> None:
        if self.settings.tally_output is not None:
            self._write_tally(self.settings.tally_output)
            return
        self._score(session)
        if self._below_fail_under() and session.exitstatus in (
            pytest.ExitCode.OK,
            pytest.ExitCode.NO_TESTS_COLLECTED,
        ):
            session.exitstatus = pytest.ExitCode.TESTS_FAILED

    def _write_tally(self, path: Path) -> None:
        """For a reference rerun: outcomes and collected ids as JSON, no report."""
        content: dict[str, Any] = {
            **self.tally.to_json(),
            "collected": sorted(self.tally.collected | set(self.tally.tests)),
        }
        path.write_text(json.dumps(content), encoding="utf-8")

    def _integrity(self, session: pytest.Session) -> list[Signal]:
        """Every signal of the session: the watch's (workers' included), the ini's, the end's."""
        reason, file = stop_reason(session, self.stopped_by, self.repository)
        ended = early_end_signal(self.tally.not_run(), reason, file)
        without_set = self.tally.expected is None  # with a set, selection cannot change a score
        return cap_signals(
            [
                *self.watch.finish(),
                *ini_signals(self.config.inipath, self.repository, selection=without_set),
                *([ended] if ended else []),
            ]
        )

    def _score(self, session: pytest.Session) -> None:
        global _last_result
        self.context.integrity = self._integrity(session)
        self.context.complete = not self.interrupted
        scores = run_scorers(self.scorers, self.context)
        for resource in self.context.resources.values():
            close = getattr(resource, "close", None)  # e.g. database snapshot copies
            if callable(close):
                close()
        crashed = any(error["traceback"] for error in self.context.errors)
        self.result = SessionResult(
            repository=str(self.settings.root),
            scorers=self.scorers,
            scores=scores,
            tests=self.tally.to_json(),
            complete=not (self.interrupted or crashed),
            errors=self.context.errors,
            files=self.context.report_files,
            integrity=self.context.integrity,
        )
        _last_result = self.result
        try:
            self.report_path = write_report(
                self.result, self.settings.report_root, self.settings.value_cap
            )
        except ScoringError as error:
            self.report_error = str(error)
        self._publish_markdown(self.result)
        self._add_junit_properties(self.result)
        self.config.hook.pytest_scoring_session_scored(
            config=self.config, result=self.result, report_path=self.report_path
        )

    def _publish_markdown(self, result: SessionResult) -> None:
        """The score table as Markdown, to ``--score-markdown`` and GitHub's step summary."""
        if self.settings.markdown is None and not os.environ.get(GITHUB_SUMMARY_ENV):
            return
        text = score_markdown(result.scores_json(), self.report_path)
        try:
            publish_markdown(text, self.settings.markdown)
        except ScoringError as error:
            self.summary_error = str(error)

    def _add_junit_properties(self, result: SessionResult) -> None:
        """Scores as properties of the JUnit XML that pytest's own sessionfinish just wrote."""
        xmlpath = getattr(self.config.option, "xmlpath", None)
        if not xmlpath:
            return
        from pytest_scoring.report.junit import add_score_properties

        try:
            add_score_properties(Path(self.config.invocation_params.dir, xmlpath), result.scores)
        except ScoringError as error:
            self.junit_error = str(error)

    def _below_fail_under(self) -> bool:
        """``--score-fail-under`` not reached, or the session did not complete."""
        threshold = self.settings.fail_under
        if threshold is None:
            return False
        return not self.context.complete or percent_passing(self.tally) < threshold

    @pytest.hookimpl
    def pytest_terminal_summary(self, terminalreporter: Any) -> None:
        """The scores, shorter under ``-q`` and ``-qq``; problems at every verbosity."""
        if self.result is None:
            return
        verbosity = terminalreporter.verbosity
        if verbosity >= 0:
            terminalreporter.write_sep("-", "scores")
        if verbosity >= -1:
            for name, score in self.result.scores.items():
                terminalreporter.write_line(score_line(name, score, explained=verbosity >= 0))
        if self.report_path is not None:
            terminalreporter.write_line(f"score report: {self.report_path}")
        if self.report_error is not None:
            terminalreporter.write_line(f"score report NOT written: {self.report_error}", red=True)
        if self.summary_error is not None:
            terminalreporter.write_line(
                f"score summary NOT written: {self.summary_error}", red=True
            )
        if self.junit_error is not None:
            terminalreporter.write_line(
                f"scores NOT added to JUnit XML: {self.junit_error}", red=True
            )
        threshold = self.settings.fail_under
        if threshold is not None and self._below_fail_under():
            percent, complete = percent_passing(self.tally), self.context.complete
            line = fail_under_line(percent, threshold, "--score-fail-under", complete)
            terminalreporter.write_line(line, red=True)


class XdistCollection:
    """Learns on the controller which test ids xdist's workers collected."""

    def __init__(self, tally: OutcomeTally):
        self.tally = tally

    @pytest.hookimpl
    def pytest_xdist_node_collection_finished(self, node: Any, ids: Sequence[str]) -> None:
        self.tally.record_collected(ids)


def repository_root(config: pytest.Config) -> Path:
    """The scored repository's root: where pytest was started, when pytest's rootdir lies
    inside it (an ini file in a subfolder moves the rootdir, not the repository)."""
    invocation, rootdir = Path(config.invocation_params.dir), Path(config.rootpath)
    return invocation if rootdir.is_relative_to(invocation) else rootdir


def _id_prefix(rootdir: Path, repository: Path) -> str:
    """What turns pytest's ids (relative to its rootdir) into ids relative to the repository."""
    relative = Path(rootdir).relative_to(repository).as_posix()
    return "" if relative == "." else f"{relative}/"
