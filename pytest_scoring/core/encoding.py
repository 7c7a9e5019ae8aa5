"""How the report's JSON files are written: readable, and quick to write for a large suite.

Objects are indented by two spaces, one key per line; each item of a list takes one line of
its own, written compactly (one test, one row, one signal per line). That reads as well as
``json.dumps(indent=2)`` and is easy to grep, and it lets the standard library's C encoder
write each item: a plain ``indent=2`` goes through the pure-Python encoder, which took three
times as long for the 5,000 tests of a session's ``scores.json`` (issue 17).
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Callable
from collections.abc import Iterable
from collections.abc import Iterator
from itertools import repeat
from json.encoder import c_make_encoder  # type: ignore[attr-defined]
from json.encoder import encode_basestring_ascii
from typing import Any
from typing import Final

#: One value on one line; ``str`` of what JSON cannot hold; NaN allowed (Inspect writes it
#: for unscored values); anything but ASCII escaped, so characters are bytes. A document
#: that holds itself ends in ``RecursionError``, as a too deeply nested one does.
_ONE_LINE: Final = json.JSONEncoder(default=str, check_circular=False)
_INDENT: Final = "  "


def _lines_encoder() -> Callable[[Iterable[Any]], Iterator[str]]:
    """What gives each value's one-line text: :data:`_ONE_LINE`'s, with the C encoder made
    once when Python has one, and called by ``map`` with no Python function per value.

    ``JSONEncoder.encode`` builds a new C encoder for every call: for the thousands of one-line
    items of a large report that doubled the time of the encoding itself (issue 17).
    """
    if c_make_encoder is None:
        return lambda values: map(_ONE_LINE.encode, values)
    encoder = c_make_encoder(
        None, str, encode_basestring_ascii, None, ": ", ", ", False, False, True
    )
    return lambda values: map("".join, map(encoder, values, repeat(0)))


_encode_lines: Final = _lines_encoder()


def _encode_line(value: Any) -> str:
    """One value's one-line text (a key, a scalar: the few values that are not list items)."""
    return next(_encode_lines((value,)))


def encode_json(content: Any) -> str:
    """The JSON text of a report file (ends with a newline).

    :raises TypeError: for an object whose keys JSON cannot hold.
    :raises RecursionError: for a document that holds itself or is nested deeper than
        Python's recursion limit.
    """
    parts: list[str] = []
    _encode(content, "\n", parts)
    parts.append("\n")
    return "".join(parts)


def _encode(value: Any, newline: str, parts: list[str]) -> None:
    """Append ``value``'s text to ``parts``; ``newline`` ends a line at its depth."""
    inner = newline + _INDENT
    if isinstance(value, dict) and value and all(isinstance(key, str) for key in value):
        separator = "{" + inner
        for key, item in value.items():
            parts += (separator, _encode_line(key), ": ")
            _encode(item, inner, parts)
            separator = "," + inner
        parts.append(newline + "}")
    elif isinstance(value, list | tuple) and value:
        items = ("," + inner).join(_encode_lines(value))
        parts.append(f"[{inner}{items}{newline}]")
    else:  # a scalar, an empty container, or an object with keys JSON converts
        parts.append(_encode_line(value))


def json_digest(content: Any) -> str:
    """SHA-256 of a JSON value in canonical form (sorted keys, no spaces): the same value
    hashes the same wherever it was written (provenance, the evaluator's cache entries)."""
    text = json.dumps(content, sort_keys=True, separators=(",", ":"), default=str)
    return hashlib.sha256(text.encode("utf-8", "surrogatepass")).hexdigest()
