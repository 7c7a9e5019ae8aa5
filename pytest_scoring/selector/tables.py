"""``tables`` criteria of a selector, and the per-table view (status, columns) they test."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any
from typing import final

from pytest_scoring.selector.criteria import COLUMN_KEYS
from pytest_scoring.selector.criteria import TABLE_KEYS
from pytest_scoring.selector.criteria import TABLE_STATUSES
from pytest_scoring.selector.criteria import Membership
from pytest_scoring.selector.criteria import as_mapping
from pytest_scoring.selector.criteria import checked_object
from pytest_scoring.selector.criteria import parse_membership
from pytest_scoring.selector.where import fail

# --- tables -------------------------------------------------------------------------------


@final
@dataclass(frozen=True, slots=True)
class TableView:
    """One table of one database as the selector's planes see it."""

    name: str
    #: Its status in the targeted planes (see the module docstring).
    status: str
    #: Its data-plane entry (empty when absent or not targeted).
    data: Mapping[str, Any]
    #: Its schema-plane entry (empty when absent or not targeted).
    schema: Mapping[str, Any]


def _plane_tables(
    entry: Mapping[str, Any], plane: str, planes: frozenset[str]
) -> Mapping[str, Any]:
    if plane not in planes:
        return {}
    return as_mapping(as_mapping(as_mapping(entry.get("comparisons")).get(plane)).get("tables"))


def _status(data: Mapping[str, Any], schema: Mapping[str, Any]) -> str:
    schema_status, data_status = schema.get("status"), data.get("status")
    if schema_status is not None and (schema_status != "unchanged" or data_status is None):
        return str(schema_status)
    return str(data_status or "unchanged")


def table_views(entry: Mapping[str, Any], planes: frozenset[str]) -> list[TableView]:
    """The tables of one database entry of ``comparisons``, in the targeted planes."""
    data = _plane_tables(entry, "data", planes)
    schema = _plane_tables(entry, "schema", planes)
    views = []
    for name in dict.fromkeys([*data, *schema]):
        data_entry, schema_entry = as_mapping(data.get(name)), as_mapping(schema.get(name))
        views.append(
            TableView(str(name), _status(data_entry, schema_entry), data_entry, schema_entry)
        )
    return views


def _column_name(entry: object) -> object:
    if not isinstance(entry, Mapping):
        return entry
    sides = (entry, as_mapping(entry.get("from")), as_mapping(entry.get("to")))
    return next((side["name"] for side in sides if "name" in side), None)


def column_names(schema: Mapping[str, Any], kind: str) -> set[str]:
    """Names of the columns listed in ``columns_<kind>`` of a schema-plane table entry."""
    entries = schema.get(f"columns_{kind}")
    names = (_column_name(entry) for entry in entries) if isinstance(entries, list) else iter(())
    return {name for name in names if isinstance(name, str)}


@final
@dataclass(frozen=True, slots=True)
class TableCriteria:
    """``tables``: criteria on one table, and on the sets of table names by status."""

    name: Membership | None = None
    status: Membership | None = None
    columns: tuple[tuple[str, Membership], ...] = ()
    by_status: tuple[tuple[str, Membership], ...] = ()

    @property
    def per_table(self) -> bool:
        """Whether some criterion must hold for one table."""
        return self.name is not None or self.status is not None or bool(self.columns)

    @property
    def decides_change(self) -> bool:
        """Whether ``status`` or ``columns`` say what change the table has (else: any)."""
        return self.status is not None or bool(self.columns)

    def fits(self, table: TableView) -> bool:
        """Whether one table fits ``name``, ``status`` and ``columns``."""
        if self.name is not None and not self.name.holds({table.name}):
            return False
        if self.status is not None and not self.status.holds({table.status}):
            return False
        return all(
            criterion.holds(column_names(table.schema, kind)) for kind, criterion in self.columns
        )

    def fits_database(self, tables: list[TableView]) -> bool:
        """Whether the sets of added, removed and changed table names fit."""
        return all(
            criterion.holds({table.name for table in tables if table.status == status})
            for status, criterion in self.by_status
        )


def parse_tables(raw: Any, path: str, planes: frozenset[str]) -> TableCriteria:
    criteria = checked_object(raw, path, TABLE_KEYS)
    single = {
        key: parse_membership(
            criteria[key],
            f"{path}.{key}",
            single=True,
            choices=TABLE_STATUSES if key == "status" else None,
        )
        for key in ("name", "status")
        if key in criteria
    }
    by_status = tuple(
        (status, parse_membership(criteria[status], f"{path}.{status}"))
        for status in ("added", "removed", "changed")
        if status in criteria
    )
    return TableCriteria(
        **single,
        columns=_parse_columns(criteria.get("columns"), f"{path}.columns", planes),
        by_status=by_status,
    )


def _parse_columns(
    raw: Any, path: str, planes: frozenset[str]
) -> tuple[tuple[str, Membership], ...]:
    if raw is None:
        return ()
    if "schema" not in planes:
        fail(path, "columns are schema-plane criteria but the target excludes the schema plane")
    criteria = checked_object(raw, path, COLUMN_KEYS)
    return tuple(
        (kind, parse_membership(criteria[kind], f"{path}.{kind}"))
        for kind in COLUMN_KEYS
        if kind in criteria
    )
