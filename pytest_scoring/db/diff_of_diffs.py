"""Diff-of-diffs (docs/databases.md): which database changes only one of two diffs has.

Given the reference diff A and the solution diff B (both from the same initial state), each
part — ``before_only`` (only in A), ``after_only`` (only in B) and ``shared`` — is itself a
diff of the shape in docs/databases.md, so selectors run over it unchanged.

* Added and removed rows compare by full content as multisets: a row added twice in B and
  once in A is once shared and once ``after_only``.
* Changed rows pair by key and split per column: the same ``(old_value, new_value)`` in both
  is shared; anything else goes to the side it came from.
* Schema column entries compare by name and content, the same way as rows.

Decisions the diff-of-diffs leaves open (stated in docs/databases.md):

* Values compare as selectors compare them (``1`` equals ``1.0`` and ``true``; a missing
  column equals ``null``), so two runs that write the same data agree.
* A table's status in a part: ``added``/``removed`` when that table-level event is in only
  that part's diff (in ``shared``: in both), else ``changed`` when rows or columns are left,
  else ``unchanged``; ``counts``, ``has_changes`` and the row totals are recomputed/kept
  consistent. ``truncated`` is true when either input was truncated (the parts are then
  incomplete). Every database and table of either diff appears in all three parts.
* Each part keeps the top-level fields and ``info`` of the diff it came from (``shared``:
  the solution's), and an ``error`` entry of a database in its source diff.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable
from collections.abc import Iterable
from collections.abc import Mapping
from typing import Any
from typing import Final

PARTS: Final = ("before_only", "after_only", "shared")
_COLUMN_LISTS: Final = ("columns_added", "columns_removed", "columns_changed")
_EVENTS: Final = ("added", "removed")

Json = dict[str, Any]
#: One table entry of each part: ``(before_only, after_only, shared)``.
Split = tuple[Json, Json, Json]
#: Splits one list of A and of B into ``(before_only, after_only, shared)``.
Splitter = Callable[[list[Any], list[Any]], tuple[list[Any], list[Any], list[Any]]]


def _mapping(value: object) -> Mapping[str, Any]:
    return value if isinstance(value, Mapping) else {}


def _items(value: object) -> list[Any]:
    return list(value) if isinstance(value, list) else []


def canonical(value: Any) -> Any:
    """A hashable form, equal for two JSON values exactly when SQLite-as-JSON equality holds.

    Python already has ``1 == 1.0 == True`` (with equal hashes) and ``"1" != 1``; objects
    become sorted tuples without their ``null`` members (a missing column is ``null``).
    """
    if isinstance(value, dict):
        return tuple(
            sorted(
                (key, canonical(item) if isinstance(item, dict | list) else item)
                for key, item in value.items()
                if item is not None
            )
        )
    if isinstance(value, list):
        return tuple(canonical(item) for item in value)
    return value


def split_multisets(
    reference: Iterable[Any], solution: Iterable[Any]
) -> tuple[list[Any], list[Any], list[Any]]:
    """``(only in reference, only in solution, in both)`` of two lists compared as multisets."""
    keyed_a = [(canonical(item), item) for item in reference]
    keyed_b = [(canonical(item), item) for item in solution]
    available = Counter(key for key, _ in keyed_a)
    after_only, shared = [], []
    for key, item in keyed_b:
        if available[key] > 0:
            available[key] -= 1
            shared.append(item)
        else:
            after_only.append(item)
    before_only = []
    for key, item in keyed_a:
        if available[key] > 0:
            available[key] -= 1
            before_only.append(item)
    return before_only, after_only, shared


def _changes_by_key(changes: Iterable[Any]) -> dict[Any, tuple[Any, dict[str, Any]]]:
    """Changed rows by canonical key, merging duplicates: ``{key: (key, {col: pair})}``."""
    rows: dict[Any, tuple[Any, dict[str, Any]]] = {}
    for change in changes:
        entry = _mapping(change)
        key = entry.get("key")
        _, columns = rows.setdefault(canonical(key), (key, {}))
        columns.update(_mapping(entry.get("changes")))
    return rows


def split_changed_rows(
    reference: Iterable[Any], solution: Iterable[Any]
) -> tuple[list[Json], list[Json], list[Json]]:
    """``rows_changed`` of both diffs paired by key and split per column."""
    old, new = _changes_by_key(reference), _changes_by_key(solution)
    parts: tuple[list[Json], list[Json], list[Json]] = ([], [], [])
    for key_text in dict.fromkeys([*old, *new]):
        key, old_columns = old.get(key_text, (None, {}))
        key, new_columns = new.get(key_text, (key, {}))
        split: tuple[Json, Json, Json] = ({}, {}, {})
        for column in dict.fromkeys([*old_columns, *new_columns]):
            pair_a, pair_b = old_columns.get(column), new_columns.get(column)
            if pair_a is not None and pair_b is not None and pair_a == pair_b:
                split[2][column] = pair_b
                continue
            if pair_a is not None:
                split[0][column] = pair_a
            if pair_b is not None:
                split[1][column] = pair_b
        for part, columns in zip(parts, split, strict=True):
            if columns:
                part.append({"key": key, "changes": columns})
    return parts


def _status(lists: Iterable[list[Any]], own: str, other: str, shared: bool) -> str:
    """The status of a table in one part (see the module docstring)."""
    event = own == other if shared else own != other
    if own in _EVENTS and event:
        return own
    return "changed" if any(lists) else "unchanged"


def _statuses(reference: Mapping[str, Any], solution: Mapping[str, Any]) -> tuple[str, str]:
    return (
        str(reference.get("status", "unchanged")),
        str(solution.get("status", "unchanged")),
    )


def _part_entries(
    reference: Mapping[str, Any], solution: Mapping[str, Any]
) -> tuple[Json, Json, Json]:
    """Copies of the source entry of each part (keeps keys this module does not rewrite)."""
    return dict(reference or solution), dict(solution or reference), dict(solution or reference)


#: How each list of a table entry splits, by plane.
_DATA_LISTS: Final[dict[str, Splitter]] = {
    "rows_added": split_multisets,
    "rows_removed": split_multisets,
    "rows_changed": split_changed_rows,
}
_SCHEMA_LISTS: Final[dict[str, Splitter]] = dict.fromkeys(_COLUMN_LISTS, split_multisets)


def _split_lists(
    reference: Mapping[str, Any], solution: Mapping[str, Any], splitters: Mapping[str, Splitter]
) -> Split:
    """Each named list of both table entries split into the parts; each part's status."""
    lists: tuple[dict[str, list[Any]], ...] = ({}, {}, {})
    for name, split in splitters.items():
        halves = split(_items(reference.get(name)), _items(solution.get(name)))
        for part, items in zip(lists, halves, strict=True):
            part[name] = items
    entries = _part_entries(reference, solution)
    status_a, status_b = _statuses(reference, solution)
    owns = ((status_a, status_b, False), (status_b, status_a, False), (status_b, status_a, True))
    for entry, part_lists, (own, other, shared) in zip(entries, lists, owns, strict=True):
        entry.update(part_lists)
        entry["status"] = _status(part_lists.values(), own, other, shared)
    return entries


def split_data_table(reference: Mapping[str, Any], solution: Mapping[str, Any]) -> Split:
    """One data-plane table entry of A and of B, split into the three parts."""
    entries = _split_lists(reference, solution, _DATA_LISTS)
    truncated = bool(reference.get("truncated") or solution.get("truncated"))
    for entry in entries:
        entry["counts"] = {
            kind: len(entry[f"rows_{kind}"]) for kind in ("added", "removed", "changed")
        }
        entry["truncated"] = truncated
    return entries


def split_schema_table(reference: Mapping[str, Any], solution: Mapping[str, Any]) -> Split:
    """One schema-plane table entry of A and of B, split into the three parts."""
    return _split_lists(reference, solution, _SCHEMA_LISTS)


def _split_plane(reference: Mapping[str, Any], solution: Mapping[str, Any], plane: str) -> Split:
    tables_a = _mapping(_mapping(reference.get(plane)).get("tables"))
    tables_b = _mapping(_mapping(solution.get(plane)).get("tables"))
    split_table = split_data_table if plane == "data" else split_schema_table
    parts: Split = ({}, {}, {})
    for name in dict.fromkeys([*tables_a, *tables_b]):
        for part, entry in zip(
            parts,
            split_table(_mapping(tables_a.get(name)), _mapping(tables_b.get(name))),
            strict=True,
        ):
            part[name] = entry
    before_only, after_only, shared = (_plane_entry(tables) for tables in parts)
    return before_only, after_only, shared


def _plane_entry(tables: Json) -> Json:
    return {
        "has_changes": any(t["status"] != "unchanged" for t in tables.values()),
        "tables": tables,
    }


def split_database(reference: Mapping[str, Any], solution: Mapping[str, Any]) -> Split:
    """One entry of ``comparisons`` of A and of B, split into the three parts."""
    comparisons_a = _mapping(reference.get("comparisons"))
    comparisons_b = _mapping(solution.get("comparisons"))
    sources = (reference or solution, solution or reference, solution or reference)
    parts: Split = ({"comparisons": {}}, {"comparisons": {}}, {"comparisons": {}})
    for plane in ("data", "schema"):
        for part, entry in zip(
            parts, _split_plane(comparisons_a, comparisons_b, plane), strict=True
        ):
            part["comparisons"][plane] = entry
    for part, source in zip(parts, sources, strict=True):
        part["info"] = dict(_mapping(source.get("info")))
        if "error" in source:
            part["error"] = source["error"]
    return parts


def diff_of_diffs(reference: Mapping[str, Any], solution: Mapping[str, Any]) -> dict[str, Json]:
    """Split two diffs into what only A, only B, and both contain (docs/databases.md).

    :param reference: diff A, from the reference run.
    :param solution: diff B, from the scored repository's run (same initial state).
    :returns: ``{"before_only": diff, "after_only": diff, "shared": diff}``.
    """
    databases_a = _mapping(reference.get("comparisons"))
    databases_b = _mapping(solution.get("comparisons"))
    sources = (reference, solution, solution)
    parts = tuple(
        {**{k: v for k, v in source.items() if k != "comparisons"}, "comparisons": {}}
        for source in sources
    )
    for key in dict.fromkeys([*databases_a, *databases_b]):
        split = split_database(_mapping(databases_a.get(key)), _mapping(databases_b.get(key)))
        for part, entry in zip(parts, split, strict=True):
            part["comparisons"][key] = entry
    return dict(zip(PARTS, parts, strict=True))
