"""The evaluator's cache of baseline runs (docs/reference.md#the-baseline-cache).

A baseline run depends only on the reference and the evaluator's options, so its result is
kept in the evaluator's private cache (:mod:`~pytest_scoring.reference.private_cache`, whose
rules it follows), under ``baseline/<route>/<key>/``:

    <key>/manifest.json            the run's tally, how it ended, each file's SHA-256
    <key>/databases/<relpath>      its final databases (and a ``-wal`` beside one in WAL mode)

The manifest is the entry's hashed document; an entry whose files are not what it hashes is
discarded, and the next run replaces it. SQLite never opens the cache: an entry's files are
copied out (and checked) first.
"""

from __future__ import annotations

import os
import shutil
from collections.abc import Iterable
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from pathlib import PurePosixPath
from typing import Any
from typing import Final

from pytest_scoring.core.settings import CacheRoute
from pytest_scoring.db.snapshot import Snapshot
from pytest_scoring.fs.private import copy_hashed
from pytest_scoring.fs.private import new_private_file
from pytest_scoring.fs.private import private_problem
from pytest_scoring.reference.private_cache import PrivateCache

KIND: Final = "baseline"
MANIFEST: Final = "manifest.json"
DATABASES: Final = "databases"
#: The files a cached database may have: the database itself and its write-ahead log.
_MEMBERS: Final = ("", "-wal")


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

    cache: PrivateCache

    @property
    def folder(self) -> Path | None:
        """The folder of entries; None when the cache is not used."""
        return self.cache.folder

    @property
    def problem(self) -> str | None:
        """Why the cache is not used."""
        return self.cache.problem

    @classmethod
    def open(
        cls,
        never_inside: Iterable[Path],
        environ: Mapping[str, str] | None = None,
        route: CacheRoute = "in-process",
    ) -> BaselineCache:
        """The evaluator's baseline cache for ``route``, made private if it is new.

        :param never_inside: folders a scored repository can write (the repository, its
            copy, the reference, the report root): a cache inside one is not used.
        :param environ: the environment naming the cache (default: the one captured at load).
        """
        return cls(PrivateCache.open(KIND, route, never_inside, environ))

    def describe(self, key: str) -> str:
        """Where the entry of ``key`` is kept, or why the cache is not used."""
        return self.cache.describe(key)

    def load(self, key: str, dest: Path) -> CachedRun | None:
        """The cached run of ``key``, its databases copied into ``dest`` (a new private folder),
        or None when there is no usable entry (a bad one is discarded, with one line)."""
        if self.folder is None or not os.path.lexists(entry := self.folder / key):
            return None
        manifest, problem = self._manifest(entry, key)
        if manifest is not None:
            final = Snapshot(source=f"the baseline run (cached in {entry})", root=dest)
            problem = _copy_out(manifest, entry, final)
            if problem is None:
                return CachedRun(final, manifest["record"], entry)
        self.cache.discard(entry, problem or "it cannot be read")
        return None

    def _manifest(self, entry: Path, key: str) -> tuple[dict[str, Any] | None, str | None]:
        """The manifest of the entry folder of ``key``, or why the entry is not usable."""
        problem = private_problem(entry)
        if problem is not None:
            return None, problem
        manifest, problem = self.cache.check(entry / MANIFEST, key)
        if manifest is None:
            return None, problem or "it has no manifest"
        problem = _manifest_problem(manifest)
        return (None, problem) if problem else (manifest, None)

    def store(self, key: str, final: Snapshot, record: dict[str, Any]) -> str:
        """Keep a finished run under ``key`` (a copy of its final databases and ``record``).

        :returns: where it is kept, or why it is not (a cache that cannot be written only
            costs another run next time).
        """
        if self.folder is None:
            return str(self.problem)
        entry = self.folder / key
        try:
            building = self.cache.building(key)
        except OSError as error:
            return f"not kept: cannot write in {self.folder}: {error.strerror or error}"
        try:
            manifest = {"record": record, "databases": _copy_databases(final, building / DATABASES)}
            with new_private_file(building / MANIFEST) as handle:
                handle.write(self.cache.document(key, manifest))
            self.cache.publish(building, entry)
        except OSError as error:
            return f"not kept: cannot write {entry}: {error.strerror or error}"
        finally:
            shutil.rmtree(building, ignore_errors=True)
        return str(entry)


def _copy_out(manifest: dict[str, Any], entry: Path, final: Snapshot) -> str | None:
    """Copy an entry's databases into ``final``'s folder; why they are not what the manifest
    hashes, or None when they are."""
    for relpath, spec in manifest["databases"].items():
        for name, digest in spec["files"].items():
            if copy_hashed(entry / DATABASES / name, final.root / name) != digest:
                return f"its file {name} does not match its hash"
        final.files[relpath] = final.root / relpath
        if spec.get("real_path"):
            final.real_paths[relpath] = str(spec["real_path"])
    return None


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
            digest = copy_hashed(source, dest / (relpath + suffix))
            if digest is None:
                raise OSError(f"cannot copy {source}")
            files[relpath + suffix] = digest
        databases[relpath] = {"files": files, "real_path": final.real_paths.get(relpath)}
    return databases


def _manifest_problem(manifest: dict[str, Any]) -> str | None:
    """Why a manifest's content is not a baseline run's, or None when it is one."""
    databases, record = manifest.get("databases"), manifest.get("record")
    if not isinstance(record, dict) or not isinstance(databases, dict):
        return "its manifest lacks the run's record or databases"
    if not all(_valid_database(relpath, spec) for relpath, spec in databases.items()):
        return "its manifest names a database outside the entry"
    return None


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
