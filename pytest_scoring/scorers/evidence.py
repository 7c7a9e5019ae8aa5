"""What decided a database verdict: the change a selector matched, named (issue 29).

A verdict says more than ``C``: it names the database, the table, the row's key and a few
columns that tell which row it is, and each changed column's value before and after. The
change is found by narrowing the diff the selector saw (one database, then one table, then
one row) for as long as the selector still matches the narrower diff; with no selector, or
for a verdict that matched nothing, it is the first change there is. The phrase goes into
the score's explanation (one sentence, about 200 characters at most), the whole into its
metadata (``evidence``), which the page shows in full.
"""

from __future__ import annotations

import itertools
import re
import sqlite3
from collections.abc import Callable
from collections.abc import Iterable
from collections.abc import Iterator
from collections.abc import Mapping
from dataclasses import dataclass
from dataclasses import field
from typing import Any
from typing import Final

from pytest_scoring.core.budget import SelectorTimeout
from pytest_scoring.core.score import DEFAULT_VALUE_CAP
from pytest_scoring.core.score import cap_values
from pytest_scoring.db.diff_types import DatabaseEntryJSON
from pytest_scoring.db.diff_types import DataPlaneJSON
from pytest_scoring.db.diff_types import DataTableJSON
from pytest_scoring.db.diff_types import DiffJSON
from pytest_scoring.db.diff_types import PlanesJSON
from pytest_scoring.db.diff_types import RowKind
from pytest_scoring.db.diff_types import SchemaTableJSON
from pytest_scoring.db.engine import RowReader
from pytest_scoring.errors import DatabaseError
from pytest_scoring.text import plural

#: Rows of one list the search narrows (a table with more is named, not its row).
ROW_SEARCH: Final = 2048
#: Characters of one value in the explanation (the metadata keeps it whole, capped).
VALUE_WIDTH: Final = 24
#: Columns besides the key that say which row it is.
IDENTITY_COLUMNS: Final = 2
#: Changed columns named in the explanation (the metadata keeps them all).
CHANGES_NAMED: Final = 3
#: Longest explanation a verdict's sentence aims at (the phrase gives way to fit).
SENTENCE_WIDTH: Final = 200
#: Column names whose values never identify a row in a sentence: they may be secrets.
SECRET: Final = re.compile(r"pass|hash|salt|secret|token|key|otp|credential|cookie|auth", re.I)
_ROW_KINDS: Final[tuple[RowKind, ...]] = ("changed", "added", "removed")

#: Whether a narrowed diff still gives the verdict.
Matcher = Callable[[DiffJSON], bool]


@dataclass
class Evidence:
    """One change that decided a verdict, as narrow as the search could make it."""

    database: str
    table: str | None = None
    #: The table's status (``added``, ``removed``, ``changed``), when a table was found.
    status: str | None = None
    #: ``changed``, ``added`` or ``removed`` for one row; ``schema`` for the table's columns;
    #: None when the search stopped at the table or the database.
    change: str | None = None
    key: dict[str, Any] | None = None
    #: ``{column: {"old_value", "new_value"}}`` of a changed row.
    changes: dict[str, Any] | None = None
    #: Columns besides the key that say which row it is.
    identity: dict[str, Any] = field(default_factory=dict)
    #: The table's schema change (``columns_added``/``removed``/``changed``), for ``schema``.
    schema: dict[str, Any] | None = None

    def to_json(self, value_cap: int = DEFAULT_VALUE_CAP) -> dict[str, Any]:
        """The score's ``metadata.evidence``: every part found, values capped."""
        found = {
            "database": self.database,
            "table": self.table,
            "table_status": self.status,
            "change": self.change,
            "key": self.key,
            "identity": self.identity or None,
            "changes": self.changes,
            "schema": self.schema,
        }
        capped: dict[str, Any] = cap_values(
            {name: part for name, part in found.items() if part is not None}, value_cap
        )
        return capped

    def phrase(self, width: int = SENTENCE_WIDTH) -> str:
        """``users.db, table users, row id=1 (username 'admin'): role 'user' → 'admin'``, in
        at most ``width`` characters (the columns naming the row give way first)."""
        place = self._place()
        if self.change in _ROW_KINDS:
            text = f"{place}, row {self._row(with_identity=True)}{self._what()}"
            if len(text) > width:
                text = f"{place}, row {self._row(with_identity=False)}{self._what()}"
        elif self.change == "schema":
            text = f"{place}: {_schema_text(self.schema or {})}"
        else:
            text = place
        return text if len(text) <= width else text[: max(width - 1, 0)] + "…"

    def _place(self) -> str:
        if self.table is None:
            return self.database
        status = f" ({self.status})" if self.status in ("added", "removed") else ""
        return f"{self.database}, table {self.table}{status}"

    def _row(self, with_identity: bool) -> str:
        key = ", ".join(f"{name}={_short(value)}" for name, value in (self.key or {}).items())
        if not with_identity or not self.identity:
            return key or "?"
        named = ", ".join(f"{name} {_short(value)}" for name, value in self.identity.items())
        return f"{key} ({named})" if key else named

    def _what(self) -> str:
        if self.change != "changed":
            return f" {self.change}"
        changes = list((self.changes or {}).items())
        shown = [
            f"{column} {_short(change.get('old_value'))} → {_short(change.get('new_value'))}"
            for column, change in changes[:CHANGES_NAMED]
        ]
        more = len(changes) - CHANGES_NAMED
        return ": " + "; ".join(shown) + (f"; {more} more column(s)" if more > 0 else "")


def find_evidence(
    diff: DiffJSON,
    matches: Matcher | None,
    read_row: RowReader | None = None,
    mentioned: frozenset[str] = frozenset(),
) -> Evidence | None:
    """The narrowest change of ``diff`` for which ``matches`` still holds (with ``matches``
    None: the first change); None when there is none, or the search ran out of time.

    :param read_row: reads a changed row's other columns (None: only its key is known).
    :param mentioned: names the selector uses, preferred as the columns naming a row.
    """
    try:
        found = _search(diff, matches or _changed, matched=matches is not None)
    except (SelectorTimeout, DatabaseError, sqlite3.Error):
        return None  # the verdict stands; only its evidence is lost
    if found is not None and found.change == "changed" and read_row is not None:
        found.identity = _read_identity(found, read_row, mentioned)
    return found


def mentioned_names(selector_source: object) -> frozenset[str]:
    """Every text in a selector (keys and values): the columns it names are among them."""
    if isinstance(selector_source, str):
        return frozenset([selector_source])
    if isinstance(selector_source, Mapping):
        items: Iterator[object] = itertools.chain(selector_source, selector_source.values())
    elif isinstance(selector_source, list):
        items = iter(selector_source)
    else:
        return frozenset()
    return frozenset().union(*(mentioned_names(item) for item in items))


# --- narrowing ---------------------------------------------------------------------------


def _search(diff: DiffJSON, matches: Matcher, matched: bool) -> Evidence | None:
    """The narrowest change that still matches.

    :param matched: ``diff`` as a whole is known to match. A selector matches per database,
        so a diff of one database then needs no second look at that level (a selector over
        millions of rows is not evaluated twice).
    """
    databases = diff["comparisons"]
    for name, entry in databases.items():
        if (matched and len(databases) == 1) or matches(_with_entry(diff, name, entry)):
            return _in_database(diff, name, entry, matches)
    return None


def _in_database(diff: DiffJSON, name: str, entry: DatabaseEntryJSON, matches: Matcher) -> Evidence:
    data = entry["comparisons"]["data"]["tables"]
    schema = entry["comparisons"]["schema"]["tables"]
    changed = [
        table
        for table in dict.fromkeys([*data, *schema])
        if _status(data.get(table)) != "unchanged" or _status(schema.get(table)) != "unchanged"
    ]
    for table in changed:
        rows, columns = data.get(table), schema.get(table)
        narrowed = _only_table(entry, table)
        # The only changed table is the one to name; its rows are still tested one by one.
        if len(changed) == 1 or matches(_with_entry(diff, name, narrowed)):
            found = Evidence(name, table, _status(rows) if rows else _status(columns))
            return _in_table(
                found, rows, columns, _table_matcher(diff, name, narrowed, table, matches)
            )
    return Evidence(name)


def _table_matcher(
    diff: DiffJSON, name: str, narrowed: DatabaseEntryJSON, table: str, matches: Matcher
) -> Callable[[DataTableJSON], bool]:
    """Whether the diff holding only ``narrowed``'s table ``table``, with other rows, matches."""

    def with_rows(rows: DataTableJSON) -> bool:
        return matches(_with_entry(diff, name, _replace_table(narrowed, table, rows)))

    return with_rows


def _in_table(
    found: Evidence,
    rows: DataTableJSON | None,
    columns: SchemaTableJSON | None,
    matches: Callable[[DataTableJSON], bool],
) -> Evidence:
    """One row of the table that still matches alone, else the table's schema change."""
    in_rows = None if rows is None else _in_rows(found, rows, matches)
    if in_rows is not None:
        return in_rows
    if columns is not None and _status(columns) != "unchanged":
        found.change, found.schema = "schema", _schema_part(columns)
    return found


def _in_rows(
    found: Evidence, rows: DataTableJSON, matches: Callable[[DataTableJSON], bool]
) -> Evidence | None:
    """One row that still matches alone; ``found`` when the selector needs rows of both
    halves together (``$count``…); None when no list of rows matches."""
    for kind in _ROW_KINDS:
        candidates = list(itertools.islice(_row_list(rows, kind), ROW_SEARCH))

        def alone(chosen: list[Any], kind: RowKind = kind) -> bool:
            return matches(_with_rows(rows, kind, chosen))

        if not candidates or not alone(candidates):
            continue
        while len(candidates) > 1:
            half = len(candidates) // 2
            if alone(candidates[:half]):
                candidates = candidates[:half]
            elif alone(candidates[half:]):
                candidates = candidates[half:]
            else:
                return found
        return _row_evidence(found, kind, candidates[0])
    return None


def _row_list(table: DataTableJSON, kind: RowKind) -> Iterable[Any]:
    """The table's ``rows_<kind>`` (a list, or a stream for selectors)."""
    if kind == "changed":
        return table["rows_changed"]
    return table["rows_added"] if kind == "added" else table["rows_removed"]


def _changed(diff: DiffJSON) -> bool:
    """Whether a (narrowed) diff holds any change: the search's rule without a selector."""
    for entry in diff["comparisons"].values():
        planes = entry["comparisons"]
        for table in planes["data"]["tables"].values():
            if any(_row_list(table, kind) for kind in _ROW_KINDS):
                return True
        if any(_status(table) != "unchanged" for table in planes["schema"]["tables"].values()):
            return True
    return False


def _row_evidence(found: Evidence, kind: str, row: Any) -> Evidence:
    found.change = kind
    if kind == "changed":
        row = _mapping(row)
        found.key = dict(_mapping(row.get("key")))
        found.changes = dict(_mapping(row.get("changes")))
        return found
    # An added or removed row is all there: its first column (usually its key) and a few
    # others that are not secrets say which it is.
    values = list(_mapping(row).items())
    if values:
        found.key = dict(values[:1])
        found.identity = _identifying(dict(values[1:]), frozenset())
    return found


def _with_entry(diff: DiffJSON, name: str, entry: DatabaseEntryJSON) -> DiffJSON:
    return {**diff, "comparisons": {name: entry}}


def _only_table(entry: DatabaseEntryJSON, name: str) -> DatabaseEntryJSON:
    """``entry`` with every plane holding ``name`` alone."""
    planes = entry["comparisons"]
    data, schema = planes["data"]["tables"], planes["schema"]["tables"]
    kept_data = {name: data[name]} if name in data else {}
    kept_schema = {name: schema[name]} if name in schema else {}
    narrowed: PlanesJSON = {
        "data": {"has_changes": _any_changed(kept_data.values()), "tables": kept_data},
        "schema": {"has_changes": _any_changed(kept_schema.values()), "tables": kept_schema},
    }
    return {**entry, "comparisons": narrowed}


def _any_changed(tables: Iterable[DataTableJSON] | Iterable[SchemaTableJSON]) -> bool:
    return any(_status(table) != "unchanged" for table in tables)


def _replace_table(entry: DatabaseEntryJSON, name: str, table: DataTableJSON) -> DatabaseEntryJSON:
    planes = entry["comparisons"]
    data: DataPlaneJSON = {**planes["data"], "tables": {**planes["data"]["tables"], name: table}}
    return {**entry, "comparisons": {**planes, "data": data}}


def _with_rows(table: DataTableJSON, kind: RowKind, rows: list[Any]) -> DataTableJSON:
    """The table holding ``rows`` as its only ``kind`` rows, its counts to match."""
    return {
        **table,
        "rows_added": rows if kind == "added" else [],
        "rows_removed": rows if kind == "removed" else [],
        "rows_changed": rows if kind == "changed" else [],
        "counts": {
            "added": len(rows) if kind == "added" else 0,
            "removed": len(rows) if kind == "removed" else 0,
            "changed": len(rows) if kind == "changed" else 0,
        },
        "truncated": False,
    }


def _status(table: DataTableJSON | SchemaTableJSON | None) -> str:
    return "unchanged" if table is None else table["status"]


def _mapping(value: object) -> Mapping[str, Any]:
    return value if isinstance(value, Mapping) else {}


def _schema_part(columns: SchemaTableJSON) -> dict[str, Any]:
    lists = {
        "columns_added": columns["columns_added"],
        "columns_removed": columns["columns_removed"],
        "columns_changed": columns["columns_changed"],
    }
    return {name: listed for name, listed in lists.items() if listed}


def _schema_text(schema: Mapping[str, Any]) -> str:
    parts = []
    for kind in ("added", "removed", "changed"):
        found = schema.get(f"columns_{kind}") or []
        names = [str(_mapping(column).get("name", "?")) for column in found]
        if names:
            parts.append(f"{plural(len(names), 'column')} {kind} ({', '.join(names[:3])})")
    return "; ".join(parts) or "schema changed"


# --- which row it is ---------------------------------------------------------------------


def _read_identity(found: Evidence, read: RowReader, mentioned: frozenset[str]) -> dict[str, Any]:
    """A few columns of the changed row, read from the database's final state.

    Neither the key nor the changed columns are read (the diff has them).
    """
    if found.table is None or not found.key:
        return {}
    leave_out = set(found.changes or {})
    row = read(found.database, found.table, found.key, leave_out)
    return {} if row is None else _identifying(row, mentioned)


def _identifying(values: Mapping[str, Any], mentioned: frozenset[str]) -> dict[str, Any]:
    """Up to :data:`IDENTITY_COLUMNS` text columns that are no secrets, those the selector
    names first."""
    texts = [
        name
        for name, value in values.items()
        if isinstance(value, str) and value and not SECRET.search(name)
    ]
    chosen = sorted(texts, key=lambda name: name not in mentioned)[:IDENTITY_COLUMNS]
    return {name: values[name] for name in texts if name in chosen}


def _short(value: object) -> str:
    """A value as the explanation shows it: text quoted and cut, NULL, a BLOB's size."""
    if value is None:
        return "NULL"
    if isinstance(value, Mapping):
        if "$blob" in value:
            return "BLOB"
        if "$truncated" in value:
            return _short(value.get("head")) if isinstance(value.get("head"), str) else "BLOB"
    if isinstance(value, str):
        line = " ".join(value.split())
        cut = line if len(line) <= VALUE_WIDTH else line[: VALUE_WIDTH - 1] + "…"
        return repr(cut)
    return str(value)
