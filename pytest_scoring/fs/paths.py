"""Resolving paths of a hostile repository: never raising, never leading out (docs/security.md).

``Path.resolve`` raises ``RuntimeError`` on a symlink loop before Python 3.13, and a scored
repository can plant a loop anywhere (``tests/a.py -> b.py -> a.py``); every check of where a
repository's path leads goes through :func:`resolve_inside`, which treats a loop as leading out.
"""

from __future__ import annotations

from pathlib import Path


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
