"""Write a scored session as a report folder (docs/report.md).

The folder is built under a temporary name beside its final one and renamed into place when
every file is written, so a reader never sees half a report.
"""

from __future__ import annotations

import os
import shutil
from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING
from typing import Any

from pytest_scoring.core.encoding import encode_json
from pytest_scoring.core.score import DEFAULT_VALUE_CAP
from pytest_scoring.core.score import REPORT_FILE_CAP
from pytest_scoring.core.score import cap_value
from pytest_scoring.core.score import cap_values
from pytest_scoring.core.settings import SNAPSHOTS_PREFIX
from pytest_scoring.errors import ReportError
from pytest_scoring.fs.leftovers import make_held
from pytest_scoring.fs.leftovers import remove_leftovers
from pytest_scoring.report.html import write_page
from pytest_scoring.report.result import BUILDING_SUFFIX
from pytest_scoring.report.result import EVIDENCE_DIR
from pytest_scoring.report.result import SCAN_DIR_PREFIX
from pytest_scoring.report.result import SCORES_FILE
from pytest_scoring.report.result import SessionResult
from pytest_scoring.report.scout import Scan
from pytest_scoring.report.scout import ScanWriter
from pytest_scoring.report.scout import batch_key_of
from pytest_scoring.report.scout import own_scan_spec

if TYPE_CHECKING:
    from pytest_scoring.report.parquet_helper import ParquetHelper


def encode_data_file(content: Any, value_cap: int = DEFAULT_VALUE_CAP) -> str:
    """JSON text for a data file (``diff.json``…): values over ``value_cap`` bytes are stubbed,
    and a text over :data:`REPORT_FILE_CAP` is replaced by one stub of itself (docs/report.md)."""
    text = encode_json(cap_values(content, value_cap))
    if len(text) > REPORT_FILE_CAP:  # ASCII (non-ASCII is escaped): characters are bytes
        text = encode_json(cap_value(text, value_cap))
    return text


def write_report(
    result: SessionResult,
    report_root: Path,
    value_cap: int = DEFAULT_VALUE_CAP,
    parquet_helper: ParquetHelper | None = None,
) -> Path:
    """Write ``report_root/scan_id=<id>/`` and return its path.

    :param value_cap: the longest text or BLOB (bytes) a data file keeps whole.
    :param parquet_helper: the process that writes the Parquet files, if one was started.

    :raises ReportError: when the report root cannot be created or written, or a value
        cannot be encoded (JSON, Parquet); nothing half-written is left behind.
    """
    final = report_root / f"{SCAN_DIR_PREFIX}{result.scan_id}"
    building = report_root / f".{SCAN_DIR_PREFIX}{result.scan_id}{BUILDING_SUFFIX}"
    lock = None
    try:
        report_root.mkdir(parents=True, exist_ok=True)
        building, lock = make_held(lambda: _made(building))
        scan = ScanWriter(Scan.of_result(result))
        parquet = scan.start(building, parquet_helper)  # the helper writes them meanwhile
        texts = {SCORES_FILE: encode_json(result.scores_json())}
        texts.update(
            (name, encode_data_file(content, value_cap)) for name, content in result.files.items()
        )
        for name, text in texts.items():
            (building / name).write_text(text, encoding="utf-8")
        write_evidence(building, result.evidence)
        # The page pastes the text just written: no second encoding of the report.
        write_page(building, texts)
        scan.write(building, parquet)
        building.rename(final)
    # ValueError/TypeError: encoding; RecursionError: a document that holds itself
    except (OSError, ValueError, TypeError, RecursionError) as error:
        if parquet_helper is not None:
            parquet_helper.close()  # it writes nothing more into the folder removed now
        shutil.rmtree(building, ignore_errors=True)
        raise ReportError(
            f"cannot write the report under {report_root}: {type(error).__name__}: {error}"
        ) from error
    finally:
        if lock is not None:
            os.close(lock)
    return final


def write_evidence(folder: Path, evidence: Mapping[str, bytes]) -> None:
    """Write the evidence files (``rescore``'s input) under ``folder/evidence/``."""
    for name, data in evidence.items():
        path = folder / EVIDENCE_DIR / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(data)


def _made(folder: Path) -> Path:
    folder.mkdir()
    return folder


def remove_report_leftovers(report_root: Path) -> str | None:
    """Remove what killed runs left in ``report_root`` (a report folder half-written, a
    session's snapshot copies), never what a live process is building there nor an
    unfinished batch, which its next run continues; one line naming what was removed."""
    if not report_root.is_dir():
        return None
    patterns = (f".{SCAN_DIR_PREFIX}*{BUILDING_SUFFIX}", f"{SNAPSHOTS_PREFIX}*")
    removed = remove_leftovers(report_root, patterns, keep=_unfinished_batch)
    if not removed:
        return None
    return f"removed what killed runs left in {report_root}: {', '.join(removed)}"


def _unfinished_batch(folder: Path) -> bool:
    spec = own_scan_spec(folder)
    return spec is not None and batch_key_of(spec) is not None


def rebuild_page(folder: Path) -> Path:
    """Write a report folder's page anew from its JSON files (reports of older versions too).

    :raises ReportError: when a file cannot be read or the page cannot be written.
    """
    # Loaded only here: writing a report never reads one back.
    from pytest_scoring.report.reader import report_json_files

    texts = {name: encode_json(content) for name, content in report_json_files(folder).items()}
    try:
        return write_page(folder, texts)
    except OSError as error:
        raise ReportError(f"cannot write the page in {folder}: {error.strerror}") from None
