"""The evaluator's cache of baseline runs (docs/reference.md#the-baseline-cache).

A baseline run depends only on the reference and the evaluator's options, so its result is
kept under ``$XDG_CACHE_HOME/pytest-scoring/baseline/<key>/`` (else ``~/.cache/…``), read from
the environment captured when pytest-scoring loaded, so that no ``conftest.py`` can move it:

    <key>/manifest.json            the run's tally, how it ended, each file's SHA-256
    <key>/databases/<relpath>      its final databases (and a ``-wal`` beside one in WAL mode)

Only the evaluator writes there, and a scored repository must not be able to plant an entry
that a later evaluation trusts (docs/security.md):

* the cache is not used when its folder lies inside the scored repository, the reference or
  the report root, or when it (or ``pytest-scoring`` above it) is a symlink, belongs to another
  user or is writable by other users; the evaluator makes both folders private (0700);
* an entry is written under a temporary name and renamed whole, so a reader never sees half of
  one; an entry that is not such a folder, whose manifest does not parse, or whose files are
  not what the manifest hashes is ignored, and the next run replaces it;
* SQLite never opens the cache: an entry's files are copied out (and checked) first.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import shutil
import stat
import tempfile
from collections.abc import Iterable
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from pathlib import PurePosixPath
from typing import Any
from typing import BinaryIO
from typing import Final

from pytest_scoring.db.snapshot import Snapshot
from pytest_scoring.fs.paths import cache_home
from pytest_scoring.process.environment import captured_environment

MANIFEST: Final = "manifest.json"
DATABASES: Final = "databases"
#: Bumped when an entry's layout or meaning changes (older entries are then ignored).
FORMAT: Final = 1
#: The largest manifest read (it lists the baseline's collected test ids).
MAX_MANIFEST_BYTES: Final = 64 * 1024 * 1024
#: The files a cached database may have: the database itself and its write-ahead log.
_MEMBERS: Final = ("", "-wal")
_BLOCK: Final = 1024 * 1024


@dataclass(frozen=True)
class CachedRun:
    """A baseline run read back from the cache."""

    #: Its final databases, copied out of the cache into the caller's folder.
    final: Snapshot
    #: What the run recorded (tally, exit code, duration), as stored.
    record: dict[str, Any]
    #: The entry it came from.
    entry: Path


@dataclass(frozen=True)
class BaselineCache:
    """Where baseline runs are kept, or why none is (:meth:`open` decides)."""

    #: The folder of entries; None when the cache is not used.
    folder: Path | None
    #: Why the cache is not used.
    problem: str | None = None

    @classmethod
    def open(
        cls, never_inside: Iterable[Path], environ: Mapping[str, str] | None = None
    ) -> BaselineCache:
        """The evaluator's baseline cache, made private if it is new.

        :param never_inside: folders a scored repository can write (the repository, its
            copy, the reference, the report root): a cache inside one is not used.
        :param environ: the environment naming the cache (default: the one captured at load).
        """
        folder = cache_home(captured_environment() if environ is None else environ) / "baseline"
        resolved = folder.resolve()
        for place in never_inside:
            if resolved.is_relative_to(place.resolve()):
                return cls(None, f"not used: the cache folder {folder} is inside {place}")
        try:
            folder.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
            folder.mkdir(mode=0o700, exist_ok=True)
        except OSError as error:
            return cls(None, f"not used: cannot make {folder}: {error.strerror or error}")
        for path in (folder.parent, folder):
            problem = private_folder_problem(path)
            if problem is not None:
                return cls(None, f"not used: {problem}")
        return cls(folder)

    def describe(self, key: str) -> str:
        """Where the entry of ``key`` is kept, or why the cache is not used."""
        return str(self.folder / key) if self.folder is not None else str(self.problem)

    def load(self, key: str, dest: Path) -> CachedRun | None:
        """The cached run of ``key``, its databases copied into ``dest`` (a new private folder),
        or None when there is no usable entry."""
        if self.folder is None:
            return None
        entry = self.folder / key
        if private_folder_problem(entry) is not None:
            return None
        manifest = _read_manifest(entry / MANIFEST, key)
        if manifest is None:
            return None
        final = Snapshot(source=f"the baseline run (cached in {entry})", root=dest)
        for relpath, spec in manifest["databases"].items():
            for name, digest in spec["files"].items():
                copied = _copy_hashed(entry / DATABASES / name, dest / name)
                if copied != digest:
                    return None
            final.files[relpath] = dest / relpath
            if spec.get("real_path"):
                final.real_paths[relpath] = str(spec["real_path"])
        return CachedRun(final, manifest["record"], entry)

    def store(self, key: str, final: Snapshot, record: dict[str, Any]) -> str:
        """Keep a finished run under ``key`` (a copy of its final databases and ``record``).

        :returns: where it is kept, or why it is not (a cache that cannot be written only
            costs another run next time).
        """
        if self.folder is None:
            return str(self.problem)
        entry = self.folder / key
        try:
            building = Path(tempfile.mkdtemp(prefix=f".{key}.", dir=self.folder))
        except OSError as error:
            return f"not kept: cannot write in {self.folder}: {error.strerror or error}"
        try:
            manifest = {"format": FORMAT, "key": key, "record": record}
            manifest["databases"] = _copy_databases(final, building / DATABASES)
            with _new_file(building / MANIFEST) as handle:
                handle.write(json.dumps(manifest).encode("utf-8"))
            self._publish(building, entry)
        except OSError as error:
            return f"not kept: cannot write {entry}: {error.strerror or error}"
        finally:
            shutil.rmtree(building, ignore_errors=True)
        return str(entry)

    def _publish(self, building: Path, entry: Path) -> None:
        """Rename the finished entry into place, replacing an unusable one of ours.

        :raises OSError: when the place is taken by something that is not ours.
        """
        if entry.is_symlink():
            entry.unlink()
        elif entry.exists() and private_folder_problem(entry) is None:
            shutil.rmtree(entry)
        try:
            building.rename(entry)
        except OSError:  # another evaluation stored the same run first, or it is not ours
            if private_folder_problem(entry) is not None:
                raise


def _copy_databases(final: Snapshot, dest: Path) -> dict[str, Any]:
    """Copy a snapshot's databases (and their ``-wal``) into ``dest``; the manifest's entries.

    :raises OSError: when a file cannot be copied.
    """
    databases = {}
    for relpath, path in final.files.items():
        files = {}
        for suffix in _MEMBERS:
            source = path.with_name(path.name + suffix)
            if suffix and not source.exists():
                continue
            digest = _copy_hashed(source, dest / (relpath + suffix))
            if digest is None:
                raise OSError(f"cannot copy {source}")
            files[relpath + suffix] = digest
        databases[relpath] = {"files": files, "real_path": final.real_paths.get(relpath)}
    return databases


def private_folder_problem(path: Path) -> str | None:
    """Why ``path`` is not a folder that only the evaluator can write, or None when it is."""
    try:
        info = path.lstat()
    except OSError as error:
        return f"{path}: {error.strerror or error}"
    if stat.S_ISLNK(info.st_mode):
        return f"{path} is a symlink"
    if not stat.S_ISDIR(info.st_mode):
        return f"{path} is not a folder"
    if info.st_uid != os.geteuid():
        return f"{path} belongs to another user"
    if info.st_mode & (stat.S_IWGRP | stat.S_IWOTH):
        return f"{path} is writable by other users"
    return None


def _read_manifest(path: Path, key: str) -> dict[str, Any] | None:
    """The manifest of an entry, when it is one we wrote for ``key``."""
    try:
        with _open_regular(path) as handle:
            data = handle.read(MAX_MANIFEST_BYTES + 1)
        manifest = json.loads(data) if len(data) <= MAX_MANIFEST_BYTES else None
    except (OSError, ValueError):
        return None
    if not isinstance(manifest, dict) or manifest.get("format") != FORMAT:
        return None
    databases, record = manifest.get("databases"), manifest.get("record")
    if manifest.get("key") != key or not isinstance(record, dict):
        return None
    if not isinstance(databases, dict) or not all(
        _valid_database(relpath, spec) for relpath, spec in databases.items()
    ):
        return None
    return manifest


def _valid_database(relpath: object, spec: object) -> bool:
    """A database entry of a manifest: a relative path inside the entry, its own files."""
    if not isinstance(relpath, str) or not isinstance(spec, dict):
        return False
    parts = PurePosixPath(relpath).parts
    if not parts or PurePosixPath(relpath).is_absolute() or ".." in parts or "\\" in relpath:
        return False
    files = spec.get("files")
    return (
        isinstance(files, dict)
        and relpath in files
        and all(name in {relpath + suffix for suffix in _MEMBERS} for name in files)
        and all(isinstance(digest, str) for digest in files.values())
        and isinstance(spec.get("real_path"), str | None)
    )


def _open_regular(path: Path) -> BinaryIO:
    """``path`` open for reading: a regular file, never through a symlink.

    :raises OSError: when it is missing, a symlink or not a regular file.
    """
    descriptor = os.open(path, os.O_RDONLY | os.O_NOFOLLOW)
    if not stat.S_ISREG(os.fstat(descriptor).st_mode):
        os.close(descriptor)
        raise OSError(f"{path} is not a regular file")
    return os.fdopen(descriptor, "rb")


def _new_file(path: Path) -> BinaryIO:
    """A new private file at ``path`` open for writing (never an old file nor a link)."""
    path.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
    flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW
    return os.fdopen(os.open(path, flags, 0o600), "wb")


def _copy_hashed(source: Path, target: Path) -> str | None:
    """Copy a regular file to the new file ``target``; its SHA-256, or None when it cannot."""
    digest = hashlib.sha256()
    with contextlib.suppress(OSError), _open_regular(source) as reader, _new_file(target) as out:
        while block := reader.read(_BLOCK):
            digest.update(block)
            out.write(block)
        return digest.hexdigest()
    return None
