"""The one walk over a scored repository's file tree, and the one list of folders it skips.

Database discovery, the reference copy and ``file_contents`` all walk through here, so they can
never disagree about what a repository holds. They used to keep lists of their own, and a
database under a folder that one list skipped and another did not (``.tox``) was scored as
changed although no test touched it. Every folder a walk skips is also a place where a hostile
repository could keep what it wants unseen, so the list holds only version control's store;
the evaluator adds folders by path (the report root, ``--score-db-exclude``), and every folder
left out is reported to the caller (docs/security.md).

A walk never follows a symlink: it reports the link and the caller decides, with
:func:`~pytest_scoring.fs.paths.resolve_inside`, whether it stays inside the repository.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from collections.abc import Iterable
from collections.abc import Iterator
from dataclasses import dataclass
from dataclasses import field
from pathlib import Path
from typing import Final
from typing import NamedTuple
from typing import final

#: Folder names no walk enters, wherever they are.
SKIPPED_DIRS: Final = frozenset({".git"})


@final
class Entry(NamedTuple):
    """A name a walk found: a folder it enters, a file, a symlink, a FIFO…"""

    #: POSIX path relative to the walk's root.
    relpath: str
    path: Path
    #: A symlink (to a file, a folder, or nothing); never followed by the walk.
    is_symlink: bool
    #: A regular file (false for a symlink, whatever it points to).
    is_file: bool
    #: A folder the walk enters (its contents follow); never a symlink.
    is_dir: bool = False


@final
@dataclass
class TreeWalk:
    """Walk ``top`` (a folder inside ``root``) in name order, without following symlinks.

    Iterate it for the :class:`Entry` of every name, each folder before its contents. Folders
    named in ``skipped_names`` and the ``exclude`` folders are not entered; their relative
    paths are collected in :attr:`skipped`, so that callers can tell the user what was left out.
    """

    root: Path
    top: Path | None = None
    #: Folders not to enter, wherever they are (compared after resolving).
    exclude: Iterable[Path] = ()
    #: When false, only the names directly in ``top``.
    recursive: bool = True
    #: Folders not to enter, by what they are (their name, a file in them): called with each
    #: folder's relative path and path; a folder it accepts is left out like ``exclude``'s.
    skip_folder: Callable[[str, Path], bool] | None = None
    #: Relative paths of the folders left out, filled while walking.
    skipped: list[str] = field(default_factory=list)
    #: Folder names not entered (:data:`SKIPPED_DIRS`); empty to measure a whole tree, where
    #: nothing may stay unseen.
    skipped_names: frozenset[str] = SKIPPED_DIRS

    def __iter__(self) -> Iterator[Entry]:
        root = self.root.resolve()
        excluded = frozenset(Path(path).resolve() for path in self.exclude)
        top = self.top.resolve() if self.top is not None else root
        # Each folder with its relative path: a child's is its parent's and its name (far
        # cheaper than parsing every path again, which a large tree notices).
        pending = [(top, top.relative_to(root).as_posix())]
        while pending:
            folder, folder_relpath = pending.pop()
            prefix = "" if folder_relpath == "." else folder_relpath + "/"
            subfolders: list[tuple[Path, str]] = []
            for item in _sorted_entries(folder):
                path, relpath = folder / item.name, prefix + item.name
                if item.is_dir(follow_symlinks=False):
                    skipped = item.name in self.skipped_names or path in excluded
                    if skipped or self._skips(relpath, path):
                        self.skipped.append(relpath)
                    elif self.recursive:
                        subfolders.append((path, relpath))
                        yield Entry(relpath, path, is_symlink=False, is_file=False, is_dir=True)
                    continue
                is_symlink = item.is_symlink()
                yield Entry(relpath, path, is_symlink, not is_symlink and _is_file(item))
            pending.extend(reversed(subfolders))  # depth first, in name order

    def _skips(self, relpath: str, path: Path) -> bool:
        return self.skip_folder is not None and self.skip_folder(relpath, path)


def _sorted_entries(folder: Path) -> list[os.DirEntry[str]]:
    """The names in ``folder`` in order; a folder that cannot be read holds nothing."""
    try:
        with os.scandir(folder) as entries:
            return sorted(entries, key=lambda entry: entry.name)
    except OSError:
        return []


def _is_file(entry: os.DirEntry[str]) -> bool:
    try:
        return entry.is_file(follow_symlinks=False)
    except OSError:
        return False
