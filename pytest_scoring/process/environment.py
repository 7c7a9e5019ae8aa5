"""The environment every child gets: the evaluator's, as it was when pytest-scoring loaded.

The scored repository's code runs inside pytest (in process) or as the evaluator's child, and
may change ``os.environ`` (``PYTHONPATH`` pointing at a ``sitecustomize``, ``PYTHONSTARTUP``,
``PYTHONHOME``…) to reach into the processes the evaluator starts later: the reference rerun,
``sandbox_state`` commands. Those get this copy instead, taken when the plugin or the command
line was imported, before any code of the repository ran (docs/security.md). pytest's version
is taken then too: in process, a ``conftest.py`` may set ``pytest.__version__`` later.
"""

from __future__ import annotations

import os
import sys
from typing import Final

_CAPTURED: Final = dict(os.environ)
#: None when pytest is not loaded yet (the command line, where no repository's code runs).
_PYTEST_VERSION: Final[str | None] = getattr(sys.modules.get("pytest"), "__version__", None)


def captured_environment() -> dict[str, str]:
    """A copy of the environment as pytest-scoring found it when it loaded."""
    return dict(_CAPTURED)


def adopt_captured(environ: dict[str, str]) -> None:
    """Take ``environ`` as the captured environment: a batch's worker, forked from a fork
    server that loaded earlier, uses the batch's own capture (docs/cli.md#many-repositories)."""
    _CAPTURED.clear()
    _CAPTURED.update(environ)


def evaluator_pytest_version() -> str:
    """The version of the pytest this process runs, as it was when pytest-scoring loaded."""
    import pytest

    return _PYTEST_VERSION or pytest.__version__
