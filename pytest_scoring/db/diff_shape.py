"""Reading and trimming a finished diff: has it changes, its errors, capped copies, a table.

These work on the JSON shape alone, so they serve a diff from a file as well as a fresh one.
"""

from __future__ import annotations

from typing import Any
from typing import Final

from pytest_scoring.scorers.score import METADATA_TEXT_CAP
from pytest_scoring.scorers.score import cap_text


def diff_errors(diff: dict[str, Any]) -> list[str]:
    """The error of every database that could not be diffed."""
    return [entry["error"] for entry in diff["comparisons"].values() if "error" in entry]


def lost_databases(diff: dict[str, Any]) -> dict[str, str]:
    """Databases readable before but not after (gone, unreadable), with why.

    A hostile repository can hide a change by making the database unreadable when the session
    ends (locked, corrupt, renamed away, swapped for a symlink leading out) and restoring it
    afterwards; a scorer that cannot see the final state must not say "no change".
    """
    lost = {}
    for relpath, entry in diff.get("comparisons", {}).items():
        info = entry.get("info", {})
        unreadable = info.get("unreadable", [])
        if not info.get("exists_before") or "before" in unreadable:
            continue
        if "after" in unreadable:
            lost[relpath] = entry.get("error", "unreadable at the end of the session")
        elif not info.get("exists_after"):
            lost[relpath] = f"{relpath} was removed during the session"
    return lost


def summary_table(diff: dict[str, Any]) -> Any:
    """A compact ``rich`` table: one line per table (or unreadable database) with counts."""
    from rich.table import Table as RichTable

    table = RichTable("database", "table", "data", "schema", "before", "after", "+", "-", "~")
    for relpath, entry in diff["comparisons"].items():
        if "error" in entry:
            table.add_row(relpath, "", f"[red]error: {entry['error']}[/red]")
            continue
        data, schema = entry["comparisons"]["data"], entry["comparisons"]["schema"]
        for name, rows in data["tables"].items():
            counts = rows["counts"]
            table.add_row(
                relpath,
                name,
                rows["status"],
                schema["tables"][name]["status"],
                *(str(rows[k]) for k in ("before_rows", "after_rows")),
                *(str(counts[k]) for k in ("added", "removed", "changed")),
            )
    return table


_ROW_LISTS: Final = ("rows_added", "rows_removed", "rows_changed")


def cap_diff(diff: dict[str, Any], max_rows: int) -> dict[str, Any]:
    """A copy of a diff whose row lists keep at most ``max_rows`` examples (counts stay exact).

    Each kept value is capped too (text to :data:`METADATA_TEXT_CAP` characters with a note
    of how much was cut, a BLOB to a valid base64 prefix of that length): a hostile repository
    writing megabyte values must not blow up every score's metadata and report file.
    ``truncated`` is true when rows or values were cut.
    """
    capped = {**diff, "comparisons": {}}
    for key, entry in diff.get("comparisons", {}).items():
        data = entry.get("comparisons", {}).get("data")
        if data is None:
            capped["comparisons"][key] = entry
            continue
        tables = {name: _cap_table(table, max_rows) for name, table in data["tables"].items()}
        comparisons = {**entry["comparisons"], "data": {**data, "tables": tables}}
        capped["comparisons"][key] = {**entry, "comparisons": comparisons}
    return capped


def _cap_table(table: dict[str, Any], max_rows: int) -> dict[str, Any]:
    cut = any(len(table.get(name, [])) > max_rows for name in _ROW_LISTS)
    lists = {name: _cap_values(table.get(name, [])[:max_rows]) for name in _ROW_LISTS}
    values_cut = lists != {name: table.get(name, [])[:max_rows] for name in _ROW_LISTS}
    return {**table, **lists, "truncated": bool(table.get("truncated")) or cut or values_cut}


def _cap_values(item: Any) -> Any:
    """``item`` (rows, changes, values) with every long text or BLOB value capped."""
    if isinstance(item, str):
        return cap_text(item)
    if isinstance(item, list):
        return [_cap_values(element) for element in item]
    if not isinstance(item, dict):
        return item
    if list(item) == ["$blob"] and isinstance(item["$blob"], str):
        encoded = item["$blob"]
        cap = METADATA_TEXT_CAP - METADATA_TEXT_CAP % 4
        return item if len(encoded) <= cap else {"$blob": encoded[:cap]}
    return {key: _cap_values(value) for key, value in item.items()}


def has_changes(diff: dict[str, Any]) -> bool:
    """Whether any database in the diff changed in data or schema."""
    for entry in diff.get("comparisons", {}).values():
        planes = entry.get("comparisons", {})
        if any(plane.get("has_changes") for plane in planes.values()):
            return True
    return False


def cap_diff_of_diffs(parts: dict[str, Any], max_rows: int) -> dict[str, Any]:
    """:func:`cap_diff` applied to each part (``before_only``, ``after_only``, ``shared``)."""
    return {name: cap_diff(part, max_rows) for name, part in parts.items()}
