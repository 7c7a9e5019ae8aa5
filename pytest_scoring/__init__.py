"""pytest-scoring: score a repository's test session and what it does to its databases.

The public names are imported on first use: pytest imports this package for every session
(the plugin lives in it), and a session that scores nothing should not pay for the rest.
"""

from __future__ import annotations

import importlib
from importlib.metadata import version as _version
from typing import TYPE_CHECKING
from typing import Any

if TYPE_CHECKING:
    from pytest_scoring.db_diff import diff_paths
    from pytest_scoring.db_diff import diff_snapshots
    from pytest_scoring.db_snapshot import take_snapshot
    from pytest_scoring.diff_of_diffs import diff_of_diffs
    from pytest_scoring.reader import ScanResults
    from pytest_scoring.reader import results_df
    from pytest_scoring.report import SessionResult
    from pytest_scoring.scorers.composite import composite_scorer
    from pytest_scoring.scorers.database import db_change_scorer
    from pytest_scoring.scorers.files import file_contents_scorer
    from pytest_scoring.scorers.reference import db_diff_change_scorer
    from pytest_scoring.scorers.sandbox import sandbox_state_scorer
    from pytest_scoring.scorers.tests import all_tests_pass_scorer
    from pytest_scoring.scorers.tests import percent_failing_tests_scorer
    from pytest_scoring.scorers.tests import percent_passing_tests_scorer
    from pytest_scoring.scorers.tests import test_runner_scorer
    from pytest_scoring.scores import Score
    from pytest_scoring.selectors import Selector
    from pytest_scoring.selectors import parse_selector
    from pytest_scoring.selectors import selector_matches
    from pytest_scoring.session import last_result

#: Where each public name lives.
_EXPORTS = {
    "ScanResults": "pytest_scoring.reader",
    "Score": "pytest_scoring.scores",
    "Selector": "pytest_scoring.selectors",
    "SessionResult": "pytest_scoring.report",
    "all_tests_pass_scorer": "pytest_scoring.scorers.tests",
    "composite_scorer": "pytest_scoring.scorers.composite",
    "db_change_scorer": "pytest_scoring.scorers.database",
    "db_diff_change_scorer": "pytest_scoring.scorers.reference",
    "diff_of_diffs": "pytest_scoring.diff_of_diffs",
    "diff_paths": "pytest_scoring.db_diff",
    "diff_snapshots": "pytest_scoring.db_diff",
    "file_contents_scorer": "pytest_scoring.scorers.files",
    "last_result": "pytest_scoring.session",
    "parse_selector": "pytest_scoring.selectors",
    "percent_failing_tests_scorer": "pytest_scoring.scorers.tests",
    "percent_passing_tests_scorer": "pytest_scoring.scorers.tests",
    "results_df": "pytest_scoring.reader",
    "sandbox_state_scorer": "pytest_scoring.scorers.sandbox",
    "selector_matches": "pytest_scoring.selectors",
    "take_snapshot": "pytest_scoring.db_snapshot",
    "test_runner_scorer": "pytest_scoring.scorers.tests",
}

__all__ = [
    "ScanResults",
    "Score",
    "Selector",
    "SessionResult",
    "all_tests_pass_scorer",
    "composite_scorer",
    "db_change_scorer",
    "db_diff_change_scorer",
    "diff_of_diffs",
    "diff_paths",
    "diff_snapshots",
    "file_contents_scorer",
    "last_result",
    "parse_selector",
    "percent_failing_tests_scorer",
    "percent_passing_tests_scorer",
    "results_df",
    "sandbox_state_scorer",
    "selector_matches",
    "take_snapshot",
    "test_runner_scorer",
]


def __getattr__(name: str) -> Any:
    if name == "__version__":
        return _version("pytest-scoring")
    if name in _EXPORTS:
        return getattr(importlib.import_module(_EXPORTS[name]), name)
    raise AttributeError(f"module 'pytest_scoring' has no attribute {name!r}")
