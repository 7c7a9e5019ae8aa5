"""Reading a PostgreSQL database: its tables, keys, sequences, and rows as diff values.

Values are read in text form under pinned settings (:data:`PINNED`), so the same data reads
the same whoever set the server's defaults, and mapped as docs/databases.md says: integers
and floats as numbers, booleans as ``1``/``0`` (as SQLite stores them), ``numeric`` as text,
``bytea`` as a BLOB, arrays, ``json`` and ``jsonb`` as JSON, everything else as its text.
"""

from __future__ import annotations

import math
from collections.abc import Iterator
from collections.abc import Sequence
from typing import TYPE_CHECKING
from typing import Any
from typing import Final
from typing import NamedTuple
from typing import final

import psycopg
from psycopg import sql
from psycopg.types.string import TextLoader

from pytest_scoring.db.diff_types import ColumnJSON
from pytest_scoring.db.row_sql import json_text

if TYPE_CHECKING:
    from pytest_scoring.core.budget import TimeBudget

#: Session settings every read runs under (issue 31).
PINNED: Final = (
    ("TimeZone", "UTC"),
    ("DateStyle", "ISO"),
    ("IntervalStyle", "iso_8601"),
    ("extra_float_digits", "3"),
    ("bytea_output", "hex"),
    ("search_path", "pg_catalog"),
)
#: Rows fetched from the server per round trip.
_BATCH: Final = 2000
#: Schemas that are the system's, never the application's.
_SYSTEM_SCHEMAS: Final = "n.nspname NOT IN ('pg_catalog', 'information_schema') " \
    "AND n.nspname NOT LIKE 'pg\\_toast%' AND n.nspname NOT LIKE 'pg\\_temp\\_%'"  # fmt: skip

#: How a column is read: its SQL, and whether its value is JSON text.
_READERS: Final = {
    "integer": ("{}", False),
    "float": ("{}", False),
    "boolean": ("{}::int", False),
    "bytea": ("{}", False),
    "json": ("{}::text", True),
    "number_array": ("array_to_json({})::text", True),
    "array": ("array_to_json({}::text[])::text", True),
    # Read as the type's output function writes it (a ``::text`` cast would not: it drops
    # ``char(n)``'s padding and adds an ``inet``'s netmask), loaded as text (:func:`cursor`).
    "text": ("{}", False),
}
#: Column kind from the base type's name (``_kind`` in SQL below): everything else is text.
_KIND_SQL: Final = """
CASE
  WHEN b.typname IN ('int2', 'int4', 'int8', 'oid') THEN 'integer'
  WHEN b.typname IN ('float4', 'float8') THEN 'float'
  WHEN b.typname = 'bool' THEN 'boolean'
  WHEN b.typname = 'bytea' THEN 'bytea'
  WHEN b.typname IN ('json', 'jsonb') THEN 'json'
  WHEN b.typcategory = 'A' AND e.typname IN ('int2', 'int4', 'int8', 'oid', 'float4', 'float8',
       'bool') THEN 'number_array'
  WHEN b.typcategory = 'A' THEN 'array'
  ELSE 'text'
END"""


@final
class PgTable(NamedTuple):
    """One ordinary table (or partition) as the diff names and reads it."""

    #: The diff's table name: ``name`` in schema ``public``, else ``schema.name``.
    name: str
    schema: str
    relname: str
    columns: tuple[ColumnJSON, ...]
    #: How each column is read (a key of :data:`_READERS`).
    kinds: tuple[str, ...]
    #: Each column's (base) type, as the server sends its values.
    oids: tuple[int, ...]
    primary_key: tuple[str, ...]
    #: UNIQUE constraints and indexes (no expression, not partial), fewest columns first.
    unique: tuple[tuple[str, ...], ...]

    def column_names(self) -> list[str]:
        return [column["name"] for column in self.columns]


def pin(connection: psycopg.Connection[Any]) -> None:
    """Set :data:`PINNED` on ``connection``."""
    for name, value in PINNED:
        connection.execute("SELECT set_config(%s, %s, false)", (name, value))


def diff_name(schema: str, relname: str) -> str:
    """A table's (or sequence's) name in the diff: ``name`` in schema ``public``, else
    ``schema.name``; both quoted (``"schema"."name"``) when either holds a ``.`` or a ``"``,
    so that no two tables share a name (a table ``"billing.events"`` in ``public`` cannot
    stand in for ``billing.events``)."""
    if any(mark in part for part in (schema, relname) for mark in '."'):
        return ".".join('"' + part.replace('"', '""') + '"' for part in (schema, relname))
    return relname if schema == "public" else f"{schema}.{relname}"


def tables(connection: psycopg.Connection[Any]) -> dict[str, PgTable]:
    """Every ordinary table and partition (partitioned parents, views and foreign tables are
    not), by diff name."""
    rows = connection.execute(
        "SELECT c.oid, n.nspname, c.relname FROM pg_class c "
        "JOIN pg_namespace n ON n.oid = c.relnamespace "
        f"WHERE c.relkind = 'r' AND {_SYSTEM_SCHEMAS} ORDER BY 2, 3"
    ).fetchall()
    found = {}
    for oid, schema, relname in rows:
        table = _table(connection, oid, schema, relname)
        found[table.name] = table
    return found


def _table(connection: psycopg.Connection[Any], oid: int, schema: str, relname: str) -> PgTable:
    columns = connection.execute(
        "SELECT a.attname, format_type(a.atttypid, a.atttypmod), a.attnotnull, b.oid, "
        + _KIND_SQL
        + " FROM pg_attribute a JOIN pg_type t ON t.oid = a.atttypid "
        "JOIN pg_type b ON b.oid = CASE WHEN t.typtype = 'd' THEN t.typbasetype ELSE t.oid END "
        "LEFT JOIN pg_type e ON e.oid = b.typelem AND b.typcategory = 'A' "
        "WHERE a.attrelid = %s AND a.attnum > 0 AND NOT a.attisdropped ORDER BY a.attnum",
        (oid,),
    ).fetchall()
    keys = connection.execute(
        "SELECT i.indisprimary, i.indnkeyatts, c.relname, "
        "ARRAY(SELECT a.attname FROM unnest(i.indkey[0:i.indnkeyatts - 1]) WITH ORDINALITY "
        "AS k(num, ord) JOIN pg_attribute a ON a.attrelid = i.indrelid AND a.attnum = k.num "
        "ORDER BY k.ord) "
        "FROM pg_index i JOIN pg_class c ON c.oid = i.indexrelid WHERE i.indrelid = %s "
        "AND i.indisunique AND i.indpred IS NULL AND i.indexprs IS NULL AND 0 <> ALL(i.indkey) "
        "ORDER BY i.indisprimary DESC, i.indnkeyatts, c.relname",
        (oid,),
    ).fetchall()
    primary = next((tuple(cols) for is_pk, _n, _name, cols in keys if is_pk), ())
    unique = tuple(dict.fromkeys(tuple(cols) for is_pk, _n, _name, cols in keys if not is_pk))
    return PgTable(
        name=diff_name(schema, relname),
        schema=schema,
        relname=relname,
        columns=tuple(
            ColumnJSON(name=name, type=kind, nullable=not notnull, primary_key=name in primary)
            for name, kind, notnull, _oid, _reader in columns
        ),
        kinds=tuple(reader for *_rest, reader in columns),
        oids=tuple(oid for *_rest, oid, _reader in columns),
        primary_key=primary,
        unique=tuple(u for u in unique if set(u) != set(primary)),
    )


def sequences(connection: psycopg.Connection[Any]) -> dict[str, int | None]:
    """Each sequence's last value (``None`` before its first ``nextval``), by diff name."""
    rows = connection.execute(
        "SELECT schemaname, sequencename, last_value FROM pg_sequences ORDER BY 1, 2"
    ).fetchall()
    return {diff_name(schema, name): value for schema, name, value in rows}


def select_list(columns: Sequence[tuple[str, str]]) -> sql.Composable:
    """The SELECT list reading ``(name, kind)`` columns as the diff reads them."""
    return sql.SQL(", ").join(
        sql.SQL(_READERS[kind][0]).format(sql.Identifier(name)) for name, kind in columns
    )


def as_text(cursor: psycopg.Cursor[Any], kinds: Sequence[str], oids: Sequence[int]) -> None:
    """Make ``cursor`` load the text-read columns' values as the text the server sent."""
    for kind, oid in zip(kinds, oids, strict=True):
        if kind == "text":
            cursor.adapters.register_loader(oid, TextLoader)


def diff_values(row: Sequence[Any], kinds: Sequence[str]) -> tuple[Any, ...]:
    """A row read by :func:`select_list` as the diff stores its values."""
    return tuple(_value(value, _READERS[kind][1]) for value, kind in zip(row, kinds, strict=True))


#: Kinds whose values the diff stores otherwise than psycopg loads them.
_CONVERTED: Final = frozenset({"float", "json", "number_array", "array"})


def rows(
    connection: psycopg.Connection[Any], table: PgTable, budget: TimeBudget | None = None
) -> Iterator[Sequence[Any]]:
    """Every row of ``table`` as diff values, streamed by a server-side cursor.

    ``connection`` must be inside a transaction (the cursor lives in it). Only the columns
    whose values need it are converted: most tables' rows pass as psycopg loads them.

    :param budget: checked after each batch.
    """
    select = select_list(list(zip(table.column_names(), table.kinds, strict=True)))
    query = sql.SQL("SELECT {} FROM {}.{}").format(
        select, sql.Identifier(table.schema), sql.Identifier(table.relname)
    )
    converted = [
        (number, _READERS[kind][1]) for number, kind in enumerate(table.kinds) if kind in _CONVERTED
    ]
    with connection.cursor(name="pytest_scoring_rows") as cursor:
        as_text(cursor, table.kinds, table.oids)
        cursor.execute(query)
        while batch := cursor.fetchmany(_BATCH):
            if budget is not None:
                budget.check()
            if not converted:
                yield from batch
                continue
            for row in batch:
                values = list(row)
                for number, is_json in converted:
                    values[number] = _value(values[number], is_json)
                yield values


def _value(value: Any, is_json: bool) -> Any:
    """A value as the diff stores it: JSON text marked, a float that JSON has no number for
    (``NaN``, ``Infinity``) as its text."""
    if value is None:
        return None
    if is_json:
        return json_text(value)
    if isinstance(value, float) and not math.isfinite(value):
        return "NaN" if math.isnan(value) else ("Infinity" if value > 0 else "-Infinity")
    return value
