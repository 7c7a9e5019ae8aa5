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
"""

from __future__ import annotations

import tempfile
from collections.abc import Callable
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from typing import Final

from pytest_scoring.db.diff_store import LISTS
from pytest_scoring.db.diff_store import PARTS
from pytest_scoring.db.diff_store import REFERENCE
from pytest_scoring.db.diff_store import SOLUTION
from pytest_scoring.db.diff_store import DiffStore
from pytest_scoring.db.diff_store import StoredRows

_EVENTS: Final = ("added", "removed")
_KINDS: Final = ("added", "removed", "changed")

Json = dict[str, Any]
#: Gives the row list of ``(part, database, table, list name)`` in a part being built.
ListReader = Callable[[int, str, str, str], Any]


def _mapping(value: object) -> Mapping[str, Any]:
    return value if isinstance(value, Mapping) else {}


@dataclass(frozen=True)
class SplitDiffs:
    """Two diffs whose rows are in a split :class:`DiffStore`; builds the parts from them.

    :param complete: the store holds every row of both diffs (their row lists in
        ``reference``/``solution`` may be cut examples); else the lists are all there is, and
        a table an input marks ``truncated`` is ``truncated`` in every part.
    """

    reference: Json
    solution: Json
    store: DiffStore
    complete: bool

    def parts(self, limit: int | None = None) -> dict[str, Json]:
        """The three parts with their row lists read out, at most ``limit`` rows per list."""

        def read(part: int, relpath: str, table: str, name: str) -> list[Any]:
            return list(self.store.rows(part, relpath, table, name, limit))

        return _PartBuilder(self, read, limit).build()

    def part_for_selectors(self, name: str) -> Json:
        """One part whose row lists stream every row from the store (for selectors, not JSON)."""

        def stream(part: int, relpath: str, table: str, list_name: str) -> StoredRows:
            return StoredRows(self.store, part, relpath, table, list_name)

        return _PartBuilder(self, stream, None).build()[name]


class _PartBuilder:
    """Builds the three parts' databases, planes and tables around the stored rows."""

    def __init__(self, split: SplitDiffs, lists: ListReader, limit: int | None):
        self.split = split
        self.lists = lists
        self.limit = limit
        self.counts = split.store.counts()

    def build(self) -> dict[str, Json]:
        reference, solution = self.split.reference, self.split.solution
        databases_a = _mapping(reference.get("comparisons"))
        databases_b = _mapping(solution.get("comparisons"))
        sources = (reference, solution, solution)
        parts = tuple(
            {**{k: v for k, v in source.items() if k != "comparisons"}, "comparisons": {}}
            for source in sources
        )
        for key in dict.fromkeys([*databases_a, *databases_b]):
            entries = self._database(
                str(key), _mapping(databases_a.get(key)), _mapping(databases_b.get(key))
            )
            for part, entry in zip(parts, entries, strict=True):
                part["comparisons"][key] = entry
        return dict(zip(PARTS, parts, strict=True))

    def _database(
        self, relpath: str, reference: Mapping[str, Any], solution: Mapping[str, Any]
    ) -> tuple[Json, Json, Json]:
        sources = (reference or solution, solution or reference, solution or reference)
        parts: tuple[Json, Json, Json] = (
            {"comparisons": {}},
            {"comparisons": {}},
            {"comparisons": {}},
        )
        planes_a = _mapping(reference.get("comparisons"))
        planes_b = _mapping(solution.get("comparisons"))
        for plane in LISTS:
            tables_a = _mapping(_mapping(planes_a.get(plane)).get("tables"))
            tables_b = _mapping(_mapping(planes_b.get(plane)).get("tables"))
            split_tables: tuple[Json, Json, Json] = ({}, {}, {})
            for name in dict.fromkeys([*tables_a, *tables_b]):
                entries = self._table(
                    relpath,
                    str(name),
                    plane,
                    _mapping(tables_a.get(name)),
                    _mapping(tables_b.get(name)),
                )
                for tables, entry in zip(split_tables, entries, strict=True):
                    tables[name] = entry
            for part, tables in zip(parts, split_tables, strict=True):
                part["comparisons"][plane] = {
                    "has_changes": any(t["status"] != "unchanged" for t in tables.values()),
                    "tables": tables,
                }
        for part, source in zip(parts, sources, strict=True):
            part["info"] = dict(_mapping(source.get("info")))
            if "error" in source:
                part["error"] = source["error"]
        return parts

    def _table(
        self,
        relpath: str,
        table: str,
        plane: str,
        reference: Mapping[str, Any],
        solution: Mapping[str, Any],
    ) -> tuple[Json, Json, Json]:
        """One table entry of A and of B, split into the three parts."""
        status_a = str(reference.get("status", "unchanged"))
        status_b = str(solution.get("status", "unchanged"))
        owns = (
            (status_a, status_b, False),
            (status_b, status_a, False),
            (status_b, status_a, True),
        )
        sources = (reference or solution, solution or reference, solution or reference)
        incomplete = not self.split.complete and bool(
            reference.get("truncated") or solution.get("truncated")
        )
        entries = []
        for part, (source, (own, other, shared)) in enumerate(zip(sources, owns, strict=True)):
            entry = dict(source)
            counts = {
                name: self.counts.get((part, relpath, table, name), 0) for name in LISTS[plane]
            }
            for name in LISTS[plane]:
                entry[name] = self._list(part, relpath, table, name, plane)
            entry["status"] = _status(any(counts.values()), own, other, shared)
            if plane == "data":
                entry["counts"] = {kind: counts[f"rows_{kind}"] for kind in _KINDS}
                cut = self.limit is not None and any(n > self.limit for n in counts.values())
                entry["truncated"] = incomplete or cut
            entries.append(entry)
        return entries[0], entries[1], entries[2]

    def _list(self, part: int, relpath: str, table: str, name: str, plane: str) -> Any:
        if plane == "schema":  # a few columns: always read out whole
            return list(self.split.store.rows(part, relpath, table, name))
        return self.lists(part, relpath, table, name)


def _status(has_entries: bool, own: str, other: str, shared: bool) -> str:
    """The status of a table in one part (see the module docstring)."""
    event = own == other if shared else own != other
    if own in _EVENTS and event:
        return own
    return "changed" if has_entries else "unchanged"


def diff_of_diffs(reference: Mapping[str, Any], solution: Mapping[str, Any]) -> dict[str, Json]:
    """Split two diffs into what only A, only B, and both contain (docs/databases.md).

    :param reference: diff A, from the reference run.
    :param solution: diff B, from the scored repository's run (same initial state).
    :returns: ``{"before_only": diff, "after_only": diff, "shared": diff}``.
    """
    with tempfile.TemporaryDirectory(prefix="pytest-scoring-diff-of-diffs-") as folder:
        store = DiffStore(Path(folder) / "rows.db")
        try:
            store.add_lists(REFERENCE, reference, LISTS)
            store.add_lists(SOLUTION, solution, LISTS)
            return SplitDiffs(dict(reference), dict(solution), store, complete=False).parts()
        finally:
            store.close()
