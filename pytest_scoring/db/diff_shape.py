"""Reading and trimming a finished diff: has it changes, its errors, capped copies, a table.

These work on the JSON shape alone, so they serve a diff from a file as well as a fresh one.
"""

from __future__ import annotations

from pathlib import PurePath
from typing import Any
from typing import Final

from pytest_scoring.core.encoding import encode_json
from pytest_scoring.core.score import DEFAULT_VALUE_CAP
from pytest_scoring.core.score import cap_values


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
                *(str(rows[k]) for k in ("before_rows", "after_rows")),
                *(str(counts[k]) for k in ("added", "removed", "changed")),
            )
    return table


def _unreadable_name(relpath: str, entry: dict[str, Any]) -> str:
    """The name of the file that could not be read, where it is not ``relpath``'s (two files
    diffed under the second one's name: ``diff notes.db app.db``)."""
    info = entry.get("info") or {}
    sides = info.get("unreadable") or []
    path = info.get(f"path_{sides[0]}") if len(sides) == 1 else None
    return str(path) if path and PurePath(path).name != PurePath(relpath).name else relpath


_ROW_LISTS: Final = ("rows_added", "rows_removed", "rows_changed")


def cap_diff(
    diff: dict[str, Any], max_rows: int, value_cap: int = DEFAULT_VALUE_CAP
) -> dict[str, Any]:
    """A copy of a diff whose row lists keep at most ``max_rows`` examples (counts stay exact).

    Each kept text or BLOB over ``value_cap`` bytes becomes a ``{"$truncated": …}`` stub
    (:func:`~pytest_scoring.core.score.cap_value`): a hostile repository writing
    megabyte values must not blow up every score's metadata and report file.
    ``truncated`` is true when rows or values were cut.
    """
    capped = {**diff, "comparisons": {}}
    for key, entry in diff.get("comparisons", {}).items():
        data = entry.get("comparisons", {}).get("data")
        if data is None:
            capped["comparisons"][key] = entry
            continue
        tables = {
            name: _cap_table(table, max_rows, value_cap) for name, table in data["tables"].items()
        }
        comparisons = {**entry["comparisons"], "data": {**data, "tables": tables}}
        capped["comparisons"][key] = {**entry, "comparisons": comparisons}
    return capped


def _cap_table(table: dict[str, Any], max_rows: int, value_cap: int) -> dict[str, Any]:
    cut = any(len(table.get(name, [])) > max_rows for name in _ROW_LISTS)
    kept = {name: table.get(name, [])[:max_rows] for name in _ROW_LISTS}
    lists = {name: cap_values(rows, value_cap) for name, rows in kept.items()}
    values_cut = lists != kept
    return {**table, **lists, "truncated": bool(table.get("truncated")) or cut or values_cut}


def json_size(content: Any) -> int:
    """Bytes of ``content`` as a report file holds it (the report writer's encoding)."""
    return len(encode_json(content).encode("utf-8", "surrogatepass"))


def fit_diff(diff: dict[str, Any], max_rows: int, value_cap: int, max_bytes: int) -> dict[str, Any]:
    """:func:`cap_diff` with as many examples (up to ``max_rows``) as fit in ``max_bytes``.

    Examples are halved until the JSON fits; counts stay exact and ``truncated`` says so.
    """
    rows = max_rows
    while True:
        capped = cap_diff(diff, rows, value_cap)
        if rows == 0 or json_size(capped) <= max_bytes:
            return capped
        rows //= 2


def has_changes(diff: dict[str, Any]) -> bool:
    """Whether any database in the diff changed in data or schema."""
    for entry in diff.get("comparisons", {}).values():
        planes = entry.get("comparisons", {})
        if any(plane.get("has_changes") for plane in planes.values()):
            return True
    return False


def cap_diff_of_diffs(
    parts: dict[str, Any], max_rows: int, value_cap: int = DEFAULT_VALUE_CAP
) -> dict[str, Any]:
    """:func:`cap_diff` applied to each part (``before_only``, ``after_only``, ``shared``)."""
    return {name: cap_diff(part, max_rows, value_cap) for name, part in parts.items()}


def fit_diff_of_diffs(
    parts: dict[str, Any], max_rows: int, value_cap: int, max_bytes: int
) -> dict[str, Any]:
    """:func:`fit_diff` applied to each part, a third of ``max_bytes`` each."""
    share = max_bytes // len(parts) if parts else max_bytes
    return {name: fit_diff(part, max_rows, value_cap, share) for name, part in parts.items()}
