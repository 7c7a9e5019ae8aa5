"""The composite formula language: what it computes, and what it refuses."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import pytest

from pytest_scoring.core.score import Score
from pytest_scoring.errors import FormulaError
from pytest_scoring.scorers.formula import parse_formula

SCORES: dict[str, Score] = {
    "tests": {
        "value": 75.0,
        "answer": None,
        "explanation": "3 passed, 1 failed",
        "metadata": {"counts": {"passed": 3, "total": 4}, "failed_tests": ["t::a"]},
    },
    "db": {"value": "I", "answer": "no", "explanation": None, "metadata": {}},
    "zero": {"value": 0, "metadata": {}},
}


def evaluate(text: str) -> Any:
    return parse_formula(text, SCORES).evaluate(SCORES)


@pytest.mark.parametrize(
    ("formula", "expected"),
    [
        ("tests.value / 100 * (db.value == 'I')", 0.75),
        ("max(tests.value, zero.value)", 75.0),
        ("tests.metadata['counts']['passed'] / tests.metadata['counts']['total']", 0.75),
        ("tests.metadata['failed_tests'][0]", "t::a"),
        ("len(tests.metadata['failed_tests'])", 1),
        ("db.value == 'C' and tests.value == 100", False),
        ("db.value == 'C' or tests.value > 50", True),
        ("not db.answer", False),
        ("'C' if tests.value >= 75 else 'I'", "C"),
        ("0 < tests.value <= 100", True),
        ("db.value in ['C', 'P']", False),
        ("tests.explanation is None", False),
        ("round(math.sqrt(tests.value), 2)", 8.66),
        ("math.floor(tests.value / 10) + abs(-1)", 8),
        ("pow(2, 10) - 2 ** 10 + 7 // 2 + 7 % 4", 6),
        ("sum([1, 2, 3]) + min(4, 5)", 10),
        ("int('12') + float('0.5') + bool(1)", 13.5),
        ("str(zero.value) + 'x' * 3", "0xxx"),
        ("math.pi > 3 and math.inf > 10**100", True),
        ("-tests.value", -75.0),
        ("(\n  tests.value\n  + 1\n)", 76.0),
    ],
)
def test_a_formula_computes_from_the_listed_scores(formula: str, expected: object) -> None:
    assert evaluate(formula) == expected


def test_a_formula_reports_the_scorers_it_reads() -> None:
    assert parse_formula("tests.value + zero.value", SCORES).variables == {"tests", "zero"}


MARKER = "MARKER_FILE"

#: Each would escape the language, run code or exhaust the machine.
HOSTILE = [
    "tests.__class__",
    "tests.value.__class__.__mro__[1].__subclasses__()",
    "().__class__.__bases__[0].__subclasses__()",
    "tests.__globals__",
    "max.__self__.__import__('os')",
    "__import__('os').system('touch {marker}')",
    "getattr(tests, '__class__')",
    "eval('1')",
    "exec('import os')",
    "open('{marker}', 'w')",
    "compile('1', 'f', 'eval')",
    "globals()",
    "vars()",
    "type(tests.value)",
    "'{{0.__class__}}'.format(tests.value)",
    "'{{0.__init__.__globals__}}'.format(max)",
    "f'{{tests.value.__class__}}'",
    "(lambda: __import__('os').system('touch {marker}'))()",
    "[x for x in (1, 2)]",
    "{{x: 1 for x in (1,)}}",
    "{{1, 2}}",
    "{{'a': 1}}",
    "(x for x in (1,))",
    "import os",
    "(x := 1)",
    "max(*[1, 2])",
    "max(**{{'a': 1}})",
    "tests",
    "unknown.value",
    "math.__loader__",
    "math.sys",
    "tests.value.upper()",
    "tests.metadata.keys()",
    "tests.metadata['counts'][0:1]",
    "1 << 100",
    "~1",
    "1 @ 2",
    "1j * 2",
    "b'bytes'",
    "...",
    "__builtins__",
    "__import__",
    "-" * 5000 + "1",
    "(" * 300 + "1" + ")" * 300,
    "abs(" * 150 + "1" + ")" * 150,
    "1" * 5000,
    "await tests",
    "yield 1",
    "tests.value if True else __import__('os')",
    "max(tests.value, key=__import__)",
]

#: Each is in the language but would take unbounded time or memory: it must fail fast.
EXHAUSTING = [
    "9**9**9**9",
    "2 ** 100000",
    "pow(10, 10**6)",
    "'a' * 10**10",
    "10**10 * 'a'",
    "['a'] * 10**9",
    "['x' * 99999] * 100",
    "'x' * 60000 + 'y' * 60000",
    "str(['x' * 90000, 'y' * 90000])",
    "math.factorial(10**7)",
    "math.comb(10**7, 5 * 10**6)",
    "round(1, -10**9)",
    "'%999999999d' % 1",
    "(2 ** 4000) * (2 ** 4000)",
    "int('9' * 5000)",
    "1e308 * 1e308 > 0 and 10.0 ** 400",
]


def test_the_hostile_corpus_is_large() -> None:
    assert len(HOSTILE) + len(EXHAUSTING) >= 30


@pytest.mark.parametrize("template", HOSTILE)
def test_a_hostile_formula_is_rejected_before_it_runs(
    template: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    marker = tmp_path / MARKER
    with pytest.raises(FormulaError):
        parse_formula(template.format(marker=marker), SCORES)
    assert not marker.exists()


@pytest.mark.parametrize("formula", EXHAUSTING)
def test_a_formula_that_would_exhaust_the_machine_fails_fast(formula: str) -> None:
    checked = parse_formula(formula, SCORES)
    with pytest.raises(FormulaError):
        checked.evaluate(SCORES)


@pytest.mark.parametrize(
    ("formula", "message"),
    [
        ("1 + tests.__class__", "line 1, column 11: attribute '__class__' is not allowed"),
        ("tests.value +\n  getattr(db, 'x')", "line 2, column 3: calling 'getattr' is not allowed"),
        (
            "nobody.value",
            "line 1, column 1: name 'nobody' is not allowed (the listed scorers: db, tests, zero)",
        ),
        (
            "tests",
            "line 1, column 1: use 'tests' with one of .answer, .explanation, .metadata, .value",
        ),
        ("tests.value +", "at its end: invalid syntax"),
        ("1 +* 2", "line 1, column 4: invalid syntax"),
        ("lambda: 1", "line 1, column 1: lambda is not allowed"),
        ("x" * 2001, "longer than 2000 characters"),
    ],
)
def test_a_rejected_formula_says_where_and_why(formula: str, message: str) -> None:
    with pytest.raises(FormulaError, match="^" + re.escape(message)):
        parse_formula(formula, SCORES)


@pytest.mark.parametrize(
    ("formula", "reason"),
    [
        ("tests.value / zero.value", "ZeroDivisionError: float division by zero"),
        ("tests.metadata['nope']", "no key 'nope'"),
        ("tests.metadata['failed_tests'][5]", "IndexError"),
        ("db.value + 1", "TypeError"),
        ("math.sqrt(-1)", "ValueError: math domain error"),
    ],
)
def test_a_formula_that_fails_while_scoring_names_the_reason(formula: str, reason: str) -> None:
    with pytest.raises(FormulaError, match=re.escape(reason)):
        evaluate(formula)
