"""pytest-scoring's scorers and solvers for Inspect AI, named as inspect_toolkit names them.

A task written with inspect_toolkit's scorers and solvers changes its imports and nothing
else; the sandbox needs nothing but Python (3.8 or newer) and pytest (docs/inspect.md)::

    from pytest_scoring.inspect import db_diff_change_scorer, percent_passing_tests_scorer

They need Inspect AI: ``pip install 'pytest-scoring[inspect]'``. The names are imported on
first use, so that finding this package (``pytest-scoring run`` imports every module it may
use) never imports Inspect AI.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING
from typing import Any

if TYPE_CHECKING:
    from pytest_scoring.inspect.scorers import all_tests_pass_scorer
    from pytest_scoring.inspect.scorers import composite_scorer
    from pytest_scoring.inspect.scorers import db_change_scorer
    from pytest_scoring.inspect.scorers import db_diff_change_scorer
    from pytest_scoring.inspect.scorers import file_contents_scorer
    from pytest_scoring.inspect.scorers import percent_failing_tests_scorer
    from pytest_scoring.inspect.scorers import percent_passing_tests_scorer
    from pytest_scoring.inspect.scorers import sandbox_state_scorer
    from pytest_scoring.inspect.scorers import test_runner_scorer
    from pytest_scoring.inspect.solvers import diff_databases
    from pytest_scoring.inspect.solvers import run_tests
    from pytest_scoring.inspect.solvers import snapshot_repo

_SOLVERS = ("diff_databases", "run_tests", "snapshot_repo")

__all__ = [
    "all_tests_pass_scorer",
    "composite_scorer",
    "db_change_scorer",
    "db_diff_change_scorer",
    "diff_databases",
    "file_contents_scorer",
    "percent_failing_tests_scorer",
    "percent_passing_tests_scorer",
    "run_tests",
    "sandbox_state_scorer",
    "snapshot_repo",
    "test_runner_scorer",
]


def __getattr__(name: str) -> Any:
    if name not in __all__:
        raise AttributeError(f"module 'pytest_scoring.inspect' has no attribute {name!r}")
    module = f"{__name__}.{'solvers' if name in _SOLVERS else 'scorers'}"
    try:
        value = getattr(importlib.import_module(module), name)
    except ModuleNotFoundError as error:
        if error.name != "inspect_ai" and not str(error.name).startswith("inspect_ai."):
            raise
        raise ModuleNotFoundError(
            "pytest_scoring.inspect needs Inspect AI: pip install 'pytest-scoring[inspect]'",
            name=error.name,
        ) from error
    globals()[name] = value
    return value
