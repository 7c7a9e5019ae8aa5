"""The kit in the sandbox: the launcher, the probe and the helper, and what the host asks of them.

One :class:`SandboxKit` per sample holds a private folder in the sandbox (``tempfile.mkdtemp``
of the sandbox's Python) with the kit (:mod:`pytest_scoring.kit`): the launcher, the probe,
the integrity watch, the deterministic plugin and the helper (:mod:`pytest_scoring.kit.sandbox`).
Everything large travels as files: the helper writes them, the host reads them with
``read_file`` in parts no larger than Inspect's limit, and writes its own the same way
(docs/inspect.md).
"""

from __future__ import annotations

import contextlib
import json
import os
import posixpath
import secrets
import tarfile
from collections.abc import Sequence
from dataclasses import dataclass
from dataclasses import field
from pathlib import Path
from typing import Any
from typing import Final

import anyio
from inspect_ai.util import SandboxEnvironment
from inspect_ai.util import SandboxEnvironmentLimits

from pytest_scoring.errors import ScoringError
from pytest_scoring.fs.walk import SKIPPED_DIRS
from pytest_scoring.kit import LAUNCHER
from pytest_scoring.kit import PREFIX
from pytest_scoring.kit import kit_files
from pytest_scoring.kit import launch
from pytest_scoring.kit.sandbox import extract

#: The helper's name in the sandbox (:mod:`pytest_scoring.kit.sandbox`), beside the launcher.
HELPER: Final = f"{PREFIX}sandbox.py"
#: The interpreters tried, in order.
PYTHONS: Final = ("python3", "python")
MIN_PYTHON: Final = (3, 8)
MIN_PYTEST: Final = (7, 0)
#: Largest part of a file read or written at once (Inspect reads at most 100 MiB by default).
PART_SIZE: Final = 32 * 1024 * 1024
#: Seconds the helper's short commands (snapshots, copies) may take.
HELPER_TIMEOUT: Final = 600
#: Run by each candidate interpreter first: its version, and a private folder (mode 0700).
BOOT: Final = (
    "import json, sys, tempfile; print(json.dumps({'python': list(sys.version_info[:3]),"
    " 'folder': tempfile.mkdtemp(prefix='pytest-scoring-')}))"
)


class SandboxProblem(ScoringError):
    """The sandbox cannot run the repository's tests (no Python, no pytest…)."""


def version_text(version: Sequence[int]) -> str:
    return ".".join(str(part) for part in version)


def _version(text: str) -> tuple[int, ...]:
    numbers = []
    for part in text.split(".")[:2]:
        digits = "".join(character for character in part if character.isdigit())
        numbers.append(int(digits or 0))
    return tuple(numbers)


@dataclass
class SandboxKit:
    """The private folder of one sample in its sandbox, and the interpreter found there."""

    environment: SandboxEnvironment
    python: str
    python_version: str
    pytest_version: str
    #: The private folder (absolute, in the sandbox).
    folder: str
    #: The sandbox's files are this machine's (Inspect's ``local`` sandbox): the evaluator
    #: removes the folder itself once the sample is done, when the sandbox is gone.
    shared: bool = False
    _count: int = 0
    #: Paths the next helper command removes first.
    _leftovers: list[str] = field(default_factory=list)

    @classmethod
    async def open(cls, environment: SandboxEnvironment) -> SandboxKit:
        """Find Python and pytest in the sandbox and write the kit there.

        :raises SandboxProblem: naming what is missing (Python, a recent enough one, pytest).
        """
        python, boot = await _find_python(environment)
        if tuple(boot["python"]) < MIN_PYTHON:
            raise SandboxProblem(
                f"the sandbox's {python} is Python {version_text(boot['python'])}; the probe "
                f"needs Python {version_text(MIN_PYTHON)} or newer"
            )
        folder = str(boot["folder"])
        for name, source in kit_files().items():
            await environment.write_file(posixpath.join(folder, name), source.read_bytes())
        token = posixpath.join(folder, f"shared-{secrets.token_hex(8)}")
        await environment.write_file(token, b"")  # seen here: the sandbox's files are ours
        check = await environment.exec(
            [python, posixpath.join(folder, LAUNCHER), "--check"], timeout=HELPER_TIMEOUT
        )
        if check.returncode == launch.NO_PYTEST or not check.success:
            raise SandboxProblem(
                f"pytest is not installed for the sandbox's {python} "
                f"(Python {version_text(boot['python'])}): {check.stderr.strip()[-500:]}"
            )
        versions = json.loads(check.stdout)
        if _version(versions["pytest"]) < MIN_PYTEST:
            raise SandboxProblem(
                f"the sandbox's pytest is {versions['pytest']}; the probe needs pytest "
                f"{version_text(MIN_PYTEST)} or newer"
            )
        shared = Path(token).is_file()
        kit = cls(environment, python, versions["python"], versions["pytest"], folder, shared)
        kit.discard(token)
        return kit

    def path(self, name: str) -> str:
        """A new path in the private folder (``name`` tells what it holds)."""
        self._count += 1
        return posixpath.join(self.folder, f"{self._count:04d}-{name}")

    def launcher(self) -> str:
        return posixpath.join(self.folder, LAUNCHER)

    async def batch(
        self,
        commands: Sequence[Sequence[str]],
        timeout: float | None = HELPER_TIMEOUT,
        user: str | None = None,
        secret: str | None = None,
    ) -> list[dict[str, Any]]:
        """Run helper commands in one process (as ``user``: default, the sandbox's), after
        removing what earlier steps left behind; their answers, in order.

        :param secret: a line for the helper's standard input (a run's key: never in a file
            or an argument).
        :raises SandboxProblem: when the helper fails (its error output is in the message).
        :raises SandboxUserUnsupportedError: when the sandbox cannot run commands as ``user``.
        """
        leftovers = [["remove", *self._leftovers]] if self._leftovers else []
        self._leftovers = []
        script = json.dumps([*leftovers, *map(list, commands)])
        # -I: no startup file, variable or user site-packages of the sandbox acts in it.
        command = [self.python, "-I", posixpath.join(self.folder, HELPER), "batch", script]
        seconds = None if timeout is None else int(timeout) + 1
        result = await self.environment.exec(
            command, input=secret, timeout=seconds, timeout_retry=False, user=user
        )
        if not result.success:
            what = ", ".join(arguments[0] for arguments in commands)
            raise SandboxProblem(
                f"{what} in the sandbox failed (exit {result.returncode}): "
                f"{result.stderr.strip()[-2000:]}"
            )
        answers: list[dict[str, Any]] = json.loads(result.stdout.strip().splitlines()[-1])
        return answers[len(leftovers) :]

    async def helper(self, *args: str, user: str | None = None) -> dict[str, Any]:
        """One helper command's answer (see :meth:`batch`)."""
        return (await self.batch([args], user=user))[0]

    def run_command(
        self,
        argv: Sequence[str],
        cwd: str,
        timeout: float | None,
        *,
        env: dict[str, str] | None = None,
        log: str | None = None,
        ends: int = 0,
        outside: str | None = None,
        grace: float = 0.0,
        stream: str | None = None,
        umask: int | None = None,
    ) -> list[str]:
        """The helper's ``run`` of ``argv`` in ``cwd`` under the kit's supervisor: SIGINT at
        ``timeout``, SIGKILL ``grace`` seconds later, and everything it started, in any session,
        killed when it ends. Output goes to ``log`` (both streams) or to two files.

        :param env: variables set last, over the sandbox's environment.
        :param ends: bytes of the head and tail of each output the answer carries.
        :param outside: a folder (the repository) that cannot shadow the command: no entry of
            ``PATH`` or ``PYTHONPATH`` inside it or relative, and ``PYTHONSAFEPATH=1``.
        :param umask: the command's file mode creation mask (the sandbox's own without it).
        :param stream: ``argv`` is the launcher: the probe's stream goes to this new file of
            the sandbox, the key from the batch's ``secret``.
        """
        out = log or self.path("stdout")
        err = log or self.path("stderr")
        self._leftovers += [out] if out == err else [out, err]
        args = ["run", f"--cwd={cwd}", f"--stdout={out}", f"--stderr={err}", f"--ends={ends}"]
        if timeout is not None:
            args += [f"--timeout={timeout}", f"--grace={grace}"]
        if stream is not None:
            args.append(f"--stream-out={stream}")
        if outside is not None:
            args.append(f"--outside={outside}")
        if umask is not None:
            args.append(f"--umask={umask:03o}")
        args += [f"--env={name}={value}" for name, value in (env or {}).items()]
        return [*args, "--", *argv]

    async def run(
        self,
        argv: Sequence[str],
        cwd: str,
        timeout: float | None,
        ends: int,
        *,
        env: dict[str, str] | None = None,
        outside: str | None = None,
    ) -> Any:
        """Run ``argv`` (see :meth:`run_command`) and wait for the helper's answer."""
        seconds = None if timeout is None else timeout + HELPER_TIMEOUT
        command = self.run_command(argv, cwd, timeout, env=env, ends=ends, outside=outside)
        return (await self.batch([command], timeout=seconds))[0]

    async def resolve(self, path: str) -> dict[str, Any]:
        """``{"path", "is_dir"}``: ``path`` made absolute (relative to the sandbox's working
        folder) with its links followed."""
        return await self.helper("resolve", path)

    def discard(self, *paths: str) -> None:
        """Have ``paths`` removed from the sandbox (with the next helper command)."""
        self._leftovers += paths

    async def read_parts(self, parts: Sequence[str], target: Path) -> None:
        """Join files of the sandbox into the local file ``target`` (the parts then go)."""
        with target.open("wb") as whole:
            for part in parts:
                whole.write(await self.environment.read_file(part, text=False))
        self.discard(*parts)

    def stop_command(self) -> list[str]:
        """The helper's ``stop``: every process of the sandbox but its init, its own command
        and the kit stopped before the tests; nothing when the sandbox's PID namespace is
        this process's (Inspect's ``local``, or any sandbox that shares this machine's
        processes: those are the evaluator's)."""
        here = ""
        with contextlib.suppress(OSError):
            here = os.readlink("/proc/self/ns/pid")
        return ["stop", f"--host-namespace={here}"]

    def parts_command(self, path: str) -> list[str]:
        """The helper's command cutting the sandbox file ``path`` into parts to read."""
        return ["parts", f"--part={part_size()}", path]

    async def pull(
        self, root: str, target: Path, paths: Sequence[str] = (), skip: Sequence[str] = ()
    ) -> bool:
        """Copy the tree ``root`` of the sandbox (or only its ``paths``) to the new local folder
        ``target``. Links are kept only where they stay inside; devices and FIFOs are left out.

        :returns: False when ``root`` is not a folder in the sandbox.
        """
        bundle = self.path("bundle.tar")
        args = ["pack", f"--root={root}", f"--out={bundle}", f"--part={part_size()}"]
        args += [f"--path={path}" for path in paths]
        args += [f"--skip={name}" for name in (*SKIPPED_DIRS, *skip)]
        answer = await self.helper(*args)
        if answer["missing"]:
            return False
        local = target.with_name(f"{target.name}.tar")
        await self.read_parts(answer["parts"], local)
        await anyio.to_thread.run_sync(_unpack, local, target)
        return True

    async def push(self, source: Path, dest: str) -> None:
        """Copy the local folder ``source`` into the folder ``dest`` of the sandbox (made when
        missing; files of the same names are replaced, links inside it are never followed
        out)."""
        bundle = source.with_name(f"{source.name}.tar")
        await anyio.to_thread.run_sync(_pack, source, bundle)
        parts: list[str] = []
        size = part_size()
        try:
            with bundle.open("rb") as data:
                while chunk := data.read(size):
                    part = self.path(f"push.{len(parts):05d}")
                    await self.environment.write_file(part, chunk)
                    parts.append(part)
        finally:
            bundle.unlink()
        await self.helper("unpack", f"--dest={dest}", *parts)


async def _find_python(environment: SandboxEnvironment) -> tuple[str, dict[str, Any]]:
    """The first interpreter of :data:`PYTHONS` that runs, and what it answered."""
    for python in PYTHONS:
        try:
            result = await environment.exec([python, "-c", BOOT], timeout=HELPER_TIMEOUT)
        except (OSError, RuntimeError):  # not there (the local sandbox raises)
            continue
        if result.success:
            with contextlib.suppress(ValueError, KeyError, TypeError):
                answer = json.loads(result.stdout.strip().splitlines()[-1])
                if isinstance(answer, dict) and isinstance(answer["folder"], str):
                    return python, answer
    raise SandboxProblem(f"no Python in the sandbox: tried {', '.join(PYTHONS)}")


def part_size() -> int:
    """Bytes read or written at once: :data:`PART_SIZE`, or less under a lower Inspect limit."""
    limit = int(SandboxEnvironmentLimits.MAX_READ_FILE_SIZE)
    return max(1024, min(PART_SIZE, limit))


def _pack(source: Path, bundle: Path) -> None:
    with tarfile.open(bundle, mode="w", format=tarfile.PAX_FORMAT) as archive:
        archive.add(source, arcname=".")


def _unpack(bundle: Path, target: Path) -> None:
    """The sandbox's tree, unpacked by the kit's rule (:func:`~pytest_scoring.kit.sandbox.
    extract`: a link leading out becomes a dangling one, a FIFO or device is left out)."""
    target.parent.mkdir(parents=True, exist_ok=True)
    try:
        extract(str(bundle), str(target))
    finally:
        bundle.unlink()
