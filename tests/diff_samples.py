"""Small diffs of the documented shape, written by hand, for selector and diff-of-diffs tests."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any


def change(key: dict[str, Any], **columns: tuple[Any, Any]) -> dict[str, Any]:
    """One entry of ``rows_changed``: ``change({"id": 3}, password=("x", "y"))``."""
    return {
        "key": key,
        "changes": {
            name: {"old_value": old, "new_value": new} for name, (old, new) in columns.items()
        },
    }


def data_table(
    status: str = "changed",
    added: Iterable[dict[str, Any]] = (),
    removed: Iterable[dict[str, Any]] = (),
    changed: Iterable[dict[str, Any]] = (),
) -> dict[str, Any]:
    """A data-plane table entry with exact counts."""
    rows = {"rows_added": list(added), "rows_removed": list(removed), "rows_changed": list(changed)}
    counts = {kind: len(rows[f"rows_{kind}"]) for kind in ("added", "removed", "changed")}
    return {
        "status": status,
        **rows,
        "before_rows": 10,
        "after_rows": 10 + counts["added"] - counts["removed"],
        "counts": counts,
        "truncated": False,
    }


def schema_table(
    status: str = "unchanged",
    added: Iterable[dict[str, Any]] = (),
    removed: Iterable[dict[str, Any]] = (),
    changed: Iterable[dict[str, Any]] = (),
) -> dict[str, Any]:
    """A schema-plane table entry."""
    return {
        "status": status,
        "columns_added": list(added),
        "columns_removed": list(removed),
        "columns_changed": list(changed),
    }


def column(name: str, type_: str = "TEXT") -> dict[str, Any]:
    """A column description as the schema plane lists it."""
    return {"name": name, "type": type_, "nullable": True, "primary_key": False}


def database(
    data: dict[str, dict[str, Any]] | None = None,
    schema: dict[str, dict[str, Any]] | None = None,
    exists_before: bool = True,
    exists_after: bool = True,
) -> dict[str, Any]:
    """One entry of ``comparisons``; tables missing from ``schema`` are ``unchanged`` there."""
    data = data or {}
    schema = {**{name: schema_table() for name in data}, **(schema or {})}
    planes = {"data": data, "schema": schema}
    return {
        "comparisons": {
            plane: {
                "has_changes": any(table["status"] != "unchanged" for table in tables.values()),
                "tables": tables,
            }
            for plane, tables in planes.items()
        },
        "info": {
            "path_before": "before",
            "path_after": "after",
            "exists_before": exists_before,
            "exists_after": exists_after,
        },
    }


def diff(databases: dict[str, dict[str, Any]]) -> dict[str, Any]:
    """A whole diff over the given databases (keyed by relative path)."""
    return {
        "status": "success",
        "before_source": "before",
        "after_source": "after",
        "db_patterns": ["*.db", "*.sqlite", "*.sqlite3"],
        "comparisons": databases,
    }
