"""Scorers: the built-in ones, and the list a session runs."""

from __future__ import annotations

from pytest_scoring.scorers.base import Scorer
from pytest_scoring.scorers.base import ScoringContext
from pytest_scoring.scorers.base import run_scorers
from pytest_scoring.scorers.tests import all_tests_pass_scorer
from pytest_scoring.scorers.tests import percent_failing_tests_scorer
from pytest_scoring.scorers.tests import percent_passing_tests_scorer

__all__ = ["Scorer", "ScoringContext", "default_test_scorers", "run_scorers"]


def default_test_scorers() -> list[Scorer]:
    """The scorers ``--score`` runs when no configuration file names others."""
    return [all_tests_pass_scorer(), percent_passing_tests_scorer(), percent_failing_tests_scorer()]
