"""Starting a child through the supervisor, and learning how it ended (evaluator side).

The supervisor (:mod:`pytest_scoring.kit.supervise`) is a process of its own, in a session
of its own: Ctrl-C on the terminal reaches only the evaluator, which decides what the child
gets (:meth:`Supervisor.interrupt`, :meth:`Supervisor.kill`). It reports the child's real exit
status once every process of the child's tree is gone.
"""

from __future__ import annotations

import contextlib
import json
import signal
import subprocess
import sys
import time
from collections.abc import Mapping
from collections.abc import Sequence
from dataclasses import dataclass
from dataclasses import field
from pathlib import Path
from typing import Any
from typing import Final

from pytest_scoring.kit.supervise import SWEEP_LIMIT
from pytest_scoring.process.environment import captured_environment

#: Extra time the evaluator gives a supervisor past its child's deadline before killing it.
SUPERVISOR_MARGIN: Final = 10.0


@dataclass(frozen=True)
class ChildUser:
    """The user the repository's processes run as (the evaluator must be root)."""

    name: str
    uid: int
    gid: int


@dataclass(frozen=True)
class Limits:
    """Resource limits of a child, lowered for good before it starts (None: unchanged)."""

    #: Largest file it may write, in bytes (``RLIMIT_FSIZE``).
    file_size: int | None = None
    #: Largest address space of one process, in bytes (``RLIMIT_AS``).
    address_space: int | None = None
    #: Largest data segment of one process (its heap and private writable mappings), in bytes
    #: (``RLIMIT_DATA``): bounds memory without the address space that runtimes reserve.
    data: int | None = None
    #: Most open files (``RLIMIT_NOFILE``).
    open_files: int | None = None
    #: Most processes and threads of the children's user (``RLIMIT_NPROC``, machine-wide).
    processes: int | None = None
    #: Most bytes on disk of everything the children can write (the runner's disk watch).
    disk: int | None = None
    #: Most tests of one session the evaluator records from the probe's stream (its memory
    #: grows with each test: about 2 KB).
    tests: int | None = None

    def options(self) -> dict[str, int | None]:
        """Every limit under its ``--limit`` kind (the report's options)."""
        return {
            "fsize": self.file_size,
            "as": self.address_space,
            "data": self.data,
            "nofile": self.open_files,
            "nproc": self.processes,
            "disk": self.disk,
            "tests": self.tests,
        }

    def to_spec(self, own_user: bool = True) -> dict[str, int]:
        """The resource limits the supervisor sets, by kind.

        :param own_user: the child runs as a user of its own; else ``nproc`` is left out, as
            it would count the evaluator's own processes.
        """
        values = self.options()
        del values["disk"], values["tests"]
        if not own_user:
            del values["nproc"]
        return {key: value for key, value in values.items() if value is not None}


@dataclass
class ChildExit:
    """How a supervised child ended, as its supervisor saw it."""

    exit_code: int | None = None
    #: The signal that killed it (``"SIGKILL"``), when one did.
    signal: str | None = None
    timed_out: bool = False
    #: Stopped by an interrupt (Ctrl-C) passed on by the evaluator.
    interrupted: bool = False
    duration: float = 0.0
    #: CPU seconds (user and system) of the child's whole tree, as the supervisor measured.
    cpu_time: float | None = None
    #: ``"full"`` when every process of its tree was contained and is gone, else ``"partial"``.
    containment: str = "full"
    containment_reason: str | None = None
    #: Why the child could not be started at all.
    error: str | None = None

    @classmethod
    def from_answer(cls, answer: Mapping[str, Any]) -> ChildExit:
        names = cls.__dataclass_fields__
        return cls(**{key: value for key, value in answer.items() if key in names})

    def describe(self) -> str:
        """``exit status 1``, ``killed by SIGKILL``, ``timed out``…"""
        if self.error is not None:
            return self.error
        if self.signal is not None:
            return f"killed by {self.signal}"
        return f"exit status {self.exit_code}"


@dataclass
class ChildSpec:
    """What the supervisor starts, and how it watches it."""

    argv: Sequence[str]
    cwd: Path
    env: Mapping[str, str]
    #: File descriptors for the child's standard output and error (they may be equal).
    stdout: int
    stderr: int
    #: Seconds until SIGINT (None: no deadline); SIGKILL ``grace`` seconds later.
    timeout: float | None = None
    grace: float = 0.0
    user: ChildUser | None = None
    limits: Limits = field(default_factory=Limits)
    #: Further descriptors the child inherits under the same numbers (the probe's channel).
    pass_fds: Sequence[int] = ()
    #: A cgroup of its own for the child's tree where cgroup v2 allows (a user of its own).
    cgroup: bool = False
    #: The child's file mode creation mask (None: the supervisor's own).
    umask: int | None = None

    def to_json(self) -> dict[str, Any]:
        return {
            "argv": [str(arg) for arg in self.argv],
            "cwd": str(self.cwd),
            "env": dict(self.env),
            "stdout_fd": self.stdout,
            "stderr_fd": self.stderr,
            "pass_fds": list(self.pass_fds),
            "timeout": self.timeout,
            "grace": self.grace,
            "user": None if self.user is None else {"uid": self.user.uid, "gid": self.user.gid},
            "limits": self.limits.to_spec(own_user=self.user is not None),
            "cgroup": self.cgroup,
            "umask": self.umask,
        }


class Supervisor:
    """A running supervisor with its child."""

    def __init__(self, spec: ChildSpec):
        self.spec = spec
        self.started = time.monotonic()
        descriptors = sorted({spec.stdout, spec.stderr, *spec.pass_fds})
        self._process = subprocess.Popen(
            # -P: never import a ``pytest_scoring`` from the folder we were started in.
            [sys.executable, "-P", "-m", "pytest_scoring.kit.supervise"],
            cwd="/",
            env=captured_environment(),
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            pass_fds=descriptors,
            start_new_session=True,  # the terminal's Ctrl-C reaches the evaluator only
        )
        assert self._process.stdin is not None and self._process.stdout is not None
        with self._process.stdin:
            self._process.stdin.write(json.dumps(spec.to_json()).encode("utf-8"))
        #: ``{"started": pid}``, or the answer itself when the child could not start.
        self._first = self._process.stdout.readline()

    def interrupt(self) -> None:
        """Pass an interrupt on: the child's process group gets SIGINT (again: SIGKILL)."""
        self._signal(signal.SIGINT)

    def kill(self) -> None:
        """End the child and its whole tree now."""
        self._signal(signal.SIGTERM)

    def _signal(self, sig: signal.Signals) -> None:
        if self._process.poll() is None and b'"started"' in self._first:
            with contextlib.suppress(ProcessLookupError):
                self._process.send_signal(sig)

    def running(self) -> bool:
        return self._process.poll() is None

    def wait(self) -> ChildExit:
        """Wait until the child and everything it started are gone; how the child ended."""
        limit = self._latest_end()
        while self.running():
            if limit is not None and time.monotonic() > limit:
                self._process.kill()  # a supervisor that hangs itself: the last resort
            with contextlib.suppress(subprocess.TimeoutExpired):
                self._process.wait(timeout=0.5)
        assert self._process.stdout is not None
        with self._process.stdout:
            answer = (self._first + self._process.stdout.read()).decode("utf-8", "replace")
        try:
            return ChildExit.from_answer(json.loads(answer.strip().splitlines()[-1]))
        except (ValueError, IndexError, TypeError):
            return ChildExit(
                error=f"the supervisor ended without an answer (exit status "
                f"{self._process.returncode})",
                containment="partial",
                containment_reason="the supervisor ended before its child's tree was gone",
            )

    def _latest_end(self) -> float | None:
        if self.spec.timeout is None:
            return None
        allowed = self.spec.timeout + self.spec.grace + SWEEP_LIMIT + SUPERVISOR_MARGIN
        return self.started + allowed
