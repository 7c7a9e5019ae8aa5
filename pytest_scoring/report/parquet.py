"""The Parquet files of a Scout results directory: the scan-result schema, rows to a file.

Shared by the report's writer (:mod:`.scout`) and the helper process that writes the files
while the tests run (:mod:`.parquet_helper`); pyarrow is imported only inside the functions.
"""

from __future__ import annotations

import io
import json
from pathlib import Path
from typing import IO
from typing import TYPE_CHECKING
from typing import Any
from typing import Final

if TYPE_CHECKING:
    import pyarrow as pa

_INT: Final = "int64"
_BOOL: Final = "bool"
_DOUBLE: Final = "double"
COLUMNS: Final[tuple[tuple[str, str], ...]] = (
    ("transcript_id", "string"),
    ("transcript_source_type", "string"),
    ("transcript_source_id", "string"),
    ("transcript_source_uri", "string"),
    ("transcript_date", "string"),
    ("transcript_task_set", "string"),
    ("transcript_task_id", "string"),
    ("transcript_task_repeat", _INT),
    ("transcript_agent", "string"),
    ("transcript_agent_args", "string"),
    ("transcript_model", "string"),
    ("transcript_model_options", "string"),
    ("transcript_score", "string"),
    ("transcript_score_explanation", "string"),
    ("transcript_success", _BOOL),
    ("transcript_message_count", _INT),
    ("transcript_total_time", _DOUBLE),
    ("transcript_total_tokens", _INT),
    ("transcript_error", "string"),
    ("transcript_limit", "string"),
    ("transcript_trust_content", _BOOL),
    ("transcript_metadata", "string"),
    ("scan_id", "string"),
    ("scan_tags", "string"),
    ("scan_metadata", "string"),
    ("scan_git_origin", "string"),
    ("scan_git_version", "string"),
    ("scan_git_commit", "string"),
    ("scanner_key", "string"),
    ("scanner_name", "string"),
    ("scanner_version", _INT),
    ("scanner_package_version", "string"),
    ("scanner_file", "string"),
    ("scanner_params", "string"),
    ("input_type", "string"),
    ("input_ids", "string"),
    ("input", "string"),
    ("input_data", "string"),
    ("uuid", "string"),
    ("label", "string"),
    ("value", "string"),
    ("value_type", "string"),
    ("answer", "string"),
    ("explanation", "string"),
    ("metadata", "string"),
    ("message_references", "string"),
    ("event_references", "string"),
    ("scan_error", "string"),
    ("scan_error_traceback", "string"),
    ("scan_error_type", "string"),
    ("validation_target", "string"),
    ("validation_result", "string"),
    ("validation_predicate", "string"),
    ("validation_split", "string"),
    ("scan_total_tokens", _INT),
    ("scan_model_usage", "string"),
    ("scan_events", "string"),
    ("timestamp", "string"),
    # Ours, after the recorder's 58: what the row counted as in the metrics (a tampering
    # "N" counts as a failed sample, docs/scoring.md#metrics).
    ("counted_as", "string"),
    # The session's flaky tests with every attempt's outcome, as JSON text, in the rows of the
    # test scorers after reruns (``--retries``, docs/scoring.md#reruns); else null.
    ("flaky", "string"),
)


def arrow_schema() -> pa.Schema:
    """The scan-result schema: the recorder's 58 columns (text columns as ``large_string``,
    like the recorder), then ``counted_as`` and ``flaky``."""
    import pyarrow as pa

    types = {
        "string": pa.large_string(),
        _INT: pa.int64(),
        _BOOL: pa.bool_(),
        _DOUBLE: pa.float64(),
    }
    return pa.schema([pa.field(name, types[kind]) for name, kind in COLUMNS])


def json_lines(rows: list[dict[str, Any]]) -> bytes:
    """The rows of one Parquet file as UTF-8 JSON lines, what :func:`write_parquet` reads."""
    # Parquet text is UTF-8: a lone surrogate (a file name from the scored repository that is
    # not UTF-8, decoded by Python with surrogateescape) becomes "?" instead of failing the file.
    text = "".join(json.dumps(row, default=str, ensure_ascii=False) + "\n" for row in rows)
    return text.encode("utf-8", errors="replace")


def write_parquet(path: Path | IO[bytes], lines: bytes) -> None:
    """Write the rows given as :func:`json_lines` to ``path`` (a file name or a binary
    file) as a table of exactly the recorder's schema (absent columns are null).

    Built by Arrow's JSON reader, not ``pa.array``/``from_pylist``: those import pandas,
    which would add about 0.2 s to the end of every scored session (docs/benchmarks.md).
    """
    import pyarrow.json as pa_json
    import pyarrow.parquet as pq

    options = pa_json.ParseOptions(
        explicit_schema=arrow_schema(), unexpected_field_behavior="ignore"
    )
    # A row longer than Arrow's 1 MiB default block fails to parse ("straddling object"), and
    # a plugin scorer's metadata can be that large: one block holds everything.
    reading = pa_json.ReadOptions(block_size=max(len(lines), 1 << 20))
    table = pa_json.read_json(io.BytesIO(lines), read_options=reading, parse_options=options)
    pq.write_table(table, path)
