"""A tree's pytest configuration, as pytest finds it at the tree's root (docs/security.md).

pytest 9 looks in a folder for ``pytest.toml``, ``.pytest.toml``, ``pytest.ini``,
``.pytest.ini``, ``pyproject.toml``, ``tox.ini`` and ``setup.cfg``, in that order, and reads the
first that holds a pytest section (the four files of pytest's own always count, even empty).
``run --tests-from PATH`` reads PATH's that way, writes its pytest section alone into a file of
the evaluator's at the copy's root and gives it to the child with ``-c``, so that no
configuration file of the scored repository is read, whatever its name or format; the
repository's files stay as they are. A section is read with the parsers pytest uses (its own
INI parser, TOML) and rendered as text in one canonical way, which is what comparisons diff
(``tests_modified``: for ``pyproject.toml``, ``tox.ini`` and ``setup.cfg`` only that section
counts) and what the evaluator's file holds.
"""

from __future__ import annotations

import datetime
import json
import re
import shlex
from collections.abc import Mapping
from dataclasses import dataclass
from dataclasses import field
from pathlib import Path
from typing import Any
from typing import Final
from typing import Literal

from pytest_scoring.documents import parse_toml
from pytest_scoring.documents import read_document
from pytest_scoring.errors import ScoringError
from pytest_scoring.fs.copy import is_regular_file

#: The files pytest 9 reads its configuration from, in the order it looks for them.
CONFIG_FILES: Final = (
    "pytest.toml",
    ".pytest.toml",
    "pytest.ini",
    ".pytest.ini",
    "pyproject.toml",
    "tox.ini",
    "setup.cfg",
)
#: Files that hold pytest's configuration and nothing else: they count even without a section.
PYTEST_ONLY: Final = frozenset({"pytest.toml", ".pytest.toml", "pytest.ini", ".pytest.ini"})
#: pytest's defaults for the settings that decide which files and names are tests.
DEFAULTS: Final[Mapping[str, tuple[str, ...]]] = {
    "python_files": ("test_*.py", "*_test.py"),
    "python_classes": ("Test",),
    "python_functions": ("test",),
    "testpaths": (),
    "norecursedirs": (
        "*.egg",
        ".*",
        "_darcs",
        "build",
        "CVS",
        "dist",
        "node_modules",
        "venv",
        "{arch}",
    ),
}
_BARE_KEY: Final = re.compile(r"[A-Za-z0-9_-]+")

Mode = Literal["ini", "toml"]


class ConfigReadError(ScoringError):
    """A configuration file that pytest could not read either (names the file)."""


@dataclass(frozen=True)
class PytestSection:
    """The pytest section of one configuration file."""

    #: The file's name, relative to the tree's root.
    file: str
    #: The section as the file names it (``[tool.pytest.ini_options]``), empty when a file of
    #: pytest's own has none.
    section: str
    #: ``ini``: values are text (or lists of text, from ``ini_options``); ``toml``: native.
    mode: Mode
    values: dict[str, Any] = field(default_factory=dict)

    def label(self) -> str:
        """How messages and the report name it: ``pyproject.toml [tool.pytest.ini_options]``."""
        return f"{self.file} {self.section}" if self.section else self.file

    def words(self, name: str) -> list[str]:
        """An ``args`` setting (``python_files``, ``testpaths``…) as a list; pytest's default
        when the section does not set it."""
        if name not in self.values:
            return list(DEFAULTS.get(name, ()))
        value = self.values[name]
        if isinstance(value, list):
            return [str(item) for item in value]
        return shlex.split(str(value))

    def text(self) -> str:
        """The section rendered canonically: what comparisons diff."""
        return _render(self.mode, self._table(), self.values)

    def _table(self) -> str:
        if self.mode == "toml":
            return "tool.pytest"
        return "tool.pytest.ini_options" if self.file == "pyproject.toml" else "pytest"

    def config_file(self) -> tuple[str, str]:
        """The suffix and text of a file ``pytest -c`` reads as this section, in every pytest
        from 7 on (``[pytest]`` in an INI file; ``[tool.pytest…]`` in a TOML one)."""
        suffix = ".ini" if self._table() == "pytest" else ".toml"
        return suffix, self.text()


#: The configuration of a tree that has none: an empty ``[pytest]`` section.
EMPTY: Final = PytestSection(file="", section="", mode="ini")


def read_section(path: Path, name: str) -> PytestSection | None:
    """The pytest section of the file ``path`` (named ``name`` at the tree's root), or None
    when it has none (a ``pyproject.toml`` of project metadata only).

    :raises ConfigReadError: when the file cannot be read or parsed.
    """
    try:
        text = read_document(str(path))
    except ScoringError as error:
        raise ConfigReadError(str(error)) from None
    if name.endswith(".toml"):
        return _toml_section(text, name)
    return _ini_section(text, name)


def _ini_section(text: str, name: str) -> PytestSection | None:
    import iniconfig  # pytest's own INI parser: what the child's pytest reads

    try:
        parsed = iniconfig.IniConfig(name, data=text)
    except iniconfig.ParseError as error:
        raise ConfigReadError(f"{name}: {error}") from None
    wanted = "tool:pytest" if name == "setup.cfg" else "pytest"
    if wanted in parsed:
        return PytestSection(name, f"[{wanted}]", "ini", dict(parsed[wanted].items()))
    return PytestSection(name, "", "ini") if name in PYTEST_ONLY else None


def _toml_section(text: str, name: str) -> PytestSection | None:
    try:
        document = parse_toml(text, name)
    except ScoringError as error:
        raise ConfigReadError(str(error)) from None
    if name != "pyproject.toml":
        table = document.get("pytest")
        if not isinstance(table, dict):
            return PytestSection(name, "", "toml")
        return PytestSection(name, "[pytest]", "toml", dict(table))
    tool = document.get("tool")
    table = tool.get("pytest") if isinstance(tool, dict) else None
    if not isinstance(table, dict):
        return None
    native = {key: value for key, value in table.items() if key != "ini_options"}
    options = table.get("ini_options")
    if native and options is not None:
        raise ConfigReadError(f"{name}: both [tool.pytest] and [tool.pytest.ini_options]")
    if native or not isinstance(options, dict):
        return PytestSection(name, "[tool.pytest]", "toml", native)
    values = {
        key: value if isinstance(value, list) else str(value) for key, value in options.items()
    }
    return PytestSection(name, "[tool.pytest.ini_options]", "ini", values)


def tree_sections(tree: Path) -> list[tuple[str, PytestSection | ConfigReadError]]:
    """Every configuration file at the root of ``tree`` that holds a pytest section, by name,
    in pytest's order (the first is the one pytest reads); a file that cannot be read is there
    with its error."""
    sections: list[tuple[str, PytestSection | ConfigReadError]] = []
    for name in CONFIG_FILES:
        path = tree / name
        if not is_regular_file(path):
            continue
        try:
            section = read_section(path, name)
        except ConfigReadError as error:
            sections.append((name, error))
            continue
        if section is not None:
            sections.append((name, section))
    return sections


def find_config(tree: Path, what: str) -> PytestSection:
    """The configuration pytest reads at the root of ``tree`` (:data:`EMPTY` for none).

    :param what: how messages name the tree (``--tests-from``).
    :raises ConfigReadError: when that file cannot be read, naming ``what``.
    """
    for _name, section in tree_sections(tree):
        if isinstance(section, ConfigReadError):
            raise ConfigReadError(f"{what}: {section}")
        return section
    return EMPTY


# --- rendering ------------------------------------------------------------------------------


def _render(mode: Mode, table: str, values: Mapping[str, Any]) -> str:
    if table == "pytest":
        lines = ["[pytest]", *(_ini_line(key, value) for key, value in values.items())]
    else:
        lines = [
            f"[{table}]",
            *(f"{_toml_key(key)} = {_toml(value)}" for key, value in values.items()),
        ]
    return "\n".join(lines) + "\n"


def _ini_line(key: str, value: Any) -> str:
    """``key = value``, a value of several lines continued on indented lines."""
    first, *rest = str(value).split("\n")
    return "\n".join(
        [f"{key} = {first}".rstrip(), *(f"    {line}" for line in rest if line.strip())]
    )


def _toml_key(key: str) -> str:
    return key if _BARE_KEY.fullmatch(key) else _toml_string(key)


def _toml_string(text: str) -> str:
    # JSON escapes every character TOML needs escaped, but DEL.
    return json.dumps(text, ensure_ascii=False).replace("\x7f", "\\u007f")


def _toml(value: Any) -> str:
    """A value read from TOML, written back as TOML."""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int | float):
        text = repr(value)
        return {"nan": "nan", "inf": "inf", "-inf": "-inf"}.get(text, text)
    if isinstance(value, str):
        return _toml_string(value)
    if isinstance(value, list):
        return "[" + ", ".join(_toml(item) for item in value) + "]"
    if isinstance(value, dict):
        return "{" + ", ".join(f"{_toml_key(k)} = {_toml(v)}" for k, v in value.items()) + "}"
    if isinstance(value, datetime.date | datetime.time):
        return value.isoformat()
    return _toml_string(str(value))
