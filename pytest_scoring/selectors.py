"""The selector language of SPEC 4.3: which database changes a scorer looks for.

:func:`parse_selector` validates a whole selector up front (every mistake names its path,
e.g. ``selector.rows.changed.where[0].role: unknown operator '$foo' …``) and compiles it;
:meth:`Selector.matches` then tests a diff of the SPEC 4.2 shape whose row lists are complete.
``where`` clauses and value semantics live in :mod:`pytest_scoring.selector_where`.

Decisions where SPEC 4.3 is silent:

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

from collections.abc import Callable
from collections.abc import Collection
from collections.abc import Iterable
from collections.abc import Iterator
from collections.abc import Mapping
from dataclasses import dataclass
from dataclasses import field
from functools import partial
from typing import Any
from typing import Final
from typing import final

from pytest_scoring.selector_where import CHANGE_FIELDS
from pytest_scoring.selector_where import RowTest
from pytest_scoring.selector_where import check_depth
from pytest_scoring.selector_where import expected
from pytest_scoring.selector_where import fail
from pytest_scoring.selector_where import is_value
from pytest_scoring.selector_where import parse_count
from pytest_scoring.selector_where import parse_where
from pytest_scoring.selector_where import values_equal

PLANES: Final = ("data", "schema")
TARGETS: Final = ("data", "schema", "both")
TABLE_STATUSES: Final = ("added", "removed", "changed", "unchanged")
SELECTOR_KEYS: Final = ("target", "$and", "$or", "$not", "databases", "tables", "rows")
DATABASE_KEYS: Final = ("name", "path", "exists_before", "exists_after")
TABLE_KEYS: Final = ("name", "status", "columns", "added", "removed", "changed")
COLUMN_KEYS: Final = ("added", "removed", "changed")
ROW_KEYS: Final = ("by_key", "added", "removed", "changed")
ROW_LIST_KEYS: Final = ("has_one", "has_all", "where", "$count")
MEMBERSHIP_KEYS: Final = ("has_one", "has_all")
_NO_FIELDS: Final = frozenset[str]()

Row = Mapping[str, Any]


def _mapping(value: object) -> Mapping[str, Any]:
    """``value`` if it is an object, else an empty one (diffs from files may be partial)."""
    return value if isinstance(value, Mapping) else {}


def _rows(value: object) -> Iterator[Row]:
    """The rows of a row list, lazily: a list, or a stream of every row of a cut table."""
    if isinstance(value, str | bytes | Mapping) or not isinstance(value, Iterable):
        return iter(())
    return (row for row in value if isinstance(row, Mapping))


def _object(raw: Any, path: str, keys: tuple[str, ...]) -> dict[str, Any]:
    """Check that ``raw`` is an object whose keys are all among ``keys``."""
    if not isinstance(raw, dict):
        fail(path, f"expected an object with keys {', '.join(keys)}, got {raw!r}")
    for key in raw:
        if key not in keys:
            fail(f"{path}.{key}", f"unknown key {expected(keys)}")
    return raw


# --- membership criteria ------------------------------------------------------------------


@final
@dataclass(frozen=True, slots=True)
class Membership:
    """``"x"``, ``{"has_one": [..]}`` and/or ``{"has_all": [..]}`` over a set of names."""

    has_one: tuple[str, ...] | None = None
    has_all: tuple[str, ...] | None = None

    def holds(self, names: Collection[str]) -> bool:
        """Whether some ``has_one`` name and every ``has_all`` name are among ``names``."""
        one = self.has_one is None or any(name in names for name in self.has_one)
        return one and (self.has_all is None or all(name in names for name in self.has_all))


def _names(raw: Any, path: str, choices: tuple[str, ...] | None) -> tuple[str, ...]:
    items = [raw] if isinstance(raw, str) else raw
    if not isinstance(items, list) or not items:
        fail(path, f"expected a name or a non-empty list of names, got {raw!r}")
    for index, item in enumerate(items):
        where = path if isinstance(raw, str) else f"{path}[{index}]"
        if not isinstance(item, str):
            fail(where, f"expected a name (string), got {item!r}")
        if choices is not None and item not in choices:
            fail(where, f"unknown value {item!r} {expected(choices)}")
    return tuple(items)


def parse_membership(
    raw: Any, path: str, single: bool = False, choices: tuple[str, ...] | None = None
) -> Membership:
    """A membership criterion; ``single`` fields (one value per item) refuse ``has_all``."""
    if isinstance(raw, str):
        return Membership(has_one=_names(raw, path, choices))
    if isinstance(raw, list):
        fail(path, f"a bare list is ambiguous; write {{'has_one': {raw!r}}} or {{'has_all': …}}")
    criterion = _object(raw, path, MEMBERSHIP_KEYS)
    if not criterion:
        fail(path, "expected has_one or has_all")
    if single and "has_all" in criterion:
        fail(f"{path}.has_all", "a single-valued field cannot have all of several values")
    return Membership(
        *(
            _names(criterion[key], f"{path}.{key}", choices) if key in criterion else None
            for key in MEMBERSHIP_KEYS
        )
    )


# --- databases ----------------------------------------------------------------------------


@final
@dataclass(frozen=True, slots=True)
class DatabaseCriteria:
    """``databases``: the database's key (or bare file name), relative path and existence."""

    name: Membership | None
    path: Membership | None
    flags: tuple[tuple[str, bool], ...]

    def holds(self, key: str, entry: Mapping[str, Any]) -> bool:
        """Whether the database stored under ``key`` in ``comparisons`` fits."""
        relative = key.replace("\\", "/")
        if self.name is not None and not self.name.holds({relative, relative.rsplit("/")[-1]}):
            return False
        if self.path is not None and not self.path.holds({relative}):
            return False
        info = _mapping(entry.get("info"))
        return all(info.get(flag) is wanted for flag, wanted in self.flags)


def _parse_databases(raw: Any, path: str) -> DatabaseCriteria:
    criteria = _object(raw, path, DATABASE_KEYS)
    flags = []
    for flag in ("exists_before", "exists_after"):
        if flag in criteria:
            if not isinstance(criteria[flag], bool):
                fail(f"{path}.{flag}", f"expected true or false, got {criteria[flag]!r}")
            flags.append((flag, criteria[flag]))
    name, where = (
        parse_membership(criteria[key], f"{path}.{key}", single=True) if key in criteria else None
        for key in ("name", "path")
    )
    return DatabaseCriteria(name, where, tuple(flags))


# --- rows ---------------------------------------------------------------------------------


def _template(raw: Any, path: str) -> RowTest:
    """``{col: value…}`` (all equal), ``"col"`` (non-null) or ``["c1", "c2"]`` (all non-null)."""
    if isinstance(raw, str):
        return lambda row: row.get(raw) is not None
    if isinstance(raw, list) and raw and all(isinstance(column, str) for column in raw):
        return lambda row: all(row.get(column) is not None for column in raw)
    if isinstance(raw, dict) and raw:
        for column, value in raw.items():
            if not is_value(value):
                fail(f"{path}.{column}", f"expected a value, got {value!r}")
        return lambda row: all(values_equal(row.get(column), raw[column]) for column in raw)
    fail(path, f'expected a template {{col: value}}, "col" or ["c1", "c2"], got {raw!r}')


def _templates(raw: Any, path: str) -> tuple[RowTest, ...]:
    """A list of templates; a bare string or object is a one-element list."""
    items = raw if isinstance(raw, list) else [raw]
    if not items:
        fail(path, "expected a non-empty list of templates")
    return tuple(_template(item, f"{path}[{index}]") for index, item in enumerate(items))


@final
@dataclass(frozen=True, slots=True)
class RowListCriteria:
    """``rows.added`` / ``rows.removed`` / ``rows.changed``: checks, filter, then count."""

    #: Tests on the rows left by ``by_key`` that must hold (templates; ``has_*`` of ``added``).
    checks: tuple[Callable[[Iterable[Row]], bool], ...]
    #: Filters narrowing the rows (``has_*`` of ``changed``, then ``where``).
    filters: tuple[RowTest, ...]
    count: Callable[[int], bool] | None

    def holds(self, rows: Callable[[], Iterable[Row]]) -> bool:
        """Whether the rows pass the checks and enough of them survive the filters.

        Each check and the filters stream the rows afresh (``rows()``), never holding them
        all: without ``$count`` the first survivor decides.
        """
        if not all(check(rows()) for check in self.checks):
            return False
        survivors = (row for row in rows() if all(test(row) for test in self.filters))
        if self.count is None:
            return next(survivors, None) is not None
        return self.count(sum(1 for _ in survivors))


def _has_one_template(templates: tuple[RowTest, ...]) -> Callable[[Iterable[Row]], bool]:
    return lambda rows: any(template(row) for row in rows for template in templates)


def _has_all_templates(templates: tuple[RowTest, ...]) -> Callable[[Iterable[Row]], bool]:
    def holds(rows: Iterable[Row]) -> bool:
        """One pass: each row ticks off the templates it matches."""
        missing = list(templates)
        for row in rows:
            if not missing:
                break
            missing = [template for template in missing if not template(row)]
        return not missing

    return holds


def _parse_added_removed(raw: Any, path: str) -> RowListCriteria:
    criteria = _object(raw, path, ROW_LIST_KEYS)
    checks = []
    if "has_one" in criteria:
        checks.append(_has_one_template(_templates(criteria["has_one"], f"{path}.has_one")))
    if "has_all" in criteria:
        checks.append(_has_all_templates(_templates(criteria["has_all"], f"{path}.has_all")))
    return RowListCriteria(tuple(checks), *_where_and_count(criteria, path, _NO_FIELDS))


def _where_and_count(
    criteria: dict[str, Any], path: str, fields: frozenset[str]
) -> tuple[tuple[RowTest, ...], Callable[[int], bool] | None]:
    where = (
        (parse_where(criteria["where"], f"{path}.where", fields),) if "where" in criteria else ()
    )
    count = parse_count(criteria["$count"], f"{path}.$count") if "$count" in criteria else None
    return where, count


def _parse_changed(raw: Any, path: str) -> RowListCriteria:
    criteria = _object(raw, path, ROW_LIST_KEYS)
    filters: list[RowTest] = []
    for key in MEMBERSHIP_KEYS:
        if key in criteria:
            filters.append(_changed_columns_test(parse_membership({key: criteria[key]}, path)))
    where, count = _where_and_count(criteria, path, CHANGE_FIELDS)
    return RowListCriteria((), (*filters, *where), count)


def _changed_columns_test(membership: Membership) -> RowTest:
    return lambda row: membership.holds(row["$changed_columns"])


def changed_row(change: Row) -> dict[str, Any]:
    """The virtual row a ``rows.changed.where`` clause sees for one changed row."""
    before: dict[str, Any] = {}
    after: dict[str, Any] = {}
    for column, pair in _mapping(change.get("changes")).items():
        values = _mapping(pair)
        before[column], after[column] = values.get("old_value"), values.get("new_value")
    return {
        **after,
        "$changed_columns": list(after),
        "$before": before,
        "$after": after,
        "$key": _mapping(change.get("key")),
    }


@final
@dataclass(frozen=True, slots=True)
class RowCriteria:
    """``rows``: an optional ``by_key`` pre-filter, then ``added``/``removed``/``changed``."""

    by_key: RowTest | None
    lists: tuple[tuple[str, RowListCriteria], ...]

    def holds(self, table: Mapping[str, Any]) -> bool:
        """Whether the data-plane entry of one table fits."""
        if not self.lists:
            kinds = ("added", "removed", "changed")
            return any(next(self._rows(table, kind), None) is not None for kind in kinds)
        return all(
            criteria.holds(partial(self._rows, table, kind)) for kind, criteria in self.lists
        )

    def _rows(self, table: Mapping[str, Any], kind: str) -> Iterator[Row]:
        """The rows of one list left by ``by_key`` (changed rows as virtual rows), lazily."""
        rows = _rows(table.get(f"rows_{kind}"))
        if kind != "changed":
            return (row for row in rows if self.by_key is None or self.by_key(row))
        return (
            changed_row(change)
            for change in rows
            if self.by_key is None or self.by_key(_mapping(change.get("key")))
        )


def _parse_by_key(raw: Any, path: str) -> RowTest:
    if not isinstance(raw, dict) or not raw:
        fail(path, f"expected an object {{column: value}}, got {raw!r}")
    for column, value in raw.items():
        if not is_value(value):
            fail(f"{path}.{column}", f"expected a value, got {value!r}")
    return lambda key: all(values_equal(key.get(column), value) for column, value in raw.items())


def _parse_rows(raw: Any, path: str) -> RowCriteria:
    criteria = _object(raw, path, ROW_KEYS)
    by_key = _parse_by_key(criteria["by_key"], f"{path}.by_key") if "by_key" in criteria else None
    parsers = {"added": _parse_added_removed, "removed": _parse_added_removed}
    lists = tuple(
        (kind, parsers.get(kind, _parse_changed)(criteria[kind], f"{path}.{kind}"))
        for kind in ("added", "removed", "changed")
        if kind in criteria
    )
    return RowCriteria(by_key, lists)


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
    return _mapping(_mapping(_mapping(entry.get("comparisons")).get(plane)).get("tables"))


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
        data_entry, schema_entry = _mapping(data.get(name)), _mapping(schema.get(name))
        views.append(
            TableView(str(name), _status(data_entry, schema_entry), data_entry, schema_entry)
        )
    return views


def _column_name(entry: object) -> object:
    if not isinstance(entry, Mapping):
        return entry
    sides = (entry, _mapping(entry.get("from")), _mapping(entry.get("to")))
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


def _parse_tables(raw: Any, path: str, planes: frozenset[str]) -> TableCriteria:
    criteria = _object(raw, path, TABLE_KEYS)
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
    criteria = _object(raw, path, COLUMN_KEYS)
    return tuple(
        (kind, parse_membership(criteria[kind], f"{path}.{kind}"))
        for kind in COLUMN_KEYS
        if kind in criteria
    )


# --- selectors ----------------------------------------------------------------------------


@final
@dataclass(frozen=True, slots=True)
class Selector:
    """A parsed, validated selector; :meth:`matches` tests a diff (SPEC 4.2 shape)."""

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
        comparisons = _mapping(_mapping(diff).get("comparisons"))
        if self.local and not any(
            self._fits_database(str(key), _mapping(entry)) for key, entry in comparisons.items()
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
    criteria = _object(raw, path, SELECTOR_KEYS)
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
        databases=_parse_databases(criteria["databases"], f"{path}.databases")
        if "databases" in criteria
        else None,
        tables=_parse_tables(criteria["tables"], f"{path}.tables", planes)
        if "tables" in criteria
        else None,
        rows=_parse_rows(criteria["rows"], f"{path}.rows") if "rows" in criteria else None,
        local=has_local or not logic,
        all_of=logic.get("$and", ()),
        any_of=logic.get("$or"),
        negated=logic.get("$not"),
        source=raw,
    )


def parse_selector(raw: object, path: str = "selector") -> Selector:
    """Validate a whole selector (SPEC 4.3) and compile it.

    :param raw: the selector as parsed JSON (an object).
    :param path: how error messages name the selector's root.
    :raises SelectorError: naming the path of the first mistake.
    """
    return _parse(raw, path, frozenset(PLANES), 0)


def selector_matches(selector: Selector | object, diff: Mapping[str, Any]) -> bool:
    """Whether ``selector`` (parsed, or raw JSON to validate first) matches ``diff``."""
    parsed = selector if isinstance(selector, Selector) else parse_selector(selector)
    return parsed.matches(diff)
