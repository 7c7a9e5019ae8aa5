"""Read reports back: find the newest, list them, load one like Scout's ``scan_results_df``.

Works on any Inspect Scout results directory, not only ours: resultset rows written by
Scout itself are expanded or kept packed as Scout's own reader does.
"""

from __future__ import annotations

import json
import uuid
from collections.abc import Iterator
from collections.abc import Sequence
from dataclasses import dataclass
from dataclasses import field
from datetime import UTC
from datetime import datetime
from pathlib import Path
from typing import TYPE_CHECKING
from typing import Any
from typing import Final
from typing import Literal
from typing import final

from pytest_scoring.errors import ReportError
from pytest_scoring.report.result import SCAN_DIR_PREFIX
from pytest_scoring.report.result import SCORES_FILE
from pytest_scoring.report.scout import ERRORS_FILE
from pytest_scoring.report.scout import SCAN_FILE
from pytest_scoring.report.scout import SUMMARY_FILE
from pytest_scoring.report.scout import encode_value

if TYPE_CHECKING:
    import pandas as pd

Rows = Literal["results", "transcripts"]
#: Columns left out unless asked for, as Scout's ``HEAVY_COLUMNS``.
HEAVY_COLUMNS: Final = ("input", "input_data", "scan_events")
_RESULT_FIELDS: Final = ("uuid", "label", "answer", "explanation")


@final
@dataclass(frozen=True)
class ScanResults:
    """A report read back, shaped like Scout's ``ScanResultsDF``."""

    #: False when the session was interrupted or a scorer crashed.
    complete: bool
    #: The ``_scan.json`` content (scan id, scanners, packages…).
    spec: dict[str, Any]
    #: The ``scan_id=…`` folder read.
    location: str
    #: The ``_summary.json`` content (counts and metrics per scanner).
    summary: dict[str, Any]
    #: The ``_errors.jsonl`` lines.
    errors: list[dict[str, Any]]
    #: One frame per scanner (Parquet file stem), one row per result or per transcript.
    scanners: dict[str, pd.DataFrame] = field(repr=False)


@final
@dataclass(frozen=True)
class ReportInfo:
    """What ``pytest-scoring list`` shows of one report."""

    path: Path
    scan_id: str
    created: str
    complete: bool
    #: The scored repository (empty for a Scout folder that is not ours).
    repository: str = ""
    #: Each score's value, by scorer name (a report of one repository).
    values: dict[str, Any] = field(default_factory=dict)
    #: How many repositories a batch's report holds (None: a report of one repository).
    samples: int | None = None
    #: Each scorer's metrics over the repositories, by scorer name (a batch's report).
    metrics: dict[str, Any] = field(default_factory=dict)


def _read_text(path: Path) -> str:
    """A report file's text; unreadable or not UTF-8 is a :class:`ReportError` (absent is not)."""
    try:
        return path.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise
    except OSError as error:
        raise ReportError(f"{path}: cannot read ({error.strerror})") from None
    except UnicodeDecodeError as error:
        raise ReportError(
            f"{path}: not UTF-8 text ({error.reason} at byte {error.start})"
        ) from None


def _read_json(path: Path, default: Any = None) -> Any:
    """A JSON file's content; ``default`` when it is absent (if a default is given)."""
    try:
        text = _read_text(path)
    except FileNotFoundError:
        if default is not None:
            return default
        raise ReportError(f"{path}: missing, so this folder holds no report") from None
    try:
        return json.loads(text)
    except json.JSONDecodeError as error:
        raise ReportError(f"{path}: not valid JSON ({error.msg} at line {error.lineno})") from None


def _object(value: object, where: str) -> dict[str, Any]:
    if not isinstance(value, dict):
        raise ReportError(f"{where}: expected a JSON object, found {type(value).__name__}")
    return value


def _read_object(path: Path, default: dict[str, Any] | None = None) -> dict[str, Any]:
    return _object(_read_json(path, default), str(path))


def _read_scores_json(path: Path, default: dict[str, Any] | None = None) -> dict[str, Any]:
    """``scores.json``, with the parts ``show`` and ``list`` walk checked to be objects (a
    report root may sit in the scored repository, which can plant anything there)."""
    content = _read_object(path, default)
    _check_scored(content, str(path))
    samples = content.get("samples")
    if samples is not None:
        if not isinstance(samples, list):
            raise ReportError(
                f"{path}: samples: expected a JSON list, found {type(samples).__name__}"
            )
        for index, sample in enumerate(samples):
            _check_scored(_object(sample, f"{path}: samples[{index}]"), f"{path}: samples[{index}]")
    return content


def _check_scored(content: dict[str, Any], where: str) -> None:
    """The scores, metrics and test counts of a report or of one of its samples are objects."""
    for key in ("scores", "metrics"):
        for name, value in _object(content.get(key) or {}, f"{where}: {key}").items():
            _object(value, f"{where}: {key}.{name}")
    tests = _object(content.get("tests") or {}, f"{where}: tests")
    _object(tests.get("counts") or {}, f"{where}: tests.counts")


def _read_errors(path: Path) -> list[dict[str, Any]]:
    if not path.exists():
        return []
    lines = []
    for number, line in enumerate(_read_text(path).splitlines(), start=1):
        if not line.strip():
            continue
        try:
            lines.append(json.loads(line))
        except json.JSONDecodeError as error:
            raise ReportError(f"{path}, line {number}: not valid JSON ({error.msg})") from None
    return lines


def _report_dirs(root: Path) -> Iterator[Path]:
    """The finished report folders directly under ``root`` (folders being built are hidden)."""
    for path in root.glob(f"{SCAN_DIR_PREFIX}*"):
        if path.is_dir() and not path.is_symlink() and (path / SCAN_FILE).is_file():
            yield path


def _moment(timestamp: object) -> datetime:
    """A sortable time for an ISO-8601 text; naive times are taken as UTC, junk sorts first."""
    try:
        moment = datetime.fromisoformat(str(timestamp))
    except ValueError:
        return datetime.min.replace(tzinfo=UTC)
    return moment if moment.tzinfo else moment.replace(tzinfo=UTC)


def report_info(path: Path) -> ReportInfo:
    """Read what :class:`ReportInfo` holds from a ``scan_id=…`` folder.

    :raises ReportError: when its ``_scan.json`` or ``scores.json`` is unreadable.
    """
    spec = _read_object(path / SCAN_FILE)
    summary = _read_object(path / SUMMARY_FILE, default={"complete": False})
    scores = _read_scores_json(path / SCORES_FILE, default={})
    values = {name: score.get("value") for name, score in (scores.get("scores") or {}).items()}
    samples = scores.get("samples")
    return ReportInfo(
        path=path,
        scan_id=str(spec.get("scan_id") or path.name.removeprefix(SCAN_DIR_PREFIX)),
        created=str(scores.get("created") or spec.get("timestamp") or ""),
        complete=bool(summary.get("complete", False)),
        repository=str(scores.get("repository") or ""),
        values=values,
        samples=len(samples) if isinstance(samples, list) else None,
        metrics=dict(scores.get("metrics") or {}) if isinstance(samples, list) else {},
    )


def _existing_folder(path: str | Path) -> Path:
    folder = Path(path)
    if folder.is_file():
        raise ReportError(
            f"{folder}: a file outside any report (give a scan_id=… folder, a file in one, "
            "or a report root)"
        )
    if not folder.is_dir():
        raise ReportError(f"{folder}: no such report folder")
    return folder


def list_reports(root: str | Path) -> list[ReportInfo]:
    """Every readable report under ``root``, newest first.

    :raises ReportError: when ``root`` is not a folder.
    """
    infos = []
    for path in _report_dirs(_existing_folder(root)):
        try:
            infos.append(report_info(path))
        except ReportError:
            continue  # a damaged report is skipped here; `show` on it says what is wrong
    return sorted(infos, key=lambda info: (_moment(info.created), info.path.name), reverse=True)


def find_report(path: str | Path) -> Path:
    """The report a path names: a ``scan_id=…`` folder itself, a file in one (its
    ``scores.json``…), or the newest report under a root.

    :raises ReportError: when the path is missing or holds no report.
    """
    given = Path(path)
    if given.is_file() and (given.parent / SCAN_FILE).is_file():
        return given.parent
    folder = _existing_folder(path)
    if (folder / SCAN_FILE).is_file():
        return folder
    reports = list_reports(folder)
    if not reports:
        raise ReportError(f"{folder}: holds no report (no {SCAN_DIR_PREFIX}… folder)")
    return reports[0].path


def report_json_files(folder: Path) -> dict[str, Any]:
    """The content of a report folder's JSON files: ``scores.json`` first, then the scorers'
    files (``diff.json``…) by name; Inspect Scout's own ``_scan.json`` and ``_summary.json``
    are left out.

    :raises ReportError: naming a file that is missing, unreadable or not JSON.
    """
    names = sorted(path.name for path in folder.glob("*.json") if not path.name.startswith("_"))
    others = [name for name in names if name != SCORES_FILE]
    return {name: _read_json(folder / name) for name in (SCORES_FILE, *others)}


def read_scores(path: str | Path) -> dict[str, Any]:
    """The ``scores.json`` of the report ``path`` names (see :func:`find_report`)."""
    return _read_scores_json(find_report(path) / SCORES_FILE)


def decode_value(text: object, value_type: object) -> Any:
    """A value stored as text back in its type (the inverse of ``scout.encode_value``)."""
    if text is None or value_type == "null":
        return None
    if value_type == "boolean":
        return str(text).lower() == "true"
    if value_type == "number":
        number = float(str(text))
        return int(number) if number.is_integer() and "." not in str(text) else number
    if value_type in ("array", "object", "resultset"):
        return json.loads(str(text))
    return text


def _expanded(row: dict[str, Any]) -> list[dict[str, Any]]:
    """A resultset row as one row per Result in it; any other row as itself."""
    if row.get("value_type") != "resultset":
        return [row]
    rows = []
    for item in decode_value(row.get("value"), "resultset") or []:
        value, inferred = encode_value(item.get("value"))
        rows.append(
            {
                **row,
                **{name: item.get(name) for name in _RESULT_FIELDS},
                "value": value,
                "value_type": item.get("type") or inferred,
                "metadata": json.dumps(item.get("metadata") or {}),
            }
        )
    return rows


def _as_result(row: dict[str, Any]) -> dict[str, Any]:
    return {
        **{name: row.get(name) for name in _RESULT_FIELDS},
        "value": decode_value(row.get("value"), row.get("value_type")),
        "type": row.get("value_type"),
        "metadata": json.loads(row.get("metadata") or "{}"),
    }


def _packed(rows: list[dict[str, Any]]) -> dict[str, Any]:
    """Several rows of one transcript as one resultset row (a single row stays as it is)."""
    if len(rows) == 1:
        return rows[0]
    results = [item for row in rows for item in map(_as_result, _expanded(row))]
    return {
        **rows[0],
        "uuid": str(uuid.uuid4()),
        "label": None,
        "value": json.dumps(results),
        "value_type": "resultset",
        "answer": None,
        "explanation": None,
        "metadata": "{}",
    }


def shape_rows(rows: list[dict[str, Any]], mode: Rows) -> list[dict[str, Any]]:
    """``results``: one row per result; ``transcripts``: one row per transcript id."""
    if mode == "results":
        return [expanded for row in rows for expanded in _expanded(row)]
    by_transcript: dict[Any, list[dict[str, Any]]] = {}
    for row in rows:
        by_transcript.setdefault(row.get("transcript_id"), []).append(row)
    return [_packed(group) for group in by_transcript.values()]


def _cast_values(frame: pd.DataFrame) -> pd.DataFrame:
    """Give ``value`` its type when all rows share one ``value_type``, as Scout does."""
    import pandas as pd

    if "value" not in frame or "value_type" not in frame:
        return frame
    kinds = frame["value_type"].dropna().unique()
    if len(kinds) != 1 or kinds[0] not in ("boolean", "number"):
        return frame
    if kinds[0] == "number":
        frame["value"] = pd.to_numeric(frame["value"], errors="coerce")
    else:
        frame["value"] = (
            frame["value"]
            .map({"true": True, "false": False}, na_action="ignore")
            .astype("bool[pyarrow]")
        )
    return frame


def _scanner_frame(path: Path, mode: Rows, exclude: Sequence[str]) -> pd.DataFrame:
    import pandas as pd
    import pyarrow as pa
    import pyarrow.parquet as pq

    try:
        schema = pq.read_schema(path)
        columns = [name for name in schema.names if name not in exclude]
        table = pq.read_table(path, columns=columns)
    except (OSError, pa.ArrowException) as error:
        raise ReportError(f"{path}: not a readable Parquet file ({error})") from None
    rows = shape_rows(table.to_pylist(), mode)
    shaped = pa.Table.from_pylist(rows, schema=table.schema) if rows else table.slice(0, 0)
    return _cast_values(shaped.to_pandas(types_mapper=pd.ArrowDtype))


def _require_pandas() -> None:
    """pandas is optional: only :func:`results_df` needs it, and says so when it is missing."""
    try:
        import pandas  # noqa: F401
    except ImportError:
        raise ModuleNotFoundError(
            "results_df needs pandas, which is not installed: pip install 'pytest-scoring[pandas]'",
            name="pandas",
        ) from None


def results_df(
    path: str | Path,
    rows: Rows = "results",
    exclude_columns: Sequence[str] | None = None,
) -> ScanResults:
    """Read a report back as data frames, like Inspect Scout's ``scan_results_df``.

    :param path: a ``scan_id=…`` folder, or a report root (its newest report is read).
    :param rows: ``"results"``: one row per result (Scout resultsets are expanded);
        ``"transcripts"``: one row per transcript, several results of one transcript
        packed into one row whose ``value`` is the JSON list of Result objects
        (``{uuid, value, type, label, answer, explanation, metadata}``) and whose
        ``value_type`` is ``"resultset"``. pytest-scoring writes one row per
        (transcript, scorer), so for its own reports both give the same rows.
    :param exclude_columns: columns left out; default the heavy ``input``, ``input_data``
        and ``scan_events``; ``[]`` reads all 59.
    :raises ReportError: naming the path when it is missing or a file in it is invalid.
    """
    if rows not in ("results", "transcripts"):
        raise ReportError(f"rows: {rows!r} is not 'results' or 'transcripts'")
    _require_pandas()
    folder = find_report(path)
    exclude = HEAVY_COLUMNS if exclude_columns is None else tuple(exclude_columns)
    summary = _read_object(folder / SUMMARY_FILE, default={"complete": False})
    return ScanResults(
        complete=bool(summary.get("complete", False)),
        spec=_read_object(folder / SCAN_FILE),
        location=str(folder),
        summary=summary,
        errors=_read_errors(folder / ERRORS_FILE),
        scanners={
            parquet.stem: _scanner_frame(parquet, rows, exclude)
            for parquet in sorted(folder.glob("*.parquet"))
        },
    )
