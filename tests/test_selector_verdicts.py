"""Selector verdicts as inspect_toolkit's selectors expect them: per database, the schema-status
rule and its warning, planes a target leaves out, and the time budget (inside SQLite too)."""

from __future__ import annotations

import contextlib
import sqlite3
from pathlib import Path
from typing import Any

import pytest
from diff_samples import data_table
from diff_samples import database
from diff_samples import diff
from diff_samples import schema_table

from pytest_scoring.core.budget import SelectorTimeout
from pytest_scoring.core.budget import TimeBudget
from pytest_scoring.db.diff import RowStream
from pytest_scoring.selector.language import parse_selector

#: ``users`` changed rows only (its schema unchanged); ``audit`` changed its schema only.
ROWS_ONLY = diff(
    {
        "app.db": database(
            data={
                "users": data_table(added=[{"id": 9, "role": "admin"}]),
                "audit": data_table(status="unchanged"),
            },
            schema={"audit": schema_table("changed", added=[{"name": "note"}])},
        ),
        "other.db": database(data={"logs": data_table(status="unchanged")}, exists_before=False),
    }
)


def test_top_level_logic_combines_facts_about_one_database() -> None:
    either = {"$or": [{"databases": {"name": "other.db"}}, {"tables": {"name": "users"}}]}
    both = {"$and": [{"databases": {"name": "other.db"}}, {"tables": {"name": "users"}}]}
    assert parse_selector(either).matches(ROWS_ONLY)
    assert not parse_selector(both).matches(ROWS_ONLY)


def test_not_over_a_diff_without_databases_does_not_match() -> None:
    assert not parse_selector({"$not": {"rows": {}}}).matches(diff({}))


def test_existence_flags_compare_with_the_diffs_info() -> None:
    # other.db has no change at all: a selector of database facts only needs none.
    assert parse_selector({"databases": {"exists_before": False}}).matches(ROWS_ONLY)
    created = {"databases": {"exists_before": False}, "tables": {"status": "unchanged"}}
    assert parse_selector(created).matches(ROWS_ONLY)
    assert not parse_selector({"databases": {"exists_after": False}}).matches(ROWS_ONLY)


def test_database_facts_alone_match_an_unchanged_database_that_has_them() -> None:
    unchanged = diff({"app.db": database(data={"users": data_table(status="unchanged")})})
    assert parse_selector({"databases": {"exists_before": True}}).matches(unchanged)
    assert parse_selector({"databases": {"name": "app.db"}}).matches(unchanged)
    assert not parse_selector({"databases": {"name": "other.db"}}).matches(unchanged)
    assert not parse_selector({"databases": {"exists_before": False}}).matches(unchanged)
    assert not parse_selector({}).matches(unchanged), "an empty selector still asks for a change"


def test_a_status_the_schema_decides_fails_with_a_warning_naming_the_table() -> None:
    verdict = parse_selector({"tables": {"changed": "users"}}).evaluate(ROWS_ONLY)
    assert not verdict.matched
    (warning,) = verdict.warnings
    assert warning.startswith("selector.tables.changed: table 'users' of 'app.db' changed in ")
    assert 'target "data"' in warning
    assert parse_selector({"target": "data", "tables": {"changed": "users"}}).matches(ROWS_ONLY)


def test_a_per_table_status_beside_rows_warns_only_when_the_rows_hold() -> None:
    holds = {"tables": {"status": "changed"}, "rows": {"added": {"has_one": [{"role": "admin"}]}}}
    verdict = parse_selector(holds).evaluate(ROWS_ONLY)
    assert not verdict.matched
    assert [w.split(":")[0] for w in verdict.warnings] == ["selector.tables.status"]
    misses = {"tables": {"status": "changed"}, "rows": {"added": {"has_one": [{"role": "x"}]}}}
    assert parse_selector(misses).evaluate(ROWS_ONLY).warnings == ()


def test_a_selector_asking_for_some_change_sees_either_plane() -> None:
    assert parse_selector({"tables": {"name": "users"}}).matches(ROWS_ONLY)
    assert parse_selector({"target": "schema", "tables": {"name": "audit"}}).matches(ROWS_ONLY)
    assert parse_selector({"tables": {"status": "changed", "name": "audit"}}).matches(ROWS_ONLY)


@pytest.mark.parametrize(
    ("selector", "note"),
    [
        ({"target": "schema", "rows": {}}, "selector.rows: the target excludes the data plane"),
        (
            {"$or": [{"target": "data", "tables": {"columns": {"added": "note"}}}]},
            "selector.$or[0].tables.columns: the target excludes the schema plane",
        ),
    ],
)
def test_criteria_for_a_plane_left_out_never_match_and_say_so(
    selector: dict[str, Any], note: str
) -> None:
    verdict = parse_selector(selector).evaluate(ROWS_ONLY)
    assert not verdict.matched
    assert verdict.warnings[0].startswith(note)


def test_a_spent_budget_stops_the_evaluation() -> None:
    many = diff({"app.db": database(data={"t": data_table(added=[{"id": n} for n in range(600)])})})
    selector = parse_selector({"rows": {"added": {"where": {"id": -1}}}})
    with pytest.raises(SelectorTimeout, match="time budget of 1e-09 s"):
        selector.evaluate(many, TimeBudget(1e-9))
    assert not selector.evaluate(many, TimeBudget(60)).matched


def test_a_spent_budget_interrupts_sqlite_while_rows_stream(tmp_path: Path) -> None:
    before, after = tmp_path / "before.db", tmp_path / "after.db"
    for path, rows in ((before, 0), (after, 50_000)):
        with contextlib.closing(sqlite3.connect(path)) as db, db:
            db.execute("CREATE TABLE t (id INTEGER PRIMARY KEY, v TEXT)")
            db.executemany("INSERT INTO t VALUES (?, 'x')", ((n,) for n in range(rows)))
    budget = TimeBudget(1e-9)
    with pytest.raises(SelectorTimeout):
        next(iter(RowStream(before, after, "t", "removed", budget=budget)))
    assert budget.expired
    assert len(list(RowStream(before, after, "t", "added", budget=TimeBudget(60)))) == 50_000
