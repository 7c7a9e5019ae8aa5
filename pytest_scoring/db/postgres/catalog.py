"""Reading a PostgreSQL database's catalog and rows: tables (per partition), keys, UNIQUE
constraints, sequences, and rows as diff values (:mod:`~pytest_scoring.db.postgres.values`)."""

from __future__ import annotations

from collections.abc import Iterator
from collections.abc import Sequence
from typing import TYPE_CHECKING
from typing import Any
from typing import Final
from typing import NamedTuple
from typing import final

import psycopg
from psycopg import sql

from pytest_scoring.core.encoding import json_digest
from pytest_scoring.db.diff_types import ColumnJSON
from pytest_scoring.db.postgres.values import KIND_SQL
from pytest_scoring.db.postgres.values import as_text
from pytest_scoring.db.postgres.values import converters
from pytest_scoring.db.postgres.values import select_list

if TYPE_CHECKING:
    from pytest_scoring.core.budget import TimeBudget

#: Rows fetched from the server per round trip.
_BATCH: Final = 2000
#: Schemas that are the system's, never the application's.
_SYSTEM_SCHEMAS: Final = "n.nspname NOT IN ('pg_catalog', 'information_schema') " \
    "AND n.nspname NOT LIKE 'pg\\_toast%' AND n.nspname NOT LIKE 'pg\\_temp\\_%'"  # fmt: skip


@final
class PgTable(NamedTuple):
    """One ordinary table (or partition) as the diff names and reads it."""

    #: The diff's table name: ``name`` in schema ``public``, else ``schema.name``.
    name: str
    schema: str
    relname: str
    columns: tuple[ColumnJSON, ...]
    #: How each column is read (a key of :data:`~pytest_scoring.db.postgres.values.READERS`).
    kinds: tuple[str, ...]
    #: Each column's (base) type, as the server sends its values.
    oids: tuple[int, ...]
    primary_key: tuple[str, ...]
    #: UNIQUE constraints and indexes (no expression, not partial), fewest columns first.
    unique: tuple[tuple[str, ...], ...]

    def column_names(self) -> list[str]:
        return [column["name"] for column in self.columns]

    def kind(self, column: str) -> str:
        return self.kinds[self.column_names().index(column)]


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
        + KIND_SQL
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


def rows(
    connection: psycopg.Connection[Any],
    table: PgTable,
    budget: TimeBudget | None = None,
    where: tuple[sql.Composable, Sequence[Any]] | None = None,
) -> Iterator[Sequence[Any]]:
    """Every row of ``table`` as diff values, streamed by a server-side cursor.

    ``connection`` must be inside a transaction (the cursor lives in it). Only the columns
    whose values need it are converted: most tables' rows pass as psycopg loads them.

    :param budget: checked after each batch.
    :param where: only the rows this condition gives, with its parameters.
    """
    select = select_list(list(zip(table.column_names(), table.kinds, strict=True)))
    query = sql.SQL("SELECT {} FROM ONLY {}.{}").format(
        select, sql.Identifier(table.schema), sql.Identifier(table.relname)
    )
    if where is not None:
        query += sql.SQL(" WHERE {}").format(where[0])
    converted = converters(table.kinds)
    with connection.cursor(name="pytest_scoring_rows") as cursor:
        as_text(cursor, table.kinds, table.oids)
        cursor.execute(query, None if where is None else where[1])
        while batch := cursor.fetchmany(_BATCH):
            if budget is not None:
                budget.check()
            if not converted:
                yield from batch
                continue
            for row in batch:
                values = list(row)
                for number, convert in converted:
                    if values[number] is not None:
                        values[number] = convert(values[number])
                yield values


def state_digest(connection: psycopg.Connection[Any]) -> str:
    """SHA-256 of what tells a database's state apart without reading a table: each table's
    columns, and each sequence's last value (docs/databases.md#postgresql)."""
    found = {name: list(table.columns) for name, table in tables(connection).items()}
    return json_digest({"tables": found, "sequences": sequences(connection)})
