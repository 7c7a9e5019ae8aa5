"""The supervisor: one small process that contains every child the evaluator starts.

PYTEST_DONT_REWRITE (pytest never rewrites or warns about this module, whatever the
repository's ``filterwarnings`` says).

Started as ``python -m pytest_scoring.kit.supervise`` by
:mod:`pytest_scoring.process.supervisor`, and in an Inspect sandbox by the helper
(:mod:`pytest_scoring.kit.sandbox`) as the kit's copy ``_pytest_scoring_supervise.py``.
:func:`main` runs only there, never in the evaluator's
own process: a subreaper there would reap, and so steal the exit statuses of, the evaluator's
other children. It reads what to run as one JSON object on standard input, then:

1. becomes a *child subreaper* (Linux ``prctl(PR_SET_CHILD_SUBREAPER)``): every process the
   child starts that is orphaned, ``setsid`` daemons included, is re-parented to it instead of
   to init, so none can leave its tree;
2. starts the child in a session of its own, as another user when asked (the evaluator runs as
   root), with its standard output and error on the descriptors it was given, and the resource
   limits (file size, address space, data, open files, processes) lowered for good; where
   cgroup v2 allows (:mod:`.cgroup`), in a cgroup of its own whose ``pids.max`` and
   ``memory.max`` bound the whole tree instead of the data and process limits;
3. forwards SIGINT to the child's process group, and at the deadline sends SIGINT itself and
   SIGKILL after the grace period; SIGTERM kills at once, and so does the end of the process
   that started it (a killed evaluator leaves nothing of the child running until its
   deadline);
4. when the child has exited, SIGKILLs every process left in its tree and reaps them, looking
   through ``/proc`` again until none is left;
5. writes ``{exit_code, signal, timed_out, interrupted, duration, cpu_time, containment, …}``
   as one JSON line on standard output and exits (``cpu_time``: the CPU seconds, user and
   system, of every process of the child's tree, all of them reaped here).

Its first line on standard output, once the child runs and signals are watched, is
``{"started": pid}`` (or ``{"error": …}`` when the child could not start): the evaluator sends
no signal before it.

Elsewhere than on Linux it kills the child's process group at the end and says containment was
partial. Standard library only (with :mod:`.cgroup`, which is too): it starts fast and trusts
nothing beside it.
"""

from __future__ import annotations

import contextlib
import ctypes
import ctypes.util
import importlib.util
import json
import os
import resource
import signal
import subprocess
import sys
import time
from collections.abc import Callable
from collections.abc import Iterable
from typing import Any
from typing import Final

PR_SET_PDEATHSIG: Final = 1
PR_SET_CHILD_SUBREAPER: Final = 36
#: Resource limits a specification may set, by key.
LIMITS: Final = {
    "fsize": resource.RLIMIT_FSIZE,
    "as": resource.RLIMIT_AS,
    "data": resource.RLIMIT_DATA,
    "nofile": resource.RLIMIT_NOFILE,
    "nproc": resource.RLIMIT_NPROC,
}
#: How long the final sweep keeps killing (a process stuck in the kernel cannot die at once).
SWEEP_LIMIT: Final = 30.0
#: Longest wait between two looks at the child (signals wake the supervisor earlier).
TICK: Final = 0.5
_WATCHED: Final = (signal.SIGCHLD, signal.SIGINT, signal.SIGTERM)


def _libc() -> Any:
    if not sys.platform.startswith("linux"):
        return None
    return ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6", use_errno=True)


_LIBC: Final = _libc()


def sibling(name: str) -> Any:
    """The kit's module ``name`` beside this file (``cgroup.py`` in the package, a copy named
    ``_pytest_scoring_cgroup.py`` in a kit folder), loaded by path: the supervisor runs with
    ``-I``, and a kit file imports nothing of pytest-scoring by name."""
    folder = os.path.dirname(os.path.abspath(__file__))
    path = os.path.join(folder, f"_pytest_scoring_{name}.py")
    if not os.path.exists(path):
        path = os.path.join(folder, f"{name}.py")
    spec = importlib.util.spec_from_file_location(f"_pytest_scoring_{name}", path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


cgroup: Final = sibling("cgroup")


def become_subreaper() -> str | None:
    """Make orphaned descendants this process's children; why not, or None when it worked."""
    if _LIBC is None:
        return f"no subreaper on {sys.platform}: only the child's process group is killed"
    if _LIBC.prctl(PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0) != 0:
        return f"prctl(PR_SET_CHILD_SUBREAPER) failed: {os.strerror(ctypes.get_errno())}"
    return None


def _prepare_child(limits: dict[str, int], umask: int | None) -> Callable[[], None]:
    """What runs in the child between fork and exec (after the user was switched)."""

    def prepare() -> None:
        if umask is not None:
            os.umask(umask)
        signal.pthread_sigmask(signal.SIG_SETMASK, set())
        signal.signal(signal.SIGINT, signal.SIG_DFL)  # an ignored SIGINT would be inherited
        for key, value in limits.items():
            _, hard = resource.getrlimit(LIMITS[key])
            value = value if hard == resource.RLIM_INFINITY else min(value, hard)
            resource.setrlimit(LIMITS[key], (value, value))
        if _LIBC is not None:  # the child dies with the supervisor, should that ever be killed
            _LIBC.prctl(PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)

    return prepare


def _run_cgroup(wanted: bool, limits: dict[str, int]) -> Any:
    """A cgroup for the child's tree, when asked for and possible: it bounds the tree's
    processes and memory instead of ``limits``' ``nproc`` and ``data``, taken out of them."""
    if not wanted or cgroup.unavailable() is not None:
        return None
    try:
        made = cgroup.RunCgroup.make(limits.get("nproc"), limits.get("data"))
    except OSError:  # no delegation here: the resource limits hold instead
        return None
    limits.pop("nproc", None)
    limits.pop("data", None)
    return made


def descendants(pid: int) -> list[int]:
    """Every process below ``pid`` in the process tree, read from ``/proc``."""
    children: dict[int, list[int]] = {}
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat", encoding="utf-8", errors="replace") as stat:
                # "pid (comm) state ppid …": comm may hold spaces and parentheses.
                parent = int(stat.read().rsplit(")", 1)[1].split()[1])
        except (OSError, IndexError, ValueError):
            continue  # gone meanwhile
        children.setdefault(parent, []).append(int(entry))
    found, pending = [], [pid]
    while pending:
        for child in children.get(pending.pop(), []):
            found.append(child)
            pending.append(child)
    return found


def exit_code(status: int) -> int:
    """A wait status as ``subprocess`` reports it (``os.waitstatus_to_exitcode``, 3.9+)."""
    return -os.WTERMSIG(status) if os.WIFSIGNALED(status) else os.WEXITSTATUS(status)


def _signal_all(pids: Iterable[int], sig: signal.Signals) -> None:
    for pid in pids:
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.kill(pid, sig)


def _signal_group(pgid: int, sig: signal.Signals) -> None:
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(pgid, sig)


class Supervision:
    """One child and everything it starts, watched until all of it is gone."""

    def __init__(self, spec: dict[str, Any]):
        self.spec = spec
        self.started = time.monotonic()
        self.child: subprocess.Popen[bytes] | None = None
        self.status: int | None = None
        self.timed_out = False
        self.interrupted = False
        self._interrupted_at: float | None = None
        self._killed = False
        #: The process that started this one: once it is gone, nobody waits for the child.
        self._starter = os.getppid()
        self.subreaper_problem: str | None = None
        self.cgroup: Any = None  # the cgroup module's RunCgroup, or None

    def start(self, subreaper_problem: str | None) -> None:
        spec = self.spec
        user = spec.get("user") or {}
        passed = [int(fd) for fd in spec.get("pass_fds", [])]
        outputs = {int(spec["stdout_fd"]), int(spec["stderr_fd"])}
        limits = dict(spec.get("limits") or {})
        self.cgroup = _run_cgroup(bool(spec.get("cgroup")), limits)
        entered = self.cgroup.entered() if self.cgroup else contextlib.nullcontext()
        try:
            with entered:
                self.child = self._popen(spec, user, passed, limits)
        finally:
            for fd in {*passed, *outputs} - {0, 1, 2}:  # the child holds them now
                with contextlib.suppress(OSError):
                    os.close(fd)
        self.subreaper_problem = subreaper_problem

    @staticmethod
    def _popen(
        spec: dict[str, Any], user: dict[str, int], passed: list[int], limits: dict[str, int]
    ) -> subprocess.Popen[bytes]:
        # ``user``, ``group`` and ``extra_groups`` exist from Python 3.9: named only when used.
        switch: dict[str, Any] = {}
        if user:
            switch = {"user": user["uid"], "group": user["gid"], "extra_groups": []}
        return subprocess.Popen(
            spec["argv"],
            cwd=spec["cwd"],
            env=spec["env"],
            stdin=subprocess.DEVNULL,
            stdout=int(spec["stdout_fd"]),
            stderr=int(spec["stderr_fd"]),
            pass_fds=passed,
            start_new_session=True,
            preexec_fn=_prepare_child(limits, spec.get("umask")),
            **switch,
        )

    def watch(self) -> None:
        """Wait for the child to exit, forwarding SIGINT and keeping the deadline."""
        assert self.child is not None
        timeout, grace = self.spec.get("timeout"), float(self.spec.get("grace", 0))
        deadline = None if timeout is None else self.started + float(timeout)
        while not self._reap():
            if os.getppid() != self._starter:
                self._kill()
            now = time.monotonic()
            if deadline is not None and now >= deadline and self._interrupted_at is None:
                self.timed_out = True
                self._interrupt(now)
            if self._interrupted_at is not None and now >= self._interrupted_at + grace:
                self._kill()
            wake = [TICK]
            if deadline is not None and self._interrupted_at is None:
                wake.append(deadline - now)
            elif self._interrupted_at is not None and not self._killed:
                wake.append(self._interrupted_at + grace - now)
            received = signal.sigtimedwait(_WATCHED, max(0.0, min(wake)))
            if received is None or received.si_signo == signal.SIGCHLD:
                continue
            if received.si_signo == signal.SIGTERM or self._interrupted_at is not None:
                self._kill()  # a second interrupt does not wait for the grace period
            else:
                self.interrupted = True
                self._interrupt(time.monotonic())

    def _interrupt(self, now: float) -> None:
        assert self.child is not None
        self._interrupted_at = now
        _signal_group(self.child.pid, signal.SIGINT)

    def _kill(self) -> None:
        assert self.child is not None
        if not self._killed:
            self._killed = True
            _signal_group(self.child.pid, signal.SIGKILL)
            _signal_all(descendants(os.getpid()) if _LIBC is not None else [], signal.SIGKILL)
            if self.cgroup is not None:
                self.cgroup.kill_all()

    def _reap(self) -> bool:
        """Reap every exited child (orphans included); True once the main child is done."""
        assert self.child is not None
        while True:
            try:
                pid, status = os.waitpid(-1, os.WNOHANG)
            except ChildProcessError:
                break
            if pid == 0:
                break
            if pid == self.child.pid:
                self.status = status
                self.child.returncode = exit_code(status)
        return self.status is not None

    def sweep(self) -> int:
        """SIGKILL and reap every process left in the tree; how many could not be ended."""
        assert self.child is not None
        if _LIBC is None:
            _signal_group(self.child.pid, signal.SIGKILL)
            return 0
        give_up = time.monotonic() + SWEEP_LIMIT
        while True:
            if self.cgroup is not None:
                self.cgroup.kill_all()
            self._reap()
            left = descendants(os.getpid())
            if not left or time.monotonic() > give_up:
                if self.cgroup is not None:
                    self.cgroup.remove()
                return len(left)
            _signal_all(left, signal.SIGKILL)
            signal.sigtimedwait([signal.SIGCHLD], 0.05)

    def outcome(self, survivors: int) -> dict[str, Any]:
        exit_code, signal_name = None, None
        if self.status is not None and os.WIFEXITED(self.status):
            exit_code = os.WEXITSTATUS(self.status)
        elif self.status is not None and os.WIFSIGNALED(self.status):
            signal_name = signal.Signals(os.WTERMSIG(self.status)).name
        problems = [self.subreaper_problem] if self.subreaper_problem else []
        if survivors:
            problems.append(f"{survivors} process(es) of the child's tree could not be killed")
        used = resource.getrusage(resource.RUSAGE_CHILDREN)  # every process reaped here
        return {
            "exit_code": exit_code,
            "signal": signal_name,
            "timed_out": self.timed_out,
            "interrupted": self.interrupted,
            "duration": round(time.monotonic() - self.started, 3),
            "cpu_time": round(used.ru_utime + used.ru_stime, 3),
            "containment": "partial" if problems else "full",
            "containment_reason": "; ".join(problems) or None,
        }


def main() -> int:
    spec = json.loads(sys.stdin.read())
    for watched in _WATCHED:  # delivered only through sigtimedwait, never as an exception
        signal.signal(watched, lambda *args: None)
    signal.pthread_sigmask(signal.SIG_BLOCK, _WATCHED)
    supervision = Supervision(spec)
    try:
        supervision.start(become_subreaper())
    except (OSError, subprocess.SubprocessError) as error:
        reason = getattr(error, "strerror", None) or str(error)
        _answer({"error": f"cannot start {spec['argv'][0]}: {reason}"})
        return 0
    assert supervision.child is not None
    _answer({"started": supervision.child.pid})
    supervision.watch()
    _answer(supervision.outcome(supervision.sweep()))
    return 0


def _answer(outcome: dict[str, Any]) -> None:
    with contextlib.suppress(BrokenPipeError):  # whoever started this one is gone
        sys.stdout.write(json.dumps(outcome) + "\n")
        sys.stdout.flush()


if __name__ == "__main__":
    sys.exit(main())
