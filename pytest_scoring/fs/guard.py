"""Fingerprints of the evaluator's own files, checked before scoring (docs/security.md).

The evaluator keeps files that decide a score where the scored repository's processes cannot
write them (snapshots, the pristine reference copy). Where that protection is partial (the
children run as the evaluator's own user), a repository that finds them could still rewrite
them. Their SHA-256 is taken when they are made and checked before scoring; any difference
makes every score ``"N"``.
"""

from __future__ import annotations

import hashlib
import os
import threading
from collections.abc import Iterable
from dataclasses import dataclass
from dataclasses import field
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
    """SHA-256 of a folder's manifest: every path, its kind, each file's own SHA-256 and
    whether it is executable, and where each symlink points."""
    digest = hashlib.sha256()
    for entry in TreeWalk(root):
        if entry.is_dir:
            kind, content = "dir", ""
        elif entry.is_symlink:
            kind, content = "link", _link_target(entry.path)
        else:
            kind = "exec" if entry.is_file and os.access(entry.path, os.X_OK) else "file"
            content = file_digest(entry.path) if entry.is_file else ""
        digest.update(f"{entry.relpath}\0{kind}\0{content}\n".encode("utf-8", "surrogateescape"))
    return digest.hexdigest()


def _link_target(path: Path) -> str:
    try:
        return os.readlink(path)
    except OSError:
        return "missing"


@dataclass(frozen=True)
class Fingerprints:
    """Digests taken once and checked by several evaluations (a batch's shared copies)."""

    files: dict[Path, str] = field(default_factory=dict)
    trees: dict[Path, str] = field(default_factory=dict)


class FileGuard:
    """The fingerprints of the files and folders an evaluation must find unchanged."""

    def __init__(self, taken: Fingerprints | None = None) -> None:
        """:param taken: fingerprints already taken elsewhere, checked here too."""
        self._files: dict[Path, str] = dict(taken.files) if taken else {}
        self._trees: dict[Path, str] = dict(taken.trees) if taken else {}
        self._lock = threading.Lock()  # the reference rerun adds from its own thread

    def add_files(self, paths: Iterable[Path]) -> None:
        """Fingerprint files now (a SQLite copy's ``-wal`` beside it too)."""
        for path in paths:
            for member in (path, path.with_name(path.name + "-wal")):
                if member == path or member.exists():
                    with self._lock:
                        self._files[member] = file_digest(member)

    def add_tree(self, root: Path) -> str:
        """Fingerprint a whole folder now (the pristine reference copy); its digest."""
        digest = tree_digest(root)
        with self._lock:
            self._trees[root] = digest
        return digest

    def fingerprints(self) -> Fingerprints:
        """Every fingerprint taken so far."""
        with self._lock:
            return Fingerprints(dict(self._files), dict(self._trees))

    def changed(self) -> list[str]:
        """The guarded files and folders that are no longer as they were."""
        taken = self.fingerprints()
        return [
            str(path) for path, digest in taken.files.items() if file_digest(path) != digest
        ] + [str(root) for root, digest in taken.trees.items() if tree_digest(root) != digest]
