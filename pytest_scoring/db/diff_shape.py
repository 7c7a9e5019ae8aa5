"""Reading and trimming a finished diff: has it changes, its errors, capped copies, a table.

These work on the JSON shape alone, so they serve a diff from a file as well as a fresh one.
"""

from __future__ import annotations

from collections.abc import Callable
from collections.abc import Iterable
from collections.abc import Mapping
from pathlib import PurePath
from typing import Any
from typing import Final

from pytest_scoring.core.encoding import encode_json
from pytest_scoring.core.score import DEFAULT_VALUE_CAP
from pytest_scoring.core.score import cap_values
from pytest_scoring.db.diff_types import DatabaseEntryJSON
from pytest_scoring.db.diff_types import DataPlaneJSON
from pytest_scoring.db.diff_types import DataTableJSON
from pytest_scoring.db.diff_types import DiffJSON
from pytest_scoring.db.diff_types import PlanesJSON
from pytest_scoring.db.diff_types import RowKind

#: Every row of one row list of one table, re-iterable: ``database, table, kind``
#: (:meth:`~pytest_scoring.db.engine.DatabaseEngine.rows`).
RowSource = Callable[[str, str, RowKind], Iterable[Any]]


def diff_errors(diff: DiffJSON) -> list[str]:
    """The error of every database that could not be diffed."""
    return [entry["error"] for entry in diff["comparisons"].values() if "error" in entry]


def lost_databases(diff: DiffJSON) -> dict[str, str]:
    """Databases readable before but not after (gone, unreadable), or whose two readable
    states could not be compared, with why.

    A hostile repository can hide a change by making the database unreadable when the session
    ends (locked, corrupt, renamed away, swapped for a symlink leading out) and restoring it
    afterwards, or, in process, by removing the start snapshot's copy under the report root;
    a scorer that cannot see both states must not say "no change".
    """
    lost = {}
    for relpath, entry in diff["comparisons"].items():
        info = entry["info"]
        unreadable = info.get("unreadable", [])
        if not info.get("exists_before") or "before" in unreadable:
            continue
        if "after" in unreadable:
            lost[relpath] = entry.get("error", "unreadable at the end of the session")
        elif not info.get("exists_after"):
            lost[relpath] = f"{relpath} was removed during the session"
        elif "error" in entry:
            lost[relpath] = entry["error"]
    return lost


def summary_table(diff: DiffJSON) -> Any:
    """A compact ``rich`` table: one line per table (or unreadable database) with counts."""
    from rich.table import Table as RichTable
    from rich.text import Text

    table = RichTable("database", "table", "data", "schema", "before", "after", "+", "-", "~")
    for relpath, entry in diff["comparisons"].items():
        if "error" in entry:
            table.add_row(
                _unreadable_name(relpath, entry), "", Text(f"error: {entry['error']}", "red")
            )
            continue
        data, schema = entry["comparisons"]["data"], entry["comparisons"]["schema"]
        for name, rows in data["tables"].items():
            counts = rows["counts"]
            table.add_row(
                relpath,
                name,
                rows["status"],
                schema["tables"][name]["status"],
                str(rows["before_rows"]),
                str(rows["after_rows"]),
                *(str(counts[k]) for k in ("added", "removed", "changed")),
            )
    return table


def _unreadable_name(relpath: str, entry: DatabaseEntryJSON) -> str:
    """The name of the file that could not be read, where it is not ``relpath``'s (two files
    diffed under the second one's name: ``diff notes.db app.db``)."""
    info = entry["info"]
    sides = info.get("unreadable") or []
    path = (
        (info["path_before"] if sides[0] == "before" else info["path_after"])
        if len(sides) == 1
        else None
    )
    return str(path) if path and PurePath(path).name != PurePath(relpath).name else relpath


_ROW_LISTS: Final = ("rows_added", "rows_removed", "rows_changed")


def cap_diff(diff: DiffJSON, max_rows: int, value_cap: int = DEFAULT_VALUE_CAP) -> DiffJSON:
    """A copy of a diff whose row lists keep at most ``max_rows`` examples (counts stay exact).

    Each kept text or BLOB over ``value_cap`` bytes becomes a ``{"$truncated": …}`` stub
    (:func:`~pytest_scoring.core.score.cap_value`): a hostile repository writing
    megabyte values must not blow up every score's metadata and report file.
    ``truncated`` is true when rows or values were cut.
    """
    capped: DiffJSON = {**diff, "comparisons": {}}
    for key, entry in diff["comparisons"].items():
        data = entry["comparisons"]["data"]
        tables = {
            name: _cap_table(table, max_rows, value_cap) for name, table in data["tables"].items()
        }
        planes: PlanesJSON = {**entry["comparisons"], "data": {**data, "tables": tables}}
        capped["comparisons"][key] = {**entry, "comparisons": planes}
    return capped


def _cap_table(table: DataTableJSON, max_rows: int, value_cap: int) -> DataTableJSON:
    """A table whose row lists (lists: the JSON's, never streams) keep ``max_rows`` rows."""
    whole = {name: _as_list(table[name]) for name in _ROW_LISTS}
    kept = {name: rows[:max_rows] for name, rows in whole.items()}
    cut = any(len(whole[name]) > max_rows for name in _ROW_LISTS)
    lists = {name: cap_values(rows, value_cap) for name, rows in kept.items()}
    values_cut = lists != kept
    return {
        **table,
        "rows_added": lists["rows_added"],
        "rows_removed": lists["rows_removed"],
        "rows_changed": lists["rows_changed"],
        "truncated": bool(table.get("truncated")) or cut or values_cut,
    }


def _as_list(rows: Iterable[Any]) -> list[Any]:
    """A row list of the JSON (a stream is only ever given to selectors)."""
    assert isinstance(rows, list), "a diff with streamed rows is never capped"
    return rows


def json_size(content: Any) -> int:
    """Bytes of ``content`` as a report file holds it (the report writer's encoding)."""
    return len(encode_json(content).encode("utf-8", "surrogatepass"))


def fit_diff(diff: DiffJSON, max_rows: int, value_cap: int, max_bytes: int) -> DiffJSON:
    """:func:`cap_diff` with as many examples (up to ``max_rows``) as fit in ``max_bytes``.

    Examples are halved until the JSON fits; counts stay exact and ``truncated`` says so.
    """
    rows = max_rows
    while True:
        capped = cap_diff(diff, rows, value_cap)
        if rows == 0 or json_size(capped) <= max_bytes:
            return capped
        rows //= 2


def has_changes(diff: DiffJSON) -> bool:
    """Whether any database in the diff changed in data or schema."""
    return any(
        entry["comparisons"]["data"]["has_changes"] or entry["comparisons"]["schema"]["has_changes"]
        for entry in diff["comparisons"].values()
    )


def cap_diff_of_diffs(
    parts: Mapping[str, DiffJSON], max_rows: int, value_cap: int = DEFAULT_VALUE_CAP
) -> dict[str, DiffJSON]:
    """:func:`cap_diff` applied to each part (``before_only``, ``after_only``, ``shared``)."""
    return {name: cap_diff(part, max_rows, value_cap) for name, part in parts.items()}


def fit_diff_of_diffs(
    parts: Mapping[str, DiffJSON], max_rows: int, value_cap: int, max_bytes: int
) -> dict[str, DiffJSON]:
    """:func:`fit_diff` applied to each part, a third of ``max_bytes`` each."""
    share = max_bytes // len(parts) if parts else max_bytes
    return {name: fit_diff(part, max_rows, value_cap, share) for name, part in parts.items()}


def stream_cut_rows(diff: DiffJSON, rows: RowSource) -> DiffJSON:
    """``diff`` with the row lists of every table whose examples were cut read from ``rows``.

    The result is for selectors only (not JSON): they see every change, not only the examples.
    """
    comparisons = dict(diff["comparisons"])
    for name, entry in diff["comparisons"].items():
        tables = entry["comparisons"]["data"]["tables"]
        if not any(table["truncated"] for table in tables.values()):
            continue
        streamed = {
            table_name: _streamed_table(table, rows, name, table_name)
            for table_name, table in tables.items()
        }
        data: DataPlaneJSON = {**entry["comparisons"]["data"], "tables": streamed}
        comparisons[name] = {**entry, "comparisons": {**entry["comparisons"], "data": data}}
    return {**diff, "comparisons": comparisons}


def _streamed_table(
    table: DataTableJSON, rows: RowSource, database: str, name: str
) -> DataTableJSON:
    if not table["truncated"]:
        return table
    return {
        **table,
        "rows_added": rows(database, name, "added"),
        "rows_removed": rows(database, name, "removed"),
        "rows_changed": rows(database, name, "changed"),
    }
