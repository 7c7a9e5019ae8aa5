"""A cgroup of its own for one child's tree, where cgroup v2 allows it (the supervisor, as root).

PYTEST_DONT_REWRITE (pytest never rewrites or warns about this module, whatever the
repository's ``filterwarnings`` says).

Resource limits are per process (``RLIMIT_DATA``) or per user (``RLIMIT_NPROC``); a cgroup
bounds the whole tree at once: ``pids.max`` its processes and threads, ``memory.max`` its
memory, and ``cgroup.kill`` ends every process in it, wherever it went in the process tree.
The supervisor makes ``/sys/fs/cgroup/pytest-scoring/run-PID``, joins it while it starts the
child (the child is born inside), goes back to its own cgroup, and at the end kills what is
left in it and removes it.

It needs the unified hierarchy at ``/sys/fs/cgroup`` with the ``pids`` and ``memory``
controllers; elsewhere (cgroup v1, a container without delegation, not root) the supervisor
sets the resource limits instead. Standard library only: the supervisor imports it.
"""

from __future__ import annotations

import contextlib
import os
import signal
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Final

ROOT: Final = Path("/sys/fs/cgroup")
#: The folder of the runs' cgroups, under :data:`ROOT`.
PARENT: Final = "pytest-scoring"
CONTROLLERS: Final = ("pids", "memory")
#: How long removing an emptied cgroup may wait for the kernel to see it empty.
REMOVE_LIMIT: Final = 10.0


def unavailable() -> str | None:
    """Why no cgroup of its own can be made for a child here, or None when one can."""
    if not sys.platform.startswith("linux"):
        return f"no cgroups on {sys.platform}"
    if os.geteuid() != 0:
        return "only root makes cgroups"
    try:
        controllers = (ROOT / "cgroup.controllers").read_text().split()
    except OSError:
        return f"no cgroup v2 hierarchy at {ROOT} (cgroup v1, or none)"
    missing = [name for name in CONTROLLERS if name not in controllers]
    if missing:
        return f"cgroup v2 at {ROOT} lacks the {' and '.join(missing)} controller(s)"
    return None


class RunCgroup:
    """The cgroup of one child's tree."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self._home = _own_cgroup()

    @classmethod
    def make(cls, processes: int | None, memory: int | None) -> RunCgroup:
        """A new cgroup bounding ``processes`` (``pids.max``) and ``memory`` bytes.

        :raises OSError: when the hierarchy does not allow it (no delegation).
        """
        parent = ROOT / PARENT
        _enable(ROOT)
        parent.mkdir(mode=0o755, exist_ok=True)
        _enable(parent)
        path = parent / f"run-{os.getpid()}"
        path.mkdir(mode=0o755)
        try:
            (path / "pids.max").write_text("max" if processes is None else str(processes))
            (path / "memory.max").write_text("max" if memory is None else str(memory))
        except OSError:
            path.rmdir()
            raise
        return cls(path)

    @contextlib.contextmanager
    def entered(self) -> Iterator[None]:
        """The calling process in the cgroup meanwhile: a child it starts is born inside."""
        _join(self.path)
        try:
            yield
        finally:
            _join(self._home)

    def kill_all(self) -> None:
        """SIGKILL every process in the cgroup."""
        kill = self.path / "cgroup.kill"  # Linux 5.14 and newer
        with contextlib.suppress(OSError):
            if kill.exists():
                kill.write_text("1")
                return
        for pid in _members(self.path):
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.kill(pid, signal.SIGKILL)

    def remove(self) -> None:
        """Remove the cgroup once the kernel sees it empty (its processes were reaped)."""
        give_up = time.monotonic() + REMOVE_LIMIT
        while True:
            try:
                self.path.rmdir()
                return
            except FileNotFoundError:
                return
            except OSError:  # still populated for a moment
                if time.monotonic() > give_up:
                    return
                self.kill_all()
                time.sleep(0.05)


def _enable(folder: Path) -> None:
    """Let the cgroups below ``folder`` use the controllers."""
    wanted = " ".join(f"+{name}" for name in CONTROLLERS)
    (folder / "cgroup.subtree_control").write_text(wanted)


def _join(folder: Path) -> None:
    (folder / "cgroup.procs").write_text(str(os.getpid()))


def _own_cgroup() -> Path:
    """The cgroup v2 this process is in (``0::/path`` in ``/proc/self/cgroup``)."""
    for line in Path("/proc/self/cgroup").read_text().splitlines():
        if line.startswith("0::"):
            return ROOT / line[3:].lstrip("/")
    return ROOT


def _members(folder: Path) -> list[int]:
    try:
        return [int(pid) for pid in (folder / "cgroup.procs").read_text().split()]
    except OSError:
        return []
