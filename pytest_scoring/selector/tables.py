"""``tables`` criteria of a selector, and the per-table view (status, columns) they test.

A table's status is its schema status (``unchanged`` included) when the target includes the
schema plane and that plane reports the table, else its data status. That rule governs
``tables.status``, ``tables.added``/``removed``/``changed`` and table criteria beside ``rows``;
a selector asking only for *some* change sees a change in any targeted plane
(:attr:`TableView.changed`). When a status criterion fails only because the schema plane says
``unchanged`` while the data plane reports a change, the evaluation warns, naming the table.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any
from typing import final

from pytest_scoring.core.budget import Evaluation
from pytest_scoring.selector.criteria import COLUMN_KEYS
from pytest_scoring.selector.criteria import TABLE_KEYS
from pytest_scoring.selector.criteria import TABLE_STATUSES
from pytest_scoring.selector.criteria import Membership
from pytest_scoring.selector.criteria import as_mapping
from pytest_scoring.selector.criteria import checked_object
from pytest_scoring.selector.criteria import parse_membership

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

    @property
    def data_status(self) -> str | None:
        """The data plane's status of the table (``None`` when that plane does not report it)."""
        status = self.data.get("status")
        return None if status is None else str(status)

    @property
    def changed(self) -> bool:
        """Whether some targeted plane reports a change of the table."""
        return any(
            plane.get("status") not in (None, "unchanged") for plane in (self.data, self.schema)
        )

    @property
    def schema_hides_data_change(self) -> bool:
        """Whether the schema's ``unchanged`` decides the status while the data changed."""
        return self.status == "unchanged" and self.data_status not in (None, "unchanged")


def _plane_tables(
    entry: Mapping[str, Any], plane: str, planes: frozenset[str]
) -> Mapping[str, Any]:
    if plane not in planes:
        return {}
    return as_mapping(as_mapping(as_mapping(entry.get("comparisons")).get(plane)).get("tables"))


def _status(data: Mapping[str, Any], schema: Mapping[str, Any]) -> str:
    """The schema plane's status when it reports the table, else the data plane's."""
    status = schema.get("status")
    return str(status if status is not None else data.get("status") or "unchanged")


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


def status_warning(path: str, names: list[str], database: str) -> str:
    """The warning for a status criterion that failed only because the schema said unchanged."""
    tables = ", ".join(repr(name) for name in names)
    return (
        f"{path}: table {tables} of {database!r} changed in the data plane, but the schema "
        "plane reports it 'unchanged' and its status decides (target \"data\" tests the data "
        "status; docs/selectors.md)"
    )


@final
@dataclass(frozen=True, slots=True)
class TableCriteria:
    """``tables``: criteria on one table, and on the sets of table names by status."""

    #: Where the criteria are in the selector (``selector.tables``), for warnings.
    path: str
    name: Membership | None = None
    status: Membership | None = None
    columns: tuple[tuple[str, Membership], ...] = ()
    by_status: tuple[tuple[str, Membership], ...] = ()

    @property
    def per_table(self) -> bool:
        """Whether ``status`` or ``columns`` must hold for one table."""
        return self.status is not None or bool(self.columns)

    @property
    def decides_change(self) -> bool:
        """Whether some criterion says which change there is (else: any change will do)."""
        return self.per_table or bool(self.by_status)

    def names(self, table: TableView) -> bool:
        """Whether ``name`` (if given) names the table."""
        return self.name is None or self.name.holds({table.name})

    def fits(self, table: TableView, status: str | None = None) -> bool:
        """Whether one table fits ``name``, ``status`` (its own, or ``status``) and ``columns``."""
        if not self.names(table):
            return False
        if self.status is not None and not self.status.holds({status or table.status}):
            return False
        return all(
            criterion.holds(column_names(table.schema, kind)) for kind, criterion in self.columns
        )

    def fails_only_by_schema_status(self, table: TableView) -> bool:
        """Whether the table fails ``status`` only because the schema said ``unchanged``."""
        return (
            self.status is not None
            and table.schema_hides_data_change
            and self.fits(table, status=table.data_status)
        )

    def fits_database(self, tables: list[TableView], database: str, evaluation: Evaluation) -> bool:
        """Whether the sets of added, removed and changed table names fit."""
        for status, criterion in self.by_status:
            names = {table.name for table in tables if table.status == status}
            if criterion.holds(names):
                continue
            hidden = {
                table.name
                for table in tables
                if table.schema_hides_data_change and table.data_status == status
            }
            if hidden and criterion.holds(names | hidden):
                evaluation.warn(status_warning(f"{self.path}.{status}", sorted(hidden), database))
            return False
        return True


def parse_tables(raw: Any, path: str) -> TableCriteria:
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
        path,
        **single,
        columns=_parse_columns(criteria.get("columns"), f"{path}.columns"),
        by_status=by_status,
    )


def _parse_columns(raw: Any, path: str) -> tuple[tuple[str, Membership], ...]:
    if raw is None:
        return ()
    criteria = checked_object(raw, path, COLUMN_KEYS)
    return tuple(
        (kind, parse_membership(criteria[kind], f"{path}.{kind}"))
        for kind in COLUMN_KEYS
        if kind in criteria
    )
