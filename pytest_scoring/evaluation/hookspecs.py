"""Hooks that pytest-scoring adds to pytest, for other plugins and ``conftest.py`` files.

Under ``pytest-scoring run`` they are called by the evaluator's own plugin manager
(:mod:`pytest_scoring.evaluation.hooks`), never in the child, whose launcher lets a
``conftest.py`` implement them without effect. They are pytest's hooks (pluggy project
``pytest``), declared without importing pytest: the evaluator needs no pytest session.
"""

from __future__ import annotations

from collections.abc import Callable
from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING

import pluggy

if TYPE_CHECKING:
    import pytest

    from pytest_scoring.report.result import SessionResult
    from pytest_scoring.scorers.base import Scorer

#: pytest's own marker (``pytest.hookspec`` is this very object).
hookspec = pluggy.HookspecMarker("pytest")


@hookspec
def pytest_scoring_session_scored(
    config: pytest.Config, result: SessionResult, report_path: Path | None
) -> None:
    """Called on the controller once the session is scored and its report written.

    :param config: the pytest config; under ``pytest-scoring run``, the evaluator's options
        (:class:`~pytest_scoring.evaluation.options.EvaluatorOptions`, whose ``getoption``
        gives the ``--score-*`` options by ``dest``).
    :param result: scores, metrics inputs and test outcomes of the session.
    :param report_path: the ``scan_id=…`` folder, or None when it could not be written.

    .. versionadded:: 0.1
    """


@hookspec
def pytest_scoring_scorers(config: pytest.Config) -> Mapping[str, Callable[..., Scorer]] | None:
    """Register scorer types that a ``--score-config`` file may name.

    Called on the controller when a configuration file is loaded, before any test runs.
    Every implementation's answer is merged; a type name that is built in or registered
    twice is a usage error. A factory is called with the entry's parameters as keyword
    arguments (checked first against its signature and annotations, like the built-in
    ones) and returns an object with ``name``, ``type``, ``metrics`` and
    ``score(context) -> Score``; ``name`` is then set to the entry's ``name``. A factory
    may raise :class:`~pytest_scoring.errors.ConfigError` with a ``"<parameter>: <what is
    wrong>"`` message to reject a value.

    :param config: the pytest config; under ``pytest-scoring run``, the evaluator's options
        (:class:`~pytest_scoring.evaluation.options.EvaluatorOptions`). There only plugins of
        the evaluator's side are asked: installed ones and ``run --plugin MODULE``, never the
        scored repository's ``conftest.py``.
    :returns: ``{type_name: factory}``, or None to add nothing.

    .. versionadded:: 0.1
    """
