"""Formulas over hostile score metadata: every failure is a formula error, found fast."""

from __future__ import annotations

from typing import Any

import pytest

from pytest_scoring.errors import FormulaError
from pytest_scoring.scorers.formula import parse_formula


def nested(depth: int) -> list[Any]:
    value: list[Any] = []
    for _ in range(depth):
        value = [value]
    return value


def test_metadata_nested_past_the_stack_is_a_formula_error() -> None:
    formula = parse_formula("x.metadata['rows'] + [1]", ["x"])
    metadata = {"rows": nested(100_000)}
    with pytest.raises(FormulaError, match="limit exceeded: a value is nested too deeply"):
        formula.evaluate({"x": {"value": 1, "metadata": metadata}})


def test_a_product_stops_at_the_first_step_past_the_integer_limit() -> None:
    formula = parse_formula("math.prod([2 ** 2000, 2 ** 2000, 2 ** 2000, 'x'])", [])
    with pytest.raises(FormulaError, match="limit exceeded: an integer would exceed 4096 bits"):
        formula.evaluate({})
