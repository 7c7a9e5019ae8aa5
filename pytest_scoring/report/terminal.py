"""Scores and reports as terminal tables and lines (``show``, ``list``, the session summary)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any
from typing import Final

#: How many characters of an explanation ``show`` prints.
EXPLANATION_WIDTH: Final = 60


def shorten(text: str, width: int = EXPLANATION_WIDTH) -> str:
    """One line of at most ``width`` characters, ending in ``…`` when cut."""
    line = " ".join(text.split())
    return line if len(line) <= width else line[: width - 1] + "…"


def _format_value(value: object) -> str:
    if isinstance(value, float):
        return f"{value:g}"
    return str(value)


def _format_metrics(metrics: dict[str, Any]) -> str:
    return ", ".join(f"{name}={_format_value(value)}" for name, value in metrics.items())


def score_table(content: dict[str, Any]) -> Any:
    """A rich table of a ``scores.json``: scorer, value, explanation, metrics."""
    from rich.table import Table

    table = Table("scorer", "value", "explanation", "metrics", title="scores")
    metrics = content.get("metrics") or {}
    for name, score in (content.get("scores") or {}).items():
        table.add_row(
            name,
            _format_value(score.get("value")),
            shorten(str(score.get("explanation") or "")),
            _format_metrics(metrics.get(name) or {}),
        )
    return table


def counts_line(content: dict[str, Any]) -> str:
    """``tests: 3 passed, 1 failed … (total 4)`` from a ``scores.json``."""
    counts = dict((content.get("tests") or {}).get("counts") or {})
    total = counts.pop("total", 0)
    parts = ", ".join(f"{number} {outcome}" for outcome, number in counts.items() if number)
    return f"tests: {parts or 'none'} (total {total})"


def reports_table(infos: Sequence[Any]) -> Any:
    """A rich table of reports (:class:`~pytest_scoring.report.reader.ReportInfo`), as given."""
    from rich.table import Table

    table = Table(title="reports")
    table.add_column("id", no_wrap=True, min_width=22)
    for heading in ("created", "repository", "complete", "scores"):
        table.add_column(heading, overflow="fold")  # wrapped, never cut: scripts read it
    for info in infos:
        values = "\n".join(f"{name}={_format_value(v)}" for name, v in info.values.items())
        table.add_row(
            info.scan_id, info.created[:19], info.repository, _yes_no(info.complete), values
        )
    return table


def _yes_no(flag: bool) -> str:
    return "yes" if flag else "no"
