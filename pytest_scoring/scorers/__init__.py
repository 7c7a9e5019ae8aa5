"""Scorers: the built-in ones, and the list a session runs.

Light to import: every pytest run with the plugin installed reads a constant of
:mod:`pytest_scoring.core.score`, which imports this package first.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from pytest_scoring.scorers.base import Scorer

__all__ = ["default_test_scorers"]


def default_test_scorers() -> list[Scorer]:
    """The scorers ``--score`` runs when no configuration file names others."""
    from pytest_scoring.scorers.tests import all_tests_pass_scorer
    from pytest_scoring.scorers.tests import percent_failing_tests_scorer
    from pytest_scoring.scorers.tests import percent_passing_tests_scorer

    return [all_tests_pass_scorer(), percent_passing_tests_scorer(), percent_failing_tests_scorer()]
