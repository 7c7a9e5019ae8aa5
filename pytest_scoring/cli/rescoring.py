"""The backend of ``rescore``: the evaluator's scorers on each report's evidence (issue 28)."""

from __future__ import annotations

import tempfile
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from pytest_scoring.core.encoding import json_digest
from pytest_scoring.core.settings import ScoringSettings
from pytest_scoring.core.signals import StrictKinds
from pytest_scoring.evaluation.assemble import build_scorers
from pytest_scoring.evaluation.hooks import evaluator_plugins
from pytest_scoring.evaluation.rescore import Evidence
from pytest_scoring.evaluation.rescore import RescoreOptions
from pytest_scoring.evaluation.rescore import read_evidence
from pytest_scoring.evaluation.rescore import rescore
from pytest_scoring.evaluation.settings import load_json_argument
from pytest_scoring.reference.expected import load_expected_tests
from pytest_scoring.report.batch import BatchResult
from pytest_scoring.report.batch import write_batch_report
from pytest_scoring.report.inputs import SampleInputs
from pytest_scoring.report.inputs import transcript_id
from pytest_scoring.report.result import now_iso
from pytest_scoring.report.samples import open_batch_folder
from pytest_scoring.report.samples import read_sample
from pytest_scoring.report.samples import write_sample
from pytest_scoring.report.scout import ScanWriter
from pytest_scoring.report.terminal import score_line
from pytest_scoring.report.writer import write_report
from pytest_scoring.scorers.base import Scorer
from pytest_scoring.text import value_text


def rescore_reports(
    reports: Sequence[Path],
    config: Path | None,
    selector: str | None,
    expected_tests: str | None,
    strict: StrictKinds | None,
    report_root: Path,
    jobs: int = 1,
) -> Rescored:
    """Re-score the reports into a new folder under ``report_root``: one report's folder, or
    a batch's for several reports or a batch (``jobs`` samples at a time).

    :raises ScoringError: naming the flag or report that is wrong, before anything is written.
    """
    cwd = Path.cwd()
    settings = ScoringSettings(
        root=cwd,
        enabled=True,
        selector=None if selector is None else load_json_argument(selector, "--selector", cwd),
        config_file=None if config is None else cwd / config,
        report_root=report_root,
    )
    scorers = build_scorers(evaluator_plugins().hook, None, settings)
    options = RescoreOptions(settings, strict=strict)
    if expected_tests is not None:
        # A folder runs as the evaluator's own, never where a report's repository wrote.
        expected = load_expected_tests(cwd / expected_tests, "--expected-tests", route="evaluator")
        options.expected, options.expected_source = expected.outcomes, expected.describe()
        settings.expected_source = cwd / expected_tests
    with tempfile.TemporaryDirectory(prefix="pytest-scoring-logs-") as logs:
        evidence = [found for report in reports for found in _evidence(Path(report), Path(logs))]
        if len(evidence) == 1 and "id" not in evidence[0].scores:
            result = rescore(evidence[0], scorers, options)
            lines = [score_line(name, score) for name, score in result.scores.items()]
            path = write_report(result, report_root)
            return Rescored([result.scores_json()], [*lines, f"score report: {path}"], batch=False)
        return _rescore_batch(evidence, scorers, options, report_root, jobs)


def _evidence(report: Path, logs: Path) -> list[Evidence]:
    """The evidence of a report folder, or of each sample of an Inspect eval log (a file),
    whose kept evidence is written under ``logs`` for the time of re-scoring."""
    if not report.is_file():
        return read_evidence(report)
    # Loaded only for a log: re-scoring a report never needs Inspect AI.
    from pytest_scoring.evaluation.inspect_store import log_evidence

    return log_evidence(report, Path(tempfile.mkdtemp(dir=logs)))


@dataclass
class Rescored:
    """What ``rescore`` wrote: each sample's content (for the exit status) and the lines."""

    samples: list[dict[str, Any]]
    lines: list[str]
    batch: bool


def _rescore_batch(
    evidence: list[Evidence],
    scorers: list[Scorer],
    options: RescoreOptions,
    report_root: Path,
    jobs: int,
) -> Rescored:
    """Several reports, or a batch's samples: one batch scan, ``jobs`` samples at a time."""
    origins = [
        (found.scores.get("scan_id"), found.scores.get("id"), str(found.folder))
        for found in evidence
    ]
    # Its own key: a re-scoring never continues (nor keeps the samples of) another batch.
    key = json_digest({"rescore": origins, "at": now_iso()})[:32]
    targets: dict[str, tuple[Evidence, SampleInputs]] = {}
    for found in evidence:
        hashed = (found.scores.get("provenance") or {}).get("inputs") or {}
        inputs = SampleInputs(
            repository=str(hashed.get("repository", "")),
            options=key,
            reference=hashed.get("reference"),
        )
        transcript = str(found.scores.get("id") or transcript_id(found.folder, key))
        targets[transcript] = (found, inputs)
    folder = open_batch_folder(report_root, key, {t: inputs for t, (_, inputs) in targets.items()})
    result = BatchResult(folder.scan_id, key, scorers, samples=[])
    folder.write_spec(ScanWriter(result.scan()).spec())

    def one(transcript: str) -> dict[str, Any]:
        found, inputs = targets[transcript]
        target = folder.target(transcript, inputs)
        write_sample(target, rescore(found, scorers, options))
        entry = read_sample(target.folder)
        assert entry is not None, "written just now"
        return entry

    with ThreadPoolExecutor(max_workers=jobs) as pool:
        result.samples = list(pool.map(one, targets))
    result.batch = {"jobs": jobs, "repositories": len(targets), "scored": len(targets), "kept": 0}
    path = write_batch_report(folder, result, report_root)
    lines = [
        f"{sample['repository']}: "
        + ", ".join(
            f"{name} {value_text(score['value'])}" for name, score in sample["scores"].items()
        )
        for sample in result.samples
    ]
    return Rescored(result.samples, [*lines, f"score report: {path}"], batch=True)
