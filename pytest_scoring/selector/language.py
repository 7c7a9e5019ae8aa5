"""The selector language: parse a whole selector and test it against a diff.

:func:`parse_selector` validates a whole selector up front (every mistake names its path,
e.g. ``selector.rows.changed.where[0].role: unknown operator '$foo' …``) and compiles it;
:meth:`Selector.matches` then tests a diff (docs/databases.md) whose row lists are complete.
``where`` clauses and value semantics live in :mod:`pytest_scoring.selector.where`.

Decisions the language leaves open (stated in docs/selectors.md):

* Evaluation is per database: the selector matches when it matches some database, and
  ``$and``/``$or``/``$not`` combine what holds for that same database. A diff with no
  database matches nothing, ``$not`` included. A nested selector without ``target``
  inherits its parent's.
* A selector that asks only for *some* change (``{}``, ``target`` only, ``databases`` only,
  ``tables.name`` only) needs the database to have a change in a targeted plane;
  ``tables.name`` also needs one of its names to be a table of that database. Criteria that
  say which change (``tables.status``, ``tables.added``/``removed``/``changed``,
  ``tables.columns``, ``rows``) decide on their own, so ``status: "unchanged"`` can match.
  A selector made of ``$and``/``$or``/``$not`` only adds no such requirement.
* A table's status is its schema status when the schema plane is targeted and reports the
  table (``unchanged`` included), else its data status
  (:mod:`pytest_scoring.selector.tables`); a criterion failing only because of that carries a
  warning naming the table.
* ``rows`` with only ``by_key`` (or empty) needs some added, removed or changed row of the
  table. ``added``/``removed`` without ``where``, ``$count`` or templates need one row, and
  their ``$count`` replaces that rule (``$count: {$eq: 0}`` means none); ``changed`` always
  needs one surviving row, so ``$count: {$eq: 0}`` there never matches.
* Criteria for a plane the target excludes (``rows`` under ``target: "schema"``,
  ``tables.columns`` under ``target: "data"``) never match; a warning says so.
* Malformed logic is an error: ``target`` as a list, ``$and``/``$or`` not given a list,
  ``$not`` given a list. ``$and``/``$or``/``$not`` nest at most ``MAX_DEPTH`` levels.
* ``databases.name`` compares path separators as ``/``; ``exists_before``/``exists_after``
  compare with the database's ``info`` (a diff without the flag matches neither value).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from dataclasses import field
from typing import Any
from typing import final

from pytest_scoring.core.budget import Evaluation
from pytest_scoring.core.budget import TimeBudget
from pytest_scoring.db.diff_types import DiffJSON
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
from pytest_scoring.selector.tables import status_warning
from pytest_scoring.selector.tables import table_views
from pytest_scoring.selector.where import check_depth
from pytest_scoring.selector.where import expected
from pytest_scoring.selector.where import fail

# --- selectors ----------------------------------------------------------------------------


@final
@dataclass(frozen=True, slots=True)
class Verdict:
    """What evaluating a selector found."""

    matched: bool
    #: One-line warnings for the score's metadata (and ``match``'s stderr).
    warnings: tuple[str, ...] = ()


@final
@dataclass(frozen=True, slots=True)
class Selector:
    """A parsed, validated selector; :meth:`evaluate` tests a diff."""

    #: Planes considered: ``{"data"}``, ``{"schema"}`` or both.
    planes: frozenset[str] = frozenset(PLANES)
    databases: DatabaseCriteria | None = None
    tables: TableCriteria | None = None
    rows: RowCriteria | None = None
    #: Whether ``databases``/``tables``/``rows`` (or no criteria at all) must hold.
    local: bool = True
    #: Whether some criterion is for a plane the target excludes: this selector never holds.
    never: bool = False
    all_of: tuple[Selector, ...] = ()
    any_of: tuple[Selector, ...] | None = None
    #: ``$not``: this must not hold.
    negated: Selector | None = None
    #: Warnings known from the selector alone (criteria for an excluded plane), nested included.
    notes: tuple[str, ...] = ()
    #: The selector as written (JSON), for score metadata.
    source: Any = field(default=None, compare=False)

    def evaluate(self, diff: DiffJSON, budget: TimeBudget | None = None) -> Verdict:
        """Whether the diff (every row list complete) has the changes this selector describes.

        Every key is read defensively (a missing or odd one reads as empty): ``pytest-scoring
        match`` gives the language diffs from files that were checked only at the top.

        :param budget: the time the evaluation may take (no limit when ``None``).
        :raises SelectorTimeout: when the evaluation goes past ``budget``.
        """
        evaluation = Evaluation(budget or TimeBudget(None))
        for note in self.notes:
            evaluation.warn(note)
        comparisons = as_mapping(as_mapping(diff).get("comparisons"))
        matched = any(
            self.holds(str(key), as_mapping(entry), evaluation)
            for key, entry in comparisons.items()
        )
        return Verdict(matched, tuple(evaluation.warnings))

    def matches(self, diff: DiffJSON) -> bool:
        """Whether the diff matches (see :meth:`evaluate`)."""
        return self.evaluate(diff).matched

    def holds(self, key: str, entry: Mapping[str, Any], evaluation: Evaluation) -> bool:
        """Whether this selector holds for one database (``key`` in ``comparisons``)."""
        evaluation.budget.tick()
        if self.databases is not None and not self.databases.holds(key, entry):
            return False
        if not all(selector.holds(key, entry, evaluation) for selector in self.all_of):
            return False
        if self.any_of is not None and not any(
            selector.holds(key, entry, evaluation) for selector in self.any_of
        ):
            return False
        if self.negated is not None and self.negated.holds(key, entry, evaluation):
            return False
        return self._local_holds(key, entry, evaluation)

    def _local_holds(self, key: str, entry: Mapping[str, Any], evaluation: Evaluation) -> bool:
        if not self.local:
            return True
        if self.never:
            return False
        if self.databases is not None and self.tables is None and self.rows is None:
            return True  # only facts about the database, which held: no change is asked for
        tables = table_views(entry, self.planes)
        criteria = self.tables or TableCriteria("")
        if not criteria.decides_change and self.rows is None:
            # Only *some* change: in any targeted plane (and a table of one of the names).
            return any(criteria.names(table) for table in tables) and any(
                table.changed for table in tables
            )
        if not criteria.fits_database(tables, key, evaluation):
            return False
        if criteria.per_table or self.rows is not None:
            return any(self._table_holds(table, key, evaluation) for table in tables)
        return any(criteria.names(table) for table in tables)

    def _table_holds(self, table: TableView, key: str, evaluation: Evaluation) -> bool:
        """Whether the table criteria, and the row criteria, hold for this one table."""
        evaluation.budget.tick()
        criteria = self.tables or TableCriteria("")
        if criteria.fits(table):
            return self._rows_hold(table, evaluation)
        if criteria.fails_only_by_schema_status(table) and self._rows_hold(table, evaluation):
            evaluation.warn(status_warning(f"{criteria.path}.status", [table.name], key))
        return False

    def _rows_hold(self, table: TableView, evaluation: Evaluation) -> bool:
        return self.rows is None or self.rows.holds(table.data, evaluation.budget)


def _parse_target(raw: Any, path: str) -> frozenset[str]:
    if raw == "both":
        return frozenset(PLANES)
    if not isinstance(raw, str) or raw not in PLANES:
        fail(path, f"unknown target {raw!r} {expected(TARGETS)}; a list is not a target")
    return frozenset({raw})


def _selector_list(raw: Any, path: str, planes: frozenset[str], depth: int) -> tuple[Selector, ...]:
    """The selectors of ``$and``/``$or``: a non-empty list."""
    if not isinstance(raw, list) or not raw:
        fail(path, f"expected a non-empty list of selectors, got {raw!r}")
    return tuple(
        _parse(item, f"{path}[{index}]", planes, depth + 1) for index, item in enumerate(raw)
    )


def _negated(raw: Any, path: str, planes: frozenset[str], depth: int) -> Selector:
    """The selector of ``$not``: one object (several would be ambiguous)."""
    if isinstance(raw, list):
        fail(path, "expected one selector object; to negate several, wrap them in $and or $or")
    return _parse(raw, path, planes, depth + 1)


def _excluded_planes(criteria: dict[str, Any], path: str, planes: frozenset[str]) -> list[str]:
    """Warnings for criteria of a plane the target excludes (they never match)."""
    notes = []
    if "rows" in criteria and "data" not in planes:
        notes.append(f"{path}.rows: the target excludes the data plane, so rows never match")
    tables = criteria.get("tables")
    if isinstance(tables, dict) and "columns" in tables and "schema" not in planes:
        notes.append(
            f"{path}.tables.columns: the target excludes the schema plane, so columns never match"
        )
    return notes


def _parse(raw: Any, path: str, inherited: frozenset[str], depth: int) -> Selector:
    check_depth(path, depth)
    criteria = checked_object(raw, path, SELECTOR_KEYS)
    planes = (
        _parse_target(criteria["target"], f"{path}.target") if "target" in criteria else inherited
    )
    all_of = (
        _selector_list(criteria["$and"], f"{path}.$and", planes, depth)
        if "$and" in criteria
        else ()
    )
    any_of = (
        _selector_list(criteria["$or"], f"{path}.$or", planes, depth) if "$or" in criteria else None
    )
    negated = (
        _negated(criteria["$not"], f"{path}.$not", planes, depth) if "$not" in criteria else None
    )
    excluded = _excluded_planes(criteria, path, planes)
    nested = (*all_of, *(any_of or ()), *((negated,) if negated else ()))
    has_local = any(key in criteria for key in ("databases", "tables", "rows"))
    return Selector(
        planes=planes,
        databases=parse_databases(criteria["databases"], f"{path}.databases")
        if "databases" in criteria
        else None,
        tables=parse_tables(criteria["tables"], f"{path}.tables") if "tables" in criteria else None,
        rows=parse_rows(criteria["rows"], f"{path}.rows") if "rows" in criteria else None,
        local=has_local or not nested,
        never=bool(excluded),
        all_of=all_of,
        any_of=any_of,
        negated=negated,
        notes=tuple(dict.fromkeys([*excluded, *(note for sub in nested for note in sub.notes)])),
        source=raw,
    )


def parse_selector(raw: object, path: str = "selector") -> Selector:
    """Validate a whole selector (docs/selectors.md) and compile it.

    :param raw: the selector as parsed JSON (an object).
    :param path: how error messages name the selector's root.
    :raises SelectorError: naming the path of the first mistake.
    """
    return _parse(raw, path, frozenset(PLANES), 0)


def selector_matches(selector: Selector | object, diff: DiffJSON) -> bool:
    """Whether ``selector`` (parsed, or raw JSON to validate first) matches ``diff``."""
    parsed = selector if isinstance(selector, Selector) else parse_selector(selector)
    return parsed.matches(diff)
