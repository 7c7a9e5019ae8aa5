"""Fingerprints of the evaluator's own files, checked before scoring (docs/security.md).

The evaluator keeps files that decide a score where the scored repository's processes cannot
write them (snapshots, the pristine reference copy). Where that protection is partial (the
children run as the evaluator's own user), a repository that finds them could still rewrite
them. Their SHA-256 is taken when they are made and checked before scoring; any difference
makes every score ``"N"``.
"""

from __future__ import annotations

import hashlib
import threading
from collections.abc import Iterable
from pathlib import Path
from typing import Final

from pytest_scoring.fs.walk import TreeWalk

CHANGED: Final = "evaluator files changed during the run"
_BLOCK: Final = 1024 * 1024


def file_digest(path: Path) -> str:
    """SHA-256 of a file's content (``"missing"`` when it cannot be read)."""
    digest = hashlib.sha256()
    try:
        with path.open("rb") as handle:
            while block := handle.read(_BLOCK):
                digest.update(block)
    except OSError:
        return "missing"
    return digest.hexdigest()


def tree_digest(root: Path) -> str:
    """SHA-256 of a folder's manifest: every path, its kind, and each file's own SHA-256."""
    digest = hashlib.sha256()
    for entry in TreeWalk(root):
        kind = "dir" if entry.is_dir else "link" if entry.is_symlink else "file"
        content = file_digest(entry.path) if entry.is_file else ""
        digest.update(f"{entry.relpath}\0{kind}\0{content}\n".encode("utf-8", "surrogateescape"))
    return digest.hexdigest()


class FileGuard:
    """The fingerprints of the files and folders an evaluation must find unchanged."""

    def __init__(self) -> None:
        self._files: dict[Path, str] = {}
        self._trees: dict[Path, str] = {}
        self._lock = threading.Lock()  # the reference rerun adds from its own thread

    def add_files(self, paths: Iterable[Path]) -> None:
        """Fingerprint files now (a SQLite copy's ``-wal`` beside it too)."""
        for path in paths:
            for member in (path, path.with_name(path.name + "-wal")):
                if member == path or member.exists():
                    with self._lock:
                        self._files[member] = file_digest(member)

    def add_tree(self, root: Path) -> None:
        """Fingerprint a whole folder now (the pristine reference copy)."""
        with self._lock:
            self._trees[root] = tree_digest(root)

    def changed(self) -> list[str]:
        """The guarded files and folders that are no longer as they were."""
        with self._lock:
            files, trees = dict(self._files), dict(self._trees)
        return [str(path) for path, digest in files.items() if file_digest(path) != digest] + [
            str(root) for root, digest in trees.items() if tree_digest(root) != digest
        ]
