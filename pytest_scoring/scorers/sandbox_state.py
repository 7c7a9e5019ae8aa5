"""``sandbox_state``: does a shell command succeed in the repository? (docs/configuration.md)

The command runs only because the evaluator configured it. Like every child of the evaluator
it runs through the supervisor (docs/security.md): past its timeout, and when it exits, the
shell and everything it started are killed, background processes included. Under
``pytest-scoring run`` it runs in the private copy, as the children's user. Output goes to
temporary files, so a chatty or stuck child never blocks the scorer and only the first part is
ever read back.

The command cannot be shadowed by the repository: it gets ``PYTHONSAFEPATH=1`` (so ``python -m
compileall`` never imports a ``compileall.py`` of the repository), and a ``PATH`` and
``PYTHONPATH`` without any folder inside the repository nor any relative entry (which would
resolve inside it), taken from
the environment the evaluator started with, not the one a ``conftest.py`` may have changed.
``PYTHONSAFEPATH`` is given to these commands only: it breaks flat-layout repositories under
``python -m pytest``. The evaluator's ``env`` entries are set last, as given.
"""

from __future__ import annotations

import math
import os
import signal
import tempfile
from collections.abc import Sequence
from pathlib import Path
from typing import IO
from typing import Any
from typing import Final
from typing import final

from pytest_scoring.core.metrics import Metric
from pytest_scoring.core.metrics import accuracy
from pytest_scoring.core.metrics import stderr
from pytest_scoring.core.score import INCORRECT
from pytest_scoring.core.score import METADATA_TEXT_CAP
from pytest_scoring.core.score import Score
from pytest_scoring.core.score import bool_value
from pytest_scoring.core.score import cap_text
from pytest_scoring.core.score import error_score
from pytest_scoring.core.score import make_score
from pytest_scoring.errors import ConfigError
from pytest_scoring.fs.paths import locate
from pytest_scoring.fs.paths import unmapped_hint
from pytest_scoring.process.children import ChildRunner
from pytest_scoring.scorers.base import ScoringContext
from pytest_scoring.scorers.scorer_type import InspectForm
from pytest_scoring.scorers.scorer_type import ScorerType

SHELL: Final = "/bin/sh"
METRICS: Final = (accuracy, stderr)


#: Bytes of a captured output read back: enough for METADATA_TEXT_CAP characters of any UTF-8.
HEAD_BYTES: Final = METADATA_TEXT_CAP * 4


def shown_output(head: str, size: int) -> str:
    """What a score keeps of an output: its ``head`` (the first :data:`HEAD_BYTES` bytes, as
    text), capped, saying how large the whole output was when it was cut."""
    if size <= HEAD_BYTES:
        return cap_text(head)
    return f"{head[:METADATA_TEXT_CAP]}\n… [{size} bytes in all, the rest cut]"


def _read_back(stream: IO[bytes]) -> tuple[str, int]:
    """The first part of a captured output (capped) and its full size in bytes."""
    size = stream.seek(0, os.SEEK_END)
    stream.seek(0)
    return shown_output(stream.read(HEAD_BYTES).decode("utf-8", errors="replace"), size), size


def command_environment(
    base: dict[str, str], root: Path, env: dict[str, str] | None = None
) -> dict[str, str]:
    """The environment of a ``sandbox_state`` command run in the repository at ``root``."""
    environment = {**base, "PATH": _outside(base.get("PATH", os.defpath), root)}
    if "PYTHONPATH" in base:
        environment["PYTHONPATH"] = _outside(base["PYTHONPATH"], root)
    return {**environment, "PYTHONSAFEPATH": "1", **(env or {})}


def _outside(search_path: str, root: Path) -> str:
    """A search path (``PATH``, ``PYTHONPATH``) without relative entries or folders in ``root``."""
    return os.pathsep.join(
        entry
        for entry in search_path.split(os.pathsep)
        if os.path.isabs(entry) and not Path(entry).resolve().is_relative_to(root.resolve())
    )


def run_command(
    command: str,
    cwd: Path,
    timeout: float | None,
    children: ChildRunner | None = None,
    environment: dict[str, str] | None = None,
) -> dict[str, Any]:
    """Run ``command`` with ``/bin/sh -c`` in ``cwd``: exit code, output, whether it timed out.

    A command killed by a signal has the negative signal number as its exit code, as
    :mod:`subprocess` reports it.

    :param environment: the command's environment (default: the children's).
    """
    children = children or ChildRunner()
    with tempfile.TemporaryFile() as out, tempfile.TemporaryFile() as err:
        argv = [SHELL, "-c", command]
        ended = children.run_command(argv, cwd, timeout, out, err, environment)
        stdout, stdout_bytes = _read_back(out)
        stderr_text, stderr_bytes = _read_back(err)
    exit_code = ended.exit_code
    if ended.signal is not None and not ended.timed_out:
        exit_code = -signal.Signals[ended.signal].value
    problem = {} if ended.error is None else {"error": ended.error}
    return {
        **problem,
        "exit_code": exit_code,
        "timed_out": ended.timed_out,
        "stdout": stdout,
        "stderr": stderr_text,
        "stdout_bytes": stdout_bytes,
        "stderr_bytes": stderr_bytes,
    }


@final
class SandboxStateScorer:
    """``"C"`` when the command exits with status 0 within its timeout."""

    __slots__ = ("command", "cwd", "detects", "env", "metrics", "name", "timeout", "type")

    def __init__(self, command: str, cwd: str | None, timeout: float | None, env: dict[str, str]):
        self.type = self.name = "sandbox_state"
        self.metrics: Sequence[Metric] = METRICS
        #: Its ``"C"`` means the command succeeded (``detects: true`` when that is a finding).
        self.detects = False
        self.command = command
        self.cwd = cwd
        self.timeout = timeout
        self.env = env

    def score(self, context: ScoringContext) -> Score:
        cwd = locate(self.cwd or ".", context.root.resolve(), context.path_map).path
        parameters = self.parameters()
        if cwd is None:
            return error_score(self.type, "cwd is outside the repository", **parameters)
        if not cwd.is_dir():
            hint = unmapped_hint(self.cwd or ".", context.path_map)
            return error_score(self.type, f"cwd {self.cwd!r} is not a folder{hint}", **parameters)
        children = context.children
        environment = command_environment(children.child_environment(), context.root, self.env)
        outcome = run_command(self.command, cwd, self.timeout, children, environment)
        return self.score_outcome(outcome)

    def parameters(self) -> dict[str, Any]:
        return {"command": self.command, "cwd": self.cwd, "timeout": self.timeout}

    def score_outcome(self, outcome: dict[str, Any]) -> Score:
        """The score of the command's outcome (:func:`run_command`'s keys), wherever it ran."""
        parameters = self.parameters()
        metadata = {**parameters, **outcome}
        if "error" in outcome:
            return error_score(self.type, outcome["error"], **parameters)
        if outcome["timed_out"] and self.timeout is not None:
            explanation = f"killed after its timeout of {self.timeout:g} s"
            return make_score(INCORRECT, self.type, explanation=explanation, metadata=metadata)
        return make_score(
            bool_value(outcome["exit_code"] == 0),
            self.type,
            explanation=f"exit code {outcome['exit_code']}",
            metadata=metadata,
        )


def sandbox_state_scorer(
    command: str,
    cwd: str | None = None,
    timeout: float | None = 60,
    env: dict[str, str] | None = None,
) -> SandboxStateScorer:
    """A scorer that runs ``command`` with ``/bin/sh -c`` and checks its exit code.

    :param command: the shell command; ``"C"`` when it exits with status 0.
    :param cwd: folder relative to the repository root (default: the root), or absolute: the
        evaluator's own folder, or a sandbox path mapped by ``--score-path-map``.
    :param timeout: seconds; past it the command's whole process group is killed. ``None``:
        no timeout.
    :param env: environment variables the evaluator adds (after ``PATH`` and
        ``PYTHONSAFEPATH`` are set, so it may change them).
    :raises ConfigError: for an empty command, a timeout that is not a positive number, or an
        ``env`` that is not a table of strings.
    """
    if not command.strip():
        raise ConfigError("command: must not be empty")
    if timeout is not None and (
        isinstance(timeout, bool) or not math.isfinite(timeout) or timeout <= 0
    ):
        raise ConfigError(f"timeout: {timeout!r} is not a positive number of seconds (or null)")
    if env is not None and not all(
        isinstance(key, str) and isinstance(value, str) for key, value in env.items()
    ):
        raise ConfigError("env: expected a table of variable names to text values")
    return SandboxStateScorer(command, cwd, timeout, dict(env or {}))


TYPE: Final = ScorerType(
    "sandbox_state",
    sandbox_state_scorer,
    METRICS,
    inspect=InspectForm(
        "sandbox_state_scorer",
        positional=("command", "cwd", "timeout"),
        keyword=("repo_path", "env"),
        annotations={"timeout": "int | None"},
        docs={
            "cwd": "the folder it runs in, in the sandbox: absolute, or relative to the "
            "repository (default: the repository)."
        },
        note="It runs in the sandbox; the repository cannot shadow it: ``PATH`` and "
        "``PYTHONPATH`` keep no folder inside it, ``PYTHONSAFEPATH=1``, ``env`` is set last.",
        reads="a command in the sandbox",
    ),
)
