"""The repository's tests compared with the reference's: ``tests_modified`` and
``--score-verify-tests`` (docs/security.md#what-the-repository-changed-in-its-tests).

Whenever the evaluator names a reference (``--reference``, ``--score-reference``) or its own
tests (``--tests-from PATH``), the repository's tests are compared with that tree's, before
any of its code runs: every test file and ``conftest.py`` the repository added, removed or
changed, every file of the reference's test roots (helpers, data, snapshots), and its pytest
configuration (the files of pytest's own whole; for ``pyproject.toml``, ``tox.ini`` and
``setup.cfg`` only their pytest section). Which files are tests is decided by the reference's
configuration (:mod:`.test_layout`). Each difference is a ``tests_modified`` signal, which only
informs (honest agents add tests), with a short unified diff; the full list is in the test
scores' metadata. ``--score-verify-tests=PATH`` refuses a tree with any difference.
"""

from __future__ import annotations

import difflib
import hashlib
import os
from collections.abc import Sequence
from pathlib import Path
from typing import Final
from typing import Literal
from typing import TypedDict

from pytest_scoring.core.signals import Signal
from pytest_scoring.core.signals import make_signal
from pytest_scoring.errors import OptionError
from pytest_scoring.fs.walk import TreeWalk
from pytest_scoring.reference.pytest_config import CONFIG_FILES
from pytest_scoring.reference.pytest_config import PYTEST_ONLY
from pytest_scoring.reference.pytest_config import ConfigReadError
from pytest_scoring.reference.pytest_config import PytestSection
from pytest_scoring.reference.pytest_config import read_section
from pytest_scoring.reference.test_layout import TestLayout
from pytest_scoring.reference.test_layout import matches_path
from pytest_scoring.reference.test_layout import own_config
from pytest_scoring.reference.test_layout import read_layout
from pytest_scoring.reference.test_layout import test_files

#: Lines of a unified diff a signal's detail shows, and characters of each.
EXCERPT_LINES: Final = 12
LINE_CHARS: Final = 160
#: Larger files are compared by their hash alone, without an excerpt.
DIFFED_BYTES: Final = 1024 * 1024
#: Files a usage error of ``--score-verify-tests`` names before "and N more".
NAMED_FILES: Final = 10

Change = Literal["added", "removed", "changed"]


class FileChange(TypedDict):
    """One file the repository added, removed or changed among its tests."""

    #: Relative to the repository's root.
    file: str
    change: Change
    #: ``test file``, ``conftest.py``, ``file in a test folder`` or ``pytest configuration``.
    what: str
    #: A short unified diff (empty for a large or binary file: its sizes instead).
    excerpt: str


def _content(path: Path) -> bytes | None:
    """What a file holds, for comparing: its bytes (a hash when large), a link's target;
    None when there is nothing there."""
    try:
        if path.is_symlink():
            return b"symlink to " + os.fsencode(os.readlink(path))
        if not path.exists():
            return None
        if not path.is_file():
            return b"<not a regular file>"
        if path.stat().st_size > DIFFED_BYTES:
            with path.open("rb") as stream:
                return b"sha256:" + hashlib.file_digest(stream, "sha256").hexdigest().encode()
        return path.read_bytes()
    except OSError as error:
        return f"<cannot be read: {error.strerror}>".encode()


def _lines(content: bytes) -> list[str] | None:
    try:
        return content.decode("utf-8").splitlines()
    except UnicodeDecodeError:
        return None


def _excerpt(relpath: str, before: bytes | None, after: bytes | None) -> str:
    """A short unified diff of one file, reference first; sizes for a binary one."""
    old, new = _lines(before or b""), _lines(after or b"")
    if old is None or new is None:
        return f"binary: {len(before or b'')} bytes in the reference, {len(after or b'')} here"
    diff = list(difflib.unified_diff(old, new, f"reference/{relpath}", relpath, n=1, lineterm=""))
    body = diff[2:]
    shown = [line if len(line) <= LINE_CHARS else line[:LINE_CHARS] + "…" for line in body]
    if len(shown) > EXCERPT_LINES:
        shown = [*shown[:EXCERPT_LINES], f"… {len(body) - EXCERPT_LINES} more lines"]
    return "\n".join(shown)


def _change(
    relpath: str, what: str, before: bytes | None, after: bytes | None
) -> FileChange | None:
    if before == after:
        return None
    change: Change = "added" if before is None else "removed" if after is None else "changed"
    return {
        "file": relpath,
        "change": change,
        "what": what,
        "excerpt": _excerpt(relpath, before, after),
    }


def _in_folder(relpath: str, config: PytestSection) -> str:
    """What a file of a test root is."""
    name = relpath.rsplit("/", 1)[-1]
    if name == "conftest.py":
        return "conftest.py"
    if name.endswith(".py") and any(matches_path(p, relpath) for p in config.words("python_files")):
        return "test file"
    return "file in a test folder"


def _compared_files(repository: Path, reference: Path, layout: TestLayout) -> dict[str, str]:
    """Every file compared, by relative path: what it is."""
    config = layout.config
    files: dict[str, str] = {}
    for root in layout.roots:
        for tree in (reference, repository):
            folder = tree / root
            if folder.is_dir() and not folder.is_symlink():
                for entry in TreeWalk(folder, skip_folder=_cache_folder):
                    relpath = f"{root}/{entry.relpath}"
                    if not entry.is_dir:
                        files[relpath] = _in_folder(relpath, config)
    own = own_config(repository)
    for tree, configs in ((reference, [config]), (repository, [config, *([own] if own else [])])):
        found, conftests = test_files(tree, configs)
        for relpath in found:
            files.setdefault(relpath, "test file")
        files.update(dict.fromkeys(conftests, "conftest.py"))
    return files


def _cache_folder(relpath: str, path: Path) -> bool:
    return path.name == "__pycache__"


def _section_text(tree: Path, name: str) -> bytes | None:
    """The pytest part of one configuration file: the whole of a file of pytest's own, the
    pytest section of another (the whole file when it cannot be parsed)."""
    path = tree / name
    if name in PYTEST_ONLY or path.is_symlink() or not path.is_file():
        return _content(path)
    try:
        section = read_section(path, name)
    except ConfigReadError:
        return _content(path)
    return None if section is None else section.text().encode()


def compare_tests(repository: Path, reference: Path) -> list[FileChange]:
    """What the repository changed in its tests relative to the reference (see the module's
    docstring), in path order, configuration last.

    :raises ConfigReadError: when the reference's pytest configuration cannot be read.
    """
    layout = read_layout(reference, "the reference")
    changes = []
    for relpath, what in sorted(_compared_files(repository, reference, layout).items()):
        found = _change(
            relpath, what, _content(reference / relpath), _content(repository / relpath)
        )
        if found is not None:
            changes.append(found)
    for name in CONFIG_FILES:
        before, after = _section_text(reference, name), _section_text(repository, name)
        found = _change(name, "pytest configuration", before, after)
        if found is not None:
            changes.append(found)
    return changes


def change_signals(changes: Sequence[FileChange]) -> list[Signal]:
    """One ``tests_modified`` signal per change, its excerpt in the detail."""
    signals = []
    for change in changes:
        detail = f"{change['what']} {change['change']} relative to the reference"
        if change["excerpt"]:
            detail += f"\n{change['excerpt']}"
        signals.append(make_signal("tests_modified", detail, change["file"]))
    return signals


def change_list(changes: Sequence[FileChange]) -> list[dict[str, str]]:
    """The changes without their excerpts, for the test scores' metadata."""
    return [{"file": c["file"], "change": c["change"], "what": c["what"]} for c in changes]


def verify_tests(root: Path, path: Path, option: str = "--score-verify-tests") -> None:
    """Refuse a tree whose tests, conftests or pytest configuration differ from PATH's.

    :raises OptionError: naming the files that differ (or PATH's unreadable configuration).
    """
    try:
        changes = compare_tests(root, path)
    except ConfigReadError as error:
        raise OptionError(f"{option}: {error}") from None
    if not changes:
        return
    named = [f"{change['file']} ({change['change']})" for change in changes[:NAMED_FILES]]
    more = f" and {len(changes) - NAMED_FILES} more" if len(changes) > NAMED_FILES else ""
    raise OptionError(
        f"{option}: the tests here differ from those of {path}: {', '.join(named)}{more}"
    )
