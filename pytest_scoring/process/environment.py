"""The environment every child gets: the evaluator's, as it was when pytest-scoring loaded.

The scored repository's code runs inside pytest (in process) or as the evaluator's child, and
may change ``os.environ`` (``PYTHONPATH`` pointing at a ``sitecustomize``, ``PYTHONSTARTUP``,
``PYTHONHOME``…) to reach into the processes the evaluator starts later: the reference rerun,
``sandbox_state`` commands. Those get this copy instead, taken when the plugin or the command
line was imported, before any code of the repository ran (docs/security.md).
"""

from __future__ import annotations

import os
from typing import Final

_CAPTURED: Final = dict(os.environ)


def captured_environment() -> dict[str, str]:
    """A copy of the environment as pytest-scoring found it when it loaded."""
    return dict(_CAPTURED)


def adopt_captured(environ: dict[str, str]) -> None:
    """Take ``environ`` as the captured environment: a batch's worker, forked from a fork
    server that loaded earlier, uses the batch's own capture (docs/cli.md#many-repositories)."""
    _CAPTURED.clear()
    _CAPTURED.update(environ)
