"""Scores and reports as terminal tables and lines (``show``, ``list``, the session summary)."""

from __future__ import annotations

from collections.abc import Mapping
from collections.abc import Sequence
from typing import Any
from typing import Final

from pytest_scoring.text import outcome_counts
from pytest_scoring.text import value_text

#: How many characters of an explanation ``show`` prints.
EXPLANATION_WIDTH: Final = 60


def shorten(text: str, width: int = EXPLANATION_WIDTH) -> str:
    """One line of at most ``width`` characters, ending in ``…`` when cut."""
    line = " ".join(text.split())
    return line if len(line) <= width else line[: width - 1] + "…"


def score_line(name: str, score: Mapping[str, Any], explained: bool = True) -> str:
    """``name: value  (explanation)``: one score as the session summary and ``junit`` print it.

    :param explained: add the explanation (left out under ``pytest -q``).
    """
    line = f"{name}: {value_text(score.get('value'))}"
    explanation = score.get("explanation")
    return f"{line}  ({explanation})" if explained and explanation else line


def format_metrics(metrics: dict[str, Any]) -> str:
    """``mean=71.43, stderr=0`` from one scorer's metrics (``show``, the Markdown summary)."""
    return ", ".join(f"{name}={value_text(value)}" for name, value in metrics.items())


def score_table(content: dict[str, Any]) -> Any:
    """A rich table of a ``scores.json``: scorer, value, explanation, metrics."""
    from rich.table import Table

    table = Table("scorer", "value", "explanation", "metrics", title="scores")
    metrics = content.get("metrics") or {}
    for name, score in (content.get("scores") or {}).items():
        table.add_row(
            name,
            value_text(score.get("value")),
            shorten(str(score.get("explanation") or "")),
            format_metrics(metrics.get(name) or {}),
        )
    return table


def counts_line(content: dict[str, Any]) -> str:
    """``tests: 3 passed, 1 failed, 2 errors (total 6)`` from a ``scores.json``."""
    counts = dict((content.get("tests") or {}).get("counts") or {})
    total = counts.pop("total", 0)
    return f"tests: {outcome_counts(counts) or 'none'} (total {value_text(total)})"


def reports_table(infos: Sequence[Any]) -> Any:
    """A rich table of reports (:class:`~pytest_scoring.report.reader.ReportInfo`), as given."""
    from rich.table import Table

    table = Table(title="reports")
    table.add_column("id", no_wrap=True, min_width=22)
    for heading in ("created", "repository", "complete", "scores"):
        table.add_column(heading, overflow="fold")  # wrapped, never cut: scripts read it
    for info in infos:
        values = "\n".join(f"{name}={value_text(v)}" for name, v in info.values.items())
        table.add_row(
            info.scan_id, info.created[:19], info.repository, _yes_no(info.complete), values
        )
    return table


def _yes_no(flag: bool) -> str:
    return "yes" if flag else "no"


def fail_under_line(percent: float, threshold: float, flag: str, complete: bool = True) -> str:
    """Why the exit status is 1: ``FAIL: 50% of tests pass, below --fail-under=75`` (and
    that the session did not complete, which no pass rate makes up for)."""
    why = "" if complete else " (the session did not complete)"
    return f"FAIL: {value_text(percent)}% of tests pass, below {flag}={value_text(threshold)}{why}"
