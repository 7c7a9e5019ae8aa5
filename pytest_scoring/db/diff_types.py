"""The diff's JSON shape as types (docs/databases.md#the-diff): what every engine produces.

These are ``TypedDict``s: a diff is built as plain dictionaries of these shapes and written
to JSON as it is, so the file format is the types and nothing converts between them. Every
engine fills the same shape; the keys one engine adds (``info.engine``, ``info.sequences``,
``info.real_path``) are ``NotRequired`` and absent from a SQLite database's entry.

A selector's view of a diff (:func:`pytest_scoring.db.diff.stream_cut_rows`, the
diff-of-diffs' parts) may hold a re-iterable stream of rows where the JSON holds a list:
:data:`RowList` names both.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any
from typing import Literal
from typing import NotRequired
from typing import TypedDict

#: A table's status in either plane.
TableStatus = Literal["added", "removed", "changed", "unchanged"]
#: The three row lists of a table, by the word in their names (``rows_added``, …).
RowKind = Literal["added", "removed", "changed"]
#: One row: column → value (text, number, ``None``, ``{"$blob": …}``, ``{"$truncated": …}``).
RowJSON = dict[str, Any]


class ColumnJSON(TypedDict):
    """A column in the schema plane."""

    name: str
    type: str
    nullable: bool
    primary_key: bool


#: A column whose definition changed (``from`` is a keyword, hence this spelling).
ColumnChange = TypedDict("ColumnChange", {"name": str, "from": ColumnJSON, "to": ColumnJSON})


class ValueChange(TypedDict):
    """One column of a changed row."""

    old_value: Any
    new_value: Any


class ChangedRowJSON(TypedDict):
    """An entry of ``rows_changed``."""

    #: The before row's key (``{"rowid": n}`` for a rowid pairing).
    key: dict[str, Any]
    changes: dict[str, ValueChange]
    #: The UNIQUE columns a removed and an added row were paired through.
    paired_by: NotRequired[list[str]]


#: A row list as the JSON holds it, or (for selectors only) a stream read afresh each time.
RowList = list[RowJSON] | Iterable[RowJSON]
ChangedList = list[ChangedRowJSON] | Iterable[ChangedRowJSON]


class RowCounts(TypedDict):
    """Exact counts of a table's row lists (the lists may keep fewer examples)."""

    added: int
    removed: int
    changed: int


class PairingJSON(TypedDict):
    """How the rows of a table on both sides paired."""

    key: list[str]
    unique: list[list[str]]


class DataTableJSON(TypedDict):
    """A table in the data plane."""

    status: TableStatus
    rows_added: RowList
    rows_removed: RowList
    rows_changed: ChangedList
    before_rows: int
    after_rows: int
    counts: RowCounts
    truncated: bool
    #: Only for a table present on both sides.
    pairing: NotRequired[PairingJSON]


class SchemaTableJSON(TypedDict):
    """A table in the schema plane."""

    status: TableStatus
    columns_added: list[ColumnJSON]
    columns_removed: list[ColumnJSON]
    columns_changed: list[ColumnChange]


class DataPlaneJSON(TypedDict):
    has_changes: bool
    tables: dict[str, DataTableJSON]


class SchemaPlaneJSON(TypedDict):
    has_changes: bool
    tables: dict[str, SchemaTableJSON]


class PlanesJSON(TypedDict):
    """A database's two planes."""

    data: DataPlaneJSON
    schema: SchemaPlaneJSON


class DatabaseInfo(TypedDict):
    """Where a database's two sides came from."""

    path_before: str
    path_after: str
    exists_before: bool
    exists_after: bool
    #: The sides that could not be read (``before``, ``after``), when any.
    unreadable: NotRequired[list[str]]
    #: Where a SQLite database reached through a symlink inside the repository lives.
    real_path: NotRequired[str]
    #: The engine, for every engine but SQLite (whose entries predate engines).
    engine: NotRequired[str]
    #: A server database's sequences at finish: name → last value (``None`` before its
    #: first ``nextval``; never rows).
    sequences: NotRequired[dict[str, int | None]]


class DatabaseEntryJSON(TypedDict):
    """One database of a diff: its planes and info, or an ``error`` with empty planes."""

    comparisons: PlanesJSON
    info: DatabaseInfo
    error: NotRequired[str]


class DiffJSON(TypedDict):
    """A whole diff: every database of both sides, by its name."""

    status: str
    before_source: str
    after_source: str
    db_patterns: list[str]
    comparisons: dict[str, DatabaseEntryJSON]


def empty_planes() -> PlanesJSON:
    """The planes of a database with nothing to compare (an error entry's)."""
    return {
        "data": {"has_changes": False, "tables": {}},
        "schema": {"has_changes": False, "tables": {}},
    }
