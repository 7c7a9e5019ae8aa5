"""How a column's values are read from PostgreSQL and stored for the diff (docs/databases.md).

Values are read in text form under pinned settings (:data:`PINNED`, set when the evaluator's
connection starts, so no statement runs before them), and mapped: integers and floats as
numbers, booleans as ``1``/``0`` (as SQLite stores them), ``numeric`` as text, ``bytea`` as a
BLOB, arrays, ``json`` and ``jsonb`` as JSON, everything else as its text.

The admin role is a superuser, and the application may own types: no read casts a value of
a type the application could own, nor calls a function on one (``CREATE CAST`` from its own
type would run its function as the superuser). Such values are read as their output function
writes them, arrays too, and parsed here.
"""

from __future__ import annotations

import json
import math
from collections.abc import Callable
from collections.abc import Sequence
from typing import Any
from typing import Final

import psycopg
from psycopg import sql
from psycopg.types.string import TextLoader

from pytest_scoring.db.row_sql import json_text

#: Session settings every connection of the evaluator starts with (issue 31).
PINNED: Final = (
    ("TimeZone", "UTC"),
    ("DateStyle", "ISO"),
    ("IntervalStyle", "iso_8601"),
    ("extra_float_digits", "3"),
    ("bytea_output", "hex"),
    ("lc_monetary", "C"),
    ("standard_conforming_strings", "on"),
    # As psycopg decodes them (a database's ``SQL_ASCII`` would send bytes, ``LATIN1`` fail),
    # and type names as the server writes them.
    ("client_encoding", "UTF8"),
    ("quote_all_identifiers", "off"),
    # Only the system's functions and operators: none of the application's can stand in.
    ("search_path", "pg_catalog"),
    # The admin role itself: the database's owner may ``ALTER DATABASE … SET role = app``,
    # which would make the evaluator read as the application (row level security applying).
    ("role", "none"),
    # A database's own timeouts (its owner sets them) must not fail the evaluator's reads;
    # a lock the application holds fails them after 10 s instead of blocking them for ever.
    ("statement_timeout", "0"),
    ("idle_in_transaction_session_timeout", "0"),
    ("lock_timeout", "10s"),
)

#: A column's kind from its base type ``b`` and, for an array, its element type ``e``:
#: only built-in types are read by a cast or a function.
KIND_SQL: Final = """
CASE
  WHEN b.typname IN ('int2', 'int4', 'int8', 'oid') THEN 'integer'
  WHEN b.typname IN ('float4', 'float8') THEN 'float'
  WHEN b.typname = 'bool' THEN 'boolean'
  WHEN b.typname = 'bytea' THEN 'bytea'
  WHEN b.typname IN ('json', 'jsonb') THEN 'json'
  WHEN b.typcategory = 'A' AND e.typname IN ('int2', 'int4', 'int8', 'oid', 'float4', 'float8',
       'bool') THEN 'number_array'
  WHEN b.typcategory = 'A' AND e.typdelim = ';' THEN 'array;'
  WHEN b.typcategory = 'A' THEN 'array,'
  ELSE 'text'
END"""


#: Settings pinned too where the server has them (the ``server_version_num`` they came in):
#: a database's owner could otherwise end the evaluator's sessions with them.
PINNED_SINCE: Final = (
    (140000, "idle_session_timeout", "0"),
    (170000, "transaction_timeout", "0"),
)


def connection_options(server_version: int = 0) -> str:
    """libpq's ``options``: :data:`PINNED` (and those of :data:`PINNED_SINCE` the server has)
    as the session starts (they take precedence over the role's and the database's own
    settings)."""
    since = [(name, value) for first, name, value in PINNED_SINCE if server_version >= first]
    return " ".join(f"-c {name}={value}" for name, value in (*PINNED, *since))


def parse_array(text: str, delimiter: str = ",") -> list[Any]:
    """An array as ``array_out`` writes it (``{a,"b c",NULL,{1}}``) as nested lists of the
    elements' texts (``None`` for NULL); bounds other than 1 (``[0:1]={…}``) are dropped."""
    if text.startswith("["):
        text = text[text.index("=") + 1 :]
    value, _end = _level(text, 0, delimiter)
    return value


def _level(text: str, at: int, delimiter: str) -> tuple[list[Any], int]:
    """The list whose ``{`` is at ``at``, and where it ends."""
    items: list[Any] = []
    at += 1
    if text[at] == "}":
        return items, at + 1
    while True:
        item: Any
        if text[at] == "{":
            item, at = _level(text, at, delimiter)
        elif text[at] == '"':
            at, chars = at + 1, []
            while text[at] != '"':
                at += text[at] == "\\"
                chars.append(text[at])
                at += 1
            item, at = "".join(chars), at + 1
        else:
            end = at
            while text[end] not in (delimiter, "}"):
                end += 1
            item = None if text[at:end].upper() == "NULL" else text[at:end]
            at = end
        items.append(item)
        if text[at] == "}":
            return items, at + 1
        at += 1


def _json(value: str) -> str:
    return json_text(value)


def _array(delimiter: str) -> Callable[[str], str]:
    def convert(value: str) -> str:
        return json_text(json.dumps(parse_array(value, delimiter), ensure_ascii=False))

    return convert


def _finite(value: float) -> float | str:
    """A float; one JSON has no number for as its text (``NaN``, ``Infinity``)."""
    if math.isfinite(value):
        return value
    return "NaN" if math.isnan(value) else ("Infinity" if value > 0 else "-Infinity")


#: How each kind is read: its SQL (built-in casts and functions only), and how its non-NULL
#: values are converted (``None``: stored as psycopg loads them).
READERS: Final[dict[str, tuple[str, Callable[[Any], Any] | None]]] = {
    "integer": ("{}", None),
    "float": ("{}", _finite),
    "boolean": ("{}::int", None),
    "bytea": ("{}", None),
    "json": ("{}::text", _json),
    "number_array": ("array_to_json({})::text", _json),
    "array,": ("{}", _array(",")),
    "array;": ("{}", _array(";")),
    # As the type's output function writes it (a ``::text`` cast would not: it drops
    # ``char(n)``'s padding and adds an ``inet``'s netmask), loaded as text (:func:`as_text`).
    "text": ("{}", None),
}
#: Kinds read as the text the server sends.
_TEXT: Final = frozenset({"text", "array,", "array;"})


def select_list(columns: Sequence[tuple[str, str]]) -> sql.Composable:
    """The SELECT list reading ``(name, kind)`` columns as the diff reads them."""
    return sql.SQL(", ").join(
        sql.SQL(READERS[kind][0]).format(sql.Identifier(name)) for name, kind in columns
    )


def as_text(cursor: psycopg.Cursor[Any], kinds: Sequence[str], oids: Sequence[int]) -> None:
    """Make ``cursor`` load the text-read columns' values as the text the server sent."""
    for kind, oid in zip(kinds, oids, strict=True):
        if kind in _TEXT:
            cursor.adapters.register_loader(oid, TextLoader)


def converters(kinds: Sequence[str]) -> list[tuple[int, Callable[[Any], Any]]]:
    """The columns whose values need converting, and how."""
    found = []
    for number, kind in enumerate(kinds):
        convert = READERS[kind][1]
        if convert is not None:
            found.append((number, convert))
    return found


def diff_values(row: Sequence[Any], kinds: Sequence[str]) -> list[Any]:
    """A row read by :func:`select_list` as the diff stores its values."""
    values = list(row)
    for number, convert in converters(kinds):
        if values[number] is not None:
            values[number] = convert(values[number])
    return values
