"""What a report holds about one scored repository, and the content of its ``scores.json``."""

from __future__ import annotations

import base64
import os
from collections.abc import Sequence
from dataclasses import dataclass
from dataclasses import field
from datetime import UTC
from datetime import datetime
from typing import TYPE_CHECKING
from typing import Any
from typing import Final

from pytest_scoring.core.metrics import compute_metrics
from pytest_scoring.core.score import Score
from pytest_scoring.scorers.base import Scorer

if TYPE_CHECKING:
    from pytest_scoring.core.signals import Signal

FORMAT_VERSION: Final = 1
SCAN_DIR_PREFIX: Final = "scan_id="
#: The end of a report folder's hidden name while it is built (``.scan_id=<id>.tmp``).
BUILDING_SUFFIX: Final = ".tmp"
SCORES_FILE: Final = "scores.json"
#: The folder of a report (or a batch's sample) that keeps the evidence (docs/report.md).
EVIDENCE_DIR: Final = "evidence"


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
    #: Integrity signals ``{"kind", "detail", "file"}`` (docs/scoring.md#integrity).
    integrity: list[Signal] = field(default_factory=list)
    #: What produced the report: tool, options, input hashes (:mod:`.provenance`).
    provenance: dict[str, Any] = field(default_factory=dict)
    #: Further top-level keys of ``scores.json`` (``containment`` and ``run`` under
    #: ``pytest-scoring run``).
    extra: dict[str, Any] = field(default_factory=dict)
    #: What ``rescore`` reads, by path under :data:`EVIDENCE_DIR` (``--evidence``).
    evidence: dict[str, bytes] = field(default_factory=dict)
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
            "integrity": self.integrity,
            "scores": self.scores,
            "metrics": self.metrics(),
            "tests": self.tests,
            "errors": self.errors,
            "provenance": self.provenance,
            **self.extra,
        }
