"""What Inspect loads through the package's ``inspect_ai`` entry point: every scorer and
solver, registered under ``pytest_scoring/<name>``, so that ``inspect score LOG --scorer
pytest_scoring/db_change_scorer -S selector=…`` finds them without a task file."""

from __future__ import annotations

from pytest_scoring.inspect import scorers
from pytest_scoring.inspect import solvers

__all__ = ["scorers", "solvers"]
