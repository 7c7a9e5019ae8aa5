"""The package's floors: no import climbs the order docs/architecture.md gives, none loops."""

from __future__ import annotations

import ast
import re
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
PACKAGE = ROOT / "pytest_scoring"


def floors() -> dict[str, int]:
    """Each floor's parts (``kit``, ``errors``…) and its height, from the architecture page."""
    page = (ROOT / "docs" / "architecture.md").read_text(encoding="utf-8")
    section = page.split("## Floors", 1)[1].split("\n## ", 1)[0]
    lines = re.findall(r"^(\d+)\. (.*)$", section, flags=re.MULTILINE)
    return {
        name.strip("/"): int(height)
        for height, text in lines
        for name in re.findall(r"`([\w/]+)`", text.split(" — ")[0])
    }


def part(module: str) -> str:
    """``pytest_scoring.db.diff`` → ``db``; the package's own ``__init__`` → ``pytest_scoring``."""
    return [*module.split("."), "pytest_scoring"][1]


def imports() -> dict[str, set[str]]:
    """Every module of the package and every module of it that it imports (lazy and
    ``TYPE_CHECKING`` imports included)."""
    found: dict[str, set[str]] = {}
    for path in PACKAGE.rglob("*.py"):
        name = ".".join(path.relative_to(ROOT).with_suffix("").parts).removesuffix(".__init__")
        targets = found.setdefault(name, set())
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.Import):
                targets.update(alias.name for alias in node.names)
            elif isinstance(node, ast.ImportFrom) and node.module:
                targets.update(f"{node.module}.{alias.name}" for alias in node.names)
        found[name] = {target for target in targets if target.startswith("pytest_scoring.")}
    return {name: {_module(target, found) for target in targets} for name, targets in found.items()}


def _module(target: str, modules: dict[str, set[str]]) -> str:
    """The module ``target`` names (``a.b.name`` → ``a.b`` when ``name`` is not a module)."""
    return target if target in modules else _module(target.rpartition(".")[0], modules)


def test_no_import_climbs_a_floor_or_crosses_to_a_neighbour() -> None:
    height = floors()
    height["pytest_scoring"] = max(height.values()) + 1  # the public API re-exports every floor
    wrong = [
        f"{source} imports {target}"
        for source, targets in imports().items()
        for target in targets
        if part(source) != part(target) and height[part(target)] >= height[part(source)]
    ]
    assert wrong == []


def test_every_part_of_the_package_stands_on_a_floor() -> None:
    assert {part(module) for module in imports()} - {"pytest_scoring"} <= set(floors())


def test_no_two_modules_import_each_other_even_through_others() -> None:
    graph = imports()
    for module in graph:
        reached, todo = set(), [t for t in graph[module] if not module.startswith(t + ".")]
        while todo:
            current = todo.pop()
            if current not in reached:
                reached.add(current)
                todo.extend(t for t in graph[current] if not current.startswith(t + "."))
        assert module not in reached, f"{module} imports itself through others"
