"""Reading reports back: results_df in both row modes, the newest report, listing, bad folders."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import pandas as pd
import pytest

from pytest_scoring import results_df
from pytest_scoring.core.metrics import mean
from pytest_scoring.core.outcomes import OutcomeTally
from pytest_scoring.core.score import Score
from pytest_scoring.core.score import make_score
from pytest_scoring.errors import ReportError
from pytest_scoring.report.reader import decode_value
from pytest_scoring.report.reader import find_report
from pytest_scoring.report.reader import list_reports
from pytest_scoring.report.reader import shape_rows
from pytest_scoring.report.result import SessionResult
from pytest_scoring.report.writer import write_report
from pytest_scoring.scorers import default_test_scorers
from pytest_scoring.scorers.base import ScoringContext
from pytest_scoring.scorers.base import run_scorers


class _Flag:
    """A scorer with a boolean value, to see booleans decoded."""

    name = type = "flag"
    metrics = (mean,)

    def score(self, context: ScoringContext) -> Score:
        return make_score(True, self.type)


def write_scored(root: Path, passed: int, failed: int, created: str | None = None) -> Path:
    """A real report of a tally with ``passed`` and ``failed`` tests, written under ``root``."""
    tally = OutcomeTally()
    for number in range(passed + failed):
        tally.record_outcome(f"t{number}", "passed" if number < passed else "failed")
    scorers = [*default_test_scorers(), _Flag()]
    result = SessionResult(
        repository=str(root / "repo"),
        scorers=scorers,
        scores=run_scorers(scorers, ScoringContext(root=root, tally=tally)),
        tests=tally.to_json(),
    )
    if created is not None:
        result.created = created
    return write_report(result, root)


def test_results_df_gives_one_frame_per_scorer_with_decoded_values(tmp_path: Path) -> None:
    folder = write_scored(tmp_path, passed=3, failed=1)
    results = results_df(folder)
    assert results.complete is True
    assert results.location == str(folder)
    assert results.spec["scan_id"] == folder.name.removeprefix("scan_id=")
    assert results.errors == []
    assert sorted(results.scanners) == sorted(
        ["all_tests_pass", "percent_passing_tests", "percent_failing_tests", "flag"]
    )
    passing = results.scanners["percent_passing_tests"]
    assert passing["value"].tolist() == [75]
    assert pd.api.types.is_numeric_dtype(passing["value"])
    assert results.scanners["flag"]["value"].tolist() == [True]
    assert results.scanners["all_tests_pass"]["value"].tolist() == ["I"]
    assert "input" not in passing.columns
    assert results.summary["scanners"]["flag"]["metrics"] == {"flag": {"mean": 1.0}}


def test_results_df_reads_every_column_when_asked(tmp_path: Path) -> None:
    folder = write_scored(tmp_path, passed=1, failed=0)
    frame = results_df(folder, exclude_columns=[]).scanners["flag"]
    assert len(frame.columns) == 60  # the recorder's 58, counted_as and flaky


def test_transcript_rows_equal_result_rows_for_one_row_per_scorer(tmp_path: Path) -> None:
    folder = write_scored(tmp_path, passed=1, failed=1)
    by_result = results_df(folder, rows="results").scanners
    by_transcript = results_df(folder, rows="transcripts").scanners
    for name, frame in by_result.items():
        assert by_transcript[name]["value"].tolist() == frame["value"].tolist()


def scout_row(**fields: Any) -> dict[str, Any]:
    return {"transcript_id": "t1", "uuid": "u", "label": None, "metadata": "{}", **fields}


RESULTSET = scout_row(
    value=json.dumps(
        [
            {"uuid": "a", "value": 2, "type": "number", "label": "x", "metadata": {"k": 1}},
            {"uuid": "b", "value": "yes", "label": "y", "explanation": "why"},
        ]
    ),
    value_type="resultset",
)


def test_results_rows_expand_a_scout_resultset_into_one_row_per_result() -> None:
    rows = shape_rows([RESULTSET], "results")
    assert [(row["uuid"], row["label"], row["value"], row["value_type"]) for row in rows] == [
        ("a", "x", "2", "number"),
        ("b", "y", "yes", "string"),
    ]
    assert json.loads(rows[0]["metadata"]) == {"k": 1}
    assert rows[1]["explanation"] == "why"


def test_transcript_rows_pack_several_results_of_one_transcript_into_a_resultset() -> None:
    rows = [
        scout_row(uuid="a", value="C", value_type="string"),
        scout_row(uuid="b", value="true", value_type="boolean"),
        scout_row(transcript_id="t2", uuid="c", value="1", value_type="number"),
    ]
    packed, alone = shape_rows(rows, "transcripts")
    assert alone == rows[2]
    assert packed["value_type"] == "resultset"
    assert [
        (item["uuid"], item["value"], item["type"]) for item in json.loads(packed["value"])
    ] == [
        ("a", "C", "string"),
        ("b", True, "boolean"),
    ]
    assert shape_rows([packed], "results")[1]["value"] == "true"


@pytest.mark.parametrize(
    ("text", "value_type", "value"),
    [
        ("20", "number", 20),
        ("66.5", "number", 66.5),
        ("false", "boolean", False),
        ("C", "string", "C"),
        ('{"a":1}', "object", {"a": 1}),
        (None, "null", None),
    ],
)
def test_values_decode_back_to_their_type(text: str | None, value_type: str, value: Any) -> None:
    assert decode_value(text, value_type) == value


def test_a_root_reads_as_its_newest_report(tmp_path: Path) -> None:
    older = write_scored(tmp_path, passed=1, failed=1, created="2026-01-01T10:00:00.000+00:00")
    newer = write_scored(tmp_path, passed=2, failed=0, created="2026-01-02T09:00:00.000+00:00")
    os.utime(older)  # a folder touched later is still the older report
    assert find_report(tmp_path) == newer
    assert results_df(tmp_path).location == str(newer)
    assert [info.path for info in list_reports(tmp_path)] == [newer, older]
    info = list_reports(tmp_path)[0]
    assert (info.complete, info.repository) == (True, str(tmp_path / "repo"))
    assert info.values["percent_passing_tests"] == 100


def test_a_folder_being_written_is_not_a_report(tmp_path: Path) -> None:
    (tmp_path / ".scan_id=abc.tmp").mkdir()
    assert list_reports(tmp_path) == []
    with pytest.raises(ReportError, match="holds no report"):
        find_report(tmp_path)


def test_a_missing_folder_is_an_error_naming_it(tmp_path: Path) -> None:
    with pytest.raises(ReportError, match=f"{tmp_path / 'nope'}: no such report folder"):
        results_df(tmp_path / "nope")


@pytest.mark.parametrize(
    ("file", "content", "message"),
    [
        ("_scan.json", "{not json", "_scan.json: not valid JSON"),
        ("_scan.json", "[1, 2]", "_scan.json: expected a JSON object"),
        ("_summary.json", "", "_summary.json: not valid JSON"),
        ("_errors.jsonl", '{"a": 1}\nnope\n', "_errors.jsonl, line 2: not valid JSON"),
        ("flag.parquet", "not parquet", "flag.parquet: not a readable Parquet file"),
    ],
)
def test_a_damaged_report_file_is_an_error_naming_it(
    tmp_path: Path, file: str, content: str, message: str
) -> None:
    folder = write_scored(tmp_path, passed=1, failed=0)
    (folder / file).write_text(content)
    with pytest.raises(ReportError, match=message):
        results_df(folder)


@pytest.mark.parametrize("file", ["_scan.json", "_summary.json", "_errors.jsonl"])
def test_a_report_file_that_is_not_utf8_is_an_error_naming_it(tmp_path: Path, file: str) -> None:
    folder = write_scored(tmp_path, passed=1, failed=0)
    (folder / file).write_bytes(b"\xff\xfe{")
    with pytest.raises(ReportError, match=f"{file}: not UTF-8 text"):
        results_df(folder)


def test_a_report_without_summary_reads_as_incomplete(tmp_path: Path) -> None:
    folder = write_scored(tmp_path, passed=1, failed=0)
    (folder / "_summary.json").unlink()
    assert results_df(folder).complete is False


def test_an_unknown_row_mode_is_an_error() -> None:
    with pytest.raises(ReportError, match="rows: 'samples'"):
        results_df(".", rows="samples")  # type: ignore[arg-type]
