"""The core of every evaluation: start, tally, score, report, summarise — without pytest.

:class:`Evaluation` is what the plugin's session (``pytest --score``) and ``pytest-scoring run``
share, and what scoring many repositories in one scan reuses: it holds no pytest state. Hooks
(``pytest_scoring_session_scored``) are called through a pluggy relay that the caller gives:
pytest's in process, the evaluator's own plugin manager under ``run``.
"""

from __future__ import annotations

import _thread
import contextlib
import os
import signal
import threading
from collections.abc import Callable
from collections.abc import Iterator
from collections.abc import Mapping
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING
from typing import Any
from typing import NamedTuple
from typing import Protocol
from typing import runtime_checkable

from pytest_scoring.core.outcomes import OutcomeTally
from pytest_scoring.core.score import INFRASTRUCTURE
from pytest_scoring.core.score import Score
from pytest_scoring.core.score import error_score
from pytest_scoring.core.settings import ScoringSettings
from pytest_scoring.core.signals import Signal
from pytest_scoring.core.signals import cap_signals
from pytest_scoring.core.signals import collision_signals
from pytest_scoring.core.signals import dedupe
from pytest_scoring.db.session import SessionDatabases
from pytest_scoring.errors import ScoringError
from pytest_scoring.evaluation.evidence import PROVENANCE_KEY as EVIDENCE_KEY
from pytest_scoring.evaluation.evidence import collect_evidence
from pytest_scoring.evaluation.evidence import manifest_digest
from pytest_scoring.report import GITHUB_SUMMARY_ENV
from pytest_scoring.report.parquet_helper import ParquetHelper
from pytest_scoring.report.provenance import session_provenance
from pytest_scoring.report.result import SessionResult
from pytest_scoring.report.terminal import dropped_line
from pytest_scoring.report.terminal import fail_under_line
from pytest_scoring.report.terminal import score_line
from pytest_scoring.report.terminal import signal_lines
from pytest_scoring.report.writer import remove_report_leftovers
from pytest_scoring.report.writer import write_report
from pytest_scoring.scorers.base import Scorer
from pytest_scoring.scorers.base import ScoringContext
from pytest_scoring.scorers.base import run_scorer
from pytest_scoring.scorers.tests import counted_percent_passing
from pytest_scoring.scorers.tests import tampering

if TYPE_CHECKING:
    from pytest_scoring.process.children import ChildRunner
    from pytest_scoring.report.samples import SampleTarget

_last_result: SessionResult | None = None


def last_result() -> SessionResult | None:
    """The result of the last session scored in this process (``pytest.main`` callers)."""
    return _last_result


class ScoringTimedOut(BaseException):
    """Raised in the main thread when scoring runs past ``run --timeout``.

    A ``BaseException``, like ``KeyboardInterrupt``: no scorer's ``except Exception`` may
    swallow it.
    """


@contextlib.contextmanager
def scoring_deadline(seconds: float) -> Iterator[None]:
    """Raise :class:`ScoringTimedOut` in the main thread once ``seconds`` have passed.

    The signal (SIGALRM) goes to the main thread itself, so that a scorer blocked in a system
    call (a read that never returns) is woken by it. Outside the main thread the deadline is
    an interrupt instead (``KeyboardInterrupt``).
    """
    armed, lock = [True], threading.Lock()
    main = threading.main_thread()
    in_main = threading.current_thread() is main

    def expire(*args: object) -> None:
        if armed[0]:
            armed[0] = False
            raise ScoringTimedOut

    def fire() -> None:
        with lock:
            if not armed[0]:
                return
            if in_main:
                signal.pthread_kill(main.ident or 0, signal.SIGALRM)
            else:
                _thread.interrupt_main()

    previous = signal.signal(signal.SIGALRM, expire) if in_main else None
    timer = threading.Timer(max(0.0, seconds), fire)
    timer.daemon = True
    timer.start()
    try:
        yield
    finally:
        with lock:
            armed[0] = False
        timer.cancel()
        if in_main:
            # A SIGALRM sent but not yet delivered must never meet the default action
            # (which ends the process): take it out while blocked, then restore.
            mask = signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGALRM})
            signal.sigtimedwait([signal.SIGALRM], 0)
            signal.signal(signal.SIGALRM, previous)
            signal.pthread_sigmask(signal.SIG_SETMASK, mask)


@runtime_checkable
class StartsWithSession(Protocol):
    """A scorer that must act when the session starts (launch a rerun)."""

    def start(self, context: ScoringContext) -> None: ...


@runtime_checkable
class PreparesFirst(Protocol):
    """A scorer that must act before any code of the repository runs (reset and snapshot
    its databases): in process, before pytest imports a ``conftest.py``. Starts no process."""

    def prepare(self, context: ScoringContext) -> None: ...


class SummaryLine(NamedTuple):
    """One line of the end-of-session summary; ``problem`` lines are shown in red."""

    text: str
    problem: bool = False


class HookRelay(Protocol):
    """pluggy's ``HookRelay``: ``relay.pytest_scoring_session_scored(...)``."""

    def __getattr__(self, name: str) -> Any: ...


class Evaluation:
    """One scored repository: its scorers, its outcomes, its result and report."""

    def __init__(
        self,
        settings: ScoringSettings,
        scorers: Sequence[Scorer],
        *,
        hooks: HookRelay | None = None,
        hook_config: object = None,
        children: ChildRunner | None = None,
        tally: OutcomeTally | None = None,
    ):
        """:param hooks: where ``pytest_scoring_session_scored`` is called (None: nowhere).
        :param hook_config: the ``config`` argument of our hooks (pytest's config in process,
            ``run``'s options object under ``run``).
        :param children: how children (reference rerun, commands) are started (default: a
            runner made when a scorer first starts one).
        :param tally: where the outcomes go (with its id prefix and expected set, if any).
        """
        self.settings = settings
        self.scorers = list(scorers)
        self.hooks = hooks
        self.hook_config = hook_config
        self.tally = tally or OutcomeTally()
        self.context = ScoringContext(
            root=settings.root,
            tally=self.tally,
            settings=settings,
            strict=settings.strict.kinds,
            runner=children,
        )
        #: The test session was interrupted (Ctrl-C, a timeout): the report is incomplete.
        self.interrupted = False
        #: Why scoring stopped before every scorer ran (Ctrl-C, the deadline), if it did.
        self.stopped: str | None = None
        #: Why every score is "N" although the run is complete: the evaluator's own files
        #: changed during the run, the repository passed a limit.
        self.withheld: str | None = None
        #: What the report says caused :attr:`withheld` (``metadata.unscored``), when known.
        self.withheld_as: str | None = None
        #: Private path → the name the report uses instead (``run``'s copy → REPO).
        self.names: dict[str, str] = {}
        self.result: SessionResult | None = None
        self.report_path: Path | None = None
        self.report_error: str | None = None
        self.summary_error: str | None = None
        #: What killed runs had left in the report root and was removed, in one line.
        self.leftovers: str | None = None
        self.junit_error: str | None = None
        #: What was left out of a JUnit file larger than the bounds, or None.
        self.junit_cut: str | None = None
        self._parquet_helper: ParquetHelper | None = None
        #: Whether :meth:`prepare` ran.
        self.prepared = False

    def start(self, report_folder: bool = True) -> None:
        """Let the scorers act before any test runs (snapshots, the reference rerun), and
        start the helper process that will write the report's Parquet files.

        Call :meth:`close` when the evaluation ends without its report.

        :param report_folder: False when the evaluation writes a batch's sample instead,
            which has no Parquet files of its own: no helper is started.
        """
        self.prepare()
        if report_folder:
            self._parquet_helper = ParquetHelper.start()
        for scorer in self.scorers:
            if isinstance(scorer, StartsWithSession):
                self._record_error(scorer, scorer.start)

    def prepare(self) -> None:
        """What must come before any code of the repository (once): the comparison of its
        tests, the scorers' :class:`PreparesFirst` part. :meth:`start` calls it; the plugin
        calls it earlier, before pytest imports the repository's ``conftest.py`` files."""
        if self.prepared:
            return
        self.prepared = True
        self._compare_tests()
        for scorer in self.scorers:
            if isinstance(scorer, PreparesFirst):
                self._record_error(scorer, scorer.prepare)

    def _record_error(self, scorer: Scorer, step: Callable[[ScoringContext], None]) -> None:
        """Run one scorer's step; its :class:`ScoringError` is kept for the report."""
        try:
            step(self.context)
        except ScoringError as error:
            # The scorer will see the missing resource and score "N" with this reason.
            self.context.errors.append(
                {"scanner": scorer.name, "error": str(error), "traceback": ""}
            )

    def _compare_tests(self) -> None:
        """Before any test runs: what the repository changed in its tests relative to the
        evaluator's (``--tests-from`` PATH, else the reference), for ``tests_modified``.

        ``run`` compares its copy before PATH's tests go in, and leaves the result here.
        """
        inputs, settings = self.context.inputs, self.settings
        against = settings.tests_from or settings.reference
        if against is None:
            return
        # Loaded only with a reference: most sessions have none.
        from pytest_scoring.reference.test_changes import compare_tests

        if inputs.test_changes is not None:
            return
        try:
            inputs.test_changes = compare_tests(settings.root, against)
        except (ScoringError, OSError):
            return  # a reference that cannot be read fails its own scorer, with the reason

    def _evaluators_signals(self) -> list[Signal]:
        """The signals the evaluator finds itself: test ids shared by several tests
        (``id_collision``), the repository's changes to its tests (``tests_modified``)."""
        signals = collision_signals(self.tally.collided)
        if self.settings.tests_from or self.settings.reference:
            from pytest_scoring.reference.test_changes import change_signals

            signals += change_signals(self.context.inputs.test_changes or [])
        return cap_signals(signals)

    def score(self) -> SessionResult:
        """Run every scorer in order; Ctrl-C or the deadline stops it, never losing the rest.

        Scorers that did not run score ``"N"`` with the reason, and the result is incomplete.
        Every score is ``"N"`` when :attr:`withheld` says why (the evaluator's files changed).
        """
        global _last_result
        self.context.complete = not self.interrupted
        # Scoring may run twice (stopped between two scorers): each signal is kept once.
        self.context.integrity = dedupe([*self.context.integrity, *self._evaluators_signals()])
        self._stoppable(self._check_evaluator_files)
        scores = {scorer.name: self._score_one(scorer) for scorer in self.scorers}
        if self.stopped is not None:
            self.context.errors.append({"scanner": "", "error": self.stopped, "traceback": ""})
        evidence = self._evidence()
        self._stoppable(self._close_resources)
        crashed = any(error["traceback"] for error in self.context.errors)
        names = self._public_names()
        provenance = session_provenance(self.settings, self._fingerprints(), self._start_states())
        if (digest := manifest_digest(evidence)) is not None:
            provenance[EVIDENCE_KEY] = {"manifest": digest, "level": self.settings.evidence}
        self.result = SessionResult(
            repository=str(self.settings.repository or self.settings.root),
            scorers=self.scorers,
            scores=_renamed(scores, names),
            tests=_renamed(self.tally.to_json(), names),
            complete=not (self.interrupted or crashed or self.stopped),
            errors=_renamed(self.context.errors, names),
            files=_renamed(self.context.report_files, names),
            integrity=_renamed(self.context.integrity, names),
            provenance=_renamed(provenance, names),
            evidence=evidence,
        )
        _last_result = self.result
        return self.result

    def _evidence(self) -> dict[str, bytes]:
        """What ``rescore`` will read (``--score-evidence``), taken while the snapshots last;
        nothing when the scores were withheld (the evaluator's files changed): what the run
        saw then cannot be scored later either."""
        if self.withheld is not None:
            return {}
        route = "plugin" if self.settings.repository is None else "run"
        kept: list[dict[str, bytes]] = []
        self._stoppable(
            lambda: kept.append(collect_evidence(self.context, self.settings.evidence, route))
        )
        return kept[0] if kept else {}

    def _public_names(self) -> dict[str, str]:
        """:attr:`names`, after the copies of the reference that the reference rerun and the
        baseline made: the report names each as the reference (issue 29), never by its
        private folder."""
        reference = self.settings.reference
        copies: dict[str, str] = {}
        if reference is not None:
            for resource in self.context.inputs.held():
                if isinstance(resource, CopiesOfReference):
                    for copy in resource.reference_copies():
                        copies[str(copy)] = str(reference)
        return {**copies, **self.names}

    def _stoppable(self, step: Callable[[], None]) -> None:
        """Run ``step``; Ctrl-C or the deadline during it stops the scoring."""
        try:
            step()
        except KeyboardInterrupt:
            self.stopped = self.stopped or "scoring was interrupted (Ctrl-C)"
        except ScoringTimedOut:
            self.stopped = self.stopped or "scoring ran past the timeout"

    def _fingerprints(self) -> Mapping[Path, str]:
        """The folders the evaluator fingerprinted (the reference copy), by path."""
        guard = self.context.guard
        return guard.fingerprints().trees if guard is not None else {}

    def _start_states(self) -> dict[str, Any]:
        """What identifies each server database's start snapshot, by name."""
        databases = self.context.inputs.databases
        return databases.start_states() if isinstance(databases, SessionDatabases) else {}

    def _check_evaluator_files(self) -> None:
        guard = self.context.guard
        if guard is not None and (changed := guard.changed()):
            from pytest_scoring.fs.guard import CHANGED  # loaded already: it made the guard

            self.withheld = f"{CHANGED}: {', '.join(changed)}"

    def _score_one(self, scorer: Scorer) -> Score:
        if self.stopped is None and self.withheld is None:
            outcome: list[Score] = []
            self._stoppable(lambda: outcome.append(run_scorer(scorer, self.context)))
            if outcome:
                return outcome[0]
        cause = self.withheld_as if self.withheld_as and not self.stopped else INFRASTRUCTURE
        score = error_score(scorer.type, self.stopped or self.withheld or "", cause)
        self.context.scores[scorer.name] = score
        return score

    def _close_resources(self) -> None:
        """Remove snapshot copies, end a reference rerun still running, remove our folders."""
        self.context.inputs.close()
        if self.context.runner is not None:
            self.context.runner.close()

    def report(
        self,
        junit_xml: Path | None = None,
        sample: SampleTarget | None = None,
        junit_source: Path | None = None,
    ) -> Path | None:
        """Add the scores to ``junit_xml``, write the report folder, call the hook.

        Ctrl-C waits until the folder is written: an interrupt never leaves half a report.

        :param sample: in a batch, where this repository's sample goes instead of a report
            folder of its own (the batch publishes one Markdown summary for all).
        :param junit_source: the JUnit XML to copy into ``junit_xml`` with the scores (the
            child's, under ``run``); by default ``junit_xml`` gets them in place.
        """
        assert self.result is not None, "score() first"
        with _interrupts_held():
            if junit_xml is not None:
                self._add_junit_properties(junit_xml, self.result, junit_source)
            value_cap = self.settings.value_cap
            try:
                if sample is None:
                    self.leftovers = remove_report_leftovers(self.settings.report_root)
                    self.report_path = write_report(
                        self.result, self.settings.report_root, value_cap, self._parquet_helper
                    )
                else:
                    # Loaded only in a batch, the one kind of evaluation that writes samples.
                    from pytest_scoring.report.samples import write_sample

                    self.report_path = write_sample(sample, self.result, value_cap)
            except ScoringError as error:
                self.report_error = str(error)
            finally:
                self.close()
            if sample is None:
                self._publish_markdown(self.result)
        if self.hooks is not None:
            self.hooks.pytest_scoring_session_scored(
                config=self.hook_config, result=self.result, report_path=self.report_path
            )
        return self.report_path

    def release(self) -> None:
        """Remove what :meth:`prepare` and :meth:`start` made (the snapshot copies) when the
        evaluation was never scored: ``pytest --markers`` ends after the plugin prepared it."""
        if self.result is None:
            self._close_resources()

    def close(self) -> None:
        """End the Parquet helper if it still runs (the report closes it too)."""
        if self._parquet_helper is not None:
            self._parquet_helper.close()
            self._parquet_helper = None

    def _publish_markdown(self, result: SessionResult) -> None:
        """The score table as Markdown, to ``--score-markdown`` and GitHub's step summary.

        The evaluator writes it (under ``run`` too): the scored repository's processes never
        learn where GitHub's summary file is.
        """
        if self.settings.markdown is None and not os.environ.get(GITHUB_SUMMARY_ENV):
            return
        # Loaded only now: most sessions write no summary.
        from pytest_scoring.report.markdown import publish_markdown
        from pytest_scoring.report.markdown import score_markdown

        text = score_markdown(result.scores_json(), self.report_path)
        try:
            publish_markdown(text, self.settings.markdown)
        except ScoringError as error:
            self.summary_error = str(error)

    def _add_junit_properties(self, path: Path, result: SessionResult, source: Path | None) -> None:
        from pytest_scoring.report.junit_write import add_score_properties

        try:
            cut = add_score_properties(path, result.scores, source)
        except ScoringError as error:
            why = str(error) if source is None else f"pytest wrote no usable JUnit XML ({error})"
            self.junit_error = why
            return
        self.junit_cut = None if cut is None else f"JUnit XML {cut.describe('copied')}"

    def below_fail_under(self) -> bool:
        """``--score-fail-under`` not reached (proven tampering counts as 0 %), or the session
        did not complete."""
        threshold = self.settings.fail_under
        if threshold is None:
            return False
        return not self.context.complete or counted_percent_passing(self.context) < threshold

    def score_lines(self, explained: bool = True) -> list[str]:
        """``name: value  (explanation)``, one per score, then one line per kind of integrity
        signal that occurred."""
        if self.result is None:
            return []
        scores = self.result.scores
        lines = [score_line(name, score, explained) for name, score in scores.items()]
        dropped = dropped_line(self.result.tests)
        return lines + signal_lines(self.result.integrity, scores) + ([dropped] if dropped else [])

    def status_lines(self, fail_under_flag: str) -> list[SummaryLine]:
        """The report path, what went wrong writing it or its summaries, the gate.

        :param fail_under_flag: how the gate is named to the user (``--score-fail-under``).
        """
        lines = []
        if self.report_path is not None:
            lines.append(SummaryLine(f"score report: {self.report_path}"))
        if self.leftovers is not None:
            lines.append(SummaryLine(self.leftovers))
        problems = (
            ("score report NOT written", self.report_error),
            ("score summary NOT written", self.summary_error),
            ("scores NOT added to JUnit XML", self.junit_error),
        )
        lines += [SummaryLine(f"{what}: {why}", True) for what, why in problems if why]
        if self.junit_cut is not None:
            lines.append(SummaryLine(self.junit_cut, True))
        threshold = self.settings.fail_under
        if threshold is not None and self.below_fail_under():
            percent, complete = counted_percent_passing(self.context), self.context.complete
            tampered = bool(tampering(self.context))
            text = fail_under_line(percent, threshold, fail_under_flag, complete, None, tampered)
            lines.append(SummaryLine(text, True))
        return lines


@runtime_checkable
class CopiesOfReference(Protocol):
    """A resource that copied the reference (the reference rerun, the baseline)."""

    def reference_copies(self) -> list[Path]:
        """The folders holding its copies of the reference, as the report's paths name them."""
        ...


def _renamed(value: Any, names: Mapping[str, str]) -> Any:
    """``value`` with every private path in its text replaced by its public name."""
    if not names:
        return value
    if isinstance(value, str):
        for private, public in names.items():
            value = value.replace(private, public)
        return value
    if isinstance(value, list):
        return [_renamed(item, names) for item in value]
    if isinstance(value, dict):
        return {_renamed(key, names): _renamed(item, names) for key, item in value.items()}
    return value


@contextlib.contextmanager
def _interrupts_held() -> Iterator[None]:
    """Hold Ctrl-C (and the scoring deadline's signal) until the block is done."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    held = {signal.SIGINT, signal.SIGALRM}
    previous = signal.pthread_sigmask(signal.SIG_BLOCK, held)
    try:
        yield
    finally:
        signal.pthread_sigmask(signal.SIG_SETMASK, previous)
