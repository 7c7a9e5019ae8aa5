"""How numbers and counts read wherever a user sees them (docs/report.md, "Numbers and words").

One owner, so that a score prints the same in the pytest summary, ``show``, ``list``, ``run``,
JUnit properties and Scout's ``value`` column, and so that every count agrees with its noun.
"""

from __future__ import annotations

from collections.abc import Iterable
from collections.abc import Mapping
from typing import Any
from typing import Final

#: Past this size a whole float is no longer exact as an integer: it keeps its ``1e+16`` form.
_EXACT_INTEGERS: Final = 2.0**53
#: Outcome words that are nouns (pytest: ``2 errors``); the others are participles (``2 passed``).
_OUTCOME_NOUNS: Final = {"error": "errors"}


def number_text(value: float) -> str:
    """A number as its shortest exact decimal text: ``75`` for ``75.0``, ``66.67``, ``nan``.

    The text reads back as the same number, so machine formats (Scout, JUnit) can use it too.
    """
    if isinstance(value, float) and value.is_integer() and abs(value) < _EXACT_INTEGERS:
        return str(int(value))
    return repr(value) if isinstance(value, float) else str(value)


def value_text(value: object) -> str:
    """A score value or metric as text: numbers by :func:`number_text`, the rest as ``str``."""
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        return number_text(value)
    return str(value)


def plural(count: int, noun: str, nouns: str | None = None) -> str:
    """``1 database``, ``2 databases``, ``0 databases`` (``nouns`` for irregular plurals)."""
    return f"{count} {noun if count == 1 else nouns or noun + 's'}"


#: Most names a one-line message lists (a configuration may have 20,000 scorers).
_NAMES_SHOWN: Final = 10


def some_names(names: Iterable[str]) -> str:
    """``a, b, c``, cut after :data:`_NAMES_SHOWN` names to ``…, 19,990 more``; ``none``."""
    listed = list(names)
    shown = ", ".join(listed[:_NAMES_SHOWN]) or "none"
    rest = len(listed) - _NAMES_SHOWN
    return f"{shown}, … {rest:,} more" if rest > 0 else shown


def outcome_counts(counts: Mapping[str, int]) -> str:
    """Test counts in pytest's words, zeros left out: ``3 passed, 1 failed, 2 errors``."""
    parts = []
    for outcome, count in counts.items():
        if count:
            word = outcome.replace("_", " ")
            parts.append(plural(count, word, _OUTCOME_NOUNS.get(outcome, word)))
    return ", ".join(parts)


#: Byte units as ``--limit`` writes them, largest first.
_SIZE_UNITS: Final = (("T", 1024**4), ("G", 1024**3), ("M", 1024**2), ("K", 1024))


def size_text(size: int) -> str:
    """A number of bytes in ``--limit``'s units: ``16G``, ``50M``, ``1.5K``, ``300``."""
    for unit, scale in _SIZE_UNITS:
        if size >= scale:
            return f"{number_text(round(size / scale, 1))}{unit}"
    return str(size)


#: The counts inside ``total``, in the order every view shows them (docs/report.md).
COUNTED: Final = ("passed", "failed", "error", "not_run", "missing")
#: The counts outside ``total``: shown after it.
NOT_COUNTED: Final = ("skipped", "xfailed", "xpassed", "extra", "flaky")


def shown_counts(counts: Mapping[str, Any], not_run: int, expected: bool) -> dict[str, int]:
    """``tests.counts`` as the views show them: the ``not_run`` tests that ``failed`` (or,
    with an expected set, ``missing``) holds taken out of it and shown as ``not_run``.

    :param not_run: how many of the counted tests never ran.
    :param expected: an expected set decided what counts.
    """
    shown = {name: _count(counts.get(name)) for name in (*COUNTED, *NOT_COUNTED)}
    holder = "missing" if expected else "failed"
    taken = min(not_run, shown[holder])
    shown[holder] -= taken
    shown["not_run"] = taken
    return shown


def _count(value: object) -> int:
    """A count read from a report: anything but a whole number (a damaged file) reads as 0."""
    return value if isinstance(value, int) and not isinstance(value, bool) else 0


def tests_text(counts: Mapping[str, Any], not_run: int, expected: bool) -> str:
    """The one wording of test counts (docs/report.md#numbers-and-counts):
    ``14 passed, 2 failed, 24 not run = 40 counted; not counted: 1 skipped``.

    The counts before ``= total counted`` add up to ``total``; a test that never ran is never
    ``failed``.
    """
    shown = shown_counts(counts, not_run, expected)
    counted = outcome_counts({name: shown[name] for name in COUNTED})
    others = outcome_counts({name: shown[name] for name in NOT_COUNTED})
    total = _count(counts.get("total"))
    if not counted and not others:
        return "no tests ran"
    text = f"{counted} = {total} counted" if counted else "0 counted"
    return f"{text}; not counted: {others}" if others else text


def report_tests_text(tests: Mapping[str, Any]) -> str:
    """:func:`tests_text` of a report's ``tests`` section (``scores.json``): with an expected
    set (its ``missing`` list), the tests that never ran and are missing are counted ones."""
    found = tests.get("counts")
    counts = found if isinstance(found, dict) else {}
    missing = tests.get("missing")
    if not isinstance(missing, list):
        return tests_text(counts, _count(counts.get("not_run")), expected=False)
    not_run = tests.get("not_run")
    never_ran = (
        {nodeid for nodeid in not_run if isinstance(nodeid, str)}
        if isinstance(not_run, list)
        else set()
    )
    return tests_text(counts, len(never_ran.intersection(map(str, missing))), expected=True)
