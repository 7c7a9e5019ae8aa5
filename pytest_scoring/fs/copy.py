"""Copying a tree of the scored repository: what the one walk sees, never a link leading out.

The private copy ``run`` scores, the reference's pristine copy and its reruns' copies are all
made here, reflinked where the file system allows (:mod:`.clone`).
"""

from __future__ import annotations

import os
import stat
from collections.abc import Callable
from collections.abc import Sequence
from pathlib import Path

from pytest_scoring.fs.clone import clone_file
from pytest_scoring.fs.paths import resolve_inside
from pytest_scoring.fs.walk import TreeWalk


def _copy_symlink(link: Path, source_root: Path, target: Path) -> bool:
    """Recreate a symlink that stays inside ``source_root`` (as a relative link); else skip."""
    resolved = resolve_inside(link, source_root)
    if resolved is None:  # leads out, or loops
        return False
    os.symlink(os.path.relpath(resolved, link.parent.resolve()), target)
    return True


def is_regular_file(path: Path) -> bool:
    """A plain file (never a FIFO or device, whose reading could hang or have effects)."""
    try:
        return stat.S_ISREG(path.lstat().st_mode)
    except OSError:
        return False


def copy_tree(
    source: Path,
    dest: Path,
    exclude: Sequence[Path] = (),
    copy_file: Callable[[Path, Path], object] = clone_file,
) -> None:
    """Copy ``source`` to the new folder ``dest`` without writing to ``source``.

    Copies what the one walk sees (:mod:`pytest_scoring.fs.walk`: all but version control and
    ``exclude``): folders, regular files (as reflinks where the file system allows), and
    symlinks that stay inside, as links.

    :param copy_file: how a regular file is copied (``source``, ``target``).
    """
    source = source.resolve()
    dest.mkdir(parents=True, exist_ok=True)
    for entry in TreeWalk(source, exclude=exclude):
        target = dest / entry.relpath
        if entry.is_dir:
            target.mkdir()
        elif entry.is_symlink:
            _copy_symlink(entry.path, source, target)
        elif entry.is_file:
            copy_file(entry.path, target)
