r"""``where`` clauses of the selector language (docs/selectors.md): fields, predicates, values.

A clause is parsed once, up front, into a plain function ``row -> bool``; every mistake is a
:class:`~pytest_scoring.errors.SelectorError` naming its path inside the selector.

Values follow JSON as SQLite stores it: ``true``/``false`` are the integers 1/0, ``1`` equals
``1.0``, ``"1"`` differs from ``1`` unless ``$coerce`` says otherwise, a missing column is
``null``, and ``{"$blob": "<base64>"}`` is a BLOB (also usable as a literal in a selector).

Decisions the language leaves open (stated in docs/selectors.md):

* ``$gt $gte $lt $lte`` compare numbers with numbers and text with text; any other pair
  (``null``, a BLOB, text against a number) does not hold — use ``$coerce`` to compare across.
* ``$regex`` is RE2 (linear time whatever the pattern and the value: the values come from
  the scored repository): ``$`` matches only at the end of the text, ``\w \d \s \b`` are
  ASCII (``\pL``, ``\pN`` for Unicode), no lookarounds, backreferences or possessive
  quantifiers; a pattern RE2 refuses is an error naming its path. It searches text and the
  text form of numbers (``12`` as ``"12"``); ``null`` and BLOBs never match.
* A scalar operand tested against a list-valued field (``$changed_columns``) holds when it
  holds for some element (``$not-eq``/``$not-in``: for none). An object or list operand of
  ``$eq $not-eq $in $not-in`` compares the whole value: ``{"$before": {"$eq": {"role":
  "user"}}}``, ``{"$changed_columns": {"$eq": ["password"]}}`` (a list compares in order).
* A field name is looked up as written first; failing that, ``a.b`` reads key ``b`` of the
  object in field ``a`` (``$before.password``, ``$key.id``).
* ``$coerce`` converts the field value and the operands: ``"string"`` (numbers in SQLite's
  text form, booleans as ``1``/``0``), ``"number"`` (text that is not a number becomes ``null``),
  ``"boolean"`` (``null`` is false; ``true/yes/on/1`` and ``false/no/off/0/""``, numbers by
  being non-zero).
"""

from __future__ import annotations

import base64
import binascii
import math
import re
from collections.abc import Callable
from collections.abc import Mapping
from collections.abc import Sequence
from typing import Any
from typing import Final
from typing import NoReturn

from pytest_scoring.db.diff_store import ChangeFilter
from pytest_scoring.db.diff_store import ChangeTest
from pytest_scoring.errors import SelectorError

#: A compiled test of one row (a dict of column values, or the virtual row of a change).
RowTest = Callable[[Mapping[str, Any]], bool]
#: A compiled test of one (already coerced) value.
ValueTest = Callable[[Any], bool]

#: How deeply ``$and``/``$or``/``$not`` may nest, so a hostile selector cannot exhaust the stack.
MAX_DEPTH: Final = 50
OPERATORS: Final = ("$eq", "$not-eq", "$in", "$not-in", "$gt", "$gte", "$lt", "$lte", "$regex")
COERCIONS: Final = ("string", "number", "boolean")
COUNT_OPERATORS: Final = ("$eq", "$not-eq", "$gt", "$gte", "$lt", "$lte")
#: Virtual fields of a changed row (``rows.changed.where``).
CHANGE_FIELDS: Final = frozenset({"$changed_columns", "$before", "$after", "$key"})
_LOGIC: Final = ("$and", "$or", "$not")
#: ``/pattern/flags`` letters: RE2's inline flags, and JavaScript's that change nothing here.
_REGEX_FLAGS: Final = {"i": "i", "m": "m", "s": "s", "g": "", "u": "", "y": ""}
_FLAG_WORD: Final = re.compile("[A-Za-z]*")
_TRUE_WORDS: Final = frozenset({"true", "yes", "on", "1"})
_FALSE_WORDS: Final = frozenset({"false", "no", "off", "0", ""})


def fail(path: str, message: str) -> NoReturn:
    """Raise the one error type of the selector language, prefixed with its path."""
    raise SelectorError(f"{path}: {message}")


def expected(options: Sequence[str]) -> str:
    """``(expected one of a, b, c)`` for error messages."""
    return f"(expected one of {', '.join(options)})"


def check_depth(path: str, depth: int) -> None:
    """Refuse nesting deeper than :data:`MAX_DEPTH`."""
    if depth > MAX_DEPTH:
        fail(path, f"nested deeper than {MAX_DEPTH} levels of $and/$or/$not")


# --- values -------------------------------------------------------------------------------


def is_blob(value: object) -> bool:
    """Whether ``value`` is a BLOB as the diff writes it: ``{"$blob": "<base64>"}``."""
    return isinstance(value, dict) and list(value) == ["$blob"] and isinstance(value["$blob"], str)


def is_value(value: object) -> bool:
    """Whether ``value`` is a JSON scalar or a BLOB, i.e. something a column can hold."""
    return value is None or isinstance(value, bool | int | float | str) or is_blob(value)


def _is_number(value: object) -> bool:
    return isinstance(value, int | float)


def values_equal(left: Any, right: Any) -> bool:
    """Equality of two column values as SQLite sees them (``True == 1 == 1.0``, ``"1" != 1``)."""
    if left is None or right is None:
        return left is None and right is None
    if _is_number(left) and _is_number(right):
        return bool(left == right)
    if isinstance(left, str) and isinstance(right, str):
        return left == right
    return is_blob(left) and is_blob(right) and left["$blob"] == right["$blob"]


def _ordered(left: Any, right: Any) -> bool:
    """Whether the two values have an order we compare by (both numbers or both text)."""
    both_numbers = _is_number(left) and _is_number(right)
    return both_numbers or (isinstance(left, str) and isinstance(right, str))


def text_form(value: Any) -> str | None:
    """The value as SQLite's ``CAST(value AS TEXT)`` would give it (``None`` for NULL)."""
    if value is None or isinstance(value, str):
        return value
    if isinstance(value, bool):
        return str(int(value))
    if isinstance(value, int | float):
        return repr(value)
    if is_blob(value):
        try:
            return base64.b64decode(value["$blob"], validate=True).decode("utf-8")
        except (binascii.Error, UnicodeDecodeError):
            return None
    return None


def _number_form(value: Any) -> int | float | None:
    if _is_number(value):
        return int(value) if isinstance(value, bool) else value
    text = text_form(value)
    if text is None:
        return None
    for kind in (int, float):
        try:
            number = kind(text.strip())
        except ValueError:
            continue
        return number if math.isfinite(number) else None
    return None


def _boolean_form(value: Any) -> bool | None:
    if value is None:
        return False
    if _is_number(value):
        return bool(value)
    text = text_form(value)
    if text is None:
        return None
    word = text.strip().lower()
    if word in _TRUE_WORDS or word in _FALSE_WORDS:
        return word in _TRUE_WORDS
    number = _number_form(word)
    return None if number is None else bool(number)


_COERCE: Final[dict[str, Callable[[Any], Any]]] = {
    "string": text_form,
    "number": _number_form,
    "boolean": _boolean_form,
}


def coerce(value: Any, kind: str | None) -> Any:
    """Convert a value for ``$coerce: kind`` (no conversion when ``kind`` is ``None``); an
    object or list (``$before``, ``$changed_columns``) is converted value by value."""
    if kind is None:
        return value
    if isinstance(value, list):
        return [coerce(item, kind) for item in value]
    if isinstance(value, Mapping) and not is_blob(value):
        return {key: coerce(item, kind) for key, item in value.items()}
    return _COERCE[kind](value)


def _is_whole(operand: object) -> bool:
    """Whether an operand is an object or a list, compared with a field's whole value."""
    return isinstance(operand, list) or (isinstance(operand, dict) and not is_blob(operand))


def whole_equal(value: Any, operand: Any) -> bool:
    """Equality of a whole object (a missing key is ``null``) or list (in order)."""
    if isinstance(operand, list):
        return (
            isinstance(value, list)
            and len(value) == len(operand)
            and all(values_equal(left, right) for left, right in zip(value, operand, strict=True))
        )
    if not isinstance(value, Mapping):
        return False
    return all(values_equal(value.get(key), operand.get(key)) for key in {*value, *operand})


def lookup(row: Mapping[str, Any], name: str) -> Any:
    """The value of field ``name`` in ``row``: the exact name, else a dotted path; else null."""
    if name in row:
        return row[name]
    for index, char in enumerate(name):
        inner = row.get(name[:index]) if char == "." else None
        if isinstance(inner, Mapping):
            return lookup(inner, name[index + 1 :])
    return None


# --- predicates ---------------------------------------------------------------------------


def _operand(raw: Any, path: str, kind: str | None, whole: bool = False) -> Any:
    """One operand; ``whole`` also accepts an object or a list of values (``$eq``, ``$in``)."""
    if whole and _is_whole(raw):
        items = raw.items() if isinstance(raw, dict) else enumerate(raw)
        for key, item in items:
            _operand(item, f"{path}.{key}" if isinstance(raw, dict) else f"{path}[{key}]", kind)
        return coerce(raw, kind)
    if not is_value(raw):
        fail(path, f"expected a value (string, number, boolean, null or $blob), got {raw!r}")
    value = coerce(raw, kind)
    if value is None and raw is not None:
        fail(path, f"{raw!r} cannot be coerced to {kind}")
    return value


def _equality_test(options: list[Any]) -> ValueTest:
    """Equal to one of ``options``: an object or list operand compares the whole value, a
    scalar compares the value or, for a list-valued field, some element of it."""
    wholes = [option for option in options if _is_whole(option)]
    scalars = [option for option in options if not _is_whole(option)]

    def holds(value: Any) -> bool:
        if any(whole_equal(value, option) for option in wholes):
            return True
        items = value if isinstance(value, list) else (value,)
        return any(values_equal(item, option) for item in items for option in scalars)

    return holds


def _ordering_test(operator: str, operand: Any, path: str) -> ValueTest:
    if isinstance(operand, bool) or not isinstance(operand, int | float | str):
        fail(path, f"expected a number or a string to compare with, got {operand!r}")
    compare: dict[str, Callable[[Any], bool]] = {
        "$gt": lambda value: bool(value > operand),
        "$gte": lambda value: bool(value >= operand),
        "$lt": lambda value: bool(value < operand),
        "$lte": lambda value: bool(value <= operand),
    }
    return lambda value: _ordered(value, operand) and compare[operator](value)


def compile_regex(raw: Any, path: str) -> Any:
    """Compile ``"/pattern/flags"`` (flags ``i m s``; ``g u y`` ignored) or a bare pattern
    with RE2, which runs in time linear in the text whatever the pattern.

    :raises SelectorError: for a pattern RE2 refuses (a lookaround, a backreference, a
        pattern past RE2's memory budget…), naming the path.
    """
    import re2  # type: ignore[import-untyped]

    if not isinstance(raw, str):
        fail(path, f"expected a regular expression string, got {raw!r}")
    pattern, flags = raw, ""
    closing = raw.rfind("/")
    if raw.startswith("/") and closing > 0 and _FLAG_WORD.fullmatch(raw[closing + 1 :]):
        pattern = raw[1:closing]
        for letter in raw[closing + 1 :]:
            if letter not in _REGEX_FLAGS:
                fail(path, f"unknown regex flag {letter!r} (expected i, m, s; g, u, y are ignored)")
            flags += _REGEX_FLAGS[letter]
    options = re2.Options()
    options.log_errors = False  # RE2 would print its reason on stderr; the message carries it
    options.never_capture = True  # only whether it matches counts: groups cost time
    try:
        return re2.compile(f"(?{flags}){pattern}" if flags else pattern, options)
    except re2.error as error:
        reason = error.args[0] if error.args else error
        reason = reason.decode("utf-8", "replace") if isinstance(reason, bytes) else reason
        fail(path, f"RE2 cannot use the regular expression {raw!r}: {reason} (docs/selectors.md)")


def _regex_test(raw: Any, path: str) -> ValueTest:
    regex = compile_regex(raw, path)

    def test(value: Any) -> bool:
        text = None if is_blob(value) else text_form(value)
        # Bytes: RE2 reads UTF-8, and a lone surrogate (from a JSON diff) must not raise.
        return text is not None and regex.search(text.encode("utf-8", "surrogatepass")) is not None

    return test


def _on_value_or_elements(test: ValueTest) -> ValueTest:
    """Apply ``test`` to a value, or to the elements of a list-valued field (some must hold)."""
    return lambda value: (
        any(test(item) for item in value) if isinstance(value, list) else test(value)
    )


def _operator_test(operator: str, raw: Any, path: str, kind: str | None) -> ValueTest:
    """The positive form of one operator (``$not-eq`` → ``$eq``; the caller negates)."""
    if operator in ("$eq", "$not-eq"):
        return _equality_test([_operand(raw, path, kind, whole=True)])
    if operator in ("$in", "$not-in"):
        if not isinstance(raw, list):
            fail(path, f"expected a list of values, got {raw!r}")
        options = [
            _operand(item, f"{path}[{index}]", kind, whole=True) for index, item in enumerate(raw)
        ]
        return _equality_test(options)
    if operator == "$regex":
        return _on_value_or_elements(_regex_test(raw, path))
    return _on_value_or_elements(_ordering_test(operator, _operand(raw, path, kind), path))


def _negated(test: ValueTest) -> ValueTest:
    return lambda value: not test(value)


def parse_predicate(raw: Any, path: str) -> ValueTest:
    """A predicate: a value (equality) or ``{$operator: operand…, "$coerce": kind}``."""
    if is_value(raw):
        return _equality_test([raw])
    if not isinstance(raw, dict):
        fail(path, f"a list is not a predicate; write {{'$in': {raw!r}}} or {{'$eq': {raw!r}}}")
    kind = raw.get("$coerce")
    if kind is not None and kind not in COERCIONS:
        fail(f"{path}.$coerce", f"unknown coercion {kind!r} {expected(COERCIONS)}")
    tests = []
    for operator, operand in raw.items():
        if operator == "$coerce":
            continue
        if operator not in OPERATORS:
            fail(path, f"unknown operator {operator!r} {expected(OPERATORS)}")
        positive = _operator_test(operator, operand, f"{path}.{operator}", kind)
        tests.append(_negated(positive) if operator.startswith("$not-") else positive)
    if not tests:
        fail(path, f"a predicate needs an operator {expected(OPERATORS)}")
    return lambda value: all(test(coerce(value, kind)) for test in tests)


def parse_count(raw: Any, path: str) -> Callable[[int], bool]:
    """``$count: {$eq|$not-eq|$gt|$gte|$lt|$lte: n}`` as a test of a number of rows."""
    if not isinstance(raw, dict) or not raw:
        fail(path, f"expected an object like {{'$gte': 1}} {expected(COUNT_OPERATORS)}")
    tests = []
    for operator, operand in raw.items():
        if operator not in COUNT_OPERATORS:
            fail(path, f"unknown operator {operator!r} {expected(COUNT_OPERATORS)}")
        if isinstance(operand, bool) or not isinstance(operand, int) or operand < 0:
            fail(f"{path}.{operator}", f"expected a whole number >= 0, got {operand!r}")
        test = _operator_test(operator, operand, f"{path}.{operator}", None)
        tests.append(_negated(test) if operator == "$not-eq" else test)
    return lambda count: all(test(count) for test in tests)


# --- clauses ------------------------------------------------------------------------------


def parse_where(raw: Any, path: str, fields: frozenset[str], depth: int = 0) -> RowTest:
    """``where``: one clause or a list of clauses (all must hold).

    :param fields: the ``$``-prefixed virtual fields allowed here (``$before``…).
    """
    if isinstance(raw, list):
        tests = [
            parse_clause(clause, f"{path}[{index}]", fields, depth)
            for index, clause in enumerate(raw)
        ]
        return lambda row: all(test(row) for test in tests)
    return parse_clause(raw, path, fields, depth)


def _clause_list(raw: Any, path: str, fields: frozenset[str], depth: int) -> list[RowTest]:
    if not isinstance(raw, list) or not raw:
        fail(path, "expected a non-empty list of clauses")
    return [
        parse_clause(clause, f"{path}[{index}]", fields, depth) for index, clause in enumerate(raw)
    ]


def _logic_test(operator: str, raw: Any, path: str, fields: frozenset[str], depth: int) -> RowTest:
    check_depth(path, depth + 1)
    if operator == "$not":
        inner = parse_where(raw, path, fields, depth + 1)
        return lambda row: not inner(row)
    tests = _clause_list(raw, path, fields, depth + 1)
    combine = all if operator == "$and" else any
    return lambda row: combine(test(row) for test in tests)


def _field_test(name: str, raw: Any, path: str, fields: frozenset[str]) -> RowTest:
    if name.startswith("$") and name.partition(".")[0] not in fields:
        fail(path, f"unknown operator {name!r} {expected([*_LOGIC, *sorted(fields)])}")
    predicate = parse_predicate(raw, f"{path}.{name}")
    return lambda row: predicate(lookup(row, name))


def parse_clause(raw: Any, path: str, fields: frozenset[str], depth: int = 0) -> RowTest:
    """A clause: ``{field: predicate…}`` and/or ``$and``/``$or``/``$not`` (all must hold)."""
    if not isinstance(raw, dict):
        fail(path, f"expected a clause {{field: predicate}} or a list of clauses, got {raw!r}")
    tests = [
        _logic_test(key, value, f"{path}.{key}", fields, depth)
        if key in _LOGIC
        else _field_test(key, value, path, fields)
        for key, value in raw.items()
    ]
    return lambda row: all(test(row) for test in tests)


# --- what a clause needs ------------------------------------------------------------------

#: Fields of a changed row naming one changed column's value, and the side that value is on.
_SIDES: Final = (("$after.", "new"), ("$before.", "old"))


def required_changes(raw: Any) -> ChangeFilter:
    """Changes of which every changed row passing ``rows.changed.where`` ``raw`` (already
    parsed) has one; none when the clause does not tell.

    A field naming a column (``role``, ``$after.role``, ``$before.role``) whose predicate fails
    on ``null`` needs that column changed (an unchanged column is ``null`` there), and a plain
    value, ``$eq`` or ``$in`` also says which values. The diff store finds such rows by an
    index, so a selector is not slowed down by rows it could never match.
    """
    for clause in raw if isinstance(raw, list) else [raw]:
        for name, predicate in clause.items():
            changes = _field_changes(str(name), predicate)
            if changes:
                return changes
    return ()


def _field_changes(name: str, raw: Any) -> ChangeFilter:
    """What a field test of a clause needs (see :func:`required_changes`)."""
    if name in _LOGIC or parse_predicate(raw, name)(None):
        return ()
    column, side = name, "new"
    for prefix, prefix_side in _SIDES:
        if name.startswith(prefix):
            column, side = name[len(prefix) :], prefix_side
    if column.startswith("$") or "." in column:
        return ()
    values = _equal_values(raw)
    needed = ChangeTest(column, side, values) if values else ChangeTest(column)  # type: ignore[arg-type]
    # A column named as the field itself (``$after.role``) is read first: it may pass too.
    return (needed,) if column == name else (needed, ChangeTest(name))


def _equal_values(raw: Any) -> tuple[Any, ...]:
    """The values a predicate accepts when it is a plain value, ``$eq`` or ``$in`` of values
    (no ``$coerce``), else ``()``."""
    if is_value(raw):
        options = [raw]
    elif isinstance(raw, dict) and len(raw) == 1 and "$eq" in raw:
        options = [raw["$eq"]]
    elif isinstance(raw, dict) and len(raw) == 1 and isinstance(raw.get("$in"), list):
        options = list(raw["$in"])
    else:
        return ()
    if not all(is_value(option) and option is not None for option in options):
        return ()
    return tuple(options)
