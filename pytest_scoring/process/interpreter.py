"""An interpreter the children's user can run, made from one it cannot (``run`` as root).

pyenv installs interpreters under ``/root``, which no other user may enter; so does a virtual
environment made from one (``pyvenv.cfg`` names the base interpreter's folder). Rather than
run the repository's code as root, ``run`` makes a read-only copy of what the interpreter
loads: its executable and shared library, the folders of its ``sys.path`` in its prefixes (the
standard library without its own tests and build files, and the site-packages), and, for a
virtual environment, a ``pyvenv.cfg`` naming the copied base. The children run the copy, with
``LD_LIBRARY_PATH`` naming its library folder when the interpreter loads a shared library.

Copies are kept in :data:`CACHE`, one per interpreter, named by the SHA-256 of the manifest of
what is copied (every path, its mode, size, modification time and link target), so a changed
interpreter gets a new copy and an unchanged one costs a walk over its files. A file that is
root's alone and readable by every user is hard-linked rather than copied (no space, and no
other user may write it either way); any other file is copied, readable by all. A copy unused
for :data:`UNUSED_DAYS` days is removed.

Nobody but root may write there, and nothing is taken from there that another user could
have written:

* every folder from ``/`` down to the cache belongs to root and is writable by no other user
  (else no copy is made, and the run says why);
* a copy is built under a temporary name and renamed whole, under a lock;
* before every use, the copy and every folder in it must belong to root and be writable by no
  other user (then no other user can have added, removed or replaced a name in it); a copy
  that fails is removed and made again.
"""

from __future__ import annotations

import contextlib
import fcntl
import hashlib
import json
import os
import shutil
import stat
import subprocess
import tempfile
import time
from collections.abc import Iterator
from collections.abc import Mapping
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from typing import Final

from pytest_scoring.errors import ScoringError
from pytest_scoring.fs.clone import clone_file
from pytest_scoring.fs.copy import copy_tree
from pytest_scoring.fs.private import folder_problem
from pytest_scoring.fs.walk import TreeWalk

#: Where the copies are kept: a place every user may read, only root may write.
CACHE: Final = Path("/var/cache/pytest-scoring/interpreters")
#: Bumped when a copy's layout changes (older copies are then made again).
FORMAT: Final = 1
#: A copy not used for this many days is removed.
UNUSED_DAYS: Final = 30
#: The file whose lock one evaluator at a time holds while it checks or makes copies.
LOCK: Final = ".lock"
#: Folders of the standard library an interpreter never needs to run tests: its own test
#: suite, and what builds extensions against it.
_LEFT_OUT: Final = ("test", "config-")
#: Seconds the interpreter may take to describe itself.
DESCRIBE_TIMEOUT: Final = 120.0
_DESCRIBE: Final = """
import json, sys, sysconfig
print(json.dumps({
    "executable": sys.executable,
    "base_executable": getattr(sys, "_base_executable", sys.executable),
    "prefix": sys.prefix,
    "base_prefix": sys.base_prefix,
    "path": [entry for entry in sys.path if entry],
    "libdir": sysconfig.get_config_var("LIBDIR") or "",
    "library": sysconfig.get_config_var("INSTSONAME") or "",
}))
"""


class InterpreterCopyError(ScoringError):
    """No copy of the interpreter could be made (the message says why)."""


@dataclass(frozen=True)
class InterpreterCopy:
    """A copy of an interpreter that every user may run."""

    #: The copy's executable (``…/venv/bin/python`` for a virtual environment).
    python: str
    #: What the children's environment needs to run it (``LD_LIBRARY_PATH``, or nothing).
    environment: dict[str, str]


@dataclass(frozen=True)
class _Plan:
    """What of an interpreter is copied where, as ``(source, target in the copy)``."""

    #: Folders, each with the folders of it left out.
    trees: list[tuple[Path, str, list[Path]]]
    #: The base interpreter's executable, and its shared library when it loads one.
    files: list[tuple[Path, str]]
    #: The base interpreter's executable in the copy.
    executable: str
    #: The executable to run, relative to the copy.
    python: str
    #: ``pyvenv.cfg``'s text with the base's folder left to fill in, for a virtual environment.
    venv: str | None
    #: The folder of the shared library, relative to the copy, when it loads one.
    library_folder: str | None


def interpreter_copy(
    python: str, environment: Mapping[str, str], cache: Path | None = None
) -> InterpreterCopy:
    """The cached copy of ``python`` every user may run, made if there is none.

    :param cache: where the copies are kept (default :data:`CACHE`).
    :raises InterpreterCopyError: when the interpreter cannot describe itself, lies outside
        its prefixes, or the cache is not root's alone.
    """
    cache = cache or CACHE
    plan = _plan(_describe(python, environment))
    key = _key(plan)
    _check_ancestors(cache)
    try:
        cache.mkdir(mode=0o755, parents=True, exist_ok=True)
    except OSError as error:
        raise InterpreterCopyError(f"cannot make {cache}: {error.strerror or error}") from None
    _check_ancestors(cache)
    entry = cache / key
    with _locked(cache):
        if _intact(entry) is not None:
            _remove(entry)
            _build(plan, cache, entry)
        os.utime(entry)  # used now
        _remove_unused(cache)
    needs = {}
    if plan.library_folder is not None:
        needs["LD_LIBRARY_PATH"] = _library_path(entry / plan.library_folder, environment)
    return InterpreterCopy(str(entry / plan.python), needs)


def copied_folders(python: str, environment: Mapping[str, str]) -> list[tuple[Path, list[Path]]]:
    """The folders a copy of ``python`` holds, each with the folders of it left out."""
    return [
        (source, left_out) for source, _, left_out in _plan(_describe(python, environment)).trees
    ]


def _describe(python: str, environment: Mapping[str, str]) -> dict[str, Any]:
    """What the interpreter says of itself (run as the evaluator, isolated from ``PYTHON*``)."""
    try:
        done = subprocess.run(
            [os.path.abspath(python), "-I", "-c", _DESCRIBE],
            env=dict(environment),
            capture_output=True,
            timeout=DESCRIBE_TIMEOUT,
            check=True,
            cwd="/",
        )
        described: dict[str, Any] = json.loads(done.stdout)
    except (OSError, subprocess.SubprocessError, ValueError) as error:
        raise InterpreterCopyError(f"{python} cannot describe itself: {error}") from None
    return described


def _plan(described: dict[str, Any]) -> _Plan:
    """What to copy: the base's executable, shared library and ``sys.path`` folders under
    ``base/``, a virtual environment's under ``venv/``."""
    base, prefix = Path(described["base_prefix"]), Path(described["prefix"])
    units = [(base, "base")] + ([(prefix, "venv")] if prefix != base else [])
    path = [Path(entry) for entry in described["path"]]
    # A folder outside the prefixes was added by a ``.pth`` file, which the copy keeps.
    inside = {entry for entry in path if entry.is_dir() and _unit(entry, units) is not None}
    trees = [
        (folder, _inside(folder, units), _left_out(folder, path))
        for folder in sorted(inside)
        if not any(folder != other and folder.is_relative_to(other) for other in inside)
    ]
    executable = Path(os.path.realpath(described["base_executable"]))
    files = [(executable, _inside(executable, units))]
    library_folder = None
    library = Path(os.path.realpath(Path(described["libdir"]) / described["library"]))
    if ".so" in described["library"] and library.is_file():
        library_folder = str(Path(_inside(library, units)).parent)
        files.append((library, f"{library_folder}/{described['library']}"))
    venv = None if prefix == base else _venv_config(prefix)
    python = "venv/bin/python" if venv is not None else files[0][1]
    return _Plan(trees, files, files[0][1], python, venv, library_folder)


def _unit(path: Path, units: list[tuple[Path, str]]) -> str | None:
    """``path``'s place in the copy (``base/…`` or ``venv/…``), or None outside both."""
    for root, name in units:
        if path.is_relative_to(root):
            return (Path(name) / path.relative_to(root)).as_posix()
    return None


def _inside(path: Path, units: list[tuple[Path, str]]) -> str:
    """``path``'s place in the copy.

    :raises InterpreterCopyError: when it is in neither prefix.
    """
    found = _unit(path, units)
    if found is None:
        raise InterpreterCopyError(f"{path} is outside the interpreter's prefixes")
    return found


def _left_out(folder: Path, path: list[Path]) -> list[Path]:
    """The folders of ``folder`` not copied: the test suite, the build files, and
    site-packages that are not on the path."""
    unused = [folder / name for name in ("site-packages", "dist-packages")]
    left_out = [*(child for child in unused if child not in path), folder / _LEFT_OUT[0]]
    return left_out + sorted(folder.glob(_LEFT_OUT[1] + "*"))


def _venv_config(prefix: Path) -> str:
    """The copy's ``pyvenv.cfg``: the original's settings, its ``home`` filled in later."""
    try:
        lines = (prefix / "pyvenv.cfg").read_text(encoding="utf-8").splitlines()
    except OSError as error:
        raise InterpreterCopyError(f"cannot read {prefix}/pyvenv.cfg: {error}") from None
    setting = "include-system-site-packages"
    kept = [line for line in lines if line.partition("=")[0].strip() == setting]
    return "\n".join(["home = {home}", *kept, ""])


def _key(plan: _Plan) -> str:
    """The SHA-256 of everything the copy would hold, as the sources are now."""
    digest = hashlib.sha256(json.dumps([FORMAT, plan.python, plan.venv]).encode())
    for source, target, left_out in plan.trees:
        digest.update(f"{target}\n{_manifest(source, left_out)}\n".encode())
    for source, target in plan.files:
        digest.update(f"{target}\n".encode() + _line(source, target, os.lstat(source)))
    return digest.hexdigest()


def _manifest(root: Path, left_out: Sequence[Path] = ()) -> str:
    """The SHA-256 of a tree's manifest: every path, its mode, size, modification time and
    link target."""
    digest = hashlib.sha256()
    for entry in TreeWalk(root, exclude=left_out, skipped_names=frozenset()):
        digest.update(_line(entry.path, entry.relpath, os.lstat(entry.path)))
    return digest.hexdigest()


def _line(path: Path, name: str, info: os.stat_result) -> bytes:
    link = os.readlink(path) if stat.S_ISLNK(info.st_mode) else ""
    text = f"{name}\0{info.st_mode}\0{info.st_size}\0{info.st_mtime_ns}\0{link}\n"
    return text.encode("utf-8", "surrogateescape")


def _build(plan: _Plan, cache: Path, entry: Path) -> None:
    """Make the copy under a temporary name, readable by all, then rename it into place."""
    building = Path(tempfile.mkdtemp(prefix=".building-", dir=cache))
    try:
        for source, target, left_out in plan.trees:
            copy_tree(source, building / target, exclude=left_out, copy_file=_link_or_copy)
        for source, target in plan.files:
            (building / target).parent.mkdir(parents=True, exist_ok=True)
            _link_or_copy(source, building / target)
        if plan.venv is not None:
            home = (entry / plan.executable).parent
            (building / "venv" / "pyvenv.cfg").write_text(plan.venv.format(home=home))
            (building / "venv" / "pyvenv.cfg").chmod(0o644)
            (building / "venv" / "bin").mkdir(parents=True, exist_ok=True)
            base_python = os.path.relpath(building / plan.executable, building / "venv" / "bin")
            (building / plan.python).symlink_to(base_python)
        for folder in [building, *_folders(building)]:
            folder.chmod(0o755)
        building.rename(entry)
    except OSError as error:
        raise InterpreterCopyError(f"cannot copy the interpreter: {error}") from None
    finally:
        shutil.rmtree(building, ignore_errors=True)


def _link_or_copy(source: Path, target: Path) -> None:
    """A hard link to ``source`` when it is root's alone and every user may read it (the
    copy costs no bytes); else a copy of it, made so."""
    info = source.lstat()
    readable = 0o005 if info.st_mode & 0o100 else 0o004
    if info.st_uid == 0 and not info.st_mode & 0o022 and info.st_mode & readable == readable:
        with contextlib.suppress(OSError):  # another file system: copy it
            os.link(source, target)
            return
    clone_file(source, target)
    target.chmod(0o755 if info.st_mode & 0o100 else 0o644)


def _folders(root: Path) -> Iterator[Path]:
    for entry in TreeWalk(root, skipped_names=frozenset()):
        if entry.is_dir:
            yield entry.path


def _intact(entry: Path) -> str | None:
    """Why the copy at ``entry`` may not be used, or None when it may."""
    for folder in [entry, *_folders(entry)]:
        problem = folder_problem(folder)
        if problem is not None:
            return problem
    return None


def _check_ancestors(cache: Path) -> None:
    """Every existing folder from ``/`` to the cache is root's alone.

    :raises InterpreterCopyError: naming the first that is not.
    """
    for folder in [*reversed(cache.parents), cache]:
        if not os.path.lexists(folder):
            return
        problem = folder_problem(folder)
        if problem is not None:
            raise InterpreterCopyError(f"the interpreters' cache is not root's alone: {problem}")


@contextlib.contextmanager
def _locked(cache: Path) -> Iterator[None]:
    """One evaluator at a time checks or makes copies."""
    flags = os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW | os.O_CLOEXEC
    descriptor = os.open(cache / LOCK, flags, 0o600)
    try:
        fcntl.flock(descriptor, fcntl.LOCK_EX)
        yield
    finally:
        os.close(descriptor)


def _remove(entry: Path) -> None:
    """Remove a copy that may not be used."""
    if entry.is_symlink() or entry.is_file():
        entry.unlink()
    else:
        shutil.rmtree(entry, ignore_errors=True)


def _remove_unused(cache: Path) -> None:
    """Remove the copies no evaluation used for :data:`UNUSED_DAYS` days."""
    oldest = time.time() - UNUSED_DAYS * 24 * 3600
    for entry in cache.iterdir():
        with contextlib.suppress(OSError):
            if entry.name != LOCK and entry.lstat().st_mtime < oldest:
                _remove(entry)


def _library_path(folder: Path, environment: Mapping[str, str]) -> str:
    """``LD_LIBRARY_PATH`` with the copy's library folder first."""
    present = environment.get("LD_LIBRARY_PATH")
    return f"{folder}:{present}" if present else str(folder)
