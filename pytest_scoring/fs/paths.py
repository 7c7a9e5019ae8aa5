"""Resolving paths of a hostile repository: never raising, never leading out (docs/security.md);
and the paths of the evaluator's configuration, sandbox paths mapped (docs/configuration.md).

``Path.resolve`` raises ``RuntimeError`` on a symlink loop before Python 3.13, and a scored
repository can plant a loop anywhere (``tests/a.py -> b.py -> a.py``); every check of where a
repository's path leads goes through :func:`resolve_inside`, which treats a loop as leading out.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from pathlib import Path
from pathlib import PurePosixPath
from typing import NamedTuple
from typing import final


def resolve_inside(path: Path, root: Path) -> Path | None:
    """``path`` with every symlink followed, when it stays inside ``root``.

    :param root: an already resolved folder.
    :returns: the resolved path, or ``None`` when it leads out of ``root`` or loops.
    """
    try:
        resolved = path.resolve()
    except (OSError, RuntimeError):  # RuntimeError: a symlink loop (Python < 3.13)
        return None
    return resolved if resolved.is_relative_to(root) else None


def overlap(folder: Path, repository: Path) -> str | None:
    """How ``folder`` overlaps the repository (``is REPO``, ``is inside REPO``, ``holds
    REPO``), or None when they are apart; both resolved. An evaluator's folder (the reference,
    ``--tests-from``) must be apart: the repository could write it, or be taken for it."""
    if folder == repository:
        return "is REPO"
    if folder.is_relative_to(repository):
        return "is inside REPO"
    if repository.is_relative_to(folder):
        return "holds REPO"
    return None


def cache_home(environ: Mapping[str, str]) -> Path:
    """pytest-scoring's folder in the user's cache: ``$XDG_CACHE_HOME/pytest-scoring``, else
    ``$HOME/.cache/pytest-scoring``.

    :param environ: the environment to read (the evaluator's, as captured at load).
    """
    home = environ.get("HOME") or str(Path.home())
    return Path(environ.get("XDG_CACHE_HOME") or Path(home) / ".cache") / "pytest-scoring"


@final
class ConfiguredPath(NamedTuple):
    """Where a path of the evaluator's configuration (``folder_path``, ``cwd``) leads."""

    #: The resolved path; ``None`` when a path in the repository leads out of it (or loops).
    path: Path | None
    #: The folder that anything read under ``path`` must stay inside.
    bound: Path


def map_sandbox_path(text: str, path_map: Mapping[str, Path]) -> Path | None:
    """The local path for a sandbox path under a mapped prefix (the longest wins), else None."""
    sandbox_path = PurePosixPath(text)
    for prefix in sorted(path_map, key=len, reverse=True):
        if sandbox_path.is_relative_to(prefix):
            return path_map[prefix] / sandbox_path.relative_to(prefix)
    return None


def locate(text: str, root: Path, path_map: Mapping[str, Path]) -> ConfiguredPath:
    """Resolve a path from the evaluator's configuration (docs/configuration.md).

    A sandbox path under a ``--score-path-map`` prefix is mapped; another absolute path is the
    evaluator's own and honoured as it is; a relative one is relative to the repository root.
    Whatever lands in the repository must stay in it: its symlinks are the repository's.

    :param root: the repository root, resolved.
    """
    mapped = map_sandbox_path(text, path_map)
    if mapped is None and not Path(text).is_absolute():
        return ConfiguredPath(resolve_inside(root / text, root), root)
    candidate = Path(os.path.normpath(mapped if mapped is not None else text))
    if candidate.is_relative_to(root):
        return ConfiguredPath(resolve_inside(candidate, root), root)
    try:
        resolved = candidate.resolve()
    except (OSError, RuntimeError):  # RuntimeError: a symlink loop (Python < 3.13)
        return ConfiguredPath(None, root)
    return ConfiguredPath(resolved, resolved)


def unmapped_hint(text: str, path_map: Mapping[str, Path]) -> str:
    """A hint for an absolute path that names nothing here: perhaps a sandbox path to map."""
    if not Path(text).is_absolute() or map_sandbox_path(text, path_map) is not None:
        return ""
    return f" (a sandbox path? map it with --score-path-map {text}=LOCAL or 'paths:')"
