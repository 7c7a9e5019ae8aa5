"""Selectors matched against a small hand-written diff: one case per construct."""

from __future__ import annotations

from typing import Any

import pytest
from diff_samples import change
from diff_samples import column
from diff_samples import data_table
from diff_samples import database
from diff_samples import diff
from diff_samples import schema_table

from pytest_scoring.selector.language import Selector
from pytest_scoring.selector.language import parse_selector
from pytest_scoring.selector.language import selector_matches

APP = database(
    data={
        "users": data_table(
            added=[{"id": 11, "email": "eve@example.com", "role": "user", "active": 1}],
            removed=[{"id": 2, "email": "bob@example.com", "role": "user", "active": 0}],
            changed=[
                change({"id": 3}, password=("x", "y")),
                change({"id": 4}, role=("user", "admin"), active=(0, 1)),
            ],
        ),
        "sessions": data_table(status="unchanged"),
        "tokens": data_table(
            status="added",
            added=[{"token": "abc", "user_id": 11}, {"token": "def", "user_id": None}],
        ),
        "blobs": data_table(added=[{"id": 1, "data": {"$blob": "AAE="}}]),
    },
    schema={
        "users": schema_table("changed", added=[column("active", "INTEGER")]),
        "tokens": schema_table("added", added=[column("token"), column("user_id", "INTEGER")]),
    },
)
SAMPLE = diff(
    {
        "data/app.db": APP,
        "logs.sqlite": database(data={"events": data_table(status="unchanged")}),
        "new/cache.db": database(
            data={"items": data_table(status="added", added=[{"k": "a"}])},
            schema={"items": schema_table("added", added=[column("k")])},
            exists_before=False,
        ),
    }
)

CASES: list[tuple[str, dict[str, Any], bool]] = [
    ("an empty selector matches any change", {}, True),
    ("a schema target matches a schema change", {"target": "schema"}, True),
    ("a data target matches a data change", {"target": "data"}, True),
    ("a database name matches the bare file name", {"databases": {"name": "app.db"}}, True),
    ("a database name matches the relative key", {"databases": {"name": "data/app.db"}}, True),
    ("a database path needs the relative key", {"databases": {"path": "app.db"}}, False),
    ("a database path matches the relative key", {"databases": {"path": "data/app.db"}}, True),
    (
        "database facts alone match an unchanged database",
        {"databases": {"name": "logs.sqlite"}},
        True,
    ),
    (
        "an unchanged database has no changed table",
        {"databases": {"name": "logs.sqlite"}, "tables": {"status": "changed"}},
        False,
    ),
    (
        "a created database matches exists_before false",
        {"databases": {"name": "cache.db", "exists_before": False}},
        True,
    ),
    (
        "an existing database fails exists_before false",
        {"databases": {"name": "app.db", "exists_before": False}},
        False,
    ),
    (
        "has_one names any of several",
        {"databases": {"name": {"has_one": ["x.db", "app.db"]}}},
        True,
    ),
    ("a table name matches a changed table", {"tables": {"name": "users"}}, True),
    ("a table name alone needs that table and some change", {"tables": {"name": "sessions"}}, True),
    ("a table name alone needs one of its names", {"tables": {"name": "nope"}}, False),
    (
        "a table name alone needs a change in its database",
        {"tables": {"name": {"has_one": ["nope", "events"]}}},
        False,
    ),
    (
        "an explicit unchanged status matches",
        {"tables": {"name": "sessions", "status": "unchanged"}},
        True,
    ),
    ("a status nobody has does not match", {"tables": {"status": "removed"}}, False),
    ("a table added in the schema plane is added", {"tables": {"added": "tokens"}}, True),
    (
        "has_all on table sets needs one database",
        {"tables": {"added": {"has_all": ["tokens", "items"]}}},
        False,
    ),
    (
        "an unchanged schema status decides when both planes are targeted",
        {"tables": {"changed": {"has_all": ["users", "blobs"]}}},
        False,
    ),
    (
        "a data target sees the data status",
        {"target": "data", "tables": {"changed": {"has_all": ["users", "blobs"]}}},
        True,
    ),
    (
        "an unchanged schema status decides beside rows",
        {"tables": {"status": "changed"}, "rows": {"added": {"has_one": [{"id": 1}]}}},
        False,
    ),
    (
        "a schema target sees only schema status",
        {"target": "schema", "tables": {"changed": "blobs"}},
        False,
    ),
    ("an added column matches", {"tables": {"columns": {"added": "active"}}}, True),
    (
        "columns must belong to the named table",
        {"tables": {"name": "users", "columns": {"added": "token"}}},
        False,
    ),
    (
        "has_all columns of one table",
        {"tables": {"name": "tokens", "columns": {"added": {"has_all": ["token", "user_id"]}}}},
        True,
    ),
    ("an added row matches a template", {"rows": {"added": {"has_one": [{"role": "user"}]}}}, True),
    (
        "a bare template object is one template",
        {"rows": {"added": {"has_one": {"role": "x"}}}},
        False,
    ),
    ("a column template needs a non-null value", {"rows": {"added": {"has_one": "email"}}}, True),
    (
        "a list template needs all columns non-null",
        {"rows": {"added": {"has_one": [["token", "user_id"]]}}},
        True,
    ),
    (
        "has_all templates may be matched by different rows",
        {"rows": {"added": {"has_all": [{"token": "abc"}, {"token": "def"}]}}},
        True,
    ),
    (
        "has_all fails when one template is unmatched",
        {"rows": {"added": {"has_all": [{"token": "abc"}, {"token": "zzz"}]}}},
        False,
    ),
    ("where on added rows filters", {"rows": {"added": {"where": {"token": "def"}}}}, True),
    (
        "a count holds for the same table",
        {"tables": {"name": "tokens"}, "rows": {"added": {"$count": {"$eq": 2}}}},
        True,
    ),
    (
        "a count that is too high fails",
        {"tables": {"name": "tokens"}, "rows": {"added": {"$count": {"$gt": 2}}}},
        False,
    ),
    (
        "a zero count matches an unchanged table",
        {"tables": {"name": "sessions"}, "rows": {"added": {"$count": {"$eq": 0}}}},
        True,
    ),
    ("a removed row matches", {"rows": {"removed": {"has_one": [{"id": 2}]}}}, True),
    ("a changed column matches", {"rows": {"changed": {"has_one": "password"}}}, True),
    (
        "has_all changed columns in one row",
        {"rows": {"changed": {"has_all": ["role", "active"]}}},
        True,
    ),
    (
        "has_all changed columns across rows fails",
        {"rows": {"changed": {"has_all": ["password", "role"]}}},
        False,
    ),
    (
        "where sees old and new values",
        {"rows": {"changed": {"where": {"$before.role": "user", "role": "admin"}}}},
        True,
    ),
    (
        "where $after holds new values",
        {"rows": {"changed": {"where": {"$after.password": "x"}}}},
        False,
    ),
    (
        "where $changed_columns holds the changed names",
        {"rows": {"changed": {"where": {"$changed_columns": "password"}}}},
        True,
    ),
    ("where $key holds the key", {"rows": {"changed": {"where": {"$key.id": 3}}}}, True),
    (
        "where $key compares",
        {"rows": {"changed": {"where": {"$key.id": {"$gt": 10}}}}},
        False,
    ),
    ("a count of changed rows", {"rows": {"changed": {"$count": {"$eq": 2}}}}, True),
    ("no changed row can never match", {"rows": {"changed": {"$count": {"$eq": 0}}}}, False),
    (
        "no surviving changed row can never match",
        {"rows": {"changed": {"where": {"role": "x"}, "$count": {"$lte": 0}}}},
        False,
    ),
    ("no added row can match", {"rows": {"added": {"$count": {"$eq": 0}}}}, True),
    (
        "$before compares whole",
        {"rows": {"changed": {"where": {"$before": {"$eq": {"role": "user", "active": 0}}}}}},
        True,
    ),
    (
        "$before compares every changed column",
        {"rows": {"changed": {"where": {"$before": {"$eq": {"role": "user"}}}}}},
        False,
    ),
    ("$key compares whole", {"rows": {"changed": {"where": {"$key": {"$eq": {"id": 3}}}}}}, True),
    (
        "$changed_columns compares as a list",
        {"rows": {"changed": {"where": {"$changed_columns": {"$eq": ["role", "active"]}}}}},
        True,
    ),
    (
        "$changed_columns as a list needs all of them",
        {"rows": {"changed": {"where": {"$changed_columns": {"$eq": ["role"]}}}}},
        False,
    ),
    (
        "rows under a schema target never match",
        {"target": "schema", "rows": {"added": {"has_one": [{"role": "user"}]}}},
        False,
    ),
    (
        "columns under a data target never match",
        {"target": "data", "tables": {"columns": {"added": "active"}}},
        False,
    ),
    (
        "$not of criteria for an excluded plane holds",
        {"$not": {"target": "schema", "rows": {}}},
        True,
    ),
    (
        "a count after has_one filters",
        {"rows": {"changed": {"has_one": "password", "$count": {"$eq": 1}}}},
        True,
    ),
    (
        "by_key keeps the changed row with that key",
        {"rows": {"by_key": {"id": 3}, "changed": {"has_one": "password"}}},
        True,
    ),
    (
        "by_key drops other rows",
        {"rows": {"by_key": {"id": 4}, "changed": {"has_one": "password"}}},
        False,
    ),
    ("by_key alone needs some row", {"rows": {"by_key": {"id": 11}}}, True),
    ("by_key alone without rows fails", {"rows": {"by_key": {"id": 99}}}, False),
    ("empty rows need some row change", {"rows": {}}, True),
    (
        "a BLOB literal matches a BLOB",
        {"rows": {"added": {"has_one": [{"data": {"$blob": "AAE="}}]}}},
        True,
    ),
    (
        "$and combines facts about one database",
        {"$and": [{"tables": {"name": "users"}}, {"databases": {"name": "cache.db"}}]},
        False,
    ),
    (
        "$and holds when one database has both",
        {"$and": [{"tables": {"name": "users"}}, {"databases": {"name": "app.db"}}]},
        True,
    ),
    (
        "$or needs one selector",
        {"$or": [{"tables": {"name": "nope"}}, {"tables": {"name": "users"}}]},
        True,
    ),
    (
        "$not holds for a database the selector misses",
        {"$not": {"tables": {"name": "users"}}},
        True,
    ),
    (
        "$not fails where the selector holds",
        {"databases": {"name": "app.db"}, "$not": {"tables": {"name": "users"}}},
        False,
    ),
    ("$not of no match matches", {"$not": {"tables": {"name": "nope"}}}, True),
    (
        "local criteria hold beside logic",
        {"$and": [{"databases": {"name": "app.db"}}], "tables": {"name": "nope"}},
        False,
    ),
    (
        "nested selectors inherit the target",
        {"target": "schema", "$and": [{"tables": {"changed": "blobs"}}]},
        False,
    ),
    (
        "nested selectors may set their own target",
        {"target": "schema", "$and": [{"target": "data", "tables": {"changed": "blobs"}}]},
        True,
    ),
]


@pytest.mark.parametrize(
    ("selector", "expected"), [case[1:] for case in CASES], ids=[case[0] for case in CASES]
)
def test_a_selector_construct_matches_or_not(selector: dict[str, Any], expected: bool) -> None:
    assert parse_selector(selector).matches(SAMPLE) is expected


def test_selector_matches_accepts_raw_json_and_parsed_selectors() -> None:
    raw = {"rows": {"changed": {"has_one": "password"}}}
    assert selector_matches(raw, SAMPLE)
    assert selector_matches(parse_selector(raw), SAMPLE)


def test_a_parsed_selector_keeps_its_source_for_metadata() -> None:
    raw = {"target": "data"}
    parsed = parse_selector(raw)
    assert isinstance(parsed, Selector)
    assert parsed.source == raw


def test_a_database_key_written_with_backslashes_matches_by_name_and_path() -> None:
    windows = diff({"data\\app.db": APP})
    assert parse_selector({"databases": {"path": "data/app.db"}}).matches(windows)
    assert parse_selector({"databases": {"name": "app.db"}}).matches(windows)


def test_nothing_matches_an_empty_or_partial_diff() -> None:
    selector = parse_selector({})
    assert not selector.matches({})
    assert not selector.matches({"comparisons": {"x.db": {"error": "not a SQLite database"}}})


def test_a_changed_row_far_beyond_the_examples_still_matches() -> None:
    changed = [change({"id": n}, name=("a", "b")) for n in range(5000)]
    changed.append(change({"id": 5000}, role=("user", "admin")))
    big = diff({"app.db": database(data={"users": data_table(changed=changed)})})
    selector = parse_selector({"rows": {"changed": {"where": {"role": "admin"}}}})
    assert selector.matches(big)
