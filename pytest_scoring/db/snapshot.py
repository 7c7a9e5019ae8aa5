"""Consistent snapshots of SQLite databases (docs/databases.md, docs/security.md).

A snapshot is a copy of each database's *committed* state. A plain copy of the main file is
wrong for a WAL database (commits may still sit in ``-wal``) and racy for one a test still
writes. So every copy is made under a SQLite read transaction on the source:

* rollback-journal mode: the read transaction holds a SHARED lock, so no writer can change the
  main file while it is copied — a plain file copy is then exactly the committed state, at the
  cost of one copy (the online backup API measured 3-6x slower than that);
* WAL mode: the read transaction pins a WAL read mark, so no checkpoint can write a page
  newer than that mark into the main file nor restart the log; the main file and ``-wal`` are
  copied as they are. SQLite's recovery, when the copy is opened, replays every complete
  commit in the copied log and drops a torn tail: a consistent committed state.

The finish state need not be copied at all: :func:`read_in_place` points a snapshot at the
live files, and :mod:`pytest_scoring.db.diff` reads them read-only inside one transaction.

Caveat (POSIX locks): closing our copy's descriptor of a database file drops every lock this
process holds on it; SQLite's own connections in the *same* process could lose theirs. The
session takes its only copy at session start, before any test opens a database.

Hostile repositories (docs/security.md): a database, ``-wal`` or ``-shm`` that is a symlink is
never read (SQLite itself opens side files with ``O_NOFOLLOW``).
Every file we write — a snapshot copy,
the ``--score-db-reset`` store inside the report root, a restored database — is created anew
with ``O_EXCL | O_NOFOLLOW`` after removing whatever was there, under a folder that resolves
inside its base: a symlink planted in the repository or its ``scores`` folder (even between
two runs) is replaced, never written through. The report root itself is the evaluator's
choice and may be a symlink.
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import sqlite3
from collections.abc import Iterator
from collections.abc import Sequence
from dataclasses import dataclass
from dataclasses import field
from pathlib import Path
from typing import BinaryIO
from typing import Final

from pytest_scoring.db.discovery import sqlite_header_error
from pytest_scoring.fs.paths import resolve_inside

#: Seconds to wait for a writer's lock before the database counts as locked.
LOCK_TIMEOUT: Final = 2.0
#: Files SQLite keeps beside a database; all belong to it.
SIDE_SUFFIXES: Final = ("-wal", "-shm", "-journal")
_MANIFEST: Final = "manifest.json"


@dataclass
class Snapshot:
    """The databases of one side of a diff: a readable file or an error, per relative path.

    A relative path in neither ``files`` nor ``errors`` did not exist on this side.
    """

    #: What this side is, for the diff's ``before_source``/``after_source``.
    source: str
    #: Relative path → file to read (a copy, or the live file when read in place).
    files: dict[str, Path] = field(default_factory=dict)
    #: Relative path → why the database could not be read.
    errors: dict[str, str] = field(default_factory=dict)
    #: The folder the databases were found in (``info.path_*`` of the diff).
    root: Path | None = None
    #: Relative path → original file, where it is not ``root / relpath``.
    origins: dict[str, Path] = field(default_factory=dict)
    #: Relative path → where a symlink led inside the root (relative to it), for links only.
    real_paths: dict[str, str] = field(default_factory=dict)

    def names(self) -> set[str]:
        """Every database this side saw, readable or not, by relative path."""
        return set(self.files) | set(self.errors)

    def path_of(self, relpath: str) -> str:
        """Where the database came from (or would have been), for the diff's ``info``."""
        if relpath in self.origins:
            return str(self.origins[relpath])
        return str(self.root / relpath) if self.root is not None else relpath


def read_only_uri(path: Path) -> str:
    """The SQLite URI opening ``path`` read-only (``mode=ro``: scoring never writes a database)."""
    return f"{path.resolve().as_uri()}?mode=ro"


def is_wal(path: Path) -> bool:
    """Whether the header says WAL mode (file format versions 2 at offsets 18-19)."""
    with path.open("rb") as handle:
        header = handle.read(20)
    return len(header) == 20 and header[18] == 2


@contextlib.contextmanager
def read_transaction(path: Path, timeout: float = LOCK_TIMEOUT) -> Iterator[sqlite3.Connection]:
    """A read-only connection inside an open read transaction on ``path``.

    Reading the schema takes the read lock (rollback) or read mark (WAL) at once; it is held
    until the block ends, so the committed state cannot move underneath.
    """
    connection = sqlite3.connect(
        read_only_uri(path), uri=True, timeout=timeout, isolation_level=None
    )
    try:
        connection.execute("BEGIN")
        connection.execute("SELECT count(*) FROM sqlite_schema").fetchone()
        yield connection
    finally:
        connection.close()


def copy_database(source: Path, target: Path, timeout: float = LOCK_TIMEOUT) -> None:
    """Copy the committed state of ``source`` (rollback or WAL mode) to the new file ``target``.

    :raises sqlite3.Error: when the source is locked, corrupt or not a database.
    :raises OSError: when ``target`` (or its ``-wal``) already exists.
    """
    wal = is_wal(source)
    with read_transaction(source, timeout):
        _copy_new(source, target)
        source_wal = source.with_name(source.name + "-wal")
        if wal and source_wal.exists():
            _copy_new(source_wal, target.with_name(target.name + "-wal"))


def _copy_new(source: Path, target: Path) -> None:
    """Copy ``source`` to a newly created ``target``, never writing through a symlink.

    :raises OSError: when ``target`` exists again (a racing writer) or cannot be created.
    """
    with source.open("rb") as reader, _create(target) as writer:
        shutil.copyfileobj(reader, writer)


def _create(target: Path) -> BinaryIO:
    """A new file at ``target`` open for writing (``O_EXCL``: never an old file nor a link)."""
    flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW
    return os.fdopen(os.open(target, flags, 0o644), "wb")


def _destination(base: Path, relpath: str) -> Path:
    """Where a file for ``relpath`` goes under ``base``, cleared of what was there.

    :raises OSError: when a folder on the way is a symlink leading out of ``base``.
    """
    target = base / relpath
    if resolve_inside(target.parent, base.resolve()) is None:
        raise OSError(f"{relpath}: a symlinked folder leads out of {base}")
    target.parent.mkdir(parents=True, exist_ok=True)
    for suffix in ("", *SIDE_SUFFIXES):
        target.with_name(target.name + suffix).unlink(missing_ok=True)
    return target


def _describe(error: BaseException) -> str:
    text = str(error)
    if "locked" in text or "busy" in text:
        return f"database is locked by another connection ({text})"
    return text


def _source(root: Path, relpath: str) -> Path | str:
    """The file to read for ``relpath``, or why it must not be read.

    A symlink (the file's or a folder's on its way) is followed only while it stays inside the
    repository: the database is then read from its real place and diffed under the link's path.
    """
    real = resolve_inside(root / relpath, root.resolve())
    if real is None:
        return f"{relpath} is a symlink leading out of the repository (or a symlink loop)"
    if not real.exists():
        return f"{relpath} is a dangling symlink"
    return sqlite_header_error(real) or real


def take_snapshot(
    root: str | os.PathLike[str],
    relpaths: Sequence[str],
    dest: str | os.PathLike[str],
    source: str | None = None,
    timeout: float = LOCK_TIMEOUT,
) -> Snapshot:
    """Copy the committed state of each database under ``root`` into ``dest``.

    :param relpaths: databases relative to ``root`` (missing ones are left out).
    :param dest: folder for the copies, laid out like ``root``.
    :returns: a snapshot with a copy or an error message per existing database.
    """
    root, dest = Path(root), Path(dest)
    snapshot = Snapshot(source=source or str(root), root=root)
    for relpath in relpaths:
        if not _present(root / relpath):
            continue
        found = _source(root, relpath)
        if isinstance(found, Path):
            try:
                copy_database(found, _destination(dest, relpath), timeout)
            except (sqlite3.Error, OSError) as error:
                found = _describe(error)
        if isinstance(found, Path):
            snapshot.files[relpath] = dest / relpath
            _note_link(snapshot, root, relpath, found)
        else:
            snapshot.errors[relpath] = found
    return snapshot


def read_in_place(root: Path, relpaths: Sequence[str], source: str | None = None) -> Snapshot:
    """A snapshot of the live databases, to be read (read-only) inside one diff transaction."""
    snapshot = Snapshot(source=source or str(root), root=root)
    for relpath in relpaths:
        if not _present(root / relpath):
            continue
        found = _source(root, relpath)
        if isinstance(found, Path):
            snapshot.files[relpath] = found
            _note_link(snapshot, root, relpath, found)
        else:
            snapshot.errors[relpath] = found
    return snapshot


def _present(path: Path) -> bool:
    """Whether anything is at ``path``, a dangling symlink included."""
    return path.exists() or path.is_symlink()


def _note_link(snapshot: Snapshot, root: Path, relpath: str, real: Path) -> None:
    real_relpath = real.relative_to(root.resolve()).as_posix()
    if real_relpath != relpath:
        snapshot.real_paths[relpath] = real_relpath


def _inside(root: Path, path: Path) -> bool:
    """Whether ``path`` (not yet followed through a final symlink) stays inside ``root``."""
    return resolve_inside(path.parent, root.resolve()) is not None and not path.is_symlink()


def reset_databases(
    root: Path, relpaths: Sequence[str], store: Path, base: Path | None = None
) -> list[str]:
    """Restore databases to their first-seen state kept in ``store`` (``--score-db-reset``).

    A database seen for the first time is stored as it is now. Databases whose path
    leaves ``root`` through a symlink are never written.

    :param base: the folder the store lives in (the report root): neither the store nor a
        folder between them may be a symlink.
    :returns: the relative paths restored from the store.
    """
    for folder in (store, *store.parents):
        if folder == base:
            break
        if folder.is_symlink():
            raise OSError(f"{folder} is a symlink; the reset store is never written through one")
        if base is None:
            break
    known = _read_manifest(store / _MANIFEST)
    restored = [relpath for relpath in known if _restore(root, relpath, store / relpath)]
    new = [relpath for relpath in relpaths if relpath not in known]
    stored = take_snapshot(root, new, store)
    store.mkdir(parents=True, exist_ok=True)
    with _create(_destination(store, _MANIFEST)) as handle:
        handle.write(json.dumps(sorted([*known, *stored.files])).encode("utf-8"))
    return restored


def _read_manifest(path: Path) -> list[str]:
    """The relative paths a store holds; a manifest that is not a list of strings holds none."""
    if not path.is_file() or path.is_symlink():
        return []
    try:
        known = json.loads(path.read_text(encoding="utf-8"))
    except ValueError:
        return []
    if not isinstance(known, list) or not all(isinstance(item, str) for item in known):
        return []
    return known


def _restore(root: Path, relpath: str, saved: Path) -> bool:
    if saved.is_symlink() or not saved.is_file() or not _inside(root, root / relpath):
        return False
    target = _destination(root, relpath)
    for suffix in ("", "-wal"):  # a WAL snapshot keeps its log beside it
        kept = saved.with_name(saved.name + suffix)
        if kept.is_file() and not kept.is_symlink():
            _copy_new(kept, target.with_name(target.name + suffix))
    return True
