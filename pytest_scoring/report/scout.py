"""Write a scored session as an Inspect Scout results directory (docs/report.md).

The layout, column types and value encoding are those Scout's own reader loads
(docs/report.md#the-parquet-columns): each scored repository is one transcript, each scorer
one scanner, and each scanner gets one ``<key>.parquet`` file with the full 58-column schema
Scout 0.6's recorder writes, one row per (transcript, scorer), and one column of ours after
them: ``counted_as``, what the row counted as in the metrics.
"""

from __future__ import annotations

import json
import math
import uuid
from collections.abc import Mapping
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING
from typing import Any
from typing import Final
from typing import NamedTuple
from urllib.parse import quote

from pytest_scoring.core.score import CORRECT
from pytest_scoring.core.score import INCORRECT
from pytest_scoring.core.score import PARTIAL
from pytest_scoring.core.score import Score
from pytest_scoring.core.score import counted_value
from pytest_scoring.core.score import value_to_float
from pytest_scoring.fs.private import read_private_json
from pytest_scoring.report.parquet import json_lines
from pytest_scoring.report.parquet import write_parquet
from pytest_scoring.scorers.base import Scorer
from pytest_scoring.scorers.tests import TEST_SCORINGS
from pytest_scoring.text import number_text

if TYPE_CHECKING:
    from pytest_scoring.report.parquet_helper import ParquetHelper
    from pytest_scoring.report.result import SessionResult

#: What a scored repository is, as a transcript source (free text for Scout).
SOURCE_TYPE: Final = "pytest_scoring"
SCAN_FILE: Final = "_scan.json"
SUMMARY_FILE: Final = "_summary.json"
ERRORS_FILE: Final = "_errors.jsonl"
#: The key of ``_scan.json``'s ``metadata`` that names a batch (docs/report.md#batches).
BATCH_KEY: Final = "batch_key"


#: The recorder's columns in its order, by Arrow type name (``string`` unless noted).
def scanner_key(name: str) -> str:
    """The file stem and ``_scan.json`` key for a scorer name.

    Names come from configuration files, so anything but letters, digits and ``_.-~`` is
    percent-escaped (``a/b`` becomes ``a%2Fb``) and a leading dot is escaped too: the
    Parquet file always lands directly inside the report folder, visible to Scout's glob.
    The escaping is one-to-one, so two scorers never share a file.
    """
    key = quote(name, safe="")
    if key.startswith("."):
        key = "%2E" + key[1:]
    return key or "%00"


def own_scan_spec(folder: Path) -> dict[str, Any] | None:
    """A scan folder's ``_scan.json``, when the folder and the file are the evaluator's own
    (a repository's processes cannot plant one)."""
    return read_private_json(folder, SCAN_FILE)


def batch_key_of(spec: Mapping[str, Any]) -> str | None:
    """The batch a scan spec belongs to, or None for a single repository's scan."""
    metadata = spec.get("metadata")
    key = metadata.get(BATCH_KEY) if isinstance(metadata, dict) else None
    return key if isinstance(key, str) else None


def package_versions() -> dict[str, str]:
    """Versions of the packages that shaped the report, for ``_scan.json``."""
    from pytest_scoring.core.version import __version__
    from pytest_scoring.process.environment import evaluator_pytest_version

    return {"pytest_scoring": __version__, "pytest": evaluator_pytest_version()}


def encode_value(value: object) -> tuple[str | None, str]:
    """A score value as the recorder stores it: ``(text, value_type)``.

    Booleans are ``true``/``false``, numbers their shortest decimal text (20.0 is ``20``),
    strings themselves, lists and dicts JSON text.
    """
    if value is None:
        return None, "null"
    if isinstance(value, bool):
        return ("true" if value else "false"), "boolean"
    if isinstance(value, (int, float)):
        return number_text(value), "number"
    if isinstance(value, str):
        return value, "string"
    kind = "array" if isinstance(value, list) else "object"
    return _json(value), kind


#: Values that count as themselves in the metrics (1, 0 and 0.5, and ``accuracy`` counts C).
_LETTERS: Final = frozenset({CORRECT, INCORRECT, PARTIAL})


def counted_as(score: Score) -> str:
    """What a score counted as in the metrics, as text (the ``counted_as`` column): ``C``,
    ``I`` or ``P``; for any other value the number it counted as (``62.5``, ``1`` for
    ``true`` or ``yes``). A ``"N"`` counts as ``0``, or as its ``metadata.counted_as`` (a
    tampering ``"N"``: its scorer's failed value)."""
    value = counted_value(score)
    if isinstance(value, str) and value in _LETTERS:
        return value
    return number_text(value_to_float(value))


def _json(content: Any) -> str:
    return json.dumps(content, separators=(",", ":"), default=str)


def _text(content: object) -> str | None:
    """Text for a text column; a plugin scorer's non-text answer must not break the file."""
    return None if content is None else str(content)


def score_error(score: Score) -> str | None:
    """The error a score carries in ``metadata.error`` (it could not be decided), if any."""
    error = (score.get("metadata") or {}).get("error")
    return None if error in (None, "", False) else str(error)


def _truthy(value: object) -> bool:
    return bool(value) and not (isinstance(value, float) and math.isnan(value))


def scanner_params(scorer: Scorer) -> dict[str, Any]:
    """What ``_scan.json`` records of a scorer: its type plus its ``params``, when it has them."""
    params = getattr(scorer, "params", None)
    return {"type": scorer.type, **(params if isinstance(params, Mapping) else {})}


class Transcript(NamedTuple):
    """One scored repository as Scout sees it: a transcript, scored by every scanner."""

    #: Its id: the scan id in a report of one repository; in a batch, derived from the
    #: repository's path and content (docs/report.md).
    id: str
    repository: str
    #: When it was scored (ISO 8601).
    created: str
    scores: Mapping[str, Score]
    #: ``{"counts": …, "tests": […]}``.
    tests: Mapping[str, Any]
    #: Its run-level errors ``{"scanner", "error", "traceback"}``.
    errors: Sequence[Mapping[str, str]] = ()


class Scan(NamedTuple):
    """What the Scout files of one report folder say: its transcripts and their scores."""

    scan_id: str
    created: str
    complete: bool
    scorers: Sequence[Scorer]
    transcripts: Sequence[Transcript]
    #: Each scorer's metrics over all transcripts, by scorer name.
    metrics: Mapping[str, Mapping[str, float]]
    #: ``scan_name`` in ``_scan.json``.
    name: str
    #: ``metadata`` in ``_scan.json`` (and ``scan_metadata`` in every row).
    metadata: Mapping[str, Any]

    @classmethod
    def of_result(cls, result: SessionResult) -> Scan:
        """The scan of a report of one repository: one transcript whose id is the scan id."""
        transcript = Transcript(
            id=result.scan_id,
            repository=result.repository,
            created=result.created,
            scores=result.scores,
            tests=result.tests,
            errors=result.errors,
        )
        return cls(
            scan_id=result.scan_id,
            created=result.created,
            complete=result.complete,
            scorers=result.scorers,
            transcripts=[transcript],
            metrics=result.metrics(),
            name=f"pytest-scoring {Path(result.repository).name}",
            metadata={"repository": result.repository},
        )


class ScanWriter:
    """Builds the Scout files of one :class:`Scan` inside a report folder."""

    def __init__(self, scan: Scan):
        self.scan = scan
        #: Each transcript's own columns by its id: the same in every scorer's row, and
        #: summing a large session's test durations once is enough (issue 17).
        self._columns: dict[str, dict[str, Any]] = {}

    def start(self, folder: Path, helper: ParquetHelper | None = None) -> ParquetFiles:
        """Hand the Parquet files to ``helper``, which writes them while the writer goes on
        with the report's other files; :meth:`write` finishes them."""
        rows = {}
        for scorer in self.scan.scorers:
            scored = [
                self.row(scorer, transcript)
                for transcript in self.scan.transcripts
                if scorer.name in transcript.scores
            ]
            if scored:
                rows[folder / f"{scanner_key(scorer.name)}.parquet"] = json_lines(scored)
        return ParquetFiles(rows, helper if helper is not None and helper.send(rows) else None)

    def write(self, folder: Path, parquet: ParquetFiles | None = None) -> None:
        """Write ``_scan.json``, ``_summary.json``, ``_errors.jsonl`` and the Parquet files.

        :param parquet: the Parquet files :meth:`start` handed on; without it, they are
            written here.
        """
        (parquet or self.start(folder)).finish()
        _write_text(folder / SCAN_FILE, json.dumps(self.spec(), indent=2) + "\n")
        _write_text(folder / SUMMARY_FILE, json.dumps(self.summary(), indent=2) + "\n")
        _write_text(folder / ERRORS_FILE, "".join(_json(line) + "\n" for line in self.errors()))

    def spec(self) -> dict[str, Any]:
        """The ScanSpec: every scorer declared as a scanner, keyed by its file stem."""
        package = package_versions().get("pytest_scoring")
        return {
            "scan_id": self.scan.scan_id,
            "scan_name": self.scan.name,
            "timestamp": self.scan.created,
            "scanners": {
                scanner_key(scorer.name): {
                    "name": scorer.name,
                    "version": 0,
                    "package_version": package,
                    "params": scanner_params(scorer),
                }
                for scorer in self.scan.scorers
            },
            "packages": package_versions(),
            "metadata": dict(self.scan.metadata),
        }

    def summary(self) -> dict[str, Any]:
        """The Summary: counts and (finite) metrics per scanner, and the complete flag."""
        scanners = {}
        for scorer in self.scan.scorers:
            scores = [
                t.scores[scorer.name] for t in self.scan.transcripts if scorer.name in t.scores
            ]
            if not scores:
                continue
            failed = sum(score_error(score) is not None for score in scores)
            results = sum(
                score_error(score) is None and _truthy(score.get("value")) for score in scores
            )
            scanners[scanner_key(scorer.name)] = {
                "scans": len(scores),
                "results": results,
                "errors": failed,
                "validation": None,
                "metrics": {scorer.name: _finite(self.scan.metrics.get(scorer.name, {}))},
                "tokens": 0,
                "model_usage": {},
            }
        return {"complete": self.scan.complete, "scanners": scanners}

    def errors(self) -> list[dict[str, Any]]:
        """Per transcript: one Error line per scorer that could not score, then any other
        run-level error of that transcript."""
        lines = []
        for transcript in self.scan.transcripts:
            tracebacks = _tracebacks(transcript)
            found = []
            for scorer in self.scan.scorers:
                error = score_error(transcript.scores.get(scorer.name) or {})
                if error is not None:
                    found.append(_error_line(transcript.id, scorer.name, error, tracebacks))
            reported = {line["scanner"] for line in found}
            for entry in transcript.errors:
                if scanner_key(entry["scanner"]) not in reported:
                    found.append(
                        _error_line(transcript.id, entry["scanner"], entry["error"], tracebacks)
                    )
            lines += found
        return lines

    def row(self, scorer: Scorer, transcript: Transcript) -> dict[str, Any]:
        """The scan-result row of one scorer's score for one transcript."""
        score = transcript.scores[scorer.name]
        value, value_type = encode_value(score.get("value"))
        error = score_error(score)
        columns = self._columns.get(transcript.id)
        if columns is None:
            columns = self._columns[transcript.id] = self._transcript_columns(transcript)
        return {
            **columns,
            "scanner_key": scanner_key(scorer.name),
            "scanner_name": scorer.name,
            "scanner_version": 0,
            "scanner_package_version": package_versions().get("pytest_scoring"),
            "scanner_params": _json(scanner_params(scorer)),
            "input_type": "transcript",
            "input_ids": _json([transcript.id]),
            "uuid": str(uuid.uuid4()),
            "value": value,
            "value_type": value_type,
            "counted_as": counted_as(score),
            "flaky": _flaky(scorer, transcript),
            "answer": _text(score.get("answer")),
            "explanation": _text(score.get("explanation")),
            "metadata": _json(score.get("metadata") or {}),
            "message_references": "[]",
            "event_references": "[]",
            "scan_error": error,
            "scan_error_traceback": None
            if error is None
            else _tracebacks(transcript).get(scorer.name),
            "scan_total_tokens": 0,
            "scan_model_usage": "{}",
            "timestamp": transcript.created,
        }

    def _transcript_columns(self, transcript: Transcript) -> dict[str, Any]:
        tests = transcript.tests.get("tests") or []
        return {
            "transcript_id": transcript.id,
            "transcript_source_type": SOURCE_TYPE,
            "transcript_source_id": transcript.id,
            "transcript_source_uri": transcript.repository,
            "transcript_date": transcript.created,
            "transcript_task_set": Path(transcript.repository).name,
            "transcript_task_id": transcript.repository,
            "transcript_task_repeat": 1,
            "transcript_total_time": round(sum(test["duration"] for test in tests), 6),
            "transcript_metadata": _json({"tests": transcript.tests.get("counts", {})}),
            "scan_id": self.scan.scan_id,
            "scan_tags": "[]",
            "scan_metadata": _json(dict(self.scan.metadata)),
        }


def _flaky(scorer: Scorer, transcript: Transcript) -> str | None:
    """The ``flaky`` column: a test scorer's row holds the session's flaky tests and their
    attempts (``tests.flaky``) when tests were rerun; every other row null."""
    flaky = transcript.tests.get("flaky")
    if getattr(scorer, "type", None) not in TEST_SCORINGS or not isinstance(flaky, dict):
        return None
    return _json(flaky)


def _tracebacks(transcript: Transcript) -> dict[str, str]:
    return {error["scanner"]: error["traceback"] for error in transcript.errors}


def _error_line(
    transcript_id: str, name: str, error: str, tracebacks: Mapping[str, str]
) -> dict[str, Any]:
    return {
        "transcript_id": transcript_id,
        "scanner": scanner_key(name),
        "error": error,
        "traceback": tracebacks.get(name, ""),
        "refusal": False,
    }


class ParquetFiles(NamedTuple):
    """A report folder's Parquet files, each as its rows' JSON lines, on their way to disk."""

    #: Path → the rows of that file (:func:`json_lines`).
    rows: dict[Path, bytes]
    #: The helper process writing them, or None when this process writes them.
    helper: ParquetHelper | None

    def finish(self) -> None:
        """Wait for the helper to have written them; write any it did not."""
        if self.helper is None or not self.helper.written():
            for path, lines in self.rows.items():
                write_parquet(path, lines)


def _finite(metrics: Mapping[str, float]) -> dict[str, float]:
    """Scout rejects null and NaN metrics: drop any value that is not a finite number."""
    return {
        name: float(value)
        for name, value in metrics.items()
        if isinstance(value, int | float) and math.isfinite(value)
    }


def _write_text(path: Path, text: str) -> None:
    path.write_text(text, encoding="utf-8")


def write_scan_results(folder: Path, scan: Scan) -> None:
    """Write the Scout results directory of ``scan`` into ``folder`` (the ``scan_id=`` dir)."""
    ScanWriter(scan).write(folder)
