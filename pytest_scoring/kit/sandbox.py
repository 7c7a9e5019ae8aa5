"""The sandbox side of the Inspect scorers: runs, database snapshots and file transfers.

PYTEST_DONT_REWRITE (pytest never rewrites or warns about this module, whatever the
repository's ``filterwarnings`` says).

It is written into the sandbox beside the launch kit (as ``_pytest_scoring_sandbox.py``) and
run with ``exec``, so it needs only the standard library and keeps to Python 3.8 syntax: the
sandbox's interpreter may be any one from 3.8 on. Every command prints one JSON answer on
stdout (``batch`` runs several commands in one process: each ``exec`` costs a process start)
and keeps everything large in files, which the evaluator reads with ``read_file`` in parts
no larger than Inspect lets it read (docs/inspect.md).

* ``run``: a command under the kit's supervisor (``supervise.py``, as under ``run``), its
  output to files, killed with everything it started, in any session, at its timeout, when it
  ends and when this helper dies; the heads and tails of its output are printed. With
  ``--stream-out`` the command is the launcher and gets the probe's channel as ``run`` gives
  it: descriptors, the key read from this helper's standard input.
* ``snapshot``: every database under a folder whose name matches a pattern's last part,
  copied with SQLite's online backup API (the committed state, WAL mode included); the
  evaluator decides which of them the patterns really match (``db/discovery.py``).
* ``copy``: a tree copied as it is (links as links), for ``snapshot_repo``.
* ``interpreter`` (the helper runs under ``-I``): the files of pytest, pluggy and iniconfig
  against what their installer recorded, and the startup files on the tests' path that no
  installer recorded (``pytest_scoring.inspect.interpreter`` reads the answer).
* ``stop``: every process of a container sandbox but its init, its own command and this
  helper's line stopped and killed before the tests (nothing in the evaluator's own PID
  namespace: Inspect's ``local``).
* ``pack`` / ``unpack``: a tree (or some of its folders) as a tar file cut into parts, and
  parts joined and unpacked; ``parts``: one file cut into parts.

The walks here skip the folder names the evaluator passes (``fs/walk.py`` owns that list).
Nothing here trusts the tree it reads: symlinks are never followed out of it, and only
regular files are read.
"""

from __future__ import annotations

import argparse
import base64
import copy as copying
import csv
import ctypes
import ctypes.util
import fnmatch
import hashlib
import importlib.metadata
import json
import os
import shutil
import signal
import site
import sqlite3
import stat
import subprocess
import sys
import tarfile
import tempfile
import urllib.parse
from collections.abc import Callable
from collections.abc import Iterator
from collections.abc import Sequence
from typing import IO
from typing import Any

#: The first 16 bytes of every SQLite 3 database file.
SQLITE_HEADER = b"SQLite format 3\x00"
#: Where a symlink that leads out of an unpacked tree points instead.
LEADS_OUT = ".pytest-scoring: a symlink leading out of the sandbox's tree"
#: Seconds a database another connection holds may keep the backup waiting.
LOCK_TIMEOUT = 2.0
PR_SET_PDEATHSIG = 1
#: ``stop``: seconds after the sandbox's init within which its own command started.
SETTLE = 2
#: ``stop``: rounds of stopping and killing (a process may have started one as it was found).
STOP_ROUNDS = 20


def _walk(root: str, skip: Sequence[str]) -> Iterator[tuple[str, str]]:
    """``(relative path, path)`` of every name under ``root``; folders are not followed
    through symlinks and the ``skip`` names are not entered."""
    for folder, folders, files in os.walk(root):
        kept = []
        for name in sorted(folders):
            path = os.path.join(folder, name)
            if os.path.islink(path):
                files.append(name)  # a linked folder is a name, never walked into
            elif name not in skip:
                kept.append(name)
        folders[:] = kept
        for name in sorted(files):
            path = os.path.join(folder, name)
            yield os.path.relpath(path, root).replace(os.sep, "/"), path


def _inside(path: str, root: str) -> str | None:
    """Where ``path`` leads with every link followed, when that stays inside ``root``."""
    real, top = os.path.realpath(path), os.path.realpath(root)
    return real if real == top or real.startswith(top.rstrip(os.sep) + os.sep) else None


# --- run --------------------------------------------------------------------------------


def _ends(path: str, size: int) -> dict[str, Any]:
    """The first and last ``size`` bytes of a file, as text, and its full size."""
    total = os.path.getsize(path)
    with open(path, "rb") as handle:
        head = handle.read(size)
        handle.seek(max(0, total - size))
        tail = handle.read(size)
    return {
        "bytes": total,
        "head": head.decode("utf-8", "replace"),
        "tail": tail.decode("utf-8", "replace"),
    }


def _outside(search_path: str, root: str) -> str:
    """A search path (``PATH``, ``PYTHONPATH``) without relative entries or folders in ``root``
    (``pytest_scoring.scorers.sandbox_state``'s rule: this file cannot import it)."""
    return os.pathsep.join(
        entry
        for entry in search_path.split(os.pathsep)
        if os.path.isabs(entry) and _inside(entry, root) is None
    )


def _environment(options: argparse.Namespace) -> dict[str, str]:
    environment = dict(os.environ)
    if options.outside is not None:  # a sandbox_state command: the repository cannot shadow it
        environment["PATH"] = _outside(environment.get("PATH", os.defpath), options.outside)
        if "PYTHONPATH" in environment:
            environment["PYTHONPATH"] = _outside(environment["PYTHONPATH"], options.outside)
        environment["PYTHONSAFEPATH"] = "1"
    environment.update(dict(item.split("=", 1) for item in options.env))
    return environment


def _kit_file(name: str) -> str:
    """The kit's file ``name`` beside this one (its copy's name in a kit folder)."""
    folder = os.path.dirname(os.path.abspath(__file__))
    copied = os.path.join(folder, "_pytest_scoring_" + name + ".py")
    return copied if os.path.exists(copied) else os.path.join(folder, name + ".py")


def _dies_with(parent: int) -> Callable[[], None]:
    """What runs in the supervisor between fork and exec: SIGTERM when this helper dies
    (Inspect killed it, the sample was cancelled), so that the supervisor kills the command's
    whole tree; and no start at all when the helper died before that was set."""

    def prepare() -> None:
        if sys.platform.startswith("linux"):
            libc = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6", use_errno=True)
            libc.prctl(PR_SET_PDEATHSIG, signal.SIGTERM, 0, 0, 0)
        if os.getppid() != parent:
            os._exit(1)

    return prepare


def _supervise(spec: dict[str, Any], descriptors: Sequence[int]) -> dict[str, Any]:
    """Run ``spec`` under the kit's supervisor (``supervise.py``, as under ``run``): it becomes
    a subreaper, so every process the command starts, ``setsid`` daemons included, is killed
    before the answer; its answer."""
    process = subprocess.Popen(
        [sys.executable, "-I", _kit_file("supervise")],
        cwd="/",
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        pass_fds=tuple(descriptors),
        start_new_session=True,
        preexec_fn=_dies_with(os.getpid()),
    )
    output, _ = process.communicate(json.dumps(spec).encode("utf-8"))
    lines = output.decode("utf-8", "replace").strip().splitlines()
    try:
        return dict(json.loads(lines[-1]))
    except (IndexError, ValueError):
        return {"error": f"the supervisor ended without an answer (exit {process.returncode})"}


def _channel(argv: Sequence[str]) -> tuple[list[str], IO[bytes], int]:
    """``argv`` (a launcher command: interpreter, launcher, options) with the probe's channel
    as ``run`` gives it: a descriptor for the stream (a file without a name, so no path names
    it) and a pipe holding the run's key, read from this helper's standard input (the key
    never touches a disk)."""
    key = sys.stdin.readline().strip().encode("ascii")
    # O_TMPFILE where the file system has it, else a random name removed at once.
    folder = os.path.dirname(os.path.abspath(__file__))
    stream = tempfile.TemporaryFile(dir=folder)  # noqa: SIM115 (closed by _save_stream)
    key_end, write_end = os.pipe()
    os.write(write_end, key)  # far less than a pipe's buffer
    os.close(write_end)
    options = [f"--stream-fd={stream.fileno()}", f"--key-fd={key_end}"]
    return [*argv[:2], *options, *argv[2:]], stream, key_end


def _save_stream(stream: IO[bytes], path: str) -> None:
    """What the probe wrote to ``stream``, into the new file ``path`` (once the whole tree of
    the run is gone: nothing writes to it any more)."""
    flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_NOFOLLOW", 0)
    with stream, os.fdopen(os.open(path, flags, 0o600), "wb") as out:
        stream.seek(0)
        shutil.copyfileobj(stream, out)


def run(options: argparse.Namespace) -> dict[str, Any]:
    argv, descriptors, stream = list(options.argv), [], None
    if options.stream_out is not None:
        argv, stream, key_end = _channel(argv)
        descriptors = [stream.fileno(), key_end]
    with open(options.stdout, "wb") as out, open(options.stderr, "ab") as err:
        errors = out if options.stderr == options.stdout else err
        spec = {
            "argv": argv,
            "cwd": options.cwd,
            "env": _environment(options),
            "stdout_fd": out.fileno(),
            "stderr_fd": errors.fileno(),
            "pass_fds": descriptors,
            "timeout": options.timeout,
            "grace": options.grace,
            "umask": options.umask,
        }
        try:
            ended = _supervise(spec, [out.fileno(), errors.fileno(), *descriptors])
        finally:
            for descriptor in descriptors[1:]:
                os.close(descriptor)
    if stream is not None:
        _save_stream(stream, options.stream_out)
    return _answer(ended, options)


def _answer(ended: dict[str, Any], options: argparse.Namespace) -> dict[str, Any]:
    """The supervisor's answer as this helper gives it: a signal's negative number as the exit
    code (``subprocess``'s convention), the heads and tails of the output."""
    code = ended.get("exit_code")
    if ended.get("signal"):
        code = -int(getattr(signal.Signals, ended["signal"]))
    result = {
        "exit_code": code,
        "timed_out": bool(ended.get("timed_out")),
        "signal": ended.get("signal"),
        "duration": ended.get("duration", 0.0),
        "containment": ended.get("containment_reason"),
    }
    if ended.get("error"):
        result["error"] = ended["error"]
    if options.ends:
        result["stdout"] = _ends(options.stdout, options.ends)
        if options.stderr != options.stdout:
            result["stderr"] = _ends(options.stderr, options.ends)
    return result


# --- snapshot ---------------------------------------------------------------------------


def _header_error(path: str) -> str | None:
    """Why ``path`` is no database to read, or None (an empty file is an empty database)."""
    try:
        descriptor = os.open(path, os.O_RDONLY | os.O_NONBLOCK)
    except OSError as error:
        return f"cannot read {os.path.basename(path)}: {error.strerror}"
    with os.fdopen(descriptor, "rb") as handle:
        if not stat.S_ISREG(os.fstat(handle.fileno()).st_mode):
            return f"{os.path.basename(path)} is not a regular file"
        head = handle.read(len(SQLITE_HEADER))
    if head and head != SQLITE_HEADER:
        return f"{os.path.basename(path)} is not a SQLite database (no SQLite header)"
    return None


def _backup(source: str, target: str) -> None:
    """The committed state of ``source`` into the new file ``target``, in rollback mode."""
    os.makedirs(os.path.dirname(target), exist_ok=True)
    uri = "file:" + urllib.parse.quote(os.path.abspath(source)) + "?mode=ro"
    reader = sqlite3.connect(uri, uri=True, timeout=LOCK_TIMEOUT)
    writer = sqlite3.connect(target)
    try:
        reader.backup(writer)
        writer.execute("PRAGMA journal_mode=DELETE")  # a copy readable without its -wal
    finally:
        writer.close()
        reader.close()


def snapshot(options: argparse.Namespace) -> dict[str, Any]:
    names = [pattern.rsplit("/", 1)[-1] for pattern in options.pattern]
    databases: dict[str, dict[str, str]] = {}
    for relpath, path in _walk(options.root, options.skip):
        if not any(fnmatch.fnmatchcase(relpath.rsplit("/", 1)[-1], name) for name in names):
            continue
        real = _inside(path, options.root)
        if real is None:
            entry = {"error": f"{relpath} is a symlink leading out of the repository (or a loop)"}
        elif not os.path.exists(real):
            entry = {"error": f"{relpath} is a dangling symlink"}
        else:
            entry = {}
            problem = _header_error(real)
            if problem is None:
                try:
                    _backup(real, os.path.join(options.out, relpath))
                except (sqlite3.Error, OSError) as error:
                    problem = f"{relpath}: {error}"
            if problem is not None:
                entry["error"] = problem
            top = os.path.realpath(options.root)
            if real != os.path.join(top, relpath):  # reached through a link inside
                entry["real_path"] = os.path.relpath(real, top).replace(os.sep, "/")
        databases[relpath] = entry
    return {"databases": databases}


# --- copy, pack, unpack -----------------------------------------------------------------


def copy(options: argparse.Namespace) -> dict[str, Any]:
    ignored = shutil.ignore_patterns(*options.exclude)
    shutil.copytree(options.source, options.dest, symlinks=True, ignore=ignored)
    return {"copied": options.dest}


def _split(path: str, part_size: int) -> list[str]:
    """Cut ``path`` into numbered parts of at most ``part_size`` bytes (the file goes)."""
    parts: list[str] = []
    with open(path, "rb") as whole:
        while True:
            chunk = whole.read(part_size)
            if not chunk and parts:
                break
            part = f"{path}.{len(parts):05d}"
            with open(part, "wb") as handle:
                handle.write(chunk)
            parts.append(part)
            if len(chunk) < part_size:
                break
    os.remove(path)
    return parts


def pack(options: argparse.Namespace) -> dict[str, Any]:
    if not os.path.isdir(options.root) or os.path.islink(options.root):
        return {"missing": True, "parts": []}
    skip = set(options.skip)

    def keep(info: tarfile.TarInfo) -> tarfile.TarInfo | None:
        return None if os.path.basename(info.name) in skip else info

    top = os.path.realpath(options.root)
    with tarfile.open(options.out, "w", format=tarfile.PAX_FORMAT) as bundle:
        for folder in options.path or ["."]:
            relpath = os.path.normpath(folder)
            parent = os.path.join(top, os.path.dirname(relpath))
            # Only a folder reached without a symlink on the way: a linked parent could lead
            # anywhere (the folder itself, if a link, is packed as the link it is).
            if os.path.realpath(parent) == os.path.normpath(parent) and not relpath.startswith(
                ".."
            ):
                path = os.path.join(top, relpath)
                if os.path.lexists(path):
                    bundle.add(path, arcname=relpath, filter=keep)
    size = os.path.getsize(options.out)
    return {"missing": False, "size": size, "parts": _split(options.out, options.part)}


def parts(options: argparse.Namespace) -> dict[str, Any]:
    if not os.path.isfile(options.file):
        return {"missing": True, "parts": []}
    return {"missing": False, "parts": _split(options.file, options.part)}


def _kept(member: tarfile.TarInfo, top: str, leads_out: str) -> tarfile.TarInfo | None:
    """``member`` as it may be unpacked in ``top``, or None: what tarfile's ``data`` filter
    keeps (which Python 3.11.0 to 3.11.3 lack), not stopping at what it refuses, since the
    tree is the scored repository's: a path leading out is left out, a symlink leading out
    becomes a dangling one named ``leads_out`` (reported as such, never followed), a FIFO or
    device is left out, and owner and modes become ordinary ones. Paths are resolved with the
    members unpacked so far, as the ``data`` filter does."""
    if not (member.isreg() or member.isdir() or member.issym() or member.islnk()):
        return None
    name = member.name.lstrip("/")
    path = os.path.realpath(os.path.join(top, name))
    if not _within(path, top):
        return None
    kept: tarfile.TarInfo = copying.copy(member)
    kept.name, kept.uid, kept.gid, kept.uname, kept.gname = name, os.getuid(), os.getgid(), "", ""
    if member.issym():
        target = os.path.join(top, os.path.dirname(name), member.linkname)
        if os.path.isabs(member.linkname) or not _within(os.path.realpath(target), top):
            kept.linkname = leads_out
    elif member.islnk() and not _within(os.path.realpath(os.path.join(top, member.linkname)), top):
        return None
    if member.isdir():
        kept.mode = (member.mode & 0o755) | 0o700
    elif member.isreg() or member.islnk():
        kept.mode = (member.mode & 0o755) | 0o600
    return kept


def _within(path: str, top: str) -> bool:
    return path == top or path.startswith(top.rstrip(os.sep) + os.sep)


def extract(bundle: str, dest: str, leads_out: str = LEADS_OUT) -> None:
    """Unpack the tar file ``bundle`` into the folder ``dest``, member by member, keeping
    only what stays inside (:func:`_kept`). Runs on every Python from 3.8: no ``filter``
    argument (3.11.4 and 3.12 on) unless tarfile has one, and then it trusts our check."""
    os.makedirs(dest, exist_ok=True)
    top = os.path.realpath(dest)
    trusted: dict[str, Any] = {}
    if hasattr(tarfile, "fully_trusted_filter"):
        trusted["filter"] = "fully_trusted"
    with tarfile.open(bundle) as archive:
        for member in archive:
            kept = _kept(member, top, leads_out)
            if kept is not None:
                archive.extract(kept, top, **trusted)


def unpack(options: argparse.Namespace) -> dict[str, Any]:
    joined = options.parts[0] + ".tar"
    with open(joined, "wb") as whole:
        for part in options.parts:
            with open(part, "rb") as handle:
                shutil.copyfileobj(handle, whole)
            os.remove(part)
    extract(joined, options.dest)
    os.remove(joined)
    return {"unpacked": options.dest}


def resolve(options: argparse.Namespace) -> dict[str, Any]:
    path = os.path.realpath(options.path)
    return {"path": path, "is_dir": os.path.isdir(path)}


def remove(options: argparse.Namespace) -> dict[str, Any]:
    for path in options.path:
        if os.path.islink(path) or (os.path.lexists(path) and not os.path.isdir(path)):
            os.remove(path)  # a link is removed, never followed
        else:
            shutil.rmtree(path, ignore_errors=True)
    return {"removed": options.path}


# --- interpreter ------------------------------------------------------------------------

#: The distributions whose files decide how a test's outcome is reported.
CHECKED = ("pytest", "pluggy", "iniconfig")
#: Files the interpreter runs at start, before any test (``.pth`` files too).
STARTUP = ("sitecustomize.py", "usercustomize.py")
#: Debian's package manager: the MD5 of every file of every package, in ``*.md5sums``.
DPKG_INFO = "/var/lib/dpkg/info"
DPKG_STATUS = "/var/lib/dpkg/status"


class Records:
    """What the installers recorded of the files of one folder of the path: the distributions'
    ``RECORD`` files (SHA-256), else the package manager's sums (Debian's MD5s)."""

    def __init__(self) -> None:
        self._records: dict[str, dict[str, str]] = {}
        self._dpkg: dict[str, str] | None = None

    def recorded(self, folder: str) -> dict[str, str]:
        """``{path relative to folder: "sha256=…"}`` from every distribution found there."""
        if folder not in self._records:
            found: dict[str, str] = {}
            for distribution in importlib.metadata.distributions(path=[folder]):
                found.update(_record(distribution.read_text("RECORD") or ""))
            self._records[folder] = found
        return self._records[folder]

    def dpkg(self) -> dict[str, str]:
        """Every file of Debian's packages by path: its MD5 (its ``*.md5sums``, and the
        ``Conffiles`` of ``status`` for those in ``/etc``)."""
        if self._dpkg is None:
            self._dpkg = {}
            names = sorted(os.listdir(DPKG_INFO)) if os.path.isdir(DPKG_INFO) else []
            for name in names:
                if name.endswith(".md5sums"):
                    for line in _lines(os.path.join(DPKG_INFO, name)):
                        digest, _, path = line.partition("  ")
                        self._dpkg["/" + path] = digest
            for line in _lines(DPKG_STATUS):
                parts = line.split()
                if line.startswith(" /") and len(parts) >= 2:
                    self._dpkg[parts[0]] = parts[1]
        return self._dpkg

    def state(self, folder: str, relpath: str, record: dict[str, str] | None = None) -> str:
        """``"recorded"``, ``"changed"`` (it differs from what recorded it) or ``"unrecorded"``."""
        path = os.path.join(folder, relpath)
        digest = (record if record is not None else self.recorded(folder)).get(relpath)
        if digest is not None:
            return "recorded" if digest == _sha256(path) else "changed"
        sums = self.dpkg()
        for name in (os.path.abspath(path), os.path.realpath(path)):
            if name in sums:
                return "recorded" if sums[name] == _digest(path, "md5") else "changed"
        return "unrecorded"


def _lines(path: str) -> list[str]:
    try:
        with open(path, encoding="utf-8", errors="replace") as handle:
            return handle.read().splitlines()
    except OSError:
        return []


def _record(text: str) -> dict[str, str]:
    """A ``RECORD`` file's hashes by path (entries without one left out)."""
    return {row[0]: row[1] for row in csv.reader(text.splitlines()) if len(row) > 1 and row[1]}


def _digest(path: str, algorithm: str) -> str | None:
    try:
        with open(path, "rb") as handle:
            return hashlib.new(algorithm, handle.read()).hexdigest()
    except OSError:
        return None


def _sha256(path: str) -> str | None:
    """A file's hash as ``RECORD`` writes it."""
    digest = _digest(path, "sha256")
    if digest is None:
        return None
    return "sha256=" + base64.urlsafe_b64encode(bytes.fromhex(digest)).rstrip(b"=").decode()


def _search_path(pythonpath: str) -> list[str]:
    """Where the tests' interpreter finds modules, as it runs them (without ``-I``): the
    entries of ``PYTHONPATH``, this interpreter's path, the user's site-packages."""
    entries = [entry for entry in pythonpath.split(os.pathsep) if entry]
    entries += [*sys.path, site.getusersitepackages()]
    seen: list[str] = []
    for entry in entries:
        if os.path.isdir(entry) and os.path.abspath(entry) not in seen:
            seen.append(os.path.abspath(entry))
    return seen


def _distribution(name: str, search: Sequence[str], records: Records) -> dict[str, Any]:
    """The first distribution ``name`` on the path, every module file of its top-level
    packages with what recorded it, and its ``RECORD``'s module hashes."""
    for folder in search:
        found = list(importlib.metadata.distributions(name=name, path=[folder]))
        if found:
            break
    else:
        return {"found": False}
    distribution = found[0]
    record = _record(distribution.read_text("RECORD") or "")
    tops = set((distribution.read_text("top_level.txt") or "").split())
    tops.update(path.split("/")[0] for path in record if path.endswith(".py"))
    problems: dict[str, list[str]] = {"changed": [], "unrecorded": [], "missing": []}
    files = [path for path in record if path.endswith(".py") and path.split("/")[0] in tops]
    for top in sorted(tops):
        for relpath, _ in _walk(os.path.join(folder, top), ()):
            files.append(f"{top}/{relpath}")
        if os.path.isfile(os.path.join(folder, top + ".py")):
            files.append(top + ".py")
    for relpath in sorted(set(files)):
        if not relpath.endswith(".py"):
            continue
        if not os.path.lexists(os.path.join(folder, relpath)):
            problems["missing"].append(relpath)
            continue
        state = records.state(folder, relpath, record if record else None)
        if state != "recorded":
            problems[state].append(relpath)
    modules = {path: digest for path, digest in record.items() if path.endswith(".py")}
    return {
        "found": True,
        "version": distribution.version,
        "folder": folder,
        "record": modules,
        **problems,
    }


def _startup(search: Sequence[str], records: Records) -> list[str]:
    """Every ``.pth``, ``sitecustomize.py`` and ``usercustomize.py`` on the path that no
    installer recorded as it is now."""
    found = []
    for folder in search:
        for name in sorted(os.listdir(folder)):
            startup = name.endswith(".pth") or name in STARTUP
            if startup and records.state(folder, name) != "recorded":
                found.append(os.path.join(folder, name))
    return found


def interpreter(options: argparse.Namespace) -> dict[str, Any]:
    """Run by this helper under ``-I`` (no startup file of the sandbox runs in it): pytest's,
    pluggy's and iniconfig's files against their ``RECORD`` (or Debian's sums), and the
    startup files on the tests' path that nothing recorded."""
    search, records = _search_path(os.environ.get("PYTHONPATH", "")), Records()
    return {
        "executable": sys.executable,
        "distributions": {name: _distribution(name, search, records) for name in CHECKED},
        "startup": _startup(search, records),
    }


def _stat(pid: int) -> list[str] | None:
    """The fields of ``/proc/PID/stat`` after the command's name (state first), or None."""
    try:
        with open(f"/proc/{pid}/stat", encoding="utf-8", errors="replace") as file:
            return file.read().rsplit(")", 1)[1].split()
    except (OSError, IndexError):
        return None


def _parents(pid: int) -> set[int]:
    """``pid`` and its parents up to the namespace's edge (this helper's line: the kit)."""
    line: set[int] = set()
    while pid > 0 and pid not in line:
        line.add(pid)
        fields = _stat(pid)
        pid = int(fields[1]) if fields else 0
    return line


def _cmdline(pid: int) -> str:
    try:
        with open(f"/proc/{pid}/cmdline", "rb") as file:
            return file.read().replace(b"\0", b" ").decode("utf-8", "replace").strip()[:200]
    except OSError:
        return ""


def _others(spared: set[int]) -> list[int]:
    """The live processes of this PID namespace but ``spared``, its init and the sandbox's own
    command (init's first child, when it started within :data:`SETTLE` seconds of init: a
    Compose ``command`` under ``init: true``, which init exits with)."""
    found: dict[int, list[str]] = {}
    for name in os.listdir("/proc"):
        fields = _stat(int(name)) if name.isdigit() else None
        if fields is not None and fields[0] not in "ZX" and int(name) not in spared:
            found[int(name)] = fields
    init = found.pop(1, None)
    children = sorted((int(fields[19]), pid) for pid, fields in found.items() if fields[1] == "1")
    if init is not None and children:
        started, first = children[0]
        if started <= int(init[19]) + SETTLE * os.sysconf("SC_CLK_TCK"):
            del found[first]
    return sorted(found)


def stop(options: argparse.Namespace) -> dict[str, Any]:
    """Stop every process of the sandbox but its init, its own command and the kit (this
    helper's line), so that nothing the agent left running acts during the tests: each is
    stopped (SIGSTOP, no forking away) and then killed, until none is left.

    Nothing when ``--host-namespace`` is this PID namespace (the evaluator's processes are
    here: Inspect's ``local``), nor when it cannot be told (no ``/proc``).
    """
    try:
        here = os.readlink("/proc/self/ns/pid")
    except OSError:
        return {"stopped": [], "skipped": "no /proc: the sandbox's processes cannot be told"}
    if here == options.host_namespace:  # empty: the evaluator has no /proc, so is not here
        return {"stopped": [], "skipped": "the evaluator's own PID namespace"}
    spared, stopped = _parents(os.getpid()), []
    for _ in range(STOP_ROUNDS):
        found = _others(spared)
        if not found:
            break
        for how in (signal.SIGSTOP, signal.SIGKILL):
            for pid in found:
                command = _cmdline(pid)
                try:
                    os.kill(pid, how)
                except OSError:
                    continue
                if how == signal.SIGKILL:
                    stopped.append({"pid": pid, "command": command})
    return {"stopped": stopped}


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="_pytest_scoring_sandbox")
    commands = parser.add_subparsers(dest="command", required=True)
    command = commands.add_parser("run")
    command.add_argument("--cwd", required=True)
    command.add_argument("--timeout", type=float, default=None)
    command.add_argument("--grace", type=float, default=0.0, help="seconds from SIGINT to SIGKILL")
    command.add_argument("--stream-out", help="a launcher command: the probe's stream goes there")
    command.add_argument("--stdout", required=True)
    command.add_argument("--stderr", required=True)
    command.add_argument("--env", action="append", default=[])
    command.add_argument("--umask", type=lambda text: int(text, 8), help="octal, e.g. 022")
    command.add_argument("--outside", help="the repository, kept out of PATH and PYTHONPATH")
    command.add_argument("--ends", type=int, default=0, help="bytes of head and tail shown")
    command.add_argument("argv", nargs=argparse.REMAINDER)
    command.set_defaults(action=run)
    command = commands.add_parser("snapshot")
    command.add_argument("--root", required=True)
    command.add_argument("--out", required=True)
    command.add_argument("--pattern", action="append", default=[])
    command.add_argument("--skip", action="append", default=[])
    command.set_defaults(action=snapshot)
    command = commands.add_parser("copy")
    command.add_argument("--source", required=True)
    command.add_argument("--dest", required=True)
    command.add_argument("--exclude", action="append", default=[])
    command.set_defaults(action=copy)
    command = commands.add_parser("pack")
    command.add_argument("--root", required=True)
    command.add_argument("--out", required=True)
    command.add_argument("--part", type=int, required=True)
    command.add_argument("--path", action="append", default=[])
    command.add_argument("--skip", action="append", default=[])
    command.set_defaults(action=pack)
    command = commands.add_parser("parts")
    command.add_argument("--part", type=int, required=True)
    command.add_argument("file")
    command.set_defaults(action=parts)
    command = commands.add_parser("unpack")
    command.add_argument("--dest", required=True)
    command.add_argument("parts", nargs="+")
    command.set_defaults(action=unpack)
    command = commands.add_parser("resolve")
    command.add_argument("path")
    command.set_defaults(action=resolve)
    command = commands.add_parser("interpreter")
    command.set_defaults(action=interpreter)
    command = commands.add_parser("stop")
    command.add_argument("--host-namespace", default="", help="the evaluator's PID namespace")
    command.set_defaults(action=stop)
    command = commands.add_parser("remove")
    command.add_argument("path", nargs="+")
    command.set_defaults(action=remove)
    return parser


def answer(argv: Sequence[str]) -> dict[str, Any]:
    """One command's answer."""
    options = _parser().parse_args(argv)
    if getattr(options, "argv", None) and options.argv[0] == "--":
        options.argv = options.argv[1:]
    result: dict[str, Any] = options.action(options)
    return result


def main(argv: Sequence[str]) -> int:
    """``batch JSON``: several commands in one process (a list of argument lists; each
    sandbox ``exec`` costs a process start), answered as a list; else one command."""
    if argv[:1] == ["batch"]:
        result: Any = [answer(arguments) for arguments in json.loads(argv[1])]
    else:
        result = answer(argv)
    sys.stdout.write(json.dumps(result) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
