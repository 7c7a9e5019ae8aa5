"""Control Arena-style fixtures files: one entry's ``scorer:`` block as the configuration.

A fixtures file holds a ``fixtures:`` table of named entries; an entry may have a ``scorer:``
block (one scorer table, or a list of them) beside keys for the sandbox it runs in.
``--score-config fixtures.yaml#NAME`` loads the ``scorer:`` block of entry ``NAME`` as if it
were a configuration file's ``scorers`` (docs/configuration.md). Nothing is misread silently:

* an entry without ``scorer:`` is an error that lists the entries having one;
* a ``#{…}`` variable (filled in by Control Arena, never here) is an error naming its key
  path, and so is one that YAML took for the start of a comment (leaving the value empty);
* the entry's other keys (``sandbox:``) are not used, and the session header says so.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from typing import Final
from typing import final

from pytest_scoring.errors import ConfigError

#: How a Control Arena fixture variable starts.
VARIABLE: Final = "#{"


@final
@dataclass(frozen=True)
class ChosenFixture:
    """The scorer entries of one fixture, ready to be checked like a configuration's."""

    #: ``fixtures.yaml#NAME``: how messages name the fixture.
    source: str
    #: Each scorer table with its key path (``fixtures.yaml#NAME: scorer``).
    entries: list[tuple[str, Any]]
    #: The file's top-level ``paths:`` table, if any.
    paths: Any
    #: Keys of the entry that are not used.
    notes: list[str]


def _strings(value: Any, path: str) -> Iterator[tuple[str, str]]:
    """Every string in ``value`` (keys included) with its key path."""
    pending = [(value, path)]
    while pending:
        item, where = pending.pop()
        if isinstance(item, str):
            yield item, where
        elif isinstance(item, dict):
            for key, child in item.items():
                yield str(key), f"{where}.{key}"
                pending.append((child, f"{where}.{key}"))
        elif isinstance(item, list):
            pending.extend((child, f"{where}[{index}]") for index, child in enumerate(item))


def _refuse_variables(block: Any, where: str) -> None:
    for text, path in _strings(block, where):
        if VARIABLE in text:
            raise ConfigError(
                f"{path}: {text!r} holds a fixture variable #{{…}}, which pytest-scoring does not "
                "fill in; write the value itself"
            )


def _commented_variable_line(text: str, name: str) -> int | None:
    """The line (1-based) of a ``#{`` in the YAML of fixture ``name``'s ``scorer:`` block,
    where YAML read it as a comment (no string holds one: :func:`_refuse_variables` ran first)."""
    import yaml  # type: ignore[import-untyped]

    root = yaml.compose(text, Loader=yaml.SafeLoader)
    node = _child(_child(_child(root, "fixtures"), name), "scorer")
    if node is None:
        return None
    lines = text.splitlines()
    end = node.end_mark  # a block ends where the next key starts: that line is not the block's
    last = end.line if end.column == 0 else end.line + 1
    for number in range(node.start_mark.line, min(last, len(lines))):
        if VARIABLE in lines[number]:
            return number + 1
    return None


def _child(node: Any, key: str) -> Any:
    """The value node under ``key`` of a YAML mapping node (``None`` when there is none)."""
    for key_node, value_node in getattr(node, "value", None) or []:
        if getattr(key_node, "value", None) == key and hasattr(value_node, "start_mark"):
            return value_node
    return None


def _fixture_entry(document: Any, source: str, name: str) -> dict[str, Any]:
    fixtures = document.get("fixtures") if isinstance(document, dict) else None
    where = f"{source}#{name}"
    if not isinstance(fixtures, dict):
        raise ConfigError(f"{where}: {source} has no 'fixtures:' table of named entries")
    if name not in fixtures:
        known = ", ".join(map(str, list(fixtures)[:10])) or "none"
        raise ConfigError(f"{where}: no fixture named {name!r} (fixtures: {known})")
    entry = fixtures[name]
    if not isinstance(entry, dict) or entry.get("scorer") is None:
        having = [
            str(key)
            for key, item in fixtures.items()
            if isinstance(item, dict) and item.get("scorer")
        ]
        listed = ", ".join(having[:10]) or "none"
        raise ConfigError(
            f"{where}: this fixture has no scorer: block (fixtures with one: {listed})"
        )
    return entry


def fixture_scorers(document: Any, text: str, path: Path, name: str) -> ChosenFixture:
    """The ``scorer:`` block of fixture ``name`` in a parsed fixtures file.

    :param text: the file's text (to find a ``#{…}`` YAML took for a comment).
    :raises ConfigError: naming ``FILE#NAME`` and the key path of the first problem.
    """
    source = f"{path.name}#{name}"
    entry = _fixture_entry(document, path.name, name)
    block = entry["scorer"]
    where = f"{source}: scorer"
    _refuse_variables(block, where)
    if path.suffix.lower() in (".yaml", ".yml"):
        line = _commented_variable_line(text, name)
        if line is not None:
            raise ConfigError(
                f"{where}: line {line}: an unquoted #{{…}} fixture variable, which YAML reads as "
                "a comment (the value is left empty); pytest-scoring does not fill variables in: "
                "write the value itself"
            )
    entries = (
        [(f"{where}[{index}]", raw) for index, raw in enumerate(block)]
        if isinstance(block, list)
        else [(where, block)]
    )
    notes = [
        f"{source}: {key}: not used (pytest-scoring runs every scorer here, in no sandbox; "
        "sandbox paths are mapped with --score-path-map or 'paths:')"
        for key in entry
        if key != "scorer"
    ]
    paths = document.get("paths") if isinstance(document, dict) else None
    return ChosenFixture(source, entries, paths, notes)
