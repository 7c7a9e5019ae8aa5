"""JSON, YAML and TOML documents read with bounded size, nesting and node count.

Selectors, configuration files and the files ``match`` reads may come from anywhere (a
diff written by a scored repository's tests, a fixtures file copied from elsewhere), so a
document that is too large, nested too deeply, or expands (YAML aliases) into too many values
is a one-line error naming the file: never a parser's ``RecursionError``, a traceback, or
memory running out. The limits are documented in docs/configuration.md.
"""

from __future__ import annotations

import json
import os
import stat
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any
from typing import Final

from pytest_scoring.errors import ScoringError

#: Largest selector or configuration file read, in bytes.
MAX_DOCUMENT_BYTES: Final = 16 * 1024 * 1024
#: Deepest nesting of objects and lists accepted (a selector needs far fewer levels).
MAX_NESTING: Final = 100
#: Most values a YAML document may hold once its aliases are expanded (a few lines of aliases
#: can stand for billions of values; other formats are bounded by their size).
MAX_VALUES: Final = 1_000_000
#: What ``-`` stands for: standard input.
STDIN: Final = "-"


class DocumentError(ScoringError):
    """A document cannot be read or parsed, or is past a limit (names the file)."""


def label(source: str) -> str:
    """How messages name a source: the path, or ``<stdin>``."""
    return "<stdin>" if source == STDIN else source


def read_bytes(source: str, limit: int = MAX_DOCUMENT_BYTES, regular_only: bool = False) -> bytes:
    """At most ``limit`` bytes of file ``source`` (``-``: standard input).

    :param regular_only: refuse a named file that is a device, a FIFO or a folder, before
        reading anything. It is opened non-blocking and checked with ``fstat``, so a FIFO
        nobody writes to cannot make the caller wait (``pytest-scoring match``, issue 12).
    :raises DocumentError: when it cannot be read, is no regular file (``regular_only``) or
        is larger than ``limit``.
    """
    try:
        if source == STDIN:
            data = sys.stdin.buffer.read(limit + 1)
        elif regular_only:
            data = _read_regular(source, limit + 1)
        else:
            with Path(source).open("rb") as stream:
                data = stream.read(limit + 1)
    except OSError as error:
        raise DocumentError(f"{label(source)}: cannot read: {error.strerror or error}") from None
    if len(data) > limit:
        raise DocumentError(f"{label(source)}: larger than {limit:,} bytes, the most read")
    return data


def _read_regular(source: str, size: int) -> bytes:
    """At most ``size`` bytes of ``source`` when it is a regular file."""
    descriptor = os.open(source, os.O_RDONLY | os.O_NONBLOCK)
    with os.fdopen(descriptor, "rb") as stream:
        kind = _not_regular(os.fstat(descriptor).st_mode)
        if kind is not None:
            raise DocumentError(f"{source}: cannot read {kind}: give a JSON file or '-'")
        return stream.read(size)


def _not_regular(mode: int) -> str | None:
    """What a file that is no regular file is (``None`` for a regular file)."""
    if stat.S_ISREG(mode):
        return None
    if stat.S_ISFIFO(mode):
        return "a FIFO"
    if stat.S_ISDIR(mode):
        return "a folder"
    if stat.S_ISCHR(mode) or stat.S_ISBLK(mode):
        return "a device"
    return "a special file"


def decode(data: bytes, source: str) -> str:
    """``data`` as UTF-8 text.

    :raises DocumentError: naming ``source`` when it is not UTF-8.
    """
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as error:
        raise DocumentError(f"{label(source)}: not UTF-8 text (byte {error.start})") from None


def read_document(source: str, limit: int = MAX_DOCUMENT_BYTES, regular_only: bool = False) -> str:
    """The text of file ``source`` (``-``: standard input), at most ``limit`` bytes."""
    return decode(read_bytes(source, limit, regular_only), source)


def check_shape(document: Any, source: str, max_values: int | None = None) -> Any:
    """``document`` when it nests at most :data:`MAX_NESTING` levels and holds at most
    ``max_values`` values (a value shared by YAML aliases counts each time it is reached).

    :raises DocumentError: naming ``source`` otherwise.
    """
    pending: list[tuple[Any, int]] = [(document, 0)]
    values = 0
    while pending:
        value, depth = pending.pop()
        values += 1
        if max_values is not None and values > max_values:
            raise DocumentError(f"{label(source)}: more than {max_values:,} values")
        if depth > MAX_NESTING:
            raise DocumentError(f"{label(source)}: nested deeper than {MAX_NESTING} levels")
        children = value.values() if isinstance(value, dict) else value
        if isinstance(value, dict | list):
            pending.extend((child, depth + 1) for child in children)
    return document


def _bounded(
    parse: Callable[[str], Any], text: str, source: str, max_values: int | None = None
) -> Any:
    """Run a parser and check the shape of what it built; a parser's own recursion running
    out (deeper than Python's stack) is the same nesting error."""
    try:
        return check_shape(parse(text), source, max_values)
    except RecursionError:
        raise DocumentError(f"{label(source)}: nested deeper than {MAX_NESTING} levels") from None


def parse_json(text: str, source: str) -> Any:
    """Parse JSON text.

    :raises DocumentError: naming ``source``, with line and column, or the limit passed.
    """
    try:
        return _bounded(json.loads, text, source)
    except json.JSONDecodeError as error:
        raise DocumentError(
            f"{label(source)}: not valid JSON ({error.msg} at line {error.lineno}, "
            f"column {error.colno})"
        ) from None
    except ValueError as error:  # an integer of more than 4,300 digits
        raise DocumentError(f"{label(source)}: not valid JSON ({error})") from None


def parse_yaml(text: str, source: str) -> Any:
    """Parse YAML text with ``safe_load`` (tags never build Python objects).

    :raises DocumentError: naming ``source``, with line and column, or the limit passed.
    """
    import yaml  # type: ignore[import-untyped]

    try:
        return _bounded(yaml.safe_load, text, source, MAX_VALUES)
    except yaml.YAMLError as error:
        mark = getattr(error, "problem_mark", None)
        where = f" at line {mark.line + 1}, column {mark.column + 1}" if mark else ""
        problem = getattr(error, "problem", None) or "cannot be parsed"
        raise DocumentError(f"{label(source)}: invalid YAML{where}: {problem}") from None
    except ValueError as error:
        raise DocumentError(f"{label(source)}: invalid YAML: {error}") from None


def parse_toml(text: str, source: str) -> Any:
    """Parse TOML text.

    :raises DocumentError: naming ``source`` and the problem, or the limit passed.
    """
    import tomllib

    try:
        return _bounded(tomllib.loads, text, source)
    except ValueError as error:  # TOMLDecodeError is a ValueError
        raise DocumentError(f"{label(source)}: invalid TOML: {error}") from None


#: The parser of each file extension the configuration accepts.
PARSERS: Final[dict[str, Callable[[str, str], Any]]] = {
    ".json": parse_json,
    ".yaml": parse_yaml,
    ".yml": parse_yaml,
    ".toml": parse_toml,
}
