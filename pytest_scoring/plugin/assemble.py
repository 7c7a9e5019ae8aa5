"""Turn the options of one pytest run into a registered scoring session (or nothing).

A run without scoring imports only the options from here: the session and the scorers are
imported once scoring is on, so having the plugin installed costs a plain run next to nothing.
"""

from __future__ import annotations

import argparse
import os
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
    from pytest_scoring.evaluation.scoring import Evaluation
    from pytest_scoring.reference.expected import ExpectedTests
    from pytest_scoring.scorers.base import Scorer


#: The evaluation assembled and prepared before pytest imported any ``conftest.py``.
PREPARED: pytest.StashKey[Evaluation] = pytest.StashKey()


@final
class PytestOptions:
    """A pytest config as an :class:`OptionSource`."""

    __slots__ = ("config", "namespace")

    def __init__(self, config: pytest.Config, namespace: argparse.Namespace | None = None):
        """:param namespace: the options parsed so far (``known_args_namespace``, before
        pytest imports any ``conftest.py``); default: the config's parsed options."""
        self.config = config
        self.namespace = namespace

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
        if self.namespace is not None:
            return getattr(self.namespace, name, default)
        return self.config.getoption(name, default)

    def getini(self, name: str) -> Any:
        return self.config.getini(name)


def prepare_scoring(config: pytest.Config) -> None:
    """Before pytest imports any ``conftest.py`` (so before any code of the repository):
    assemble the evaluation from the options parsed so far and prepare it (reset and
    snapshot the databases, compare the tests), on the controller only.

    Anything that stops it leaves the whole assembly to :func:`configure_scoring`, as
    before: a bad option (reported there), a scorer type only a ``conftest.py`` provides.
    Nothing of the repository runs before this, so none of it can be the cause.
    """
    from pytest_scoring.kit.integrity import XDIST_WORKER

    if os.environ.get(XDIST_WORKER):
        return  # an xdist worker: it cannot see its ``workerinput`` yet, only this
    options = config.known_args_namespace
    if getattr(options, "help", False) or getattr(options, "version", False):
        return  # no session: nothing to reset or snapshot
    try:
        settings = resolve_settings(PytestOptions(config, options))
        if not settings.enabled:
            return
        scorers = _scorers(config, settings)
    except ScoringError:
        return
    from pytest_scoring.plugin.session import new_evaluation

    evaluation = new_evaluation(config, settings, scorers)
    config.add_cleanup(evaluation.release)
    evaluation.prepare()
    config.stash[PREPARED] = evaluation


def configure_scoring(config: pytest.Config, is_worker: bool) -> None:
    """Validate the options and, on the controller, register the scoring session (with
    the evaluation :func:`prepare_scoring` made, when it made one).

    :raises pytest.UsageError: for any bad option or configuration, before tests run.
    """
    prepared = config.stash.get(PREPARED, None)
    try:
        settings = (
            resolve_settings(PytestOptions(config)) if prepared is None else prepared.settings
        )
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
    from pytest_scoring.plugin.session import new_evaluation

    watch = IntegrityWatch(config, repository_root(config), _guarded_functions())
    _register(config, watch, f"{PLUGIN_NAME}-integrity")
    if is_worker:
        return
    try:
        if prepared is None:
            evaluation = new_evaluation(config, settings, _scorers(config, settings))
        else:
            _check_conftest_types(config, settings)
            evaluation = prepared
        expected = _expected_tests(config, settings)
    except ScoringError as error:
        raise pytest.UsageError(str(error)) from None
    session = ScoringSession(config, evaluation, watch, expected)
    _register(config, session, PLUGIN_NAME)
    if config.pluginmanager.hasplugin("xdist"):
        _register(config, XdistCollection(session.tally), f"{PLUGIN_NAME}-xdist")


def _scorers(config: pytest.Config, settings: ScoringSettings) -> list[Scorer]:
    """The session's scorers, checked against the settings.

    :raises ScoringError: for a bad configuration.
    """
    from pytest_scoring.evaluation.assemble import build_scorers
    from pytest_scoring.evaluation.assemble import check_scorer_settings

    scorers = build_scorers(config.hook, config, settings)
    check_scorer_settings(settings, scorers)
    return scorers


def _check_conftest_types(config: pytest.Config, settings: ScoringSettings) -> None:
    """The scorer types the conftests register, checked as if the configuration used them
    (it did not: it was read before pytest imported them).

    :raises ScoringError: for a type that is not callable or whose name is taken.
    """
    if settings.config_file is not None:
        from pytest_scoring.scorers.registry import scorer_types

        scorer_types(config.hook.pytest_scoring_scorers(config=config))


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
