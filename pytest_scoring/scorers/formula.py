"""Composite formulas: a tiny expression language checked and walked as a syntax tree.

The formula text is parsed with :func:`ast.parse` and every node is checked against a
whitelist when the configuration is loaded; evaluation walks that tree itself. Nothing of
the user's text is ever compiled to code, ``eval``-ed or ``exec``-ed, and every value the
walk builds is bounded in size, so ``9**9**9**9`` or ``"a" * 10**10`` fail fast instead of
exhausting the machine (the scored repository may be hostile).
"""

from __future__ import annotations

import ast
import math
import operator
from collections.abc import Callable
from collections.abc import Collection
from collections.abc import Mapping
from typing import Any
from typing import Final
from typing import final

from pytest_scoring.core.score import Score
from pytest_scoring.errors import FormulaError
from pytest_scoring.text import some_names

#: Longest formula text accepted, in characters.
MAX_FORMULA_LENGTH: Final = 2_000
#: Deepest nesting of the syntax tree accepted.
MAX_DEPTH: Final = 100
#: Largest integer a formula may build, in bits.
MAX_INT_BITS: Final = 4_096
#: Largest string or list (counting nested items) a formula may build.
MAX_SIZE: Final = 100_000
#: Largest ``ndigits`` of ``round`` and argument of ``math.factorial``/``comb``/``perm``.
MAX_SMALL_ARGUMENT: Final = 1_000

#: Attributes a formula may read on a score.
SCORE_FIELDS: Final = frozenset({"value", "answer", "explanation", "metadata"})
#: ``math`` constants a formula may read.
MATH_CONSTANTS: Final = frozenset({"pi", "e", "tau", "inf", "nan"})

_Walk = Callable[[ast.AST, Mapping[str, Score]], Any]


class _Bounded(Exception):
    """A value would grow past the limits (reported as a scoring-time formula error)."""


def _weight(value: Any) -> int:
    """Size of a value for the limits: characters of a string, items of a list (nested)."""
    if isinstance(value, str):
        return len(value)
    if isinstance(value, list | tuple):
        return 1 + sum(_weight(item) for item in value)
    if isinstance(value, dict):
        return 1 + sum(_weight(key) + _weight(item) for key, item in value.items())
    return 1


def _bounded(value: Any) -> Any:
    """``value`` itself, after checking it is within the size limits."""
    if isinstance(value, int) and not isinstance(value, bool):
        if value.bit_length() > MAX_INT_BITS:
            raise _Bounded(f"an integer would exceed {MAX_INT_BITS} bits")
    elif isinstance(value, str | list | tuple | dict) and _weight(value) > MAX_SIZE:
        raise _Bounded(f"a string or list would exceed {MAX_SIZE:,} items")
    return value


def _small(value: Any, what: str) -> None:
    if isinstance(value, int) and abs(value) > MAX_SMALL_ARGUMENT:
        raise _Bounded(f"{what} is beyond {MAX_SMALL_ARGUMENT}")


def _multiply(left: Any, right: Any) -> Any:
    """``*`` that refuses to repeat a string or list past :data:`MAX_SIZE` before doing it."""
    for sequence, count in ((left, right), (right, left)):
        repeated = isinstance(sequence, str | list | tuple) and isinstance(count, int)
        if repeated and _weight(sequence) * max(count, 0) > MAX_SIZE:
            raise _Bounded(f"a string or list would exceed {MAX_SIZE:,} items")
    return _bounded(left * right)


def _power(base: Any, exponent: Any, modulus: Any = None) -> Any:
    """``**`` and ``pow`` that refuse an integer result past :data:`MAX_INT_BITS` up front."""
    integers = modulus is None and isinstance(base, int) and isinstance(exponent, int)
    if integers and abs(base) > 1 and exponent > 0 and exponent * base.bit_length() > MAX_INT_BITS:
        raise _Bounded(f"an integer would exceed {MAX_INT_BITS} bits")
    return _bounded(pow(base, exponent, modulus))


def _modulo(left: Any, right: Any) -> Any:
    if isinstance(left, str):  # printf-style formatting can build huge strings
        raise TypeError("'%' formatting of strings is not allowed")
    return left % right


def _round(number: Any, ndigits: Any = None) -> Any:
    _small(ndigits, "round() ndigits")
    return round(number, ndigits)


def _product(values: Any, *, start: Any = 1) -> Any:
    """``math.prod`` that checks the limits after each step.

    Multiplying 40,000 integers of 2,000 bits at once would take hours before the result's
    size could be checked.
    """
    result = start
    for value in values:
        result = _multiply(result, value)
    return result


def _guard_small_arguments(function: Callable[..., Any], what: str) -> Callable[..., Any]:
    def guarded(*args: Any) -> Any:
        for arg in args:
            _small(arg, f"math.{what}() argument")
        return function(*args)

    return guarded


_BINARY: Final[dict[type[ast.operator], Callable[[Any, Any], Any]]] = {
    ast.Add: operator.add,  # every result is checked by _binary
    ast.Sub: operator.sub,
    ast.Mult: _multiply,
    ast.Div: operator.truediv,
    ast.FloorDiv: operator.floordiv,
    ast.Mod: _modulo,
    ast.Pow: _power,
}
_UNARY: Final[dict[type[ast.unaryop], Callable[[Any], Any]]] = {
    ast.UAdd: operator.pos,
    ast.USub: operator.neg,
    ast.Not: operator.not_,
}
_COMPARE: Final[dict[type[ast.cmpop], Callable[[Any, Any], Any]]] = {
    ast.Eq: operator.eq,
    ast.NotEq: operator.ne,
    ast.Lt: operator.lt,
    ast.LtE: operator.le,
    ast.Gt: operator.gt,
    ast.GtE: operator.ge,
    ast.In: lambda a, b: a in b,
    ast.NotIn: lambda a, b: a not in b,
    ast.Is: operator.is_,
    ast.IsNot: operator.is_not,
}

#: The functions a formula may call by name.
FUNCTIONS: Final[dict[str, Callable[..., Any]]] = {
    "abs": abs,
    "max": max,
    "min": min,
    "round": _round,
    "sum": sum,
    "pow": _power,
    "len": len,
    "bool": bool,
    "int": int,
    "float": float,
    "str": str,
}


def _math_functions() -> dict[str, Callable[..., Any]]:
    """Every public function of :mod:`math`, the expensive ones guarded."""
    functions = {
        name: getattr(math, name)
        for name in dir(math)
        if not name.startswith("_") and callable(getattr(math, name))
    }
    for name in ("factorial", "comb", "perm"):
        functions[name] = _guard_small_arguments(functions[name], name)
    functions["prod"] = _product
    return functions


MATH_FUNCTIONS: Final = _math_functions()

_CONSTANT_TYPES: Final = (int, float, str, bool, type(None))
#: Operator and context nodes: checked through their parent node, never walked themselves.
_OPERATOR_NODES: Final = (ast.operator, ast.unaryop, ast.boolop, ast.cmpop, ast.expr_context)


def _position(node: ast.AST) -> str:
    if isinstance(node, ast.Attribute):
        return _attribute_position(node)
    line = getattr(node, "lineno", 2) - 1
    column = getattr(node, "col_offset", 0) + 1
    return f"line {line}, column {column}"


def _attribute_position(node: ast.Attribute) -> str:
    """Where the attribute's name starts (``a.__class__`` points at ``__class__``)."""
    end = node.end_col_offset or node.col_offset + len(node.attr) + 1
    return f"line {(node.end_lineno or node.lineno) - 1}, column {end - len(node.attr) + 1}"


def _reject(node: ast.AST, what: str) -> FormulaError:
    return FormulaError(f"{_position(node)}: {what} is not allowed")


@final
class _Checker:
    """Walks a parsed formula once and rejects anything outside the language."""

    def __init__(self, variables: Collection[str]):
        self.variables = frozenset(variables)
        self.used: set[str] = set()

    def check(self, node: ast.AST, depth: int = 0) -> None:
        if depth > MAX_DEPTH:
            raise FormulaError(f"{_position(node)}: nested deeper than {MAX_DEPTH} levels")
        if isinstance(node, ast.Constant):
            self._check_constant(node)
        elif isinstance(node, ast.Attribute):
            self._check_attribute(node, called=False)
        elif isinstance(node, ast.Call):
            self._check_call(node, depth)
        elif isinstance(node, ast.Name):
            raise self._bare_name(node)
        else:
            self._check_operation(node, depth)

    def _check_operation(self, node: ast.AST, depth: int) -> None:
        allowed = (ast.BinOp, ast.UnaryOp, ast.BoolOp, ast.Compare, ast.IfExp)
        allowed_containers = (ast.Subscript, ast.List, ast.Tuple)
        if not isinstance(node, allowed + allowed_containers):
            raise _reject(node, _describe(node))
        if isinstance(node, ast.BinOp) and type(node.op) not in _BINARY:
            raise _reject(node, f"operator {type(node.op).__name__}")
        if isinstance(node, ast.UnaryOp) and type(node.op) not in _UNARY:
            raise _reject(node, f"operator {type(node.op).__name__}")
        if isinstance(node, ast.Subscript) and isinstance(node.slice, ast.Slice):
            raise _reject(node.slice, "slicing")
        for child in ast.iter_child_nodes(node):
            if not isinstance(child, _OPERATOR_NODES):
                self.check(child, depth + 1)

    def _check_constant(self, node: ast.Constant) -> None:
        if not isinstance(node.value, _CONSTANT_TYPES):
            raise _reject(node, f"constant of type {type(node.value).__name__}")

    def _check_attribute(self, node: ast.Attribute, called: bool) -> None:
        if not isinstance(node.value, ast.Name):
            raise _reject(node, f"attribute {node.attr!r} here (only on a scorer's name)")
        owner = node.value.id
        if owner == "math":
            known = node.attr in MATH_FUNCTIONS if called else node.attr in MATH_CONSTANTS
            if not known:
                raise _reject(node, f"math.{node.attr}{'()' if called else ''}")
            return
        if owner not in self.variables:
            raise self._bare_name(node.value)
        if called or node.attr not in SCORE_FIELDS:
            raise _reject(node, f"attribute {node.attr!r}")
        self.used.add(owner)

    def _check_call(self, node: ast.Call, depth: int) -> None:
        function = node.func
        if isinstance(function, ast.Name):
            if function.id not in FUNCTIONS:
                raise _reject(function, f"calling {function.id!r}")
        elif isinstance(function, ast.Attribute) and _is_math(function):
            self._check_attribute(function, called=True)
        elif isinstance(function, ast.Attribute):
            raise _reject(function, f"calling method {function.attr!r}")
        else:
            raise _reject(function, "calling this expression")
        for argument in node.args:
            self.check(argument, depth + 1)
        for keyword in node.keywords:
            if keyword.arg is None:
                raise _reject(keyword, "'**' arguments")
            self.check(keyword.value, depth + 1)

    def _bare_name(self, node: ast.Name) -> FormulaError:
        if node.id in self.variables:
            fields = ", ".join(f".{f}" for f in sorted(SCORE_FIELDS))
            return FormulaError(f"{_position(node)}: use {node.id!r} with one of {fields}")
        known = some_names(sorted(self.variables))
        return FormulaError(
            f"{_position(node)}: name {node.id!r} is not allowed (the listed scorers: {known})"
        )


def _is_math(node: ast.Attribute) -> bool:
    return isinstance(node.value, ast.Name) and node.value.id == "math"


def _describe(node: ast.AST) -> str:
    names = {
        ast.Lambda: "lambda",
        ast.NamedExpr: "assignment expression ':='",
        ast.Starred: "starred expression",
        ast.JoinedStr: "f-string",
        ast.Dict: "dict display",
        ast.Set: "set display",
        ast.ListComp: "comprehension",
        ast.SetComp: "comprehension",
        ast.DictComp: "comprehension",
        ast.GeneratorExp: "generator expression",
        ast.Await: "await",
        ast.Yield: "yield",
        ast.YieldFrom: "yield",
        ast.Slice: "slicing",
    }
    return names.get(type(node), f"syntax {type(node).__name__}")


@final
class Formula:
    """A checked formula over the scores of named scorers, ready to evaluate."""

    __slots__ = ("text", "tree", "variables")

    def __init__(self, text: str, tree: ast.Expression, variables: frozenset[str]):
        #: The formula as the user wrote it.
        self.text = text
        self.tree = tree
        #: Scorer names the formula reads.
        self.variables = variables

    def evaluate(self, scores: Mapping[str, Score]) -> Any:
        """The formula's value given each variable's score.

        :raises FormulaError: when evaluation fails (division by zero, a missing metadata
            key, a value past the size limits…), naming the reason.
        """
        try:
            return _evaluate(self.tree.body, scores)
        except _Bounded as error:
            raise FormulaError(f"limit exceeded: {error}") from None
        except RecursionError:  # metadata nested past Python's stack, e.g. from a hook's scorer
            raise FormulaError("limit exceeded: a value is nested too deeply") from None
        except (ArithmeticError, TypeError, ValueError, LookupError) as error:
            raise FormulaError(f"{type(error).__name__}: {error}") from None


def parse_formula(text: str, variables: Collection[str]) -> Formula:
    """Parse and check a formula over the scores named ``variables``.

    :raises FormulaError: for anything outside the language, with its line and column.
    """
    if not isinstance(text, str):
        raise FormulaError(f"expected a string, got {type(text).__name__}")
    if len(text) > MAX_FORMULA_LENGTH:
        raise FormulaError(f"longer than {MAX_FORMULA_LENGTH} characters")
    try:
        # Parenthesised on lines of their own, so a formula may span lines (a YAML block)
        # and positions keep their line and column (line numbers shift by one).
        tree = ast.parse(f"(\n{text}\n)", mode="eval")
    except SyntaxError as error:
        line = (error.lineno or 0) - 1
        inside_text = 1 <= line <= text.count("\n") + 1
        where = f"line {line}, column {error.offset or 1}" if inside_text else "at its end"
        detail = "" if error.msg == "invalid syntax" else f" ({error.msg})"
        raise FormulaError(f"{where}: invalid syntax{detail}") from None
    except (RecursionError, MemoryError, ValueError) as error:
        raise FormulaError(f"cannot be parsed ({type(error).__name__})") from None
    checker = _Checker(variables)
    checker.check(tree.body)
    return Formula(text, tree, frozenset(checker.used))


def _evaluate(node: ast.AST, scores: Mapping[str, Score]) -> Any:
    """Evaluate a checked node (only the node types the checker lets through)."""
    walk = _WALKERS.get(type(node))
    if walk is None:  # unreachable after the checker; never fall back to anything else
        raise _reject(node, _describe(node))
    return walk(node, scores)


def _constant(node: ast.Constant, scores: Mapping[str, Score]) -> Any:
    return node.value


def _attribute(node: ast.Attribute, scores: Mapping[str, Score]) -> Any:
    assert isinstance(node.value, ast.Name)  # guaranteed by the checker
    if node.value.id == "math":
        return getattr(math, node.attr)
    score = scores[node.value.id]
    return score.get("metadata") or {} if node.attr == "metadata" else score.get(node.attr)


def _subscript(node: ast.Subscript, scores: Mapping[str, Score]) -> Any:
    container = _evaluate(node.value, scores)
    key = _evaluate(node.slice, scores)
    if not isinstance(container, dict | list | tuple | str):
        raise TypeError(f"cannot index a {type(container).__name__}")
    if isinstance(container, dict) and key not in container:
        raise KeyError(f"no key {key!r} (keys: {', '.join(map(str, list(container)[:20]))})")
    return container[key]


def _binary(node: ast.BinOp, scores: Mapping[str, Score]) -> Any:
    left = _evaluate(node.left, scores)
    right = _evaluate(node.right, scores)
    return _bounded(_BINARY[type(node.op)](left, right))


def _unary(node: ast.UnaryOp, scores: Mapping[str, Score]) -> Any:
    return _UNARY[type(node.op)](_evaluate(node.operand, scores))


def _boolean(node: ast.BoolOp, scores: Mapping[str, Score]) -> Any:
    want_true = isinstance(node.op, ast.Or)
    value: Any = None
    for operand in node.values:
        value = _evaluate(operand, scores)
        if bool(value) == want_true:
            return value
    return value


def _compare(node: ast.Compare, scores: Mapping[str, Score]) -> Any:
    left = _evaluate(node.left, scores)
    for op, right_node in zip(node.ops, node.comparators, strict=True):
        right = _evaluate(right_node, scores)
        if not _COMPARE[type(op)](left, right):
            return False
        left = right
    return True


def _conditional(node: ast.IfExp, scores: Mapping[str, Score]) -> Any:
    branch = node.body if _evaluate(node.test, scores) else node.orelse
    return _evaluate(branch, scores)


def _call(node: ast.Call, scores: Mapping[str, Score]) -> Any:
    function = node.func
    if isinstance(function, ast.Name):
        callee = FUNCTIONS[function.id]
    else:
        assert isinstance(function, ast.Attribute)  # math.<function>, checked
        callee = MATH_FUNCTIONS[function.attr]
    args = [_evaluate(argument, scores) for argument in node.args]
    kwargs = {str(k.arg): _evaluate(k.value, scores) for k in node.keywords}
    return _bounded(callee(*args, **kwargs))


def _list(node: ast.List, scores: Mapping[str, Score]) -> Any:
    return _bounded([_evaluate(item, scores) for item in node.elts])


def _tuple(node: ast.Tuple, scores: Mapping[str, Score]) -> Any:
    return _bounded(tuple(_evaluate(item, scores) for item in node.elts))


_WALKERS: Final[dict[type[ast.AST], _Walk]] = {
    ast.Constant: _constant,  # type: ignore[dict-item]
    ast.Attribute: _attribute,  # type: ignore[dict-item]
    ast.Subscript: _subscript,  # type: ignore[dict-item]
    ast.BinOp: _binary,  # type: ignore[dict-item]
    ast.UnaryOp: _unary,  # type: ignore[dict-item]
    ast.BoolOp: _boolean,  # type: ignore[dict-item]
    ast.Compare: _compare,  # type: ignore[dict-item]
    ast.IfExp: _conditional,  # type: ignore[dict-item]
    ast.Call: _call,  # type: ignore[dict-item]
    ast.List: _list,  # type: ignore[dict-item]
    ast.Tuple: _tuple,  # type: ignore[dict-item]
}
