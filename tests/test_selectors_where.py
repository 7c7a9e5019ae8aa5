"""Predicates, value semantics, coercion and regex flags of ``where`` clauses."""

from __future__ import annotations

from typing import Any

import pytest

from pytest_scoring.errors import SelectorError
from pytest_scoring.selector.where import CHANGE_FIELDS
from pytest_scoring.selector.where import parse_predicate
from pytest_scoring.selector.where import parse_where
from pytest_scoring.selector.where import values_equal

EQUALITY: list[tuple[Any, Any, bool]] = [
    (True, 1, True),
    (False, 0, True),
    (1, 1.0, True),
    ("1", 1, False),
    (None, None, True),
    (None, 0, False),
    ("", None, False),
    ({"$blob": "AAE="}, {"$blob": "AAE="}, True),
    ({"$blob": "AAE="}, "AAE=", False),
]


@pytest.mark.parametrize(("left", "right", "equal"), EQUALITY)
def test_values_compare_as_sqlite_stores_json(left: Any, right: Any, equal: bool) -> None:
    assert values_equal(left, right) is equal
    assert values_equal(right, left) is equal


PREDICATES: list[tuple[Any, Any, bool]] = [
    ("admin", "admin", True),
    ("admin", "Admin", False),
    (True, 1, True),
    (None, None, True),
    ({"$eq": 1}, 1.0, True),
    ({"$eq": "1"}, 1, False),
    ({"$eq": "1", "$coerce": "number"}, 1, True),
    ({"$eq": 1, "$coerce": "string"}, "1", True),
    ({"$eq": 1.5, "$coerce": "string"}, "1.5", True),
    ({"$eq": True, "$coerce": "boolean"}, "yes", True),
    ({"$eq": False, "$coerce": "boolean"}, "0", True),
    ({"$eq": True, "$coerce": "boolean"}, "maybe", False),
    ({"$eq": False, "$coerce": "boolean"}, None, True),
    ({"$not-eq": True, "$coerce": "boolean"}, None, True),
    ({"$eq": 5, "$coerce": "number"}, " 5 ", True),
    ({"$eq": 5, "$coerce": "number"}, "five", False),
    ({"$gt": 5, "$coerce": "number"}, "inf", False),
    ({"$not-eq": "admin"}, "user", True),
    ({"$not-eq": "admin"}, None, True),
    ({"$not-eq": None}, None, False),
    ({"$in": ["a", "b"]}, "b", True),
    ({"$in": ["a", "b"]}, "c", False),
    ({"$in": [1, 2]}, "1", False),
    ({"$in": [1, 2], "$coerce": "number"}, "1", True),
    ({"$not-in": ["a", "b"]}, "c", True),
    ({"$not-in": ["a", "b"]}, "a", False),
    ({"$gt": 18}, 21, True),
    ({"$gt": 18}, 18, False),
    ({"$gte": 18}, 18.0, True),
    ({"$lt": 18}, 17, True),
    ({"$lte": 18}, 19, False),
    ({"$gt": 18}, "21", False),
    ({"$gt": 18, "$coerce": "number"}, "21", True),
    ({"$gt": 18}, None, False),
    ({"$gt": "b"}, "c", True),
    ({"$gt": "b"}, 5, False),
    ({"$gte": 1, "$lte": 3}, 2, True),
    ({"$gte": 1, "$lte": 3}, 4, False),
    ({"$regex": "^\\$2b\\$"}, "$2b$12$abc", True),
    ({"$regex": "admin"}, "superadmin", True),
    ({"$regex": "/ADMIN/i"}, "superadmin", True),
    ({"$regex": "/ADMIN/"}, "superadmin", False),
    ({"$regex": "/^b$/m"}, "a\nb", True),
    ({"$regex": "/^b$/"}, "a\nb", False),
    ({"$regex": "/a.b/s"}, "a\nb", True),
    ({"$regex": "/a.b/"}, "a\nb", False),
    ({"$regex": "/admin/guy"}, "admin", True),
    ({"$regex": "^1"}, 12, True),
    ({"$regex": "."}, None, False),
    ({"$regex": "."}, {"$blob": "AAE="}, False),
    ({"$regex": "^1$", "$coerce": "string"}, True, True),
    ({"$blob": "AAE="}, {"$blob": "AAE="}, True),
    # RE2's dialect: $ only at the very end, ASCII \w, \pL for Unicode letters.
    ({"$regex": "b$"}, "ab\n", False),
    ({"$regex": "/b$/m"}, "ab\n", True),
    ({"$regex": "^\\w+$"}, "café", False),
    ({"$regex": "^\\pL+$"}, "café", True),
    ({"$regex": "/CAFÉ/i"}, "café", True),
    # Objects and lists compare whole ($before, $key, $changed_columns).
    ({"$eq": {"role": "user"}}, {"role": "user"}, True),
    ({"$eq": {"role": "user"}}, {"role": "user", "active": 1}, False),
    ({"$eq": {"role": "user", "active": None}}, {"role": "user"}, True),
    ({"$eq": {"org_id": 2, "user_id": 7}}, {"user_id": 7, "org_id": 2.0}, True),
    ({"$eq": {"role": "user"}}, "user", False),
    ({"$not-eq": {"role": "user"}}, {"role": "admin"}, True),
    ({"$in": [{"id": 1}, {"id": 2}]}, {"id": 2}, True),
    ({"$eq": {"id": "7"}, "$coerce": "number"}, {"id": 7}, True),
]


def test_regex_searches_the_whole_of_a_huge_hostile_value() -> None:
    padding = "a" * 5_000_000
    assert parse_predicate({"$regex": "ab"}, "p")(padding + "b") is True
    assert parse_predicate({"$regex": "^(\\w+\\s?)*$"}, "p")(padding + "!") is False


@pytest.mark.parametrize(
    "pattern",
    ["(a)\\1", "(?<=a)b", "(?=a)", "a++", "\\Z", "(?:a{1000}){1000}", "\\pL{1000}"],
    ids=["backreference", "lookbehind", "lookahead", "possessive", "Python's \\Z", "huge", "large"],
)
def test_a_pattern_re2_refuses_is_an_error_naming_its_path(pattern: str) -> None:
    with pytest.raises(SelectorError, match=r"^where\.password\.\$regex: RE2 cannot use"):
        parse_predicate({"$regex": pattern}, "where.password")


@pytest.mark.parametrize(("predicate", "value", "holds"), PREDICATES)
def test_a_predicate_holds_for_the_values_it_describes(
    predicate: Any, value: Any, holds: bool
) -> None:
    assert parse_predicate(predicate, "p")(value) is holds


@pytest.mark.parametrize(
    ("predicate", "holds"),
    [
        ("password", True),
        ({"$in": ["email", "password"]}, True),
        ({"$not-eq": "password"}, False),
        ({"$not-eq": "email"}, True),
        ({"$not-in": ["email"]}, True),
        ({"$regex": "^pass"}, True),
        ({"$eq": ["password", "salt"]}, True),
        ({"$eq": ["salt", "password"]}, False),
        ({"$eq": ["password"]}, False),
        ({"$not-eq": ["password"]}, True),
        ({"$in": [["email"], ["password", "salt"]]}, True),
    ],
)
def test_a_list_field_holds_a_predicate_through_its_elements(predicate: Any, holds: bool) -> None:
    assert parse_predicate(predicate, "p")(["password", "salt"]) is holds


ROW = {"role": "admin", "age": 30, "$before": {"role": "user"}, "a.b": 1}
CLAUSES: list[tuple[Any, bool]] = [
    ({"role": "admin", "age": 30}, True),
    ([{"role": "admin"}, {"age": 31}], False),
    ([], True),
    ({"$or": [{"role": "user"}, {"age": {"$gt": 18}}]}, True),
    ({"$and": [{"role": "admin"}, {"age": {"$lt": 18}}]}, False),
    ({"$not": {"role": "user"}}, True),
    ({"$not": [{"role": "admin"}, {"age": 30}]}, False),
    ({"missing": None}, True),
    ({"missing": {"$not-eq": None}}, False),
    ({"$before.role": "user"}, True),
    ({"a.b": 1}, True),
    ({"role.x": None}, True),
]


@pytest.mark.parametrize(("clause", "holds"), CLAUSES)
def test_a_where_clause_combines_its_predicates(clause: Any, holds: bool) -> None:
    assert parse_where(clause, "where", CHANGE_FIELDS)(ROW) is holds
