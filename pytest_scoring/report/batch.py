"""The report of a batch: ``scores.json`` format 2, one sample per repository, and the Scout
files of as many transcripts (docs/report.md#batches).

Metrics are taken across the samples, as Inspect takes them across the samples of an eval:
the mean, stderr and accuracy of each scorer over every repository of the batch. A repository
that could not be scored has a ``"N"`` score for every scorer, so every scorer has one row per
repository and the metrics count it (``"N"`` is 0; a tampering ``"N"`` counts as a failed
sample, ``metadata.counted_as``, never left out).
"""

from __future__ import annotations

import shutil
from collections.abc import Mapping
from collections.abc import Sequence
from dataclasses import dataclass
from dataclasses import field
from pathlib import Path
from typing import Any
from typing import Final

from pytest_scoring.core.metrics import compute_metrics
from pytest_scoring.core.metrics import denominators
from pytest_scoring.core.outcomes import OutcomeTally
from pytest_scoring.core.score import Score
from pytest_scoring.core.score import error_score
from pytest_scoring.core.score import is_tampering
from pytest_scoring.errors import ReportError
from pytest_scoring.report.html import write_page
from pytest_scoring.report.result import SCORES_FILE
from pytest_scoring.report.result import now_iso
from pytest_scoring.report.samples import SAMPLE_FILE
from pytest_scoring.report.samples import BatchFolder
from pytest_scoring.report.samples import SampleTarget
from pytest_scoring.report.scout import BATCH_KEY
from pytest_scoring.report.scout import Scan
from pytest_scoring.report.scout import Transcript
from pytest_scoring.report.scout import write_scan_results
from pytest_scoring.scorers.base import Scorer
from pytest_scoring.scorers.tests import percent_of_counts

#: ``format_version`` of a batch's ``scores.json`` (one repository's report keeps 1).
BATCH_FORMAT_VERSION: Final = 2


def unscored_sample(
    repository: Path, target: SampleTarget, scorers: Sequence[Scorer], reason: str
) -> dict[str, Any]:
    """The sample of a repository that gave nothing to score: ``"N"`` for every scorer."""
    return {
        "id": target.id,
        "repository": str(repository),
        "created": now_iso(),
        "complete": False,
        "integrity": [],
        "scores": {scorer.name: error_score(scorer.type, reason) for scorer in scorers},
        "tests": OutcomeTally().to_json(),
        "errors": [{"scanner": "", "error": reason, "traceback": ""}],
        "inputs": target.inputs,
        "files": [],
    }


def write_unscored_sample(target: SampleTarget, sample: Mapping[str, Any]) -> None:
    """Keep an unscored sample in the folder too, so each repository has its folder.

    :raises ReportError: when it cannot be written.
    """
    from pytest_scoring.core.encoding import encode_json

    try:
        staging = target.prepare()
        text = encode_json(sample)
        (staging / SAMPLE_FILE).write_text(text, encoding="utf-8")
        write_page(staging, {SCORES_FILE: text})
        shutil.rmtree(target.folder, ignore_errors=True)  # what a failed worker left
        staging.rename(target.folder)
    except OSError as error:
        raise ReportError(f"cannot write the sample {target.folder}: {error}") from None


@dataclass
class BatchResult:
    """Everything the report of a batch holds."""

    scan_id: str
    #: The batch's key (:func:`~pytest_scoring.report.inputs.batch_key`).
    key: str
    scorers: Sequence[Scorer]
    #: One entry per repository, in the order they were given.
    samples: list[dict[str, Any]]
    complete: bool = True
    #: Errors of the batch itself (an interrupt): ``{"scanner", "error", "traceback"}``.
    errors: list[dict[str, str]] = field(default_factory=list)
    #: ``batch`` in ``scores.json``: jobs, counts of samples scored and kept.
    batch: dict[str, Any] = field(default_factory=dict)
    created: str = field(default_factory=now_iso)

    def metrics(self) -> dict[str, dict[str, float]]:
        """Each scorer's metrics over the samples that have its score."""
        return {
            scorer.name: compute_metrics(scorer.metrics, self._scores_of(scorer.name))
            for scorer in self.scorers
        }

    def denominators(self) -> dict[str, dict[str, Any]]:
        """Each scorer's metrics over ``all`` samples and the ``scored`` ones, with the
        counts of each kind of ``"N"`` (:func:`~pytest_scoring.core.metrics.denominators`)."""
        return {
            scorer.name: denominators(scorer.metrics, self._scores_of(scorer.name))
            for scorer in self.scorers
        }

    def _scores_of(self, name: str) -> list[Score]:
        return [sample["scores"][name] for sample in self.samples if name in sample["scores"]]

    def scores_json(self) -> dict[str, Any]:
        """The content of ``scores.json`` (format 2)."""
        return {
            "format_version": BATCH_FORMAT_VERSION,
            "scan_id": self.scan_id,
            "created": self.created,
            "complete": self.complete,
            "metrics": self.metrics(),
            "denominators": self.denominators(),
            "samples": self.samples,
            "errors": self.errors,
            "batch": self.batch,
        }

    def scan(self) -> Scan:
        """The Scout files' content: one transcript per sample."""
        transcripts = [
            Transcript(
                id=sample["id"],
                repository=sample["repository"],
                created=sample["created"],
                scores=sample["scores"],
                tests=sample["tests"],
                errors=sample["errors"],
            )
            for sample in self.samples
        ]
        return Scan(
            scan_id=self.scan_id,
            created=self.created,
            complete=self.complete,
            scorers=self.scorers,
            transcripts=transcripts,
            metrics=self.metrics(),
            name=f"pytest-scoring batch of {len(self.samples)} repositories",
            metadata=self.metadata(),
        )

    def metadata(self) -> dict[str, Any]:
        """``metadata`` of ``_scan.json``: the batch's key (to resume it), its size."""
        return {BATCH_KEY: self.key, "repositories": len(self.samples)}


def write_batch_report(folder: BatchFolder, result: BatchResult, report_root: Path) -> Path:
    """Write the batch's own files into its folder and rename it into place.

    :raises ReportError: when a file cannot be written or a value cannot be encoded.
    """
    from pytest_scoring.core.encoding import encode_json

    try:
        text = encode_json(result.scores_json())
        (folder.path / SCORES_FILE).write_text(text, encoding="utf-8")
        write_page(folder.path, {SCORES_FILE: text})
        write_scan_results(folder.path, result.scan())
    except (OSError, ValueError, TypeError, RecursionError) as error:
        raise ReportError(
            f"cannot write the report in {folder.path}: {type(error).__name__}: {error}"
        ) from error
    return folder.finish(report_root)


def mean_percent_passing(samples: Sequence[Mapping[str, Any]]) -> float:
    """What ``--fail-under`` compares for a batch: the mean over the samples of each one's
    pass percentage, a sample that did not complete or whose tampering was proven counting 0."""
    if not samples:
        return 0.0
    percents = [
        percent_of_counts((sample.get("tests") or {}).get("counts") or {})
        if sample.get("complete") and not tampered(sample)
        else 0.0
        for sample in samples
    ]
    return sum(percents) / len(percents)


def collected_nothing(sample: Mapping[str, Any]) -> bool:
    """The sample's session collected no test (and no collector failed): no outcome, none
    left to run, no expected set."""
    tests = sample.get("tests")
    if not isinstance(tests, Mapping):
        return True
    return not tests.get("tests") and not tests.get("not_run") and "missing" not in tests


def tampered(sample: Mapping[str, Any]) -> bool:
    """A score of the sample is ``"N"`` because tampering was proven."""
    scores = sample.get("scores")
    return isinstance(scores, Mapping) and any(
        isinstance(score, dict) and is_tampering(score) for score in scores.values()
    )
