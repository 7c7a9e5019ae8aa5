"""Which files of a tree are its tests, read statically (docs/security.md#the-evaluators-tests).

``run --tests-from PATH`` and the ``tests_modified`` comparison need to know PATH's tests
without running anything: the files pytest would collect, the folders they live in, the
``conftest.py`` files. Everything is read with :mod:`ast` and PATH's pytest configuration
(:mod:`.pytest_config`), with pytest's defaults where it sets nothing:

* a **test file** is a ``.py`` file whose name matches ``python_files``, that defines tests:
  a function named as ``python_functions`` says, a class named as ``python_classes`` says or
  deriving from a ``TestCase``, or a name bound to one of these by an assignment or an import
  (a file that cannot be parsed counts too, so that pytest reports it); with ``testpaths``,
  only files under one of them count. A source module named like a test but defining none
  (``pkg/test_utils.py`` of helpers) is not a test file;
* the walk skips what pytest's collection skips: folders matching ``norecursedirs``, virtual
  environments, ``__pycache__``, and what the tree's ``conftest.py`` files list literally in
  ``collect_ignore`` and ``collect_ignore_glob``;
* a **test root** is a folder replaced whole: the ``testpaths`` entry that holds a test file,
  when that entry is named like a tests folder or lies inside one; otherwise the top-most
  folder above the test file (below the entry, or the tree's root) named like a tests folder
  (``test``, ``tests``, ``testing``, or ending in ``_test(s)``/``-test(s)``). The tree's root is
  never one, and neither is a source package: a test file with no such folder above it (at
  the root, or beside the modules it tests, ``pkg/test_x.py``) is a **loose** test file, taken
  one by one;
* the files pytest is given are the ``python_files`` matches inside the roots (as pytest's own
  walk of those folders would find them) and the loose test files.
"""

from __future__ import annotations

import ast
import fnmatch
import glob
import re
from collections.abc import Iterable
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from pathlib import PurePosixPath
from typing import Final

from pytest_scoring.fs.paths import resolve_inside
from pytest_scoring.fs.walk import TreeWalk
from pytest_scoring.reference.pytest_config import ConfigReadError
from pytest_scoring.reference.pytest_config import PytestSection
from pytest_scoring.reference.pytest_config import find_config

#: Folder names that make a folder a tests folder.
TESTS_FOLDER: Final = re.compile(r"(tests?|testing|.+[_-]tests?)", re.IGNORECASE)
#: Larger Python files are not parsed: they count as test files when named like one.
PARSED_BYTES: Final = 2 * 1024 * 1024
_GLOB_CHARS: Final = frozenset("*?[")


def tests_named(name: str) -> bool:
    """A folder name that says "tests" (``tests``, ``testing``, ``unit_tests``…)."""
    return TESTS_FOLDER.fullmatch(name) is not None


def matches_option(name: str, options: Sequence[str]) -> bool:
    """pytest's rule for ``python_functions``/``python_classes``: a prefix, or a glob."""
    for option in options:
        if name.startswith(option):
            return True
        if _GLOB_CHARS & set(option) and fnmatch.fnmatch(name, option):
            return True
    return False


def matches_path(pattern: str, relpath: str) -> bool:
    """pytest's ``fnmatch_ex``: a pattern without ``/`` matches the name, else the path."""
    if "/" not in pattern:
        return fnmatch.fnmatch(PurePosixPath(relpath).name, pattern)
    return fnmatch.fnmatch(relpath, pattern) or fnmatch.fnmatch(relpath, f"*/{pattern}")


def _parsed(path: Path) -> ast.Module | None:
    """The module's syntax tree, or None when it is too large or cannot be parsed."""
    try:
        if path.stat().st_size > PARSED_BYTES:
            return None
        return ast.parse(path.read_bytes(), str(path))
    except (OSError, SyntaxError, ValueError, RecursionError):
        return None


def _top_level(module: ast.Module) -> Iterable[ast.stmt]:
    """The module's statements, those inside ``if``/``try``/``with`` blocks included."""
    pending = list(module.body)
    while pending:
        statement = pending.pop(0)
        yield statement
        if isinstance(statement, ast.If | ast.With | ast.AsyncWith):
            pending += [*statement.body, *getattr(statement, "orelse", [])]
        elif isinstance(statement, ast.Try):
            pending += [*statement.body, *statement.orelse, *statement.finalbody]
            pending += [line for handler in statement.handlers for line in handler.body]


def _bound_names(statement: ast.stmt) -> list[str]:
    """The names an assignment or an import binds (``*`` for a star import)."""
    if isinstance(statement, ast.Assign):
        return [target.id for target in statement.targets if isinstance(target, ast.Name)]
    if isinstance(statement, ast.AnnAssign | ast.AugAssign) and isinstance(
        statement.target, ast.Name
    ):
        return [statement.target.id]
    if isinstance(statement, ast.Import | ast.ImportFrom):
        return [alias.asname or alias.name.split(".")[-1] for alias in statement.names]
    return []


def defines_tests(path: Path, functions: Sequence[str], classes: Sequence[str]) -> bool:
    """Whether the module at ``path`` defines tests pytest would collect (see the module's
    docstring); a module that cannot be parsed does, so that pytest reports it."""
    module = _parsed(path)
    if module is None:
        return True
    for statement in _top_level(module):
        if isinstance(statement, ast.FunctionDef | ast.AsyncFunctionDef):
            if matches_option(statement.name, functions):
                return True
        elif isinstance(statement, ast.ClassDef):
            bases = [ast.unparse(base) for base in statement.bases]
            if matches_option(statement.name, classes) or any(
                base.endswith("TestCase") for base in bases
            ):
                return True
        for name in _bound_names(statement):
            if name == "*" or matches_option(name, [*functions, *classes]):
                return True
    return False


def _decorator_name(decorator: ast.expr) -> str:
    target = decorator.func if isinstance(decorator, ast.Call) else decorator
    return ast.unparse(target)


def _fixture_name(function: ast.FunctionDef | ast.AsyncFunctionDef) -> str | None:
    """The name a fixture is requested by, when ``function`` is one."""
    for decorator in function.decorator_list:
        if _decorator_name(decorator).split(".")[-1] != "fixture":
            continue
        if isinstance(decorator, ast.Call):
            for keyword in decorator.keywords:
                if keyword.arg == "name" and isinstance(keyword.value, ast.Constant):
                    return str(keyword.value.value)
        return function.name
    return None


def fixture_names(path: Path) -> list[str]:
    """The fixtures a ``conftest.py`` defines at its top level, read statically."""
    module = _parsed(path)
    if module is None:
        return []
    names = []
    for statement in _top_level(module):
        if isinstance(statement, ast.FunctionDef | ast.AsyncFunctionDef):
            name = _fixture_name(statement)
            if name is not None:
                names.append(name)
    return names


def _literal_lists(path: Path, names: Sequence[str]) -> dict[str, list[str]]:
    """Literal lists of text a module assigns (or adds) to ``names`` at its top level."""
    module = _parsed(path)
    found: dict[str, list[str]] = {name: [] for name in names}
    for statement in _top_level(module) if module is not None else ():
        value = getattr(statement, "value", None)
        for name in _bound_names(statement):
            if name in found and isinstance(value, ast.List | ast.Tuple):
                found[name] += [
                    item.value
                    for item in value.elts
                    if isinstance(item, ast.Constant) and isinstance(item.value, str)
                ]
    return found


@dataclass
class TestLayout:
    """A tree's tests: its configuration, test roots, loose test files and conftests."""

    # pytest would try to collect a class named Test*; this one is no test.
    __test__ = False

    root: Path
    config: PytestSection
    #: Folders replaced whole (relative POSIX paths), none inside another.
    roots: list[str]
    #: Test files outside every root, taken one by one.
    loose: list[str]
    #: The files pytest is given: the ``python_files`` matches in the roots, and the loose.
    collected: list[str]
    #: Every ``conftest.py`` the walk found.
    conftests: list[str]

    def in_root(self, relpath: str) -> str | None:
        """The root that holds ``relpath``, or None."""
        return next((root for root in self.roots if _under(relpath, root)), None)


def _under(relpath: str, folder: str) -> bool:
    return relpath == folder or relpath.startswith(f"{folder}/")


def _is_environment(path: Path) -> bool:
    """A virtual environment or a conda one, which pytest's collection never enters."""
    return (path / "pyvenv.cfg").is_file() or (path / "conda-meta" / "history").is_file()


def walk_tests(tree: Path, config: PytestSection) -> tuple[list[str], list[str]]:
    """The files of ``tree`` named like test files (``python_files``), and its conftests,
    skipping what pytest's collection skips."""
    patterns, norecurse = config.words("python_files"), config.words("norecursedirs")

    def skip(relpath: str, path: Path) -> bool:
        name = path.name
        return (
            name == "__pycache__"
            or any(matches_path(pattern, relpath) for pattern in norecurse)
            or _is_environment(path)
        )

    candidates, conftests = [], []
    for entry in TreeWalk(tree, skip_folder=skip):
        if not entry.is_file:
            continue
        name = entry.path.name
        if name == "conftest.py":
            conftests.append(entry.relpath)
        elif name.endswith(".py") and any(matches_path(p, entry.relpath) for p in patterns):
            candidates.append(entry.relpath)
    ignored = _collect_ignore(tree, conftests)
    return [path for path in candidates if not ignored(path)], conftests


def _collect_ignore(tree: Path, conftests: Sequence[str]) -> _Ignored:
    paths: list[str] = []
    globs: list[str] = []
    for conftest in conftests:
        folder = PurePosixPath(conftest).parent
        lists = _literal_lists(tree / conftest, ("collect_ignore", "collect_ignore_glob"))
        paths += [_joined(folder, item) for item in lists["collect_ignore"]]
        globs += [_joined(folder, item) for item in lists["collect_ignore_glob"]]
    return _Ignored(paths, globs)


def _joined(folder: PurePosixPath, item: str) -> str:
    return str(folder / item).removeprefix("./")


@dataclass(frozen=True)
class _Ignored:
    paths: list[str]
    globs: list[str]

    def __call__(self, relpath: str) -> bool:
        return any(_under(relpath, path) for path in self.paths) or any(
            fnmatch.fnmatch(relpath, pattern) for pattern in self.globs
        )


def _testpath_entries(tree: Path, config: PytestSection) -> list[str] | None:
    """``testpaths`` as relative paths inside ``tree`` (globs expanded), or None without
    them (or when none exists: pytest then walks the whole tree)."""
    entries = []
    root = tree.resolve()
    for pattern in config.words("testpaths"):
        for found in sorted(glob.glob(pattern, root_dir=root, recursive=True)):
            inside = resolve_inside(root / found, root)
            if inside is not None:
                entries.append(inside.relative_to(root).as_posix())
    return entries or None


def _root_for(test_file: str, entry: str | None) -> str | None:
    """The test root of one test file (see the module's docstring), or None: loose."""
    folders = [str(folder) for folder in reversed(PurePosixPath(test_file).parents)][1:]
    if entry is not None and entry != "." and entry != test_file:
        if any(tests_named(PurePosixPath(folder).name) for folder in [*_ancestors(entry), entry]):
            return entry
        folders = [folder for folder in folders if folder != entry and _under(folder, entry)]
    return next((folder for folder in folders if tests_named(PurePosixPath(folder).name)), None)


def _ancestors(relpath: str) -> list[str]:
    return [str(folder) for folder in PurePosixPath(relpath).parents if str(folder) != "."]


def read_layout(tree: Path, what: str = "--tests-from") -> TestLayout:
    """The tests of ``tree``, read statically (see the module's docstring).

    :param what: how messages name the tree.
    :raises ConfigReadError: when its pytest configuration cannot be read.
    """
    config = find_config(tree, what)
    functions, classes = config.words("python_functions"), config.words("python_classes")
    candidates, conftests = walk_tests(tree, config)
    entries = _testpath_entries(tree, config)
    if entries is not None:
        candidates = [path for path in candidates if _entry_of(path, entries) is not None]
    roots: set[str] = set()
    loose: list[str] = []
    for candidate in candidates:
        if defines_tests(tree / candidate, functions, classes):
            root = _root_for(candidate, _entry_of(candidate, entries))
            if root is None:
                loose.append(candidate)
            else:
                roots.add(root)
    top = sorted(root for root in roots if not any(_under(root, other) for other in roots - {root}))
    loose = [path for path in loose if not any(_under(path, root) for root in top)]
    collected = [path for path in candidates if any(_under(path, root) for root in top)]
    return TestLayout(tree, config, top, loose, sorted({*collected, *loose}), conftests)


def _entry_of(relpath: str, entries: list[str] | None) -> str | None:
    """The ``testpaths`` entry holding ``relpath`` (None without testpaths: the tree)."""
    if entries is None:
        return None
    return next((entry for entry in entries if entry == "." or _under(relpath, entry)), None)


def test_files(tree: Path, configs: Sequence[PytestSection]) -> tuple[list[str], list[str]]:
    """The test files of ``tree`` by any of ``configs`` (named as one says and defining tests
    as it says), and its ``conftest.py`` files.

    The scored repository's files are read with PATH's configuration and with its own: a
    file it made a test with a ``python_files`` line of its own is one of its test files.
    """
    found: set[str] = set()
    conftests: set[str] = set()
    for config in configs:
        functions, classes = config.words("python_functions"), config.words("python_classes")
        candidates, in_config = walk_tests(tree, config)
        conftests.update(in_config)
        found.update(path for path in candidates if defines_tests(tree / path, functions, classes))
    return sorted(found), sorted(conftests)


def own_config(tree: Path) -> PytestSection | None:
    """The configuration pytest would read at the root of ``tree``, None when it cannot be
    read (pytest could not read it either)."""
    try:
        return find_config(tree, "the repository")
    except ConfigReadError:
        return None
