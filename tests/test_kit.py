"""The kit: what is copied into a child or a sandbox is one folder, and keeps its rules."""

from __future__ import annotations

import ast
import sys
from pathlib import Path

import pytest

from pytest_scoring.kit import FOLDER
from pytest_scoring.kit import kit_files
from pytest_scoring.process.children import ChildRunner

KIT_SOURCES = sorted(FOLDER.glob("*.py"))
#: What the kit may import when it runs, beside the standard library.
ALLOWED = {
    "pytest",
    "_pytest",  # pytest's own internals, whose constructors the probe watches
    "pluggy",  # pytest's hook machinery
    "bcrypt",  # patched only when the scored code has it (ImportError is expected)
}


def runtime_imports(tree: ast.Module) -> set[str]:
    """The modules a file imports when it runs (``if TYPE_CHECKING:`` blocks left out)."""
    found: set[str] = set()
    for node in tree.body:
        if isinstance(node, ast.If) and "TYPE_CHECKING" in ast.unparse(node.test):
            continue
        for inner in ast.walk(node):
            if isinstance(inner, ast.ImportFrom):
                found.add(inner.module or "")
            elif isinstance(inner, ast.Import):
                found.update(alias.name for alias in inner.names)
    return found


def every_import(tree: ast.Module) -> set[str]:
    """Every module a file names in an import, ``TYPE_CHECKING`` included."""
    found: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom):
            found.add(("." * node.level) + (node.module or ""))
        elif isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
    return found


@pytest.mark.parametrize("path", KIT_SOURCES, ids=lambda path: path.name)
def test_every_file_of_the_kit_is_python_3_8(path: Path) -> None:
    ast.parse(path.read_text(encoding="utf-8"), feature_version=(3, 8))


@pytest.mark.parametrize("path", KIT_SOURCES, ids=lambda path: path.name)
def test_no_file_of_the_kit_imports_pytest_scoring(path: Path) -> None:
    tree = ast.parse(path.read_text(encoding="utf-8"))
    ours = {name for name in every_import(tree) if name.startswith(("pytest_scoring", "."))}
    assert ours == set()


@pytest.mark.parametrize("path", KIT_SOURCES, ids=lambda path: path.name)
def test_the_kit_needs_only_the_standard_library_and_pytest(path: Path) -> None:
    tree = ast.parse(path.read_text(encoding="utf-8"))
    foreign = {name.split(".")[0] for name in runtime_imports(tree)}
    assert foreign - set(sys.stdlib_module_names) - ALLOWED == set()


def test_the_sandbox_helper_needs_only_the_standard_library() -> None:
    tree = ast.parse((FOLDER / "sandbox.py").read_text(encoding="utf-8"))
    foreign = {name.split(".")[0] for name in runtime_imports(tree)}
    assert foreign - set(sys.stdlib_module_names) == set()


def test_a_child_gets_every_file_of_the_kit_folder_and_nothing_else(tmp_path: Path) -> None:
    kit = ChildRunner(area=tmp_path).kit()
    copied = sorted(path.relative_to(kit).as_posix() for path in kit.rglob("*.py"))
    assert copied == sorted(kit_files())
    modules = [path for path in KIT_SOURCES if path.name != "__init__.py"]
    assert sorted(Path(name).name for name in copied) == sorted(
        f"_pytest_scoring_{path.name}" for path in modules
    )
    assert all((kit / name).read_bytes() == kit_files()[name].read_bytes() for name in copied)


@pytest.mark.parametrize(
    "path", [path for path in KIT_SOURCES if path.name != "__init__.py"], ids=lambda p: p.name
)
def test_pytest_never_rewrites_nor_warns_about_a_file_of_the_kit(path: Path) -> None:
    # A repository's ``filterwarnings = error`` turns pytest's "already imported, cannot be
    # rewritten" warning into an error that kills the child at start.
    docstring = ast.get_docstring(ast.parse(path.read_text(encoding="utf-8"))) or ""
    assert "PYTEST_DONT_REWRITE" in docstring
