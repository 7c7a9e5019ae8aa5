"""Diff-of-diffs (docs/databases.md): which database changes only one of two diffs has.

Given the reference diff A and the solution diff B (both from the same initial state), each
part — ``before_only`` (only in A), ``after_only`` (only in B) and ``shared`` — is itself a
diff of the shape in docs/databases.md, so selectors run over it unchanged.

* Added and removed rows compare by full content as multisets: a row added twice in B and
  once in A is once shared and once ``after_only``.
* Changed rows pair by key and split per column: the same ``(old_value, new_value)`` in both
  is shared; anything else goes to the side it came from.
* Schema column entries compare by name and content, the same way as rows.

The rows are split in SQLite (:mod:`pytest_scoring.db.diff_store`), so memory does not grow
with the number of changed rows; this module builds the parts' structure around them.

Decisions the diff-of-diffs leaves open (stated in docs/databases.md):

* Values compare as selectors compare them (``1`` equals ``1.0`` and ``true``; a missing
  column equals ``null``), so two runs that write the same data agree.
* A table's status in a part: ``added``/``removed`` when that table-level event is in only
  that part's diff (in ``shared``: in both), else ``changed`` when rows or columns are left,
  else ``unchanged``; ``counts``, ``has_changes`` and the row totals are recomputed/kept
  consistent. ``truncated`` is true when an input's rows were incomplete (the parts are then
  incomplete) or the part's examples were cut. Every database and table of either diff
  appears in all three parts.
* Each part keeps the top-level fields and ``info`` of the diff it came from (``shared``:
  the solution's), and an ``error`` entry of a database in its source diff.
* A changed row keeps its other fields (``paired_by``) in the part its columns went to.

With a third diff C, the baseline (the reference's own tests, issue 11), two more parts of B's
entries are built: ``from_tests`` (in A but not in C: changes this repository's test files
make) and ``scored`` (``after_only`` and ``from_tests`` together). A table-level event is in
``from_tests`` when A has it and C has not, in ``scored`` when A or C lacks it.
"""

from __future__ import annotations

import json
import tempfile
from collections.abc import Callable
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from typing import Final
from typing import cast

from pytest_scoring.db.diff_store import ALL_PARTS
from pytest_scoring.db.diff_store import BASELINE
from pytest_scoring.db.diff_store import LISTS
from pytest_scoring.db.diff_store import PARTS
from pytest_scoring.db.diff_store import REFERENCE
from pytest_scoring.db.diff_store import SOLUTION
from pytest_scoring.db.diff_store import DiffStore
from pytest_scoring.db.diff_store import StoredRows
from pytest_scoring.db.diff_types import DiffJSON

_EVENTS: Final = ("added", "removed")
_KINDS: Final = ("added", "removed", "changed")

Json = dict[str, Any]
#: Gives the row list of ``(part, database, table, list name)`` in a part being built.
ListReader = Callable[[int, str, str, str], Any]


def _mapping(value: object) -> Mapping[str, Any]:
    return value if isinstance(value, Mapping) else {}


@dataclass(frozen=True)
class SplitDiffs:
    """Two diffs (three with a baseline) whose rows are in a split :class:`DiffStore`; builds
    the parts from them.

    :param complete: the store holds every row of both diffs (their row lists in
        ``reference``/``solution`` may be cut examples); else the lists are all there is, and
        a table an input marks ``truncated`` is ``truncated`` in every part.
    :param baseline: the baseline diff, when the store holds one (``from_tests``, ``scored``).
    """

    reference: DiffJSON
    solution: DiffJSON
    store: DiffStore
    complete: bool
    baseline: DiffJSON | None = None

    def parts(self, limit: int | None = None) -> dict[str, DiffJSON]:
        """The parts for the report, row lists read out, at most ``limit`` rows per list:
        the three of the diff-of-diffs, and ``from_tests`` with a baseline."""
        names = [*PARTS, "from_tests"] if self.baseline is not None else list(PARTS)
        return self.parts_named(names, limit)

    def parts_named(self, names: list[str], limit: int | None = None) -> dict[str, DiffJSON]:
        """The named parts (of :data:`~pytest_scoring.db.diff_store.ALL_PARTS`), row lists
        read out, at most ``limit`` rows per list."""

        def read(part: int, relpath: str, table: str, name: str) -> list[Any]:
            return list(self.store.rows(part, relpath, table, name, limit))

        return _PartBuilder(self, read, limit).build(names)

    def part_for_selectors(self, name: str) -> DiffJSON:
        """One part whose row lists stream every row from the store (for selectors, not JSON).

        :param name: a part of :data:`~pytest_scoring.db.diff_store.ALL_PARTS`.
        """

        def stream(part: int, relpath: str, table: str, list_name: str) -> StoredRows:
            return StoredRows(self.store, part, relpath, table, list_name)

        return _PartBuilder(self, stream, None).build([name])[name]


class _PartBuilder:
    """Builds the parts' databases, planes and tables around the stored rows."""

    def __init__(self, split: SplitDiffs, lists: ListReader, limit: int | None):
        self.split = split
        self.lists = lists
        self.limit = limit
        self.counts = split.store.counts()

    def build(self, names: list[str]) -> dict[str, DiffJSON]:
        """The named parts (of :data:`~pytest_scoring.db.diff_store.ALL_PARTS`).

        Built key by key (planes and row lists by name) from the inputs' shape: each part is
        a diff of the same shape (:class:`~pytest_scoring.db.diff_types.DiffJSON`).
        """
        reference, solution = self.split.reference, self.split.solution
        databases_a = _mapping(reference.get("comparisons"))
        databases_b = _mapping(solution.get("comparisons"))
        baseline = self.split.baseline
        databases_c = None if baseline is None else _mapping(baseline.get("comparisons"))
        parts: dict[str, Json] = {}
        for name in names:
            source = reference if name == "before_only" else solution
            parts[name] = {
                **{k: v for k, v in source.items() if k != "comparisons"},
                "comparisons": {},
            }
        for key in dict.fromkeys([*databases_a, *databases_b]):
            sides = _Sides(
                _mapping(databases_a.get(key)),
                _mapping(databases_b.get(key)),
                None if databases_c is None else _mapping(databases_c.get(key)),
            )
            for name in names:
                parts[name]["comparisons"][key] = self._database(str(key), name, sides)
        return cast("dict[str, DiffJSON]", parts)

    def _database(self, relpath: str, name: str, sides: _Sides) -> Json:
        source = sides.source_for(name)
        part: Json = {"comparisons": {}}
        for plane in LISTS:
            tables = {
                table: self._table(relpath, table, plane, name, table_sides)
                for table, table_sides in sides.tables(plane).items()
            }
            part["comparisons"][plane] = {
                "has_changes": any(t["status"] != "unchanged" for t in tables.values()),
                "tables": tables,
            }
        part["info"] = dict(_mapping(source.get("info")))
        if "error" in source:
            part["error"] = source["error"]
        return part

    def _table(self, relpath: str, table: str, plane: str, name: str, sides: _Sides) -> Json:
        """One table entry of the named part."""
        part = ALL_PARTS.index(name)
        incomplete = not self.split.complete and bool(
            sides.reference.get("truncated") or sides.solution.get("truncated")
        )
        entry = dict(sides.source_for(name))
        counts = {
            list_name: self.counts.get((part, relpath, table, list_name), 0)
            for list_name in LISTS[plane]
        }
        for list_name in LISTS[plane]:
            entry[list_name] = self._list(part, relpath, table, list_name, plane)
        entry["status"] = _status(name, any(counts.values()), sides)
        if plane == "data":
            entry["counts"] = {kind: counts[f"rows_{kind}"] for kind in _KINDS}
            cut = self.limit is not None and any(n > self.limit for n in counts.values())
            entry["truncated"] = incomplete or cut
        return entry

    def _list(self, part: int, relpath: str, table: str, name: str, plane: str) -> Any:
        if plane == "schema":  # a few columns: always read out whole
            return list(self.split.store.rows(part, relpath, table, name))
        return self.lists(part, relpath, table, name)


@dataclass(frozen=True)
class _Sides:
    """One database's (or table's) entries in the reference, solution and baseline diffs."""

    reference: Mapping[str, Any]
    solution: Mapping[str, Any]
    #: None without a baseline diff; empty when it lacks this database or table.
    baseline: Mapping[str, Any] | None

    def source_for(self, part: str) -> Mapping[str, Any]:
        """The entry a part copies its fields from (``before_only``: the reference's)."""
        if part == "before_only":
            return self.reference or self.solution
        return self.solution or self.reference

    def tables(self, plane: str) -> dict[str, _Sides]:
        """The sides of each table of one plane of this database (the reference's and the
        solution's tables; a table only the baseline has is in no part)."""
        tables_a, tables_b = (_tables(side, plane) for side in (self.reference, self.solution))
        tables_c = None if self.baseline is None else _tables(self.baseline, plane)
        return {
            str(name): _Sides(
                _mapping(tables_a.get(name)),
                _mapping(tables_b.get(name)),
                None if tables_c is None else _mapping(tables_c.get(name)),
            )
            for name in dict.fromkeys([*tables_a, *tables_b])
        }


def _tables(database: Mapping[str, Any], plane: str) -> Mapping[str, Any]:
    return _mapping(_mapping(_mapping(database.get("comparisons")).get(plane)).get("tables"))


def _status(part: str, has_entries: bool, sides: _Sides) -> str:
    """The status of a table in one part (see the module docstring)."""
    reference = str(sides.reference.get("status", "unchanged"))
    solution = str(sides.solution.get("status", "unchanged"))
    # Without a baseline diff, the baseline counts as doing what the solution does.
    baseline = solution if sides.baseline is None else str(sides.baseline.get("status", ""))
    own = reference if part == "before_only" else solution
    event = {
        "before_only": reference != solution,
        "after_only": solution != reference,
        "shared": solution == reference,
        "from_tests": solution == reference and solution != baseline,
        "scored": solution != reference or solution != baseline,
    }[part]
    if own in _EVENTS and event:
        return own
    return "changed" if has_entries else "unchanged"


def diff_of_diffs(
    reference: DiffJSON, solution: DiffJSON, baseline: DiffJSON | None = None
) -> dict[str, DiffJSON]:
    """Split two diffs into what only A, only B, and both contain (docs/databases.md).

    :param reference: diff A, from the reference run.
    :param solution: diff B, from the scored repository's run (same initial state).
    :param baseline: diff C, from the reference's own tests (same initial state), if any.
    :returns: ``{"before_only": diff, "after_only": diff, "shared": diff}``; with a baseline
        also ``from_tests`` and ``scored``.
    """
    with tempfile.TemporaryDirectory(prefix="pytest-scoring-diff-of-diffs-") as folder:
        store = DiffStore(Path(folder) / "rows.db", baseline=baseline is not None)
        try:
            store.add_lists(REFERENCE, reference, LISTS)
            store.add_lists(SOLUTION, solution, LISTS)
            if baseline is not None:
                store.add_lists(BASELINE, baseline, LISTS)
            split = SplitDiffs(
                reference.copy(),
                solution.copy(),
                store,
                complete=False,
                baseline=None if baseline is None else baseline.copy(),
            )
            parts = split.parts()
            if baseline is not None:
                parts["scored"] = split.parts_named(["scored"])["scored"]
            return parts
        finally:
            store.close()


def scored_part(parts: Mapping[str, Any]) -> DiffJSON:
    """What ``db_diff_change``'s selector sees, from a diff-of-diffs read back from a file:
    ``after_only``, with ``from_tests`` merged in when the file has that part.

    The file is read defensively (a missing part or key reads as empty), hence ``Any``.

    The two parts never hold the same entry; a changed row with some columns in each is one
    row again here. Counts add up (changed rows listed in both count once).
    """
    after_only = _mapping(parts.get("after_only"))
    from_tests = parts.get("from_tests")
    if not isinstance(from_tests, Mapping):
        return cast("DiffJSON", dict(after_only))
    databases_a = _mapping(after_only.get("comparisons"))
    databases_b = _mapping(from_tests.get("comparisons"))
    merged = {**after_only, "comparisons": {}}
    for key in dict.fromkeys([*databases_a, *databases_b]):
        entry_a, entry_b = _mapping(databases_a.get(key)), _mapping(databases_b.get(key))
        database: Json = {**(entry_a or entry_b), "comparisons": {}}
        for plane in LISTS:
            tables_a, tables_b = _tables(entry_a, plane), _tables(entry_b, plane)
            tables = {
                name: _merged_table(
                    _mapping(tables_a.get(name)), _mapping(tables_b.get(name)), plane
                )
                for name in dict.fromkeys([*tables_a, *tables_b])
            }
            database["comparisons"][plane] = {
                "has_changes": any(table["status"] != "unchanged" for table in tables.values()),
                "tables": tables,
            }
        merged["comparisons"][key] = database
    return cast("DiffJSON", merged)


def _merged_table(first: Mapping[str, Any], second: Mapping[str, Any], plane: str) -> Json:
    """One table's entries of two parts of a diff-of-diffs that share no entry."""
    entry = dict(first or second)
    for name in LISTS[plane]:
        entry[name] = _list(first, name) + _list(second, name)
    events = [str(side.get("status")) for side in (first, second) if side.get("status") in _EVENTS]
    has_entries = any(entry[name] for name in LISTS[plane])
    entry["status"] = events[0] if events else "changed" if has_entries else "unchanged"
    if plane == "data":
        listed = len(entry["rows_changed"])
        entry["rows_changed"] = _merged_changes(entry["rows_changed"])
        counts_a, counts_b = _mapping(first.get("counts")), _mapping(second.get("counts"))
        counts = {kind: _count(counts_a, kind) + _count(counts_b, kind) for kind in _KINDS}
        counts["changed"] -= listed - len(entry["rows_changed"])
        entry["counts"] = counts
        entry["truncated"] = bool(first.get("truncated") or second.get("truncated"))
    return entry


def _merged_changes(rows: list[Any]) -> list[Any]:
    """Changed rows with the same key as one row, their changed columns together."""
    by_key: dict[str, Json] = {}
    for row in rows:
        row = _mapping(row)
        key = json.dumps(row.get("key"), sort_keys=True, default=str)
        if key in by_key:
            changes = {**_mapping(by_key[key].get("changes")), **_mapping(row.get("changes"))}
            by_key[key] = {**by_key[key], **row, "changes": changes}
        else:
            by_key[key] = dict(row)
    return list(by_key.values())


def _list(entry: Mapping[str, Any], name: str) -> list[Any]:
    value = entry.get(name)
    return list(value) if isinstance(value, list) else []


def _count(counts: Mapping[str, Any], kind: str) -> int:
    value = counts.get(kind)
    return value if isinstance(value, int) and not isinstance(value, bool) else 0
