"""Turn the options of one pytest run into a registered scoring session (or nothing).

A run without scoring imports only the options from here: the session and the scorers are
imported once scoring is on, so having the plugin installed costs a plain run next to nothing.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING
from typing import Any
from typing import final

import pytest

from pytest_scoring.core.settings import ScoringSettings
from pytest_scoring.errors import ScoringError
from pytest_scoring.evaluation.settings import resolve_settings
from pytest_scoring.evaluation.settings import verify_tests_path

if TYPE_CHECKING:
    from pytest_scoring.reference.expected import ExpectedTests


@final
class PytestOptions:
    """A pytest config as an :class:`OptionSource`."""

    __slots__ = ("config",)

    def __init__(self, config: pytest.Config):
        self.config = config

    @property
    def rootpath(self) -> Path:
        return Path(self.config.rootpath)

    @property
    def invocation_dir(self) -> Path:
        return Path(self.config.invocation_params.dir)

    @property
    def inipath(self) -> Path | None:
        return self.config.inipath

    def getoption(self, name: str, default: Any = None) -> Any:
        return self.config.getoption(name, default)

    def getini(self, name: str) -> Any:
        return self.config.getini(name)


def configure_scoring(config: pytest.Config, is_worker: bool) -> None:
    """Validate the options and, on the controller, register the scoring session.

    :raises pytest.UsageError: for any bad option or configuration, before tests run.
    """
    try:
        settings = resolve_settings(PytestOptions(config))
    except ScoringError as error:
        raise pytest.UsageError(str(error)) from None
    if settings.deterministic:
        # Every process patches its own generators: controller, xdist workers, reference rerun.
        from pytest_scoring.kit.deterministic import install_deterministic

        install_deterministic(config)
    if not settings.enabled:
        return
    from pytest_scoring.kit.integrity import IntegrityWatch
    from pytest_scoring.kit.integrity import repository_root
    from pytest_scoring.plugin.session import PLUGIN_NAME
    from pytest_scoring.plugin.session import ScoringSession
    from pytest_scoring.plugin.session import XdistCollection

    watch = IntegrityWatch(config, repository_root(config), _guarded_functions())
    _register(config, watch, f"{PLUGIN_NAME}-integrity")
    if is_worker:
        return
    from pytest_scoring.evaluation.assemble import build_scorers
    from pytest_scoring.evaluation.assemble import check_scorer_settings

    try:
        scorers = build_scorers(config.hook, config, settings)
        check_scorer_settings(settings, scorers)
        expected = _expected_tests(config, settings)
    except ScoringError as error:
        raise pytest.UsageError(str(error)) from None
    session = ScoringSession(config, settings, scorers, watch, expected)
    _register(config, session, PLUGIN_NAME)
    if config.pluginmanager.hasplugin("xdist"):
        _register(config, XdistCollection(session.tally), f"{PLUGIN_NAME}-xdist")


def verify_tests_first(config: pytest.Config) -> None:
    """``--score-verify-tests=PATH``: refuse a tree whose tests, conftests or pytest
    configuration differ from PATH's, before any of its conftests is imported. (A
    pytest-xdist worker checks again: it cannot tell it is one this early.)

    :raises pytest.UsageError: naming the files that differ.
    """
    from pytest_scoring.kit.integrity import repository_root
    from pytest_scoring.reference.test_changes import verify_tests

    try:
        # The options are not parsed yet: only the early arguments are known.
        value = config.known_args_namespace.score_verify_tests
        path = verify_tests_path(value, config.invocation_params.dir)
        if path is not None:
            verify_tests(repository_root(config), path)
    except ScoringError as error:
        raise pytest.UsageError(str(error)) from None


def _expected_tests(config: pytest.Config, settings: ScoringSettings) -> ExpectedTests | None:
    """The expected set, read (or run, for a folder) before any test runs."""
    if settings.expected_source is None:
        return None
    from pytest_scoring.reference.expected import load_expected_tests

    return load_expected_tests(
        settings.expected_source,
        route=settings.cache_route,
        never_inside=settings.scored_places(),
    )


def _guarded_functions() -> list[tuple[str, object, str]]:
    """Our functions that decide a verdict: replacing one at run time is ``patched``."""
    from pytest_scoring.core import outcomes
    from pytest_scoring.core import rule
    from pytest_scoring.evaluation.scoring import Evaluation
    from pytest_scoring.kit import integrity
    from pytest_scoring.plugin.session import ScoringSession
    from pytest_scoring.scorers import tests

    return [
        ("OutcomeTally.record_phase", outcomes.OutcomeTally, "record_phase"),
        ("OutcomeTally.counts", outcomes.OutcomeTally, "counts"),
        ("OutcomeTally.records", outcomes.OutcomeTally, "records"),
        ("OutcomeTally.record_test", outcomes.OutcomeTally, "record_test"),
        ("OutcomeTally._fold_pending", outcomes.OutcomeTally, "_fold_pending"),
        ("OutcomeTally._fold", outcomes.OutcomeTally, "_fold"),
        ("judged", rule, "judged"),
        ("TestState.final", rule.TestState, "final"),
        ("percent_passing", tests, "percent_passing"),
        ("tampering", tests, "tampering"),
        ("TestScorer.score", tests.TestScorer, "score"),
        ("ScoringSession.pytest_runtest_logreport", ScoringSession, "pytest_runtest_logreport"),
        ("ScoringSession.pytest_sessionfinish", ScoringSession, "pytest_sessionfinish"),
        ("Evaluation.score", Evaluation, "score"),
        ("outcome_changed", integrity, "outcome_changed"),
        ("IntegrityWatch.check_report", integrity.IntegrityWatch, "check_report"),
    ]


def _register(config: pytest.Config, plugin: object, name: str) -> None:
    """Register for this run only (``pytest.main`` may run again in the same process)."""
    config.pluginmanager.register(plugin, name)
    config.add_cleanup(lambda: config.pluginmanager.unregister(name=name))
