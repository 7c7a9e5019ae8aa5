"""How numbers and counts read wherever a user sees them (docs/report.md, "Numbers and words").

One owner, so that a score prints the same in the pytest summary, ``show``, ``list``, ``run``,
JUnit properties and Scout's ``value`` column, and so that every count agrees with its noun.
"""

from __future__ import annotations

from collections.abc import Mapping
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
