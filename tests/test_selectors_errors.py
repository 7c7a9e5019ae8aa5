"""A malformed selector is refused up front with a message naming its path."""

from __future__ import annotations

from typing import Any

import pytest

from pytest_scoring.errors import SelectorError
from pytest_scoring.selector.language import parse_selector


def nested(operator: str, depth: int) -> dict[str, Any]:
    """A selector with ``depth`` levels of ``operator`` around an empty selector."""
    selector: dict[str, Any] = {}
    for _ in range(depth):
        selector = {operator: [selector]}
    return selector


def nested_where(depth: int) -> dict[str, Any]:
    clause: dict[str, Any] = {"role": "admin"}
    for _ in range(depth):
        clause = {"$not": clause}
    return {"rows": {"changed": {"where": clause}}}


ERRORS: list[tuple[str, Any, str]] = [
    ("a selector is an object", [], "selector: expected an object"),
    ("unknown top-level key", {"rowz": {}}, "selector.rowz: unknown key (expected one of target,"),
    ("unknown target", {"target": "both-ish"}, "selector.target: unknown target 'both-ish'"),
    ("empty target list", {"target": []}, "selector.target: unknown target []"),
    (
        "unknown operator in where",
        {"rows": {"changed": {"where": [{"role": {"$foo": 1}}]}}},
        "selector.rows.changed.where[0].role: unknown operator '$foo' (expected one of $eq, $not",
    ),
    (
        "unknown $ field in where",
        {"rows": {"added": {"where": {"$before.role": 1}}}},
        "selector.rows.added.where: unknown operator '$before.role'",
    ),
    (
        "a list as predicate",
        {"rows": {"added": {"where": {"role": ["a", "b"]}}}},
        "selector.rows.added.where.role: a list is not a predicate",
    ),
    (
        "a predicate without an operator",
        {"rows": {"added": {"where": {"age": {"$coerce": "number"}}}}},
        "selector.rows.added.where.age: a predicate needs an operator",
    ),
    (
        "bad coercion",
        {"rows": {"added": {"where": {"age": {"$eq": 1, "$coerce": "int"}}}}},
        "selector.rows.added.where.age.$coerce: unknown coercion 'int'",
    ),
    (
        "operand that cannot be coerced",
        {"rows": {"added": {"where": {"age": {"$gt": "old", "$coerce": "number"}}}}},
        "selector.rows.added.where.age.$gt: 'old' cannot be coerced to number",
    ),
    (
        "$in needs a list",
        {"rows": {"added": {"where": {"role": {"$in": "admin"}}}}},
        "selector.rows.added.where.role.$in: expected a list of values",
    ),
    (
        "$in items are values or objects of values",
        {"rows": {"added": {"where": {"role": {"$in": ["a", {"b": [1]}]}}}}},
        "selector.rows.added.where.role.$in[1].b: expected a value",
    ),
    (
        "$gt needs a number or text",
        {"rows": {"added": {"where": {"age": {"$gt": None}}}}},
        "selector.rows.added.where.age.$gt: expected a number or a string",
    ),
    (
        "bad regex",
        {"rows": {"added": {"where": {"email": {"$regex": "/(unclosed/i"}}}}},
        "where.email.$regex: RE2 cannot use the regular expression '/(unclosed/i': missing ): ",
    ),
    (
        "bad regex flag",
        {"rows": {"added": {"where": {"email": {"$regex": "/a/x"}}}}},
        "selector.rows.added.where.email.$regex: unknown regex flag 'x'",
    ),
    (
        "regex must be text",
        {"rows": {"added": {"where": {"email": {"$regex": 5}}}}},
        "selector.rows.added.where.email.$regex: expected a regular expression string",
    ),
    (
        "a clause is an object",
        {"rows": {"added": {"where": ["role"]}}},
        "selector.rows.added.where[0]: expected a clause",
    ),
    (
        "$or needs clauses",
        {"rows": {"added": {"where": {"$or": []}}}},
        "selector.rows.added.where.$or: expected a non-empty list of clauses",
    ),
    (
        "bad count operator",
        {"rows": {"added": {"$count": {"$in": [1]}}}},
        "selector.rows.added.$count: unknown operator '$in' (expected one of $eq, $not-eq, $gt",
    ),
    (
        "count operand is a whole number",
        {"rows": {"added": {"$count": {"$gte": 1.5}}}},
        "selector.rows.added.$count.$gte: expected a whole number >= 0",
    ),
    (
        "count is an object",
        {"rows": {"added": {"$count": 3}}},
        "selector.rows.added.$count: expected an object",
    ),
    (
        "a bare list at criterion level",
        {"tables": {"name": ["users", "roles"]}},
        "selector.tables.name: a bare list is ambiguous",
    ),
    (
        "has_all on a single-valued field",
        {"databases": {"name": {"has_all": ["a.db"]}}},
        "selector.databases.name.has_all: a single-valued field",
    ),
    (
        "has_all on table status",
        {"tables": {"status": {"has_all": ["changed"]}}},
        "selector.tables.status.has_all: a single-valued field",
    ),
    (
        "unknown table status",
        {"tables": {"status": "modified"}},
        "selector.tables.status: unknown value 'modified' (expected one of added, removed",
    ),
    (
        "unknown status in a list",
        {"tables": {"status": {"has_one": ["added", "gone"]}}},
        "selector.tables.status.has_one[1]: unknown value 'gone'",
    ),
    (
        "membership names are strings",
        {"tables": {"changed": {"has_one": ["users", 3]}}},
        "selector.tables.changed.has_one[1]: expected a name",
    ),
    (
        "empty membership",
        {"tables": {"changed": {}}},
        "selector.tables.changed: expected has_one or has_all",
    ),
    (
        "unknown membership key",
        {"tables": {"changed": {"any": ["users"]}}},
        "selector.tables.changed.any: unknown key",
    ),
    (
        "exists flags are booleans",
        {"databases": {"exists_after": "yes"}},
        "selector.databases.exists_after: expected true or false",
    ),
    (
        "unknown columns key",
        {"tables": {"columns": {"renamed": "a"}}},
        "selector.tables.columns.renamed: unknown key",
    ),
    (
        "a target is not a list",
        {"target": ["data", "schema"]},
        "selector.target: unknown target ['data', 'schema'] (expected one of data, schema, both)",
    ),
    ("$and takes a list", {"$and": {"rows": {}}}, "selector.$and: expected a non-empty list"),
    ("$or takes a list", {"$or": {"rows": {}}}, "selector.$or: expected a non-empty list"),
    (
        "$not takes one selector",
        {"$not": [{"rows": {}}]},
        "selector.$not: expected one selector object; to negate several, wrap them in $and",
    ),
    (
        "bad template",
        {"rows": {"added": {"has_one": [3]}}},
        "selector.rows.added.has_one[0]: expected a template",
    ),
    (
        "template values are values",
        {"rows": {"added": {"has_one": [{"role": ["a"]}]}}},
        "selector.rows.added.has_one[0].role: expected a value",
    ),
    (
        "by_key is an object of values",
        {"rows": {"by_key": {"id": {"$gt": 1}}}},
        "selector.rows.by_key.id: expected a value",
    ),
    (
        "errors inside logic name their index",
        {"$or": [{}, {"tables": {"nme": "x"}}]},
        "selector.$or[1].tables.nme: unknown key",
    ),
    ("empty $and", {"$and": []}, "selector.$and: expected a non-empty list of selectors, got []"),
    ("deep selector logic", nested("$and", 60), "nested deeper than 50 levels"),
    ("deep where logic", nested_where(60), "nested deeper than 50 levels"),
]


@pytest.mark.parametrize(
    ("selector", "message"), [case[1:] for case in ERRORS], ids=[case[0] for case in ERRORS]
)
def test_a_malformed_selector_is_refused_naming_its_path(selector: Any, message: str) -> None:
    with pytest.raises(SelectorError) as caught:
        parse_selector(selector)
    assert message in str(caught.value)


def test_the_root_path_can_be_renamed_for_configuration_files() -> None:
    with pytest.raises(SelectorError, match=r"^scorers\[1\]\.selector\.rowz: unknown key"):
        parse_selector({"rowz": {}}, path="scorers[1].selector")


def test_nesting_up_to_the_limit_is_accepted() -> None:
    assert parse_selector(nested("$or", 50)).matches({"comparisons": {}}) is False
    parse_selector(nested_where(49))
