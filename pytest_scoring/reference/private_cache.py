"""The evaluator's private cache: one set of rules for every kind of entry (docs/security.md).

What the evaluator computes once and reuses (a baseline run, the run of an expected-tests
folder) is kept under ``$XDG_CACHE_HOME/pytest-scoring/<kind>/<route>/`` (else
``~/.cache/…``), read from the environment captured when pytest-scoring loaded, so that no
``conftest.py`` can move it. A scored repository must not be able to plant an entry that a
later evaluation trusts:

* the cache is not used when its folder lies inside the scored repository, the reference or
  the report root, when a folder of it is a symlink, belongs to another user or is writable
  by other users, or when another user could replace a folder above it; the evaluator makes
  its folders private (0700);
* each route has a folder of its own (:data:`~pytest_scoring.core.settings.CacheRoute`): an
  in-process session runs the scored repository's code as the evaluator's user, so ``run``
  never reads what one wrote;
* an entry is a JSON document that names its kind, its route and its key (the hash of what it
  was computed from) and carries the SHA-256 of its content; it is written under a temporary
  name and renamed whole. An entry that does not check out is discarded with one line on
  standard error and computed again, never trusted.
"""

from __future__ import annotations

import contextlib
import json
import secrets
import shutil
import sys
import tempfile
from collections.abc import Iterable
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from typing import Final

from pytest_scoring.core.encoding import json_digest
from pytest_scoring.core.settings import CacheRoute
from pytest_scoring.fs.paths import cache_home
from pytest_scoring.fs.private import movable_problem
from pytest_scoring.fs.private import new_private_file
from pytest_scoring.fs.private import open_regular
from pytest_scoring.fs.private import private_problem
from pytest_scoring.process.environment import captured_environment

#: Bumped when the entries' envelope changes (older entries are then discarded).
FORMAT: Final = 2
#: The largest entry read (a baseline's lists every test id it collected).
MAX_ENTRY_BYTES: Final = 64 * 1024 * 1024


def _unusable(home: Path, folder: Path, never_inside: Iterable[Path]) -> str | None:
    """Why the cache ``folder`` (under pytest-scoring's ``home``) cannot be the evaluator's,
    or None when it is (made private if it is new)."""
    resolved = folder.resolve()
    for place in never_inside:
        if resolved.is_relative_to(place.resolve()):
            return f"the cache folder {folder} is inside {place}"
    try:
        home.mkdir(mode=0o700, parents=True, exist_ok=True)
        folder.parent.mkdir(mode=0o700, exist_ok=True)
        folder.mkdir(mode=0o700, exist_ok=True)
    except OSError as error:
        return f"cannot make {folder}: {error.strerror or error}"
    for path in (home, folder.parent, folder):
        problem = private_problem(path)
        if problem is not None:
            return problem
    return movable_problem(home)


def _parsed(data: bytes) -> tuple[Any, str | None]:
    """An entry document's JSON, or why it cannot be one."""
    if len(data) > MAX_ENTRY_BYTES:
        return None, f"it is over {MAX_ENTRY_BYTES} bytes"
    try:
        return json.loads(data), None
    except ValueError:
        return None, "it is not JSON"


@dataclass(frozen=True)
class PrivateCache:
    """One kind of entry, for one route: where they are kept, or why they are not."""

    kind: str
    route: CacheRoute
    #: The folder of entries; None when the cache is not used.
    folder: Path | None
    #: Why the cache is not used.
    problem: str | None = None

    @classmethod
    def open(
        cls,
        kind: str,
        route: CacheRoute,
        never_inside: Iterable[Path],
        environ: Mapping[str, str] | None = None,
    ) -> PrivateCache:
        """The evaluator's cache of ``kind`` for ``route``, made private if it is new.

        :param never_inside: folders a scored repository can write (the repository, its
            copy, the reference, the report root): a cache inside one is not used.
        :param environ: the environment naming the cache (default: the one captured at load).
        """
        home = cache_home(captured_environment() if environ is None else environ)
        folder = home / kind / route
        problem = _unusable(home, folder, never_inside)
        return cls(kind, route, None if problem else folder, problem and f"not used: {problem}")

    def describe(self, name: str) -> str:
        """Where the entry ``name`` is kept, or why the cache is not used."""
        return str(self.folder / name) if self.folder is not None else str(self.problem)

    def read(self, path: Path, key: str) -> dict[str, Any] | None:
        """The content of the file entry at ``path`` when it holds ``key``'s result and checks
        out; None when there is none (a bad one is discarded, with one line)."""
        content, problem = self.check(path, key)
        if problem is not None:
            self.discard(path, problem)
        return content

    def check(self, path: Path, key: str) -> tuple[dict[str, Any] | None, str | None]:
        """The content of the entry document at ``path`` (None when there is none), or why
        it is not ``key``'s entry."""
        try:
            with open_regular(path) as handle:
                data = handle.read(MAX_ENTRY_BYTES + 1)
        except FileNotFoundError:
            return None, None
        except OSError as error:
            return None, str(error.strerror or error)
        document, problem = _parsed(data)
        problem = problem or self._document_problem(document, key)
        return (None, problem) if problem else (document["content"], None)

    def _document_problem(self, document: Any, key: str) -> str | None:
        """Why ``document`` is not this cache's entry of ``key``, or None when it is."""
        if not isinstance(document, dict) or document.get("format") != FORMAT:
            return "it is not an entry of this version of pytest-scoring"
        if (document.get("kind"), document.get("key")) != (self.kind, key):
            return "it holds another result than the one its name says"
        if document.get("route") != self.route:
            return f"it was written by the {document.get('route')!r} route, not this one"
        content = document.get("content")
        if not isinstance(content, dict) or document.get("sha256") != json_digest(content):
            return "its content does not match its hash"
        return None

    def document(self, key: str, content: dict[str, Any]) -> bytes:
        """The entry document of ``key``: its content, named and hashed."""
        return json.dumps(
            {
                "format": FORMAT,
                "kind": self.kind,
                "route": self.route,
                "key": key,
                "sha256": json_digest(content),
                "content": content,
            }
        ).encode("utf-8")

    def discard(self, entry: Path, reason: str) -> None:
        """Say in one line that ``entry`` is not used, and remove it (the next result
        computed replaces it anyway)."""
        sys.stderr.write(
            f"pytest-scoring: warning: the cache entry {entry} is discarded ({reason}): "
            "its result is computed again\n"
        )
        with contextlib.suppress(OSError):
            if entry.is_dir() and not entry.is_symlink():
                shutil.rmtree(entry)
            else:
                entry.unlink()

    def write(self, name: str, data: bytes) -> str:
        """Put the file entry ``name`` in place whole; where it is kept, or why it is not."""
        if self.folder is None:
            return str(self.problem)
        target = self.folder / name
        building = self.folder / f".{name}.{secrets.token_hex(8)}.tmp"
        try:
            with new_private_file(building) as handle:
                handle.write(data)
            building.replace(target)
        except OSError as error:
            with contextlib.suppress(OSError):
                building.unlink()
            return f"not kept: cannot write {target}: {error.strerror or error}"
        return str(target)

    def building(self, key: str) -> Path:
        """A new private folder in the cache, where a folder entry of ``key`` is built.

        :raises OSError: when the cache is not used or cannot be written.
        """
        if self.folder is None:
            raise OSError(self.problem)
        return Path(tempfile.mkdtemp(prefix=f".{key}.", dir=self.folder))

    def publish(self, building: Path, entry: Path) -> None:
        """Rename a finished folder entry into place, replacing an unusable one of ours.

        :raises OSError: when the place is taken by something that is not ours.
        """
        if entry.is_symlink():
            entry.unlink()
        elif entry.exists() and private_problem(entry) is None:
            shutil.rmtree(entry)
        try:
            building.rename(entry)
        except OSError:  # another evaluation stored the same result first, or it is not ours
            if private_problem(entry) is not None:
                raise
