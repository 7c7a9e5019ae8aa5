"""The selector language: parse a whole selector and test it against a diff.

:func:`parse_selector` validates a whole selector up front (every mistake names its path,
e.g. ``selector.rows.changed.where[0].role: unknown operator '$foo' …``) and compiles it;
:meth:`Selector.matches` then tests a diff (docs/databases.md) whose row lists are complete.
``where`` clauses and value semantics live in :mod:`pytest_scoring.selector.where`.

Decisions the language leaves open (stated in docs/selectors.md):

* ``$and``/``$or``/``$not`` test their selectors against the whole diff (each may match a
  different database); the other keys of the same object must then hold for one database.
  A nested selector without ``target`` inherits its parent's.
* A selector describes a change. One with no criteria (``{}``, ``{"target": "schema"}``), or
  with ``databases`` only, needs the database to have some table whose status in a targeted
  plane is not ``unchanged``; ``tables`` with only ``name`` needs that table to be changed
  (not ``unchanged``). Criteria that say which change (``status``, ``columns``, ``rows``)
  decide on their own, so ``status: "unchanged"`` or ``$count: {$eq: 0}`` can match.
* With both planes targeted, a table's status is its schema status when the schema plane
  reports the table with a change, else its data status (so a table whose rows changed is
  ``changed``); with one plane targeted, that plane's status.
* ``rows`` with only ``by_key`` (or empty) needs some added, removed or changed row of the table.
  ``added``/``removed``/``changed`` without ``where``, ``$count`` or templates need one row.
  ``$count`` replaces the "at least one row" rule (``$count: {$eq: 0}`` means none).
* ``target`` also accepts a list (``["data", "schema"]``) and ``$and``/``$or`` a single
  selector, as older selectors wrote them; ``$not`` given a list negates all of them together.
* ``rows`` under ``target: "schema"`` and ``tables.columns`` under ``target: "data"`` are
  errors (they could never match).
* ``databases.name`` compares path separators as ``/``.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from dataclasses import field
from typing import Any
from typing import final

from pytest_scoring.selector.criteria import PLANES
from pytest_scoring.selector.criteria import SELECTOR_KEYS
from pytest_scoring.selector.criteria import TARGETS
from pytest_scoring.selector.criteria import DatabaseCriteria
from pytest_scoring.selector.criteria import as_mapping
from pytest_scoring.selector.criteria import checked_object
from pytest_scoring.selector.criteria import parse_databases
from pytest_scoring.selector.rows import RowCriteria
from pytest_scoring.selector.rows import parse_rows
from pytest_scoring.selector.tables import TableCriteria
from pytest_scoring.selector.tables import TableView
from pytest_scoring.selector.tables import parse_tables
from pytest_scoring.selector.tables import table_views
from pytest_scoring.selector.where import check_depth
from pytest_scoring.selector.where import expected
from pytest_scoring.selector.where import fail

# --- selectors ----------------------------------------------------------------------------


@final
@dataclass(frozen=True, slots=True)
class Selector:
    """A parsed, validated selector; :meth:`matches` tests a diff."""

    #: Planes considered: ``{"data"}``, ``{"schema"}`` or both.
    planes: frozenset[str] = frozenset(PLANES)
    databases: DatabaseCriteria | None = None
    tables: TableCriteria | None = None
    rows: RowCriteria | None = None
    #: Whether ``databases``/``tables``/``rows`` (or no criteria at all) must hold for a database.
    local: bool = True
    all_of: tuple[Selector, ...] = ()
    any_of: tuple[Selector, ...] | None = None
    #: ``$not``: these must not all match.
    negated: tuple[Selector, ...] | None = None
    #: The selector as written (JSON), for score metadata.
    source: Any = field(default=None, compare=False)

    def matches(self, diff: Mapping[str, Any]) -> bool:
        """Whether the diff (every row list complete) has the changes this selector describes."""
        comparisons = as_mapping(as_mapping(diff).get("comparisons"))
        if self.local and not any(
            self._fits_database(str(key), as_mapping(entry)) for key, entry in comparisons.items()
        ):
            return False
        if not all(selector.matches(diff) for selector in self.all_of):
            return False
        if self.any_of is not None and not any(selector.matches(diff) for selector in self.any_of):
            return False
        return self.negated is None or not all(selector.matches(diff) for selector in self.negated)

    def _fits_database(self, key: str, entry: Mapping[str, Any]) -> bool:
        if self.databases is not None and not self.databases.holds(key, entry):
            return False
        tables = table_views(entry, self.planes)
        if self.tables is None and self.rows is None:
            return any(table.status != "unchanged" for table in tables)
        if self.tables is not None and not self.tables.fits_database(tables):
            return False
        return any(self._fits_table(table) for table in tables) if self._per_table else True

    @property
    def _per_table(self) -> bool:
        return self.rows is not None or (self.tables is not None and self.tables.per_table)

    def _fits_table(self, table: TableView) -> bool:
        criteria = self.tables or TableCriteria()
        if not criteria.fits(table):
            return False
        if self.rows is not None:
            return self.rows.holds(table.data)
        return criteria.decides_change or table.status != "unchanged"


def _parse_target(raw: Any, path: str) -> frozenset[str]:
    if raw == "both":
        return frozenset(PLANES)
    items = [raw] if isinstance(raw, str) else raw
    if not isinstance(items, list) or not items or any(item not in PLANES for item in items):
        fail(path, f"unknown target {raw!r} {expected(TARGETS)}")
    return frozenset(items)


def _sub_selectors(raw: Any, path: str, planes: frozenset[str], depth: int) -> tuple[Selector, ...]:
    """The selectors of ``$and``/``$or``/``$not``: a list, or one selector object."""
    items = raw if isinstance(raw, list) else [raw]
    if not items:
        fail(path, "expected a selector or a non-empty list of selectors")
    suffix = isinstance(raw, list)
    return tuple(
        _parse(item, f"{path}[{index}]" if suffix else path, planes, depth + 1)
        for index, item in enumerate(items)
    )


def _parse(raw: Any, path: str, inherited: frozenset[str], depth: int) -> Selector:
    check_depth(path, depth)
    criteria = checked_object(raw, path, SELECTOR_KEYS)
    planes = (
        _parse_target(criteria["target"], f"{path}.target") if "target" in criteria else inherited
    )
    if "rows" in criteria and "data" not in planes:
        fail(f"{path}.rows", "rows are data-plane criteria but the target excludes the data plane")
    logic = {
        key: _sub_selectors(criteria[key], f"{path}.{key}", planes, depth)
        for key in ("$and", "$or", "$not")
        if key in criteria
    }
    has_local = any(key in criteria for key in ("databases", "tables", "rows"))
    return Selector(
        planes=planes,
        databases=parse_databases(criteria["databases"], f"{path}.databases")
        if "databases" in criteria
        else None,
        tables=parse_tables(criteria["tables"], f"{path}.tables", planes)
        if "tables" in criteria
        else None,
        rows=parse_rows(criteria["rows"], f"{path}.rows") if "rows" in criteria else None,
        local=has_local or not logic,
        all_of=logic.get("$and", ()),
        any_of=logic.get("$or"),
        negated=logic.get("$not"),
        source=raw,
    )


def parse_selector(raw: object, path: str = "selector") -> Selector:
    """Validate a whole selector (docs/selectors.md) and compile it.

    :param raw: the selector as parsed JSON (an object).
    :param path: how error messages name the selector's root.
    :raises SelectorError: naming the path of the first mistake.
    """
    return _parse(raw, path, frozenset(PLANES), 0)


def selector_matches(selector: Selector | object, diff: Mapping[str, Any]) -> bool:
    """Whether ``selector`` (parsed, or raw JSON to validate first) matches ``diff``."""
    parsed = selector if isinstance(selector, Selector) else parse_selector(selector)
    return parsed.matches(diff)
