"""pytest-scoring: score a repository's test session and what it does to its databases.

The public names are imported on first use: pytest imports this package for every session
(the plugin lives in it), and a session that scores nothing should not pay for the rest.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING
from typing import Any

from pytest_scoring.core.version import __version__ as __version__

if TYPE_CHECKING:
    from pytest_scoring.core.metrics import Metric
    from pytest_scoring.core.metrics import accuracy
    from pytest_scoring.core.metrics import mean
    from pytest_scoring.core.metrics import stderr
    from pytest_scoring.core.metrics import threshold_accuracy
    from pytest_scoring.core.score import Score
    from pytest_scoring.core.score import error_score
    from pytest_scoring.core.score import make_score
    from pytest_scoring.db.diff import diff_paths
    from pytest_scoring.db.diff import diff_snapshots
    from pytest_scoring.db.diff_of_diffs import diff_of_diffs
    from pytest_scoring.db.snapshot import take_snapshot
    from pytest_scoring.errors import ConfigError
    from pytest_scoring.errors import DatabaseError
    from pytest_scoring.errors import FormulaError
    from pytest_scoring.errors import JUnitError
    from pytest_scoring.errors import OptionError
    from pytest_scoring.errors import ReportError
    from pytest_scoring.errors import ScoringError
    from pytest_scoring.errors import SelectorError
    from pytest_scoring.evaluation.scoring import last_result
    from pytest_scoring.report.reader import ScanResults
    from pytest_scoring.report.reader import results_df
    from pytest_scoring.report.result import SessionResult
    from pytest_scoring.scorers.base import Scorer
    from pytest_scoring.scorers.base import ScoringContext
    from pytest_scoring.scorers.composite import composite_scorer
    from pytest_scoring.scorers.db_change import db_change_scorer
    from pytest_scoring.scorers.db_diff_change import db_diff_change_scorer
    from pytest_scoring.scorers.file_contents import file_contents_scorer
    from pytest_scoring.scorers.sandbox_state import sandbox_state_scorer
    from pytest_scoring.scorers.tests import all_tests_pass_scorer
    from pytest_scoring.scorers.tests import percent_failing_tests_scorer
    from pytest_scoring.scorers.tests import percent_passing_tests_scorer
    from pytest_scoring.scorers.tests import test_runner_scorer
    from pytest_scoring.selector.language import Selector
    from pytest_scoring.selector.language import parse_selector
    from pytest_scoring.selector.language import selector_matches

#: Where each public name lives.
_EXPORTS = {
    "ConfigError": "pytest_scoring.errors",
    "DatabaseError": "pytest_scoring.errors",
    "FormulaError": "pytest_scoring.errors",
    "JUnitError": "pytest_scoring.errors",
    "Metric": "pytest_scoring.core.metrics",
    "OptionError": "pytest_scoring.errors",
    "ReportError": "pytest_scoring.errors",
    "ScanResults": "pytest_scoring.report.reader",
    "Score": "pytest_scoring.core.score",
    "Scorer": "pytest_scoring.scorers.base",
    "ScoringContext": "pytest_scoring.scorers.base",
    "ScoringError": "pytest_scoring.errors",
    "Selector": "pytest_scoring.selector.language",
    "SelectorError": "pytest_scoring.errors",
    "SessionResult": "pytest_scoring.report.result",
    "accuracy": "pytest_scoring.core.metrics",
    "all_tests_pass_scorer": "pytest_scoring.scorers.tests",
    "composite_scorer": "pytest_scoring.scorers.composite",
    "db_change_scorer": "pytest_scoring.scorers.db_change",
    "db_diff_change_scorer": "pytest_scoring.scorers.db_diff_change",
    "diff_of_diffs": "pytest_scoring.db.diff_of_diffs",
    "diff_paths": "pytest_scoring.db.diff",
    "diff_snapshots": "pytest_scoring.db.diff",
    "error_score": "pytest_scoring.core.score",
    "file_contents_scorer": "pytest_scoring.scorers.file_contents",
    "last_result": "pytest_scoring.evaluation.scoring",
    "make_score": "pytest_scoring.core.score",
    "mean": "pytest_scoring.core.metrics",
    "parse_selector": "pytest_scoring.selector.language",
    "percent_failing_tests_scorer": "pytest_scoring.scorers.tests",
    "percent_passing_tests_scorer": "pytest_scoring.scorers.tests",
    "results_df": "pytest_scoring.report.reader",
    "sandbox_state_scorer": "pytest_scoring.scorers.sandbox_state",
    "selector_matches": "pytest_scoring.selector.language",
    "stderr": "pytest_scoring.core.metrics",
    "take_snapshot": "pytest_scoring.db.snapshot",
    "test_runner_scorer": "pytest_scoring.scorers.tests",
    "threshold_accuracy": "pytest_scoring.core.metrics",
}

__all__ = [
    "ConfigError",
    "DatabaseError",
    "FormulaError",
    "JUnitError",
    "Metric",
    "OptionError",
    "ReportError",
    "ScanResults",
    "Score",
    "Scorer",
    "ScoringContext",
    "ScoringError",
    "Selector",
    "SelectorError",
    "SessionResult",
    "accuracy",
    "all_tests_pass_scorer",
    "composite_scorer",
    "db_change_scorer",
    "db_diff_change_scorer",
    "diff_of_diffs",
    "diff_paths",
    "diff_snapshots",
    "error_score",
    "file_contents_scorer",
    "last_result",
    "make_score",
    "mean",
    "parse_selector",
    "percent_failing_tests_scorer",
    "percent_passing_tests_scorer",
    "results_df",
    "sandbox_state_scorer",
    "selector_matches",
    "stderr",
    "take_snapshot",
    "test_runner_scorer",
    "threshold_accuracy",
]


def __getattr__(name: str) -> Any:
    if name not in _EXPORTS:
        raise AttributeError(f"module 'pytest_scoring' has no attribute {name!r}")
    value = getattr(importlib.import_module(_EXPORTS[name]), name)
    # Bind it here, so that a later import of a submodule of the same name (which sets the
    # package attribute to that module) can never change what this name gives.
    globals()[name] = value
    return value
