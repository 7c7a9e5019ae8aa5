"""Building blocks every part of a selector uses: key lists, objects, membership, databases."""

from __future__ import annotations

from collections.abc import Collection
from collections.abc import Iterable
from collections.abc import Iterator
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any
from typing import Final
from typing import final

from pytest_scoring.selector.where import expected
from pytest_scoring.selector.where import fail

PLANES: Final = ("data", "schema")
TARGETS: Final = ("data", "schema", "both")
TABLE_STATUSES: Final = ("added", "removed", "changed", "unchanged")
SELECTOR_KEYS: Final = ("target", "$and", "$or", "$not", "databases", "tables", "rows")
DATABASE_KEYS: Final = ("name", "path", "exists_before", "exists_after")
TABLE_KEYS: Final = ("name", "status", "columns", "added", "removed", "changed")
COLUMN_KEYS: Final = ("added", "removed", "changed")
ROW_KEYS: Final = ("by_key", "added", "removed", "changed")
ROW_LIST_KEYS: Final = ("has_one", "has_all", "where", "$count")
MEMBERSHIP_KEYS: Final = ("has_one", "has_all")
NO_FIELDS: Final = frozenset[str]()

Row = Mapping[str, Any]


def as_mapping(value: object) -> Mapping[str, Any]:
    """``value`` if it is an object, else an empty one (diffs from files may be partial)."""
    return value if isinstance(value, Mapping) else {}


def row_list(value: object) -> Iterator[Row]:
    """The rows of a row list, lazily: a list, or a stream of every row of a cut table."""
    if isinstance(value, str | bytes | Mapping) or not isinstance(value, Iterable):
        return iter(())
    return (row for row in value if isinstance(row, Mapping))


def checked_object(raw: Any, path: str, keys: tuple[str, ...]) -> dict[str, Any]:
    """Check that ``raw`` is an object whose keys are all among ``keys``."""
    if not isinstance(raw, dict):
        fail(path, f"expected an object with keys {', '.join(keys)}, got {raw!r}")
    for key in raw:
        if key not in keys:
            fail(f"{path}.{key}", f"unknown key {expected(keys)}")
    return raw


# --- membership criteria ------------------------------------------------------------------


@final
@dataclass(frozen=True, slots=True)
class Membership:
    """``"x"``, ``{"has_one": [..]}`` and/or ``{"has_all": [..]}`` over a set of names."""

    has_one: tuple[str, ...] | None = None
    has_all: tuple[str, ...] | None = None

    def holds(self, names: Collection[str]) -> bool:
        """Whether some ``has_one`` name and every ``has_all`` name are among ``names``."""
        one = self.has_one is None or any(name in names for name in self.has_one)
        return one and (self.has_all is None or all(name in names for name in self.has_all))


def _names(raw: Any, path: str, choices: tuple[str, ...] | None) -> tuple[str, ...]:
    items = [raw] if isinstance(raw, str) else raw
    if not isinstance(items, list) or not items:
        fail(path, f"expected a name or a non-empty list of names, got {raw!r}")
    for index, item in enumerate(items):
        where = path if isinstance(raw, str) else f"{path}[{index}]"
        if not isinstance(item, str):
            fail(where, f"expected a name (string), got {item!r}")
        if choices is not None and item not in choices:
            fail(where, f"unknown value {item!r} {expected(choices)}")
    return tuple(items)


def parse_membership(
    raw: Any, path: str, single: bool = False, choices: tuple[str, ...] | None = None
) -> Membership:
    """A membership criterion; ``single`` fields (one value per item) refuse ``has_all``."""
    if isinstance(raw, str):
        return Membership(has_one=_names(raw, path, choices))
    if isinstance(raw, list):
        fail(path, f"a bare list is ambiguous; write {{'has_one': {raw!r}}} or {{'has_all': …}}")
    criterion = checked_object(raw, path, MEMBERSHIP_KEYS)
    if not criterion:
        fail(path, "expected has_one or has_all")
    if single and "has_all" in criterion:
        fail(f"{path}.has_all", "a single-valued field cannot have all of several values")
    return Membership(
        *(
            _names(criterion[key], f"{path}.{key}", choices) if key in criterion else None
            for key in MEMBERSHIP_KEYS
        )
    )


# --- databases ----------------------------------------------------------------------------


@final
@dataclass(frozen=True, slots=True)
class DatabaseCriteria:
    """``databases``: the database's key (or bare file name), relative path and existence."""

    name: Membership | None
    path: Membership | None
    flags: tuple[tuple[str, bool], ...]

    def holds(self, key: str, entry: Mapping[str, Any]) -> bool:
        """Whether the database stored under ``key`` in ``comparisons`` fits."""
        relative = key.replace("\\", "/")
        if self.name is not None and not self.name.holds({relative, relative.rsplit("/")[-1]}):
            return False
        if self.path is not None and not self.path.holds({relative}):
            return False
        info = as_mapping(entry.get("info"))
        return all(info.get(flag) is wanted for flag, wanted in self.flags)


def parse_databases(raw: Any, path: str) -> DatabaseCriteria:
    criteria = checked_object(raw, path, DATABASE_KEYS)
    flags = []
    for flag in ("exists_before", "exists_after"):
        if flag in criteria:
            if not isinstance(criteria[flag], bool):
                fail(f"{path}.{flag}", f"expected true or false, got {criteria[flag]!r}")
            flags.append((flag, criteria[flag]))
    name, where = (
        parse_membership(criteria[key], f"{path}.{key}", single=True) if key in criteria else None
        for key in ("name", "path")
    )
    return DatabaseCriteria(name, where, tuple(flags))
