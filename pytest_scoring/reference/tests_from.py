"""The evaluator's tests put into a copy of the scored repository (``run --tests-from PATH``).

Before any code of the repository runs, :func:`install_tests` makes the copy's tests PATH's
(docs/security.md#the-evaluators-tests), reading PATH statically (:mod:`.test_layout`):

(a) each of PATH's test roots is deleted from the copy and PATH's copied in, every file in it
    (helpers, ``__init__.py``, data, snapshots, databases); each loose test file of PATH
    replaces the copy's file at its place;
(b) the child's pytest is given the explicit list of PATH's test files, never a folder to
    walk: a test file the repository added elsewhere is never collected, and stays in place;
(c) it reads a configuration file the evaluator writes at the copy's root from PATH's pytest
    section (an empty one when PATH has none), with ``-c`` and ``--rootdir``: pytest then reads
    no configuration file of the repository, whatever its name or format, and the
    repository's files keep their contents;
(d) every ``conftest.py`` at the copy's root and in the folders of the collected files and
    their parents is PATH's, or is removed where PATH has none.

What it did is a :class:`TestsFrom`, whose :meth:`~TestsFrom.to_json` is the report's
``tests_from``. The same function serves the reference rerun (PATH's tests on the reference's
code) and, through a copy of PATH, the Inspect scorers.
"""

from __future__ import annotations

import os
import re
from collections.abc import Iterable
from collections.abc import Mapping
from dataclasses import dataclass
from dataclasses import field
from pathlib import Path
from pathlib import PurePosixPath
from typing import Any
from typing import Final

from pytest_scoring.fs.copy import is_regular_file
from pytest_scoring.fs.graft import graft_file
from pytest_scoring.fs.graft import graft_folder
from pytest_scoring.fs.graft import place
from pytest_scoring.fs.graft import remove
from pytest_scoring.fs.walk import TreeWalk
from pytest_scoring.reference.pytest_config import ConfigReadError
from pytest_scoring.reference.pytest_config import tree_sections
from pytest_scoring.reference.test_layout import TestLayout
from pytest_scoring.reference.test_layout import fixture_names
from pytest_scoring.reference.test_layout import own_config
from pytest_scoring.reference.test_layout import read_layout
from pytest_scoring.reference.test_layout import test_files
from pytest_scoring.text import plural

#: The evaluator's configuration file at the copy's root (``.ini`` or ``.toml`` follows).
CONFIG_STEM: Final = ".pytest-scoring-tests-from"
#: Most paths one list of the report's ``tests_from`` holds; one more entry says how many
#: were left out.
LISTED_PATHS: Final = 1000
#: pytest's message for a test that asks for a fixture nobody defines.
MISSING_FIXTURE: Final = re.compile(r"fixture '([^']+)' not found")


@dataclass
class TestsFrom:
    """What :func:`install_tests` did to a copy, and how its pytest must run."""

    # pytest would try to collect a class named Test*; this one is no test.
    __test__ = False

    #: PATH, as the evaluator named it.
    path: str
    #: PATH's file whose pytest section the child reads (None: PATH has none).
    config: str | None
    #: The test roots (``tests/``), loose test files and conftests of the copy that hold
    #: PATH's in place of the repository's.
    replaced: list[str] = field(default_factory=list)
    #: The repository's files that are gone: files of its test roots that PATH's lack, its
    #: ``conftest.py`` files where PATH has none.
    removed: list[str] = field(default_factory=list)
    #: PATH's test roots, test files and conftests that the repository did not have.
    added: list[str] = field(default_factory=list)
    #: The repository's files left in place and never read: its pytest configuration files,
    #: its test files outside PATH's test roots.
    ignored: list[str] = field(default_factory=list)
    #: The child's pytest arguments: ``-c``, ``--rootdir`` and the test files.
    args: list[str] = field(default_factory=list)
    #: Fixtures the repository's removed or replaced conftests defined, by name: the file.
    fixtures_gone: dict[str, str] = field(default_factory=dict)
    #: What in the copy is PATH's: test roots (``tests/``), files, the configuration file
    #: (a signal whose file is one of them came from the evaluator).
    evaluators: list[str] = field(default_factory=list)

    def to_json(self) -> dict[str, Any]:
        """The report's ``tests_from``."""
        return {
            "path": self.path,
            "config": self.config,
            "replaced": _listed(self.replaced),
            "removed": _listed(self.removed),
            "added": _listed(self.added),
            "ignored": _listed(self.ignored),
        }


def _listed(paths: list[str]) -> list[str]:
    if len(paths) <= LISTED_PATHS:
        return list(paths)
    return [*paths[:LISTED_PATHS], f"… and {len(paths) - LISTED_PATHS} more"]


def _files_under(tree: Path, relpath: str) -> set[str]:
    folder = tree / relpath
    if folder.is_symlink() or not folder.is_dir():
        return set()
    return {f"{relpath}/{entry.relpath}" for entry in TreeWalk(folder) if not entry.is_dir}


def _folders_of(files: Iterable[str]) -> list[str]:
    """The copy's root (``""``) and every folder holding one of ``files`` or above one."""
    folders = {""}
    for relpath in files:
        folders.update(str(folder) for folder in PurePosixPath(relpath).parents)
    return sorted(folder for folder in folders if folder != ".")


def _conftest_at(folder: str) -> str:
    return f"{folder}/conftest.py" if folder else "conftest.py"


def write_config(layout: TestLayout, tree: Path) -> tuple[str, list[str]]:
    """Write PATH's pytest section as the file the child reads with ``-c``.

    :returns: its name at the root of ``tree``, and what was removed to make room.
    """
    suffix, text = layout.config.config_file()
    target, removed = place(tree, CONFIG_STEM + suffix)
    target.write_text(text, encoding="utf-8")
    return target.name, removed


def pytest_arguments(layout: TestLayout, config_name: str) -> list[str]:
    """The child's arguments: PATH's configuration, the copy as rootdir, the test files
    (a name that starts with ``-`` is given as ``./-name``, never read as an option)."""
    files = [f"./{path}" if path.startswith("-") else path for path in layout.collected]
    return ["-c", config_name, "--rootdir=.", *files]


def install_tests(
    path: Path, copy: Path, public_path: str | None = None, layout: TestLayout | None = None
) -> TestsFrom:
    """Make the tests of ``copy`` PATH's: (a) to (d) of the module's docstring.

    :param path: PATH (or a private copy of it).
    :param public_path: how the report names PATH (default: ``path``).
    :param layout: PATH's tests, when already read.
    :raises ConfigReadError: when PATH's pytest configuration cannot be read.
    :raises OSError: when a file cannot be copied or removed.
    """
    layout = layout or read_layout(path)
    record = TestsFrom(str(public_path or path), layout.config.file or None)
    ignored_tests = _repository_tests_elsewhere(copy, layout)
    conftests = _relevant_conftests(copy, layout)
    before = {relpath: _fixtures(copy / relpath) for relpath in conftests}
    for root in layout.roots:
        _install_root(path, copy, root, record)
    for relpath in layout.loose:
        _install_file(path, copy, relpath, record)
    for relpath in conftests:
        if layout.in_root(relpath) is None:
            _install_conftest(path, copy, relpath, record)
    for relpath, names in before.items():
        gone = set(names) - set(_fixtures(copy / relpath))
        record.fixtures_gone.update(dict.fromkeys(sorted(gone), relpath))
    name, removed = write_config(layout, copy)
    record.removed += removed
    record.evaluators.append(name)
    record.ignored = [*_repository_configs(copy), *ignored_tests]
    record.args = pytest_arguments(layout, name)
    return record


def _fixtures(path: Path) -> list[str]:
    return fixture_names(path) if is_regular_file(path) else []


def _relevant_conftests(copy: Path, layout: TestLayout) -> list[str]:
    """The conftests pytest loads for the collected files (the root's and those of every
    folder on their way), and the repository's conftests inside PATH's test roots."""
    places = {_conftest_at(folder) for folder in _folders_of(layout.collected)}
    for root in layout.roots:
        places.update(relpath for relpath in _files_under(copy, root) if _is_conftest(relpath))
    return sorted(places)


def _is_conftest(relpath: str) -> bool:
    return PurePosixPath(relpath).name == "conftest.py"


def _install_root(path: Path, copy: Path, root: str, record: TestsFrom) -> None:
    existed = os.path.lexists(copy / root)
    theirs = _files_under(path, root)
    removed = graft_folder(path / root, copy, root)
    record.removed += [relpath for relpath in removed if relpath not in theirs]
    (record.replaced if existed else record.added).append(f"{root}/")
    record.evaluators.append(f"{root}/")


def _install_file(path: Path, copy: Path, relpath: str, record: TestsFrom) -> None:
    existed = os.path.lexists(copy / relpath)
    graft_file(path / relpath, copy, relpath)
    (record.replaced if existed else record.added).append(relpath)
    record.evaluators.append(relpath)


def _install_conftest(path: Path, copy: Path, relpath: str, record: TestsFrom) -> None:
    """PATH's conftest at ``relpath``, or none where PATH has none."""
    if is_regular_file(path / relpath):
        _install_file(path, copy, relpath, record)
    else:
        record.removed += remove(copy, relpath)


def _repository_tests_elsewhere(copy: Path, layout: TestLayout) -> list[str]:
    """The repository's test files (by PATH's configuration or its own) outside PATH's
    roots and loose files: never collected, left in place."""
    own = own_config(copy)
    found, _ = test_files(copy, [layout.config, *([own] if own else [])])
    loose = set(layout.loose)
    return [path for path in found if layout.in_root(path) is None and path not in loose]


def _repository_configs(copy: Path) -> list[str]:
    """The repository's files holding a pytest section, which the child does not read."""
    return [
        name if isinstance(section, ConfigReadError) else section.label()
        for name, section in tree_sections(copy)
    ]


def own_tests_arguments(tree: Path) -> list[str]:
    """The arguments that run a tree's own tests as ``--tests-from`` runs PATH's, when the
    tree is PATH itself (the baseline of a reference that is PATH): its configuration file
    written at its root, its test files listed."""
    layout = read_layout(tree)
    name, _ = write_config(layout, tree)
    return pytest_arguments(layout, name)


def missing_fixtures_note(gone: Mapping[str, str], messages: Iterable[str]) -> str | None:
    """One sentence when tests errored for a fixture that a removed conftest defined.

    :param gone: the fixtures the repository's removed or replaced conftests defined.
    :param messages: the messages of the tests that errored.
    """
    named: set[str] = set()
    tests = 0
    for message in messages:
        found = {name for name in MISSING_FIXTURE.findall(message) if name in gone}
        named |= found
        tests += bool(found)
    if not named:
        return None
    fixtures = ", ".join(f"'{name}'" for name in sorted(named))
    files = ", ".join(sorted({gone[name] for name in named}))
    return (
        f"{plural(tests, 'test')} errored for want of fixture {fixtures}, which the "
        f"repository's {files} defined: --tests-from removed it, only the evaluator's "
        "conftest.py files load"
    )
