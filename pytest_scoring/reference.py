"""The reference rerun's mechanics (SPEC 2.2 steps 1, 3 and 4).

A private copy of the reference checkout is made (the checkout itself is only read), the scored
repository's test files are copied over it, and pytest runs there in its own process group
with a timeout. The scored repository may be hostile: a test pattern never writes outside the
copy, and no symlink leads out of either tree; a symlink loop counts as leading out.
"""

from __future__ import annotations

import contextlib
import fnmatch
import json
import os
import shutil
import signal
import stat
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from collections.abc import Sequence
from dataclasses import dataclass
from dataclasses import field
from pathlib import Path
from pathlib import PurePosixPath
from typing import Any
from typing import Final

from pytest_scoring.errors import OptionError
from pytest_scoring.paths import resolve_inside
from pytest_scoring.scores import cap_text

#: Environment variable giving the reference run's timeout in seconds (``run --timeout`` sets it).
TIMEOUT_ENV: Final = "PYTEST_SCORING_REFERENCE_TIMEOUT"
DEFAULT_TIMEOUT: Final = 600.0
#: Folders never copied into the reference copy nor searched for test files.
SKIPPED_DIRS: Final = frozenset(
    {".git", ".hg", ".svn", "node_modules", ".venv", "venv", ".tox", "__pycache__"}
)
#: How much of the reference run's output a score keeps (its end says what went wrong).
OUTPUT_TAIL: Final = 4_000
_GLOB_CHARS: Final = frozenset("*?[")


def reference_timeout(environ: dict[str, str] | None = None) -> float:
    """The reference run's timeout: ``$PYTEST_SCORING_REFERENCE_TIMEOUT`` or 600 seconds.

    :raises OptionError: when the variable is not a positive number.
    """
    text = (os.environ if environ is None else environ).get(TIMEOUT_ENV, "")
    if not text:
        return DEFAULT_TIMEOUT
    try:
        value = float(text)
    except ValueError:
        value = -1.0
    if not 0 < value < float("inf"):
        raise OptionError(f"{TIMEOUT_ENV}={text!r}: expected a positive number of seconds")
    return value


def check_reference_dir(reference: Path) -> Path:
    """The reference checkout, resolved; it must be a readable folder.

    :raises OptionError: naming ``--score-reference`` and the path.
    """
    if not reference.is_dir():
        raise OptionError(f"--score-reference: {reference} is not a folder")
    if not os.access(reference, os.R_OK | os.X_OK):
        raise OptionError(f"--score-reference: {reference} cannot be read")
    return reference.resolve()


def check_test_pattern(pattern: str) -> list[str]:
    """A test pattern split into path segments; it must stay inside the repository.

    :raises OptionError: for an absolute pattern or one with a ``..`` segment.
    """
    segments = pattern.replace("\\", "/").split("/")
    if not pattern or PurePosixPath(pattern.replace("\\", "/")).is_absolute() or ":" in segments[0]:
        raise OptionError(f"{pattern!r}: must be relative to the repository")
    if ".." in segments:
        raise OptionError(f"{pattern!r}: '..' would leave the repository")
    return [segment for segment in segments if segment not in ("", ".")]


def _matches(parts: Sequence[str], segments: Sequence[str]) -> bool:
    """Glob match of a relative path against pattern segments (``**`` spans folders)."""
    if not segments:
        return not parts
    head, rest = segments[0], segments[1:]
    if head == "**":
        return any(_matches(parts[index:], rest) for index in range(len(parts) + 1))
    return bool(parts) and fnmatch.fnmatchcase(parts[0], head) and _matches(parts[1:], rest)


def _is_skipped_dir(path: Path, excluded: set[Path]) -> bool:
    return path.name in SKIPPED_DIRS or (path / "pyvenv.cfg").exists() or path.resolve() in excluded


def _walk(top: Path, excluded: set[Path]) -> Iterator[tuple[Path, list[str], list[str]]]:
    """``os.walk`` without following symlinks, pruning skipped folders.

    Symlinked folders are reported among the files so callers decide what to do with them.
    """
    for dirpath, dirnames, filenames in os.walk(top):
        here = Path(dirpath)
        links = [name for name in dirnames if (here / name).is_symlink()]
        dirnames[:] = [
            name
            for name in dirnames
            if name not in links and not _is_skipped_dir(here / name, excluded)
        ]
        yield here, dirnames, [*filenames, *links]


def _copy_symlink(link: Path, source_root: Path, target: Path) -> bool:
    """Recreate a symlink that stays inside ``source_root`` (as a relative link); else skip."""
    resolved = resolve_inside(link, source_root)
    if resolved is None:  # leads out, or loops
        return False
    os.symlink(os.path.relpath(resolved, link.parent.resolve()), target)
    return True


def _is_regular_file(path: Path) -> bool:
    """A plain file (never a FIFO or device, whose reading could hang or have effects)."""
    try:
        return stat.S_ISREG(path.lstat().st_mode)
    except OSError:
        return False


def copy_tree(source: Path, dest: Path, exclude: Sequence[Path] = ()) -> None:
    """Copy ``source`` to the new folder ``dest`` without writing to ``source``.

    Skips version control, virtual environments, ``node_modules``, ``exclude`` folders and
    anything that is neither a folder, a regular file, nor a symlink staying inside.
    """
    source = source.resolve()
    excluded = {path.resolve() for path in exclude}
    for here, _dirs, names in _walk(source, excluded):
        target_dir = dest / here.relative_to(source)
        target_dir.mkdir(parents=True, exist_ok=True)
        for name in names:
            path = here / name
            if path.is_symlink():
                _copy_symlink(path, source, target_dir / name)
            elif _is_regular_file(path):
                shutil.copy2(path, target_dir / name)


@dataclass
class CopiedTests:
    """Which of the scored repository's test files went into the reference copy."""

    copied: list[str] = field(default_factory=list)
    #: Matched files not copied: symlinks leading out of the repository, non-regular files,
    #: and a pattern's folder when it is a symlink (``tests`` linked elsewhere).
    skipped: list[str] = field(default_factory=list)


def _literal_base(segments: Sequence[str]) -> list[str]:
    """The leading segments without glob characters: the only folder worth walking."""
    base: list[str] = []
    for segment in segments[:-1]:
        if _GLOB_CHARS & set(segment) or segment == "**":
            break
        base.append(segment)
    return base


def _candidate_files(root: Path, segments: list[str], excluded: set[Path]) -> Iterator[Path]:
    base = root.joinpath(*_literal_base(segments))
    if not base.is_dir():
        return
    if base.resolve() != base:
        yield base  # reached through a symlink: never followed, listed as skipped
        return
    for here, _dirs, names in _walk(base, excluded):
        for name in names:
            path = here / name
            if _matches(path.relative_to(root).parts, segments):
                yield path


def _safe_target(dest: Path, relpath: str) -> Path:
    """Where ``relpath`` goes inside ``dest``, refusing anything that resolves outside it."""
    target = dest / relpath
    if resolve_inside(target.parent, dest) is None:
        raise OptionError(f"test file {relpath!r} would be written outside the reference copy")
    target.parent.mkdir(parents=True, exist_ok=True)
    if target.is_symlink():
        target.unlink()  # replace the link itself; never write through it
    return target


def copy_test_files(
    root: Path, patterns: Sequence[str], dest: Path, exclude: Sequence[Path] = ()
) -> CopiedTests:
    """Copy the files of ``root`` matched by ``patterns`` to the same places under ``dest``.

    A symlink is copied as the content it points to only when that stays inside ``root``.

    :raises OptionError: for a pattern that is absolute or climbs out with ``..``.
    """
    root, dest = root.resolve(), dest.resolve()
    excluded = {path.resolve() for path in exclude}
    result = CopiedTests()
    seen: set[str] = set()  # a file matched by several patterns is handled once
    for pattern in patterns:
        for path in _candidate_files(root, check_test_pattern(pattern), excluded):
            relpath = path.relative_to(root).as_posix()
            if relpath in seen:
                continue
            seen.add(relpath)
            source = resolve_inside(path, root)
            if source is None or not _is_regular_file(source):
                result.skipped.append(relpath)
                continue
            target = _safe_target(dest, relpath)
            if target.is_dir():
                result.skipped.append(relpath)
                continue
            shutil.copyfile(source, target)
            result.copied.append(relpath)
    return result


@dataclass
class ChildRun:
    """How the pytest process in the reference copy ended."""

    exit_code: int | None
    timed_out: bool
    duration: float
    #: The tally it wrote (``counts``, ``tests``, ``collected``), or None when it wrote none.
    tally: dict[str, Any] | None
    #: The end of its output.
    output: str

    def failure(self, timeout: float) -> str | None:
        """Why the run gave no usable result, or None when it did."""
        if self.timed_out:
            return f"the reference run timed out after {timeout:g} s and was killed"
        if self.tally is not None:
            return None
        if self.exit_code is not None and self.exit_code < 0:
            name = signal.Signals(-self.exit_code).name
            return f"the reference run was killed by {name} before it finished"
        return f"the reference run ended (exit status {self.exit_code}) without results"


def pytest_command(*args: str) -> list[str]:
    """pytest in this interpreter with our plugin, loaded even when plugin autoload is off.

    ``no:scoring`` first: the entry point would otherwise register the module a second time.
    """
    return [
        sys.executable,
        "-m",
        "pytest",
        "-p",
        "no:scoring",
        "-p",
        "pytest_scoring.plugin",
        *args,
    ]


def kill_group(pid: int, sig: signal.Signals = signal.SIGKILL) -> None:
    """Signal a whole process group (a test may have started children of its own)."""
    with contextlib.suppress(ProcessLookupError, PermissionError):  # the group is already gone
        os.killpg(pid, sig)


def _read_tally(path: Path) -> dict[str, Any] | None:
    """The child's tally, or None when it is missing or not the shape our plugin writes.

    The copied test files run in the child, so a hostile ``conftest.py`` may overwrite it.
    """
    try:
        content = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    if not isinstance(content, dict) or not _is_counts(content.get("counts")):
        return None
    collected = content.get("collected")
    if not isinstance(collected, list) or not all(isinstance(item, str) for item in collected):
        return None
    return content


def _is_counts(counts: Any) -> bool:
    return isinstance(counts, dict) and all(
        isinstance(value, int) and not isinstance(value, bool) for value in counts.values()
    )


def _tail(path: Path) -> str:
    try:
        text = path.read_bytes()[-OUTPUT_TAIL:].decode("utf-8", "replace")
    except OSError:
        return ""
    return cap_text(text, OUTPUT_TAIL)


def _wait(process: subprocess.Popen[bytes], timeout: float, cancel: threading.Event) -> bool:
    """Wait for the run to end by itself (True), or until the timeout or a cancel (False)."""
    deadline = time.monotonic() + timeout
    while process.poll() is None:
        remaining = deadline - time.monotonic()
        if remaining <= 0 or cancel.is_set():
            return False
        with contextlib.suppress(subprocess.TimeoutExpired):
            process.wait(timeout=min(0.2, remaining))
    return True


def run_child(
    cwd: Path,
    workdir: Path,
    extra_args: Sequence[str],
    timeout: float,
    cancel: threading.Event | None = None,
) -> ChildRun:
    """Run pytest in ``cwd`` in a new process group; kill the group at ``timeout`` seconds.

    :param cancel: set it to kill the run at once (the session was interrupted).
    """
    tally_file, log_file = workdir / "tally.json", workdir / "output.txt"
    started = time.monotonic()
    with log_file.open("wb") as log:
        process = subprocess.Popen(
            pytest_command(f"--score-tally-output={tally_file}", *extra_args),
            cwd=cwd,
            stdin=subprocess.DEVNULL,
            stdout=log,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
        try:
            timed_out = not _wait(process, timeout, cancel or threading.Event())
        finally:
            kill_group(process.pid)
            process.wait()
    return ChildRun(
        exit_code=None if timed_out else process.returncode,
        timed_out=timed_out,
        duration=round(time.monotonic() - started, 3),
        tally=None if timed_out else _read_tally(tally_file),
        output=_tail(log_file),
    )
