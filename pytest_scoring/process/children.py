"""How one evaluation starts the scored repository's processes (docs/security.md).

A :class:`ChildRunner` knows the interpreter, the user, the environment and the limits the
children get, and keeps their folders: the launch kit (launcher, probe and deterministic plugin,
copied where only the evaluator can write), a private home and temporary folder, logs. Every
child goes through a supervisor: :meth:`ChildRunner.start_pytest` for a pytest session that
streams its outcomes through the probe, :meth:`ChildRunner.run_command` for a shell command.
Another run beside it (the reference rerun, the baseline) gets a runner of its own from
:meth:`ChildRunner.for_another_run`: a user of its own, the same disk watch.
"""

from __future__ import annotations

import contextlib
import os
import secrets
import shutil
import stat
import sys
import tempfile
import threading
from collections.abc import Callable
from collections.abc import Sequence
from dataclasses import dataclass
from dataclasses import field
from pathlib import Path
from pathlib import PurePath
from typing import IO
from typing import Final

from pytest_scoring.core.determinism import PINNED_UMASK
from pytest_scoring.core.determinism import pinned_environment
from pytest_scoring.core.outcomes import OutcomeTally
from pytest_scoring.fs.guard import FileGuard
from pytest_scoring.kit import LAUNCHER
from pytest_scoring.kit import kit_files
from pytest_scoring.kit import launch
from pytest_scoring.kit.channel import KEY_BYTES
from pytest_scoring.process.disk import DiskWatch
from pytest_scoring.process.environment import captured_environment
from pytest_scoring.process.stream import ProbeState
from pytest_scoring.process.stream import StreamReader
from pytest_scoring.process.supervisor import ChildExit
from pytest_scoring.process.supervisor import ChildSpec
from pytest_scoring.process.supervisor import ChildUser
from pytest_scoring.process.supervisor import Limits
from pytest_scoring.process.supervisor import Supervisor
from pytest_scoring.process.users import UserPool
from pytest_scoring.process.witness import ChildEnding

#: Longest wait after SIGINT before a pytest child is killed.
MAX_GRACE: Final = 30.0
#: Bytes of the end of pytest's output its witnesses read (a plugin's explanation is there).
WITNESSED_OUTPUT: Final = 64 * 1024


def grace_period(timeout: float) -> float:
    """How long pytest may take to end after SIGINT: a quarter of the timeout, 2 to 30 s."""
    return min(MAX_GRACE, max(2.0, timeout / 4))


@dataclass(frozen=True)
class BlackBox:
    """``--black-box``: what of the copy is the evaluator's, and where else the repository is
    (REPO itself: an interpreter with REPO installed would load it from there)."""

    #: Paths of this machine, or of an Inspect sandbox (``PurePosixPath``).
    evaluator: Sequence[PurePath]
    elsewhere: Sequence[PurePath] = ()

    def options(self) -> list[str]:
        """The launcher's options for it."""
        return [
            *(f"{launch.EVALUATOR_PATH}{path}" for path in self.evaluator),
            *(f"{launch.REPOSITORY_PATH}{path}" for path in self.elsewhere),
        ]


@dataclass
class PytestChild:
    """A pytest session running in a supervised child, and what its probe said so far."""

    supervisor: Supervisor
    reader: StreamReader
    log: Path
    #: Told how the child ended (the runner keeps every child's containment).
    on_exit: Callable[[ChildExit], object] = lambda ended: None

    @property
    def state(self) -> ProbeState:
        return self.reader.state

    def wait(
        self,
        on_progress: Callable[[ProbeState, bool], object] = lambda state, done: None,
        cancel: threading.Event | None = None,
    ) -> ChildExit:
        """Wait for the child's whole tree to be gone, then for the end of its stream.

        Ctrl-C while waiting is passed on (pytest stops and ends its session); a second one
        kills the child's tree at once.

        :param on_progress: called now and then with what the probe said so far, and once
            more at the end with ``done`` true.
        :param cancel: when set, the child is killed at once (the evaluation was interrupted).
        """
        cancel = cancel or threading.Event()
        interrupts = 0
        try:
            while self.supervisor.running():
                try:
                    on_progress(self.state, False)
                    if cancel.wait(0.2):
                        self.supervisor.kill()
                except KeyboardInterrupt:
                    interrupts += 1
                    (self.supervisor.interrupt if interrupts == 1 else self.supervisor.kill)()
        finally:
            if self.supervisor.running():  # an exception (Ctrl-C) while waiting: end it now
                self.supervisor.kill()
            ended = self.supervisor.wait()
            self.reader.join()
            self.on_exit(ended)
        on_progress(self.state, True)
        return ended

    def ending(self, ended: ChildExit) -> ChildEnding:
        """How the child ended, for its witnesses (:mod:`pytest_scoring.process.witness`)."""
        return ChildEnding.of(ended, read_tail(self.log, WITNESSED_OUTPUT))


@dataclass
class ChildRunner:
    """The interpreter, user, environment, limits and folders of an evaluation's children."""

    #: The interpreter of pytest children (``run --python``; default: this one).
    python: str = field(default_factory=lambda: sys.executable)
    #: Who the children run as (None: the evaluator's own user).
    user: ChildUser | None = None
    limits: Limits = field(default_factory=Limits)
    #: The environment the evaluator started with (never what the repository set since).
    environment: dict[str, str] = field(default_factory=captured_environment)
    #: Where the runner keeps its folders (None: a temporary folder made on first use).
    area: Path | None = None
    #: Give children a private ``HOME`` and ``TMPDIR`` (``run``: nothing of one repository is
    #: seen by another); in process they keep the evaluator's.
    private_folders: bool = False
    #: The pinned environment and umask (``run``; docs/scoring.md#determinism), with what the
    #: evaluator set over it (``--env``, the configuration's ``env``); None: in process, the
    #: children get the evaluator's environment as it is.
    pinned: dict[str, str] | None = None
    #: The longest any child may run (``run --timeout`` leaves time to score); None: no cap.
    time_limit: float | None = None
    #: Fingerprints of the evaluator's files, checked before scoring (``run`` only).
    guard: FileGuard | None = None
    #: How every child so far ended (their containment goes into the report).
    exits: list[ChildExit] = field(default_factory=list)
    #: Where another run gets a user of its own (``run`` as root); None: it runs as ``user``.
    users: UserPool | None = None
    _owned_area: bool = False
    _kit: Path | None = None
    _homes: tuple[Path, Path] | None = None
    _count: int = 0
    #: The bound on what the children write, shared with the runners of other runs.
    _disk: DiskWatch = field(init=False)
    #: Made by :meth:`for_another_run`: its user goes back to the pool, the watch goes on.
    _another_run: bool = False

    def __post_init__(self) -> None:
        self._disk = DiskWatch(self.limits.disk)

    def for_another_run(self, name: str) -> ChildRunner:
        """A runner for another run beside this one's (the reference rerun, the baseline, an
        expected-tests folder): the same interpreter, environment, limits, guard and disk
        watch, a folder ``name`` of its own in this runner's area, and a user of its own when
        :attr:`users` has one. Its :meth:`close` removes the folder and gives the user back.
        """
        user = self.users.take() if self.users is not None else self.user
        area = self.folder(name)
        if user is not None and self.area is not None:
            self.area.chmod(0o711)  # its user passes through to its own folders
        runner = ChildRunner(
            python=self.python,
            user=user,
            limits=self.limits,
            environment=self.environment,
            area=area,
            private_folders=self.private_folders,
            pinned=self.pinned,
            time_limit=self.time_limit,
            guard=self.guard,
            exits=self.exits,
            users=self.users,
        )
        runner._disk, runner._owned_area, runner._another_run = self._disk, True, True
        return runner

    def folder(self, name: str, numbered: bool = True) -> Path:
        """A new folder only the evaluator can read (snapshots, logs, pristine copies).

        :param numbered: named ``NAME-N``, N counting the runner's folders; else ``NAME``
            (made once per runner: the children's copy and ``HOME``, whose paths the tests
            see, at the same place in every run).
        """
        if self.area is None:
            self.area = Path(tempfile.mkdtemp(prefix="pytest-scoring-"))
            self._owned_area = True
        self._count += 1
        folder = self.area / (f"{name}-{self._count}" if numbered else name)
        folder.mkdir(mode=0o700)
        return folder

    def workspace(self, name: str, numbered: bool = True) -> Path:
        """A new folder the children's user owns and may write (a copy they run in)."""
        folder = self.folder(name, numbered)
        if self.area is not None and self.user is not None:
            # The area lets the children's user through, without listing it.
            self.area.chmod(0o711)
        self.give(folder)
        self._disk.add(folder)
        return folder

    def give(self, tree: Path) -> None:
        """Hand ``tree`` (a copy made by the evaluator) to the children's user."""
        if self.user is None:
            return
        os.lchown(tree, self.user.uid, self.user.gid)
        for folder, folders, files in os.walk(tree):
            for name in (*folders, *files):
                os.lchown(os.path.join(folder, name), self.user.uid, self.user.gid)

    def kit(self) -> Path:
        """The kit (:mod:`pytest_scoring.kit`), readable by the children, not writable."""
        if self._kit is None:
            kit = self.folder("kit")
            for relpath, source in kit_files().items():
                copied = kit / relpath
                copied.parent.mkdir(mode=0o755, exist_ok=True)
                shutil.copyfile(source, copied)
                copied.chmod(0o644)
            kit.chmod(0o755)
            if self.area is not None and self.user is not None:
                self.area.chmod(0o711)
            self._kit = kit
        return self._kit

    def _home_and_tmp(self) -> tuple[Path, Path]:
        if self._homes is None:
            self._homes = (self.workspace("home", numbered=False), self.workspace("tmp", False))
        return self._homes

    def child_environment(self) -> dict[str, str]:
        """The evaluator's captured environment, pinned where the runner pins it, with the
        children's private folders."""
        environment = dict(self.environment)
        if self.pinned is not None:
            environment = pinned_environment(environment, self.pinned)
        if self.private_folders:
            home, tmp = self._home_and_tmp()
            environment.update(HOME=str(home), TMPDIR=str(tmp))
        return environment

    def launcher_command(self, *options: str) -> list[str]:
        """``python <kit>/private/_pytest_scoring_launch.py OPTIONS``."""
        return [self.python, str(self.kit() / LAUNCHER), *options]

    def start_pytest(
        self,
        cwd: Path,
        args: Sequence[str],
        timeout: float | None,
        *,
        deterministic: bool = False,
        ignored_options: Sequence[str] = (),
        grace: float | None = None,
        tally: OutcomeTally | None = None,
        black_box: BlackBox | None = None,
        only: Sequence[str] | None = None,
    ) -> PytestChild:
        """Start pytest in ``cwd`` through the launcher, its probe streaming to us.

        The run gets a key of its own, on a pipe the launcher reads to its end and closes
        before any code of the repository runs; the stream comes back on another pipe. The
        launcher's arguments name both descriptors, the environment neither.

        :param tally: where the outcomes go (default: a new one, in the child's state).
        :param black_box: ``--black-box``: the test process loads no file of ``cwd`` (nor of
            the repository's other copies) but the evaluator's.
        :param only: the ids (relative to pytest's rootdir) of the only tests to run, the
            others deselected (a rerun of ``--retries``).
        """
        key = secrets.token_bytes(KEY_BYTES)
        log = self.folder("pytest") / "output.txt"
        self._disk.add(log.parent)
        read_end, write_end = os.pipe()
        key_end = _key_pipe(key)
        options = [f"{launch.STREAM_FD}{write_end}", f"{launch.KEY_FD}{key_end}"]
        options += ["--deterministic"] if deterministic else []
        options += [f"{launch.IGNORE}{name}" for name in ignored_options]
        if black_box is not None:
            options += [launch.BLACK_BOX, *black_box.options()]
        if only is not None:
            options.append(f"{launch.ONLY}{self._id_file(only)}")
        argv = [*self.launcher_command(*options), "--", *args]
        try:
            with _new_file(log) as output:
                spec = ChildSpec(
                    argv=argv,
                    cwd=cwd,
                    env=self.child_environment(),
                    stdout=output.fileno(),
                    stderr=output.fileno(),
                    timeout=timeout,
                    grace=grace_period(timeout or 0) if grace is None else grace,
                    user=self.user,
                    limits=self.limits,
                    pass_fds=[write_end, key_end],
                    cgroup=self.user is not None,
                    umask=self._umask(),
                )
                supervisor = self._start(spec)
        except BaseException:
            os.close(read_end)
            raise
        finally:
            os.close(write_end)  # the child holds it now: the stream ends when its tree does
            os.close(key_end)
        state = ProbeState(root=cwd, key=key, tally=tally or OutcomeTally())
        state.max_tests = self.limits.tests
        reader = StreamReader(read_end, state)
        return PytestChild(supervisor, reader, log, lambda ended: self._ended(supervisor, ended))

    def run_command(
        self,
        argv: Sequence[str],
        cwd: Path,
        timeout: float | None,
        stdout: IO[bytes],
        stderr: IO[bytes],
        environment: dict[str, str] | None = None,
    ) -> ChildExit:
        """Run a command to its end (killed with its whole tree at ``timeout``).

        :param environment: the command's environment (default: :meth:`child_environment`).
        """
        spec = ChildSpec(
            argv=argv,
            cwd=cwd,
            env=self.child_environment() if environment is None else environment,
            stdout=stdout.fileno(),
            stderr=stderr.fileno(),
            timeout=timeout,
            user=self.user,
            limits=self.limits,
            cgroup=self.user is not None,
            umask=self._umask(),
        )
        supervisor = self._start(spec)
        try:
            ended = supervisor.wait()
        except BaseException:  # Ctrl-C or the scoring deadline while the command runs
            supervisor.kill()
            self._ended(supervisor, supervisor.wait())
            raise
        self._ended(supervisor, ended)
        return ended

    def _id_file(self, ids: Sequence[str]) -> Path:
        """A file of test ids the children can read, not write."""
        folder = self.folder("only")
        path = folder / "ids.txt"
        path.write_text("".join(f"{nodeid}\n" for nodeid in ids), encoding="utf-8")
        path.chmod(0o644)
        folder.chmod(0o755)
        if self.area is not None and self.user is not None:
            self.area.chmod(0o711)
        return path

    def _umask(self) -> int | None:
        return None if self.pinned is None else PINNED_UMASK

    def _start(self, spec: ChildSpec) -> Supervisor:
        supervisor = Supervisor(spec)
        self._disk.track(supervisor)  # killed at once when the disk bound is passed
        return supervisor

    def _ended(self, supervisor: Supervisor, ended: ChildExit) -> None:
        self._disk.untrack(supervisor)
        self.exits.append(ended)

    def disk_exceeded(self) -> str | None:
        """Why the children wrote more than ``--limit disk`` allows (measured now), or None."""
        return self._disk.check()

    def containment_problems(self) -> list[str]:
        """Why some child was not fully contained (empty when every one was)."""
        return sorted(
            {ended.containment_reason or "" for ended in self.exits if ended.containment != "full"}
        )

    def close(self) -> None:
        """Remove the folders this runner made; give back a user of its own."""
        if not self._another_run:
            self._disk.stop()
        if self._owned_area and self.area is not None:
            shutil.rmtree(self.area, ignore_errors=True)
            self.area, self._owned_area, self._kit, self._homes = None, False, None, None
        if self._another_run and self.users is not None and self.user is not None:
            self.users.release(self.user)
            self.user = None


def _key_pipe(key: bytes) -> int:
    """The read end of a pipe holding ``key`` in hexadecimal, its write end closed."""
    read_end, write_end = os.pipe()
    try:
        os.write(write_end, key.hex().encode("ascii"))  # far less than a pipe's buffer
    finally:
        os.close(write_end)
    return read_end


def _new_file(path: Path) -> IO[bytes]:
    """A new file only the evaluator can read (the child writes through the descriptor)."""
    flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW
    return os.fdopen(os.open(path, flags, stat.S_IRUSR | stat.S_IWUSR), "wb")


def read_tail(path: Path, limit: int) -> str:
    """The last ``limit`` bytes of a log, as text."""
    with contextlib.suppress(OSError), path.open("rb") as log:
        size = log.seek(0, os.SEEK_END)
        log.seek(max(0, size - limit))
        return log.read().decode("utf-8", "replace")
    return ""
