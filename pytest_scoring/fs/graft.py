"""Putting folders and files of one tree into a copy of another, in place of what was there.

``run --tests-from PATH`` puts the evaluator's test folders, test files and ``conftest.py``
files into the private copy of REPO (docs/security.md#the-evaluators-tests). What the copy held
at those places is removed first, whatever it was: a file, a folder and everything in it, or a
symlink, which is removed itself and never followed. Nothing is written outside the copy: a
folder on the way that is a link leading out, or no folder at all, is replaced by a real one.
Folders are copied with :func:`~pytest_scoring.fs.copy.copy_tree` (no link leading out of the
copied folder), so what lands in the copy is what the one walk sees of the source.
"""

from __future__ import annotations

import shutil
from pathlib import Path

from pytest_scoring.fs.clone import clone_file
from pytest_scoring.fs.copy import copy_tree
from pytest_scoring.fs.copy import is_regular_file
from pytest_scoring.fs.paths import resolve_inside
from pytest_scoring.fs.walk import TreeWalk


def _parts(relpath: str) -> list[str]:
    parts = [part for part in relpath.split("/") if part not in ("", ".")]
    if not parts or ".." in parts:
        raise ValueError(f"{relpath!r} is not a path inside the tree")
    return parts


def _files_in(folder: Path, relpath: str) -> list[str]:
    """The files and links of ``folder`` (not followed), as paths under ``relpath``."""
    return [f"{relpath}/{entry.relpath}" for entry in TreeWalk(folder) if not entry.is_dir]


def _remove(path: Path, relpath: str) -> list[str]:
    """Remove ``path`` (a link itself, a file, or a folder and all in it); what was removed."""
    if path.is_symlink() or (path.exists() and not path.is_dir()):
        path.unlink()
        return [relpath]
    if path.is_dir():
        removed = _files_in(path, relpath)
        shutil.rmtree(path)
        return removed
    return []


def _real_folder(root: Path, parts: list[str], removed: list[str]) -> Path:
    """The folder ``root/parts…``, made where it is missing; a link on the way is followed
    only while it leads to a folder inside ``root``, anything else there is replaced.

    :param removed: receives the relative paths of what was replaced.
    """
    root = root.resolve()
    folder = root
    for index, part in enumerate(parts):
        path = folder / part
        relpath = "/".join(parts[: index + 1])
        if path.is_symlink():
            inside = resolve_inside(path, root)
            if inside is not None and inside.is_dir():
                folder = inside
                continue
        if not path.is_dir() or path.is_symlink():
            removed += _remove(path, relpath)
            path.mkdir()
        folder = path
    return folder


def place(root: Path, relpath: str) -> tuple[Path, list[str]]:
    """Clear the place of ``relpath`` in ``root`` for something new.

    :returns: the path to write, and the relative paths of every file and link removed.
    :raises ValueError: for a path that is absolute or climbs out with ``..``.
    """
    *folders, name = _parts(relpath)
    removed: list[str] = []
    parent = _real_folder(root, folders, removed)
    target = parent / name
    removed += _remove(target, relpath)
    return target, removed


def remove(root: Path, relpath: str) -> list[str]:
    """Remove what ``relpath`` names in ``root``, if anything; what was removed."""
    parts = _parts(relpath)
    parent = resolve_inside(root.joinpath(*parts[:-1]), root.resolve())
    if parent is None or not parent.is_dir():
        return []
    return _remove(parent / parts[-1], relpath)


def graft_folder(source: Path, root: Path, relpath: str) -> list[str]:
    """Put the folder ``source`` at ``relpath`` in ``root``, in place of what was there.

    :returns: the relative paths of the files and links removed to make room.
    """
    target, removed = place(root, relpath)
    copy_tree(source, target)
    return removed


def graft_file(source: Path, root: Path, relpath: str) -> list[str]:
    """Put the regular file ``source`` at ``relpath`` in ``root``, in place of what was there.

    :returns: the relative paths of the files and links removed to make room.
    :raises OSError: when ``source`` is not a regular file.
    """
    if not is_regular_file(source):
        raise OSError(f"{source} is not a regular file")
    target, removed = place(root, relpath)
    clone_file(source, target)
    return removed
