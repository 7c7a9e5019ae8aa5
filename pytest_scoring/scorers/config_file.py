"""The scorer configuration file (docs/configuration.md): TOML, JSON or YAML -> checked scorers.

Every entry is checked against its type's registry entry (the factory's parameters, their
types and defaults: :mod:`~pytest_scoring.scorers.scorer_type`) before any scorer is built,
so a typo is a one-line :class:`ConfigError` naming the file and key path
(``scores.yaml: scorers[2].formula: …``) before any test runs.
"""

from __future__ import annotations

import collections.abc
import difflib
import inspect
import json
import keyword
import re
import types
import typing
from collections.abc import Mapping
from dataclasses import dataclass
from dataclasses import field
from pathlib import Path
from typing import Any
from typing import Final
from typing import final

from pytest_scoring.core.determinism import env_assignments
from pytest_scoring.documents import PARSERS
from pytest_scoring.documents import DocumentError
from pytest_scoring.documents import read_document
from pytest_scoring.errors import ConfigError
from pytest_scoring.errors import OptionError
from pytest_scoring.errors import ScoringError
from pytest_scoring.scorers.base import Scorer
from pytest_scoring.scorers.fixture_file import fixture_scorers
from pytest_scoring.scorers.registry import ALIAS_SUFFIX
from pytest_scoring.scorers.registry import resolve_type
from pytest_scoring.scorers.scorer_type import ScorerFactory
from pytest_scoring.scorers.scorer_type import ScorerType
from pytest_scoring.text import some_names

#: Scorer names become file names and formula variables: plain ASCII identifiers.
NAME_PATTERN: Final = re.compile(r"[A-Za-z_][A-Za-z0-9_]{0,99}")
#: Names a scorer may not take (``math`` is the formula language's module).
RESERVED_NAMES: Final = frozenset({"math"})
#: Keys of an entry that are not parameters of the factory.
ENTRY_KEYS: Final = ("type", "name", "detects")
#: Keys a configuration file may have at its top level.
TOP_LEVEL_KEYS: Final = ("scorers", "paths", "exclude", "env", "databases")
#: Keys of a ``databases:`` entry (``url`` is required).
DATABASE_KEYS: Final = ("url", "name", "admin_url", "env")
#: Most scorers a configuration may list: past it the file is refused before any is checked.
MAX_SCORERS: Final = 50_000
#: The composite type, whose ``scorers`` parameter names other entries.
COMPOSITE: Final = "composite"


def _read_text(path: Path) -> str:
    if path.suffix.lower() not in PARSERS:
        raise ConfigError(
            f"{path}: unknown extension {path.suffix.lower()!r} (use .toml, .json, .yaml or .yml)"
        )
    try:
        return read_document(str(path))
    except DocumentError as error:
        raise ConfigError(f"cannot read the scorer configuration {error}") from None


def parse_config_text(text: str, path: Path) -> Any:
    """Parse configuration text by the extension of ``path`` (messages name its file name)."""
    try:
        return PARSERS[path.suffix.lower()](text, path.name)
    except DocumentError as error:
        raise ConfigError(str(error)) from None


def _paths_table(raw: Any, source: str) -> dict[str, str]:
    """The ``paths:`` table: absolute sandbox paths to local folders (docs/configuration.md)."""
    if raw is None:
        return {}
    if not isinstance(raw, dict):
        raise ConfigError(f"{source}: paths: expected a table of sandbox path = local folder")
    for sandbox, local in raw.items():
        if not isinstance(sandbox, str) or not sandbox.startswith("/"):
            raise ConfigError(f"{source}: paths: {sandbox!r} is not an absolute sandbox path")
        if not isinstance(local, str) or not local:
            raise ConfigError(f"{source}: paths.{sandbox}: expected a local folder, got {local!r}")
    return dict(raw)


def _exclude_list(raw: Any, source: str) -> list[str]:
    """The ``exclude:`` list: folders left out of database discovery and the reference copy."""
    if raw is None:
        return []
    if not isinstance(raw, list) or not all(isinstance(item, str) and item for item in raw):
        raise ConfigError(f"{source}: exclude: expected a list of folders such as ['vendor']")
    return list(raw)


def _env_table(raw: Any, source: str) -> dict[str, str]:
    """The ``env:`` table: variables the children of ``run`` get over the pinned environment
    (docs/scoring.md#determinism)."""
    if raw is None:
        return {}
    if not isinstance(raw, dict) or not all(isinstance(value, str) for value in raw.values()):
        raise ConfigError(f'{source}: env: expected a table of NAME = "value" (text values)')
    try:
        return env_assignments((f"{name}={value}" for name, value in raw.items()), "env")
    except OptionError as error:
        raise ConfigError(f"{source}: {error}") from None


def _databases_list(raw: Any, source: str) -> list[dict[str, str]]:
    """The ``databases:`` list: server databases named by URL, each a table of text values
    (``url`` required; ``name``, ``admin_url``, ``env``), checked further where settings are
    made."""
    if raw is None:
        return []
    if not isinstance(raw, list):
        raise ConfigError(f"{source}: databases: expected a list of tables such as {{url: …}}")
    for index, entry in enumerate(raw):
        where = f"{source}: databases[{index}]"
        if not isinstance(entry, dict):
            raise ConfigError(f"{where}: expected a table such as {{url: …, name: …}}")
        unknown = sorted(set(entry) - set(DATABASE_KEYS))
        if unknown:
            expected = ", ".join(DATABASE_KEYS)
            raise ConfigError(f"{where}: unknown key {unknown[0]!r} (expected {expected})")
        if "url" not in entry:
            raise ConfigError(f"{where}: url: missing")
        for key, value in entry.items():
            if not isinstance(value, str) or not value:
                raise ConfigError(f"{where}.{key}: expected text, got {value!r}")
    return [dict(entry) for entry in raw]


def _entries(data: Any, source: str) -> list[tuple[str, Any]]:
    """The scorer entries, each with its key path: the ``scorers`` key, or the whole file
    when it is a list."""
    if isinstance(data, dict):
        if "fixtures" in data and "scorers" not in data:
            names = (
                ", ".join(list(map(str, data["fixtures"]))[:5])
                if isinstance(data["fixtures"], dict)
                else ""
            )
            raise ConfigError(
                f"{source}: a fixtures file: name one fixture, as in --score-config "
                f"{source}#NAME (fixtures: {names or 'none'})"
            )
        unknown = sorted(set(data) - set(TOP_LEVEL_KEYS))
        if unknown:
            expected = ", ".join(repr(key) for key in TOP_LEVEL_KEYS)
            raise ConfigError(f"{source}: unknown key {unknown[0]!r} (expected {expected})")
        data = data.get("scorers")
    if not isinstance(data, list) or not data:
        raise ConfigError(f"{source}: scorers: expected a non-empty list of scorer tables")
    return [(f"{source}: scorers[{index}]", raw) for index, raw in enumerate(data)]


def _type_label(hint: Any) -> str:
    """A readable name of an annotation (``list[str] | None`` -> ``list of string or null``)."""
    labels = {str: "string", int: "integer", float: "number", bool: "boolean", type(None): "null"}
    if hint in labels:
        return labels[hint]
    origin = typing.get_origin(hint)
    args = typing.get_args(hint)
    if origin in (typing.Union, types.UnionType):
        return " or ".join(_type_label(arg) for arg in args)
    if origin in (list, collections.abc.Sequence) and args:
        return f"list of {_type_label(args[0])}"
    if origin in (dict, collections.abc.Mapping) or hint is dict:
        return "table"
    return getattr(hint, "__name__", str(hint))


def matches_annotation(value: Any, hint: Any) -> bool:
    """Whether a configuration value fits a parameter's annotation (unknown kinds pass)."""
    if hint is Any or hint is inspect.Parameter.empty:
        return True
    if hint is type(None) or hint is None:
        return value is None
    if hint is bool:
        return isinstance(value, bool)
    if hint is int:
        return isinstance(value, int) and not isinstance(value, bool)
    if hint is float:
        return isinstance(value, int | float) and not isinstance(value, bool)
    if hint is str:
        return isinstance(value, str)
    return _matches_generic(value, hint)


def _matches_generic(value: Any, hint: Any) -> bool:
    origin = typing.get_origin(hint)
    args = typing.get_args(hint)
    if origin in (typing.Union, types.UnionType):
        return any(matches_annotation(value, arg) for arg in args)
    if origin is typing.Literal:
        return value in args
    if origin in (list, collections.abc.Sequence):
        items_fit = all(matches_annotation(item, args[0]) for item in value) if args else True
        return isinstance(value, list) and items_fit
    if origin in (dict, collections.abc.Mapping) or hint is dict:
        return isinstance(value, dict)
    if origin is collections.abc.Callable or hint is collections.abc.Callable:
        return False  # a configuration file cannot hold a function
    if isinstance(hint, type):  # a protocol (a Scorer object) cannot come from a file
        return not getattr(hint, "_is_protocol", False) and isinstance(value, hint)
    return True


def check_parameters(kind: ScorerType, params: Mapping[str, Any], where: str) -> None:
    """Reject unknown, missing or mistyped parameters, naming the key path.

    :param kind: the scorer type, whose parameters its registry entry describes.
    :param where: the entry's key path, such as ``scores.yaml: scorers[2]``.
    """
    accepted = {parameter.name: parameter for parameter in kind.parameters}
    for key in params:
        if key not in accepted and not kind.open_ended:
            names = ", ".join([*ENTRY_KEYS, *accepted]) or "none"
            raise ConfigError(f"{where}.{key}: unknown parameter (known: {names})")
    for name, parameter in accepted.items():
        if name not in params and parameter.required:
            raise ConfigError(f"{where}.{name}: missing required parameter")
    for key, value in params.items():
        found = accepted.get(key)
        hint = inspect.Parameter.empty if found is None else found.annotation
        if not matches_annotation(value, hint):
            shown = json.dumps(value, default=str)[:80]
            raise ConfigError(f"{where}.{key}: expected {_type_label(hint)}, got {shown}")


def _entry_name(entry: Mapping[str, Any], type_name: str, where: str) -> str:
    name = entry.get("name", type_name)
    if not isinstance(name, str) or not NAME_PATTERN.fullmatch(name):
        raise ConfigError(
            f"{where}.name: {name!r} must be an identifier (letters, digits, '_'; "
            "it names a file and a formula variable)"
        )
    if keyword.iskeyword(name) or name in RESERVED_NAMES:
        raise ConfigError(f"{where}.name: {name!r} is reserved")
    return name


class _Entry:
    """One checked configuration entry, not built yet."""

    __slots__ = ("detects", "factory", "name", "params", "type", "where")

    def __init__(
        self, name: str, type_name: str, factory: ScorerFactory, params: dict[str, Any], where: str
    ) -> None:
        self.name = name
        self.type = type_name
        self.factory = factory
        self.params = params
        self.where = where
        #: ``detects:`` as written (None: the type's default).
        self.detects: bool | None = None

    def references(self) -> list[str]:
        """Names of the entries a composite reads (checked as a list of strings already)."""
        return list(self.params.get("scorers", [])) if self.type == COMPOSITE else []


def _check_entry(
    raw: Any,
    where: str,
    types: Mapping[str, ScorerType],
    command_line: Mapping[str, Any],
) -> _Entry:
    """Check one entry against its type's registry entry."""
    if not isinstance(raw, dict):
        raise ConfigError(f"{where}: expected a table with 'type' and parameters")
    type_text = raw.get("type")
    if not isinstance(type_text, str):
        raise ConfigError(f"{where}.type: missing (one of {', '.join(sorted(types))})")
    type_name = resolve_type(type_text, types)
    if type_name is None:
        close = difflib.get_close_matches(type_text.removesuffix(ALIAS_SUFFIX), types, n=1)
        guess = f"did you mean {close[0]!r}? " if close else ""
        raise ConfigError(
            f"{where}.type: unknown scorer type {type_text!r} "
            f"({guess}known: {', '.join(sorted(types))})"
        )
    kind = types[type_name]
    accepted = {parameter.name for parameter in kind.parameters}
    if "sandbox" in raw and "sandbox" not in accepted:
        raise ConfigError(
            f"{where}.sandbox: pytest-scoring runs every scorer here, in no Inspect sandbox; "
            "remove this key and map sandbox paths with --score-path-map or 'paths:'"
        )
    # Parameters the entry leaves out but the command line gives (--score-selector…).
    params = {k: v for k, v in command_line.items() if k in accepted}
    params.update((key, value) for key, value in raw.items() if key not in ENTRY_KEYS)
    check_parameters(kind, params, where)
    entry = _Entry(_entry_name(raw, type_name, where), type_name, kind.factory, params, where)
    entry.detects = _detects(raw, where)
    return entry


def _detects(raw: Mapping[str, Any], where: str) -> bool | None:
    """``detects:``: the scorer's ``"C"`` is a finding (docs/configuration.md)."""
    detects = raw.get("detects")
    if detects is not None and not isinstance(detects, bool):
        raise ConfigError(f"{where}.detects: expected true or false, got {detects!r}")
    return detects


def _check_names(entries: list[_Entry]) -> dict[str, _Entry]:
    by_name: dict[str, _Entry] = {}
    for entry in entries:
        if entry.name in by_name:
            first = by_name[entry.name].where.rsplit(": ", 1)[-1]
            raise ConfigError(
                f"{entry.where}.name: duplicate scorer name {entry.name!r} (also {first}); "
                "give one of them another 'name'"
            )
        by_name[entry.name] = entry
    for entry in entries:
        for position, reference in enumerate(entry.references()):
            if reference not in by_name or reference == entry.name:
                known = some_names(n for n in by_name if n != entry.name)
                raise ConfigError(
                    f"{entry.where}.scorers[{position}]: {reference!r} is not another scorer "
                    f"of this file (known: {known})"
                )
    return by_name


def _build_order(entries: list[_Entry], by_name: Mapping[str, _Entry]) -> list[_Entry]:
    """The entries with each composite after the scorers it reads; rejects cycles.

    A depth-first walk with a stack of its own: a chain of 20,000 composites each reading the
    next is as deep as it is long, past any recursion limit.
    """
    order: list[_Entry] = []
    state: dict[str, str] = {}
    for root in entries:
        stack = [(root, iter(root.references()))]
        if state.get(root.name) == "done":
            continue
        state[root.name] = "visiting"
        while stack:
            entry, pending = stack[-1]
            reference = next(pending, None)
            if reference is None:
                stack.pop()
                state[entry.name] = "done"
                order.append(entry)
                continue
            child = by_name[reference]
            if state.get(child.name) == "visiting":
                raise ConfigError(f"{child.where}.scorers: composites read each other in a cycle")
            if state.get(child.name) != "done":
                state[child.name] = "visiting"
                stack.append((child, iter(child.references())))
    return order


def _build(entry: _Entry, built: Mapping[str, Scorer]) -> Scorer:
    params = dict(entry.params)
    if entry.type == COMPOSITE:
        params["scorers"] = [built[name] for name in entry.references()]
    try:
        scorer = entry.factory(**params)
    except ScoringError as error:
        raise ConfigError(f"{entry.where}.{error}") from None
    except (TypeError, ValueError) as error:
        raise ConfigError(f"{entry.where}: {error}") from None
    if not isinstance(scorer, Scorer):
        raise ConfigError(
            f"{entry.where}: type {entry.type!r} built {type(scorer).__name__}, not a scorer "
            "(needs name, type, metrics and score(context))"
        )
    scorer.name = entry.name
    if entry.detects is not None:
        try:
            scorer.detects = entry.detects  # type: ignore[attr-defined]
        except AttributeError:
            raise ConfigError(
                f"{entry.where}.detects: type {entry.type!r} cannot be made a detector"
            ) from None
    return scorer


def _build_all(
    entries: list[tuple[str, Any]],
    types: Mapping[str, ScorerType],
    command_line: Mapping[str, Any] | None,
) -> list[Scorer]:
    if len(entries) > MAX_SCORERS:
        where = entries[MAX_SCORERS][0]
        raise ConfigError(f"{where}: more than {MAX_SCORERS:,} scorers, the most a file may list")
    checked = [_check_entry(raw, where, types, command_line or {}) for where, raw in entries]
    by_name = _check_names(checked)
    built: dict[str, Scorer] = {}
    for entry in _build_order(checked, by_name):
        built[entry.name] = _build(entry, built)
    return list(built.values())


def scorers_from_data(
    data: Any,
    source: str,
    types: Mapping[str, ScorerType],
    command_line: Mapping[str, Any] | None = None,
) -> list[Scorer]:
    """Check every entry of a parsed configuration, then build the scorers.

    :param source: the file name, first part of every error's key path.
    :param types: the scorer types by name (:func:`~pytest_scoring.scorers.registry.scorer_types`).
    :param command_line: values for parameters that entries leave out (``selector``…).
    :returns: the scorers in run order (each composite after the scorers it reads).
    :raises ConfigError: naming the file and key path of the first problem.
    """
    return _build_all(_entries(data, source), types, command_line)


@final
@dataclass(frozen=True)
class Configuration:
    """What a configuration file (or one fixture of a fixtures file) gives the session."""

    scorers: list[Scorer]
    #: The ``paths:`` table: sandbox paths and the local folders they stand for (as written).
    paths: dict[str, str] = field(default_factory=dict)
    #: Parts of a fixture read but not used (its ``sandbox:`` block), for the session header.
    notes: list[str] = field(default_factory=list)
    #: The ``exclude:`` list: folders left out of discovery and the reference copy (as written).
    exclude: list[str] = field(default_factory=list)
    #: The ``env:`` table: variables over the pinned environment of ``run``'s children.
    env: dict[str, str] = field(default_factory=dict)
    #: The ``databases:`` list: server databases, each as written (``${VAR}`` unresolved).
    databases: list[dict[str, str]] = field(default_factory=list)


def load_configuration(
    path: Path,
    types: Mapping[str, ScorerType],
    command_line: Mapping[str, Any] | None = None,
    fixture: str | None = None,
) -> Configuration:
    """The scorers (and ``paths:``) a configuration file describes; with ``fixture``, the
    ``scorer:`` block of that entry of a fixtures file
    (:mod:`~pytest_scoring.scorers.fixture_file`).

    :raises ConfigError: naming the file and key path of the first problem.
    """
    text = _read_text(path)
    document = parse_config_text(text, path)
    if fixture is not None:
        chosen = fixture_scorers(document, text, path, fixture)
        scorers = _build_all(chosen.entries, types, command_line)
        return Configuration(scorers, _paths_table(chosen.paths, chosen.source), chosen.notes)
    top = document if isinstance(document, dict) else {}
    scorers = _build_all(_entries(document, path.name), types, command_line)
    return Configuration(
        scorers,
        _paths_table(top.get("paths"), path.name),
        exclude=_exclude_list(top.get("exclude"), path.name),
        env=_env_table(top.get("env"), path.name),
        databases=_databases_list(top.get("databases"), path.name),
    )


def load_config(
    path: Path,
    types: Mapping[str, ScorerType],
    command_line: Mapping[str, Any] | None = None,
) -> list[Scorer]:
    """The scorers a configuration file describes (see :func:`scorers_from_data`)."""
    return load_configuration(path, types, command_line).scorers
