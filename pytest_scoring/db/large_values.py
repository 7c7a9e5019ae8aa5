"""Values too large to read whole: compared and reported by a stub, hashed in chunks.

A scored repository may store a value of a gigabyte. Read whole it would cost the evaluator
that much memory (twice: before and after), and more to encode. So the diff's connections let
SQLite materialise no value past :data:`LARGE_VALUE` (an error, never the memory), and a
table holding such a value is read through a guard: a text or BLOB past :data:`LARGE_VALUE`
bytes is replaced, inside SQL, by its stub, computed by incremental BLOB I/O in chunks:
``{"$truncated": bytes, "sha256": hex, "head": …}`` (the stub of
:func:`~pytest_scoring.core.score.cap_value`). Two large values compare equal when their
stubs do (type, size, hash and head). The guard costs a Python call per text value, so it is
paid only where a large value is: a diff that receives its rows as they come (no row may be
given twice) asks SQLite's ``dbstat`` first, which reads no value; the others diff the table
unguarded and again, guarded, when SQLite refuses a value.

A value past :data:`LARGE_VALUE` in a key or UNIQUE column, or in a WITHOUT ROWID table (no
rowid to read it by), makes SQLite refuse the guarded pass too: the database gets an error.
"""

from __future__ import annotations

import base64
import hashlib
import json
import secrets
import sqlite3
from functools import lru_cache
from functools import partial
from typing import Any
from typing import Final

from pytest_scoring.core.score import DEFAULT_VALUE_CAP
from pytest_scoring.db.schema import Table
from pytest_scoring.db.schema import quote

#: Values longer than this many bytes are never read whole (SQLite refuses them on the diff's
#: connections): the diff holds their stub.
LARGE_VALUE: Final = 16 * 1024 * 1024
#: Why a database with a value past the limit where no stub can stand for it was not diffed.
UNREADABLE_VALUE: Final = (
    "a value larger than 16 MiB in a key, a UNIQUE column or a WITHOUT ROWID table "
    "(string or blob too big): not read"
)
#: Bytes hashed per read of a large value.
CHUNK: Final = 1024 * 1024
#: Starts a stub's JSON in SQL text: random per process, so no stored text can pass for one.
_MARK: Final = f"stub-{secrets.token_hex(16)}:"
#: Names a rowid table may read its rowid by (a column of that name hides it).
_ROWID_NAMES: Final = ("rowid", "_rowid_", "oid")


def limit_values(connection: sqlite3.Connection) -> None:
    """Make SQLite refuse, rather than hold, any value past :data:`LARGE_VALUE`."""
    connection.setlimit(sqlite3.SQLITE_LIMIT_LENGTH, LARGE_VALUE)


def too_large(error: sqlite3.Error) -> bool:
    """Whether SQLite refused a value past its limit (``SQLITE_TOOBIG``)."""
    return getattr(error, "sqlite_errorname", None) == "SQLITE_TOOBIG"


def stub_of(value: str) -> dict[str, Any] | None:
    """The stub a guarded value stands for; ``None`` for any other text."""
    if value.startswith(_MARK):
        stub: dict[str, Any] = json.loads(value[len(_MARK) :])
        return stub
    return None


def _largest_record(connection: sqlite3.Connection, table: Table) -> int:
    """The size of the table's largest record, from its pages (no value is read); a
    connection without ``dbstat`` counts every table as large."""
    try:
        row = connection.execute(
            "SELECT mx_payload FROM dbstat(?, 1) WHERE name = ?", (table.schema, table.name)
        ).fetchone()
    except sqlite3.OperationalError:
        return LARGE_VALUE + 1
    return int(row[0] or 0) if row else 0


def guard(connection: sqlite3.Connection, table: Table | None, known: bool = False) -> Table | None:
    """``table``, guarded when it holds a record past :data:`LARGE_VALUE` (each column's
    reader registered on ``connection``); as it is otherwise.

    :param known: SQLite refused one of its values already: no need to ask ``dbstat``.
    """
    if table is None or table.without_rowid:
        return table
    if not known and _largest_record(connection, table) <= LARGE_VALUE:
        return table
    names = {name.lower() for name in table.column_names()}
    rowid = next((name for name in _ROWID_NAMES if name not in names), None)
    if rowid is None:
        return table
    for number, column in enumerate(table.column_names()):
        read = lru_cache(maxsize=8)(partial(_stub_text, connection, table, column))
        connection.create_function(reader(table, number), 2, read)
    return table._replace(large_by=rowid)


def reader(table: Table, number: int) -> str:
    """The SQL function that gives column ``number``'s stub (ours: no stored name in it)."""
    return f"large_{'b' if table.schema == 'b' else 'a'}_{number}"


def guarded(table: Table, alias: str, column: str) -> str:
    """SQL for a column of a guarded table: its value, or its stub when past the size."""
    value = f"{alias}.{quote(column)}"
    number = table.column_names().index(column)
    stub = f"{reader(table, number)}({alias}.{table.large_by}, typeof({value}))"
    return (
        f"CASE WHEN typeof({value}) NOT IN ('text', 'blob') THEN {value} "
        f"ELSE coalesce({stub}, {value}) END"
    )


def _stub_text(
    connection: sqlite3.Connection, table: Table, column: str, rowid: int, kind: str
) -> str | None:
    """A large value's stub as marked SQL text; ``None`` for a value small enough to read."""
    try:
        blob = connection.blobopen(table.name, column, rowid, readonly=True, name=table.schema)
    except sqlite3.Error:
        return None  # read whole, or refused by SQLite's limit: an error, not the memory
    with blob:
        size = len(blob)
        if size <= LARGE_VALUE:
            return None
        head = blob.read(DEFAULT_VALUE_CAP)
        digest = hashlib.sha256(head)
        while chunk := blob.read(CHUNK):
            digest.update(chunk)
    shown: Any = (
        head.decode("utf-8", "ignore")
        if kind == "text"
        else {"$blob": base64.b64encode(head).decode("ascii")}
    )
    stub = {"$truncated": size, "sha256": digest.hexdigest(), "head": shown}
    return _MARK + json.dumps(stub)
