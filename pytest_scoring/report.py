"""Write a scored session as a report folder (SPEC 5).

The folder is built under a temporary name beside its final one and renamed into place when
every file is written, so a reader never sees half a report.
"""

from __future__ import annotations

import base64
import json
import os
import shutil
from collections.abc import Sequence
from dataclasses import dataclass
from dataclasses import field
from datetime import UTC
from datetime import datetime
from pathlib import Path
from typing import Any
from typing import Final

from pytest_scoring.errors import ReportError
from pytest_scoring.metrics import compute_metrics
from pytest_scoring.scorers.base import Scorer
from pytest_scoring.scores import Score
from pytest_scoring.scout import write_scan_results

FORMAT_VERSION: Final = 1
SCAN_DIR_PREFIX: Final = "scan_id="


def new_scan_id() -> str:
    """22 url-safe random characters, drawn from ``os.urandom``.

    Not from ``secrets``: ``--score-deterministic`` patches its token functions.
    """
    return base64.urlsafe_b64encode(os.urandom(16)).rstrip(b"=").decode("ascii")


def now_iso() -> str:
    """Now, to the millisecond: reports made in the same second still sort newest first."""
    return datetime.now(UTC).isoformat(timespec="milliseconds")


@dataclass
class SessionResult:
    """Everything a report holds about one scored repository."""

    repository: str
    scorers: Sequence[Scorer]
    scores: dict[str, Score]
    #: ``{"counts": …, "tests": […]}`` from :meth:`OutcomeTally.to_json`.
    tests: dict[str, Any]
    complete: bool = True
    #: Run-level errors: ``{"scanner", "error", "traceback"}``.
    errors: list[dict[str, str]] = field(default_factory=list)
    #: Extra JSON files for the folder (``diff.json``…), by file name.
    files: dict[str, Any] = field(default_factory=dict)
    scan_id: str = field(default_factory=new_scan_id)
    created: str = field(default_factory=now_iso)

    def metrics(self) -> dict[str, dict[str, float]]:
        """Each scorer's metrics over this report's samples (one scored repository)."""
        return {
            scorer.name: compute_metrics(scorer.metrics, [self.scores[scorer.name]])
            for scorer in self.scorers
            if scorer.name in self.scores
        }

    def scores_json(self) -> dict[str, Any]:
        """The content of ``scores.json``."""
        return {
            "format_version": FORMAT_VERSION,
            "scan_id": self.scan_id,
            "created": self.created,
            "repository": self.repository,
            "complete": self.complete,
            "scores": self.scores,
            "metrics": self.metrics(),
            "tests": self.tests,
            "errors": self.errors,
        }


def write_json(path: Path, content: Any) -> None:
    """Write JSON text; NaN is allowed where Inspect writes it (unscored values)."""
    path.write_text(json.dumps(content, indent=2, default=str) + "\n", encoding="utf-8")


def write_report(result: SessionResult, report_root: Path) -> Path:
    """Write ``report_root/scan_id=<id>/`` and return its path.

    :raises ReportError: when the report root cannot be created or written, or a value
        cannot be encoded (JSON, Parquet); nothing half-written is left behind.
    """
    final = report_root / f"{SCAN_DIR_PREFIX}{result.scan_id}"
    building = report_root / f".{SCAN_DIR_PREFIX}{result.scan_id}.tmp"
    try:
        report_root.mkdir(parents=True, exist_ok=True)
        building.mkdir()
        write_json(building / "scores.json", result.scores_json())
        for name, content in result.files.items():
            write_json(building / name, content)
        write_scan_results(building, result)
        building.rename(final)
    except (OSError, ValueError, TypeError) as error:  # ValueError/TypeError: encoding
        shutil.rmtree(building, ignore_errors=True)
        raise ReportError(
            f"cannot write the report under {report_root}: {type(error).__name__}: {error}"
        ) from error
    return final


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
    """A rich table of reports (:class:`~pytest_scoring.reader.ReportInfo`), as given."""
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
