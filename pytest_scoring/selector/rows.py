"""``rows`` criteria of a selector: ``by_key``, added and removed templates, changed rows.

Rows are streamed, never held: a table whose examples were cut streams every row from SQLite,
and each row counts against the evaluation's time budget.
"""

from __future__ import annotations

from collections.abc import Callable
from collections.abc import Iterable
from collections.abc import Iterator
from collections.abc import Mapping
from dataclasses import dataclass
from functools import partial
from typing import Any
from typing import final

from pytest_scoring.core.budget import TimeBudget
from pytest_scoring.db.diff_store import ChangeFilter
from pytest_scoring.db.diff_store import ChangeTest
from pytest_scoring.db.diff_store import StoredRows
from pytest_scoring.selector.criteria import MEMBERSHIP_KEYS
from pytest_scoring.selector.criteria import NO_FIELDS
from pytest_scoring.selector.criteria import ROW_KEYS
from pytest_scoring.selector.criteria import ROW_LIST_KEYS
from pytest_scoring.selector.criteria import Membership
from pytest_scoring.selector.criteria import Row
from pytest_scoring.selector.criteria import as_mapping
from pytest_scoring.selector.criteria import checked_object
from pytest_scoring.selector.criteria import parse_membership
from pytest_scoring.selector.criteria import row_list
from pytest_scoring.selector.where import CHANGE_FIELDS
from pytest_scoring.selector.where import RowTest
from pytest_scoring.selector.where import fail
from pytest_scoring.selector.where import is_value
from pytest_scoring.selector.where import parse_count
from pytest_scoring.selector.where import parse_where
from pytest_scoring.selector.where import required_changes
from pytest_scoring.selector.where import values_equal

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
    #: ``changed``: at least one row must survive, whatever ``$count`` says.
    needs_one: bool = False
    #: ``changed``: changes of which every surviving row has one, found in the diff store
    #: before any row is read (none: every row is read).
    having: ChangeFilter = ()

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
        count = sum(1 for _ in survivors)
        return (count > 0 or not self.needs_one) and self.count(count)


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
    criteria = checked_object(raw, path, ROW_LIST_KEYS)
    checks = []
    if "has_one" in criteria:
        checks.append(_has_one_template(_templates(criteria["has_one"], f"{path}.has_one")))
    if "has_all" in criteria:
        checks.append(_has_all_templates(_templates(criteria["has_all"], f"{path}.has_all")))
    return RowListCriteria(tuple(checks), *_where_and_count(criteria, path, NO_FIELDS))


def _where_and_count(
    criteria: dict[str, Any], path: str, fields: frozenset[str]
) -> tuple[tuple[RowTest, ...], Callable[[int], bool] | None]:
    where = (
        (parse_where(criteria["where"], f"{path}.where", fields),) if "where" in criteria else ()
    )
    count = parse_count(criteria["$count"], f"{path}.$count") if "$count" in criteria else None
    return where, count


def _parse_changed(raw: Any, path: str) -> RowListCriteria:
    criteria = checked_object(raw, path, ROW_LIST_KEYS)
    filters: list[RowTest] = []
    having: list[ChangeFilter] = []
    for key in MEMBERSHIP_KEYS:
        if key in criteria:
            membership = parse_membership({key: criteria[key]}, path)
            filters.append(_changed_columns_test(membership))
            having.append(_membership_changes(membership))
    where, count = _where_and_count(criteria, path, CHANGE_FIELDS)
    if "where" in criteria:
        having.append(required_changes(criteria["where"]))
    return RowListCriteria(
        (), (*filters, *where), count, needs_one=True, having=next(filter(None, having), ())
    )


def _membership_changes(membership: Membership) -> ChangeFilter:
    """Changes every row passing ``has_one`` (one of its columns) or ``has_all`` (its first
    column, among others) has."""
    if membership.has_one is not None:
        return tuple(ChangeTest(column) for column in membership.has_one)
    return (ChangeTest(membership.has_all[0]),) if membership.has_all else ()


def _changed_columns_test(membership: Membership) -> RowTest:
    return lambda row: membership.holds(row["$changed_columns"])


def changed_row(change: Row) -> dict[str, Any]:
    """The virtual row a ``rows.changed.where`` clause sees for one changed row."""
    before: dict[str, Any] = {}
    after: dict[str, Any] = {}
    for column, pair in as_mapping(change.get("changes")).items():
        values = as_mapping(pair)
        before[column], after[column] = values.get("old_value"), values.get("new_value")
    return {
        **after,
        "$changed_columns": list(after),
        "$before": before,
        "$after": after,
        "$key": as_mapping(change.get("key")),
    }


@final
@dataclass(frozen=True, slots=True)
class RowCriteria:
    """``rows``: an optional ``by_key`` pre-filter, then ``added``/``removed``/``changed``."""

    by_key: RowTest | None
    lists: tuple[tuple[str, RowListCriteria], ...]

    def holds(self, table: Mapping[str, Any], budget: TimeBudget) -> bool:
        """Whether the data-plane entry of one table fits.

        :raises SelectorTimeout: when the budget runs out while looking at the rows.
        """
        if not self.lists:
            kinds = ("added", "removed", "changed")
            return any(next(self._rows(table, kind, budget), None) is not None for kind in kinds)
        return all(
            criteria.holds(partial(self._rows, table, kind, budget, criteria.having))
            for kind, criteria in self.lists
        )

    def _rows(
        self, table: Mapping[str, Any], kind: str, budget: TimeBudget, having: ChangeFilter = ()
    ) -> Iterator[Row]:
        """The rows of one list left by ``by_key`` (changed rows as virtual rows), lazily;
        rows in the diff store without a change ``having`` asks for are never read."""
        listed = table.get(f"rows_{kind}")
        if having and isinstance(listed, StoredRows):
            listed = listed.having(having)
        for row in row_list(listed):
            budget.tick()
            if kind != "changed":
                if self.by_key is None or self.by_key(row):
                    yield row
            elif self.by_key is None or self.by_key(as_mapping(row.get("key"))):
                yield changed_row(row)


def _parse_by_key(raw: Any, path: str) -> RowTest:
    if not isinstance(raw, dict) or not raw:
        fail(path, f"expected an object {{column: value}}, got {raw!r}")
    for column, value in raw.items():
        if not is_value(value):
            fail(f"{path}.{column}", f"expected a value, got {value!r}")
    return lambda key: all(values_equal(key.get(column), value) for column, value in raw.items())


def parse_rows(raw: Any, path: str) -> RowCriteria:
    criteria = checked_object(raw, path, ROW_KEYS)
    by_key = _parse_by_key(criteria["by_key"], f"{path}.by_key") if "by_key" in criteria else None
    parsers = {"added": _parse_added_removed, "removed": _parse_added_removed}
    lists = tuple(
        (kind, parsers.get(kind, _parse_changed)(criteria[kind], f"{path}.{kind}"))
        for kind in ("added", "removed", "changed")
        if kind in criteria
    )
    return RowCriteria(by_key, lists)
