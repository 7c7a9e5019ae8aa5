"""Hooks that pytest-scoring adds to pytest, for other plugins and ``conftest.py`` files."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

import pytest

if TYPE_CHECKING:
    from pytest_scoring.report import SessionResult


@pytest.hookspec
def pytest_scoring_session_scored(
    config: pytest.Config, result: SessionResult, report_path: Path | None
) -> None:
    """Called on the controller once the session is scored and its report written.

    :param config: the pytest config.
    :param result: scores, metrics inputs and test outcomes of the session.
    :param report_path: the ``scan_id=…`` folder, or None when it could not be written.

    .. versionadded:: 0.1
    """
