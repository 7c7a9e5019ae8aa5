"""The report folder: Scout results directory next to scores.json, read back by real readers."""

from __future__ import annotations

import contextlib
import json
from pathlib import Path
from typing import Any

import pandas  # noqa: F401  # see below
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from pytest_scoring.core.metrics import mean
from pytest_scoring.core.outcomes import OutcomeTally
from pytest_scoring.core.score import Score
from pytest_scoring.core.score import make_score
from pytest_scoring.report.parquet import COLUMNS
from pytest_scoring.report.parquet import arrow_schema
from pytest_scoring.report.result import SessionResult
from pytest_scoring.report.scout import encode_value
from pytest_scoring.report.scout import scanner_key
from pytest_scoring.report.writer import write_report
from pytest_scoring.scorers import default_test_scorers
from pytest_scoring.scorers.base import ScoringContext
from pytest_scoring.scorers.base import run_scorers

# Imported before any in-process pytester run: a run restores sys.modules afterwards, so a
# module first imported inside it (pandas via pyarrow) would be imported twice, and importing
# inspect_scout inside a test adds a metadata finder that hides our entry point from later runs.
with contextlib.suppress(ImportError):
    import inspect_ai.scorer  # noqa: F401
    import inspect_scout  # noqa: F401

SOME_OUTCOMES = """
    import pytest

    def test_one():
        pass

    def test_two():
        assert False

    @pytest.mark.skip(reason="later")
    def test_three():
        pass
"""
TEST_SCORERS = ("all_tests_pass", "percent_passing_tests", "percent_failing_tests")


@pytest.fixture
def report(pytester: pytest.Pytester) -> Path:
    """The report folder of a real session with one pass, one failure and one skip."""
    pytester.makepyfile(SOME_OUTCOMES)
    pytester.runpytest("--score", "-p", "no:cacheprovider").assert_outcomes(
        passed=1, failed=1, skipped=1
    )
    (folder,) = (pytester.path / "scores").glob("scan_id=*")
    return folder


def read_json(path: Path) -> Any:
    return json.loads(path.read_text(encoding="utf-8"))


class _Crashing:
    """A scorer whose code raises, as a broken plugin scorer would."""

    name = type = "crashing"
    metrics = (mean,)

    def score(self, context: ScoringContext) -> Score:
        raise RuntimeError("scorer bug")


def scored_result(scorers: list[Any], passed: int = 1) -> SessionResult:
    """A session result scored by real scorers from a tally."""
    tally = OutcomeTally()
    for number in range(passed):
        tally.record_outcome(f"test_{number}", "passed")
    context = ScoringContext(root=Path("/repo/shop"), tally=tally)
    return SessionResult(
        repository="/repo/shop",
        scorers=scorers,
        scores=run_scorers(scorers, context),
        tests=tally.to_json(),
        errors=context.errors,
        complete=not context.errors,
    )


def test_a_report_holds_scores_json_and_the_scout_files(report: Path) -> None:
    names = sorted(path.name for path in report.iterdir())
    assert names == sorted(
        ["scores.json", "index.html", "_scan.json", "_summary.json", "_errors.jsonl"]
        + [f"{name}.parquet" for name in TEST_SCORERS]
    )
    assert read_json(report / "scores.json")["format_version"] == 1


def test_scan_json_names_the_folder_id_and_declares_every_scorer(report: Path) -> None:
    spec = read_json(report / "_scan.json")
    assert f"scan_id={spec['scan_id']}" == report.name
    assert len(spec["scan_id"]) == 22
    assert spec["scan_name"]
    assert {key: scanner["name"] for key, scanner in spec["scanners"].items()} == {
        name: name for name in TEST_SCORERS
    }
    assert spec["scanners"]["all_tests_pass"]["params"] == {"type": "all_tests_pass"}
    assert "pytest_scoring" in spec["packages"]


def test_every_parquet_file_has_the_full_recorder_schema_and_one_row(report: Path) -> None:
    for name in TEST_SCORERS:
        table = pq.read_table(report / f"{name}.parquet")
        assert table.schema.names == [column for column, _ in COLUMNS]
        # The recorder's 58 columns in its order, then ours: what the row counted as.
        assert len(table.schema.names) == 60 and table.schema.names[-2:] == ["counted_as", "flaky"]
        assert table.schema == arrow_schema()
        assert table.schema.field("transcript_task_repeat").type == pa.int64()
        assert table.schema.field("transcript_success").type == pa.bool_()
        assert table.num_rows == 1


def test_values_are_text_tagged_by_their_type(report: Path) -> None:
    rows = {name: pq.read_table(report / f"{name}.parquet").to_pylist()[0] for name in TEST_SCORERS}
    assert {name: (row["value"], row["value_type"]) for name, row in rows.items()} == {
        "all_tests_pass": ("I", "string"),
        "percent_passing_tests": ("50", "number"),
        "percent_failing_tests": ("50", "number"),
    }
    assert {name: row["counted_as"] for name, row in rows.items()} == {
        "all_tests_pass": "I",
        "percent_passing_tests": "50",
        "percent_failing_tests": "50",
    }
    row = rows["percent_failing_tests"]
    assert row["scanner_key"] == row["scanner_name"] == "percent_failing_tests"
    assert json.loads(row["metadata"])["counts"]["failed"] == 1
    assert row["scan_error"] is None
    assert len({row["uuid"] for row in rows.values()}) == 3
    assert len({row["transcript_id"] for row in rows.values()}) == 1


def test_the_summary_has_counts_and_finite_metrics_per_scanner(report: Path) -> None:
    summary = read_json(report / "_summary.json")
    assert summary["complete"] is True
    passing = summary["scanners"]["percent_passing_tests"]
    assert (passing["scans"], passing["results"], passing["errors"]) == (1, 1, 0)
    assert passing["metrics"] == {
        "percent_passing_tests": {"mean": 50.0, "stderr": 0.0, "accuracy_at_100": 0.0}
    }
    assert summary["scanners"]["all_tests_pass"]["results"] == 1  # "I" is a (truthy) result
    assert (report / "_errors.jsonl").read_text() == ""


def test_inspect_scout_reads_the_report_in_both_row_modes(report: Path) -> None:
    scout = pytest.importorskip("inspect_scout")
    results = scout.scan_results_df(str(report))
    assert results.complete is True
    assert results.spec.scan_id == report.name.removeprefix("scan_id=")
    assert sorted(results.scanners) == sorted(TEST_SCORERS)
    assert results.scanners["percent_passing_tests"]["value"].tolist() == [50]
    assert results.scanners["all_tests_pass"]["value"].tolist() == ["I"]
    packed = scout.scan_results_df(str(report), rows="transcripts", exclude_columns=[])
    assert len(packed.scanners["percent_failing_tests"]) == 1


def test_every_score_validates_as_an_inspect_ai_score(report: Path) -> None:
    scorer = pytest.importorskip("inspect_ai.scorer")
    for name, score in read_json(report / "scores.json")["scores"].items():
        assert set(score) <= {"value", "answer", "explanation", "metadata"}, name
        assert scorer.Score.model_validate(score).value == score["value"]


def test_a_crashing_scorer_gives_an_error_row_an_error_line_and_an_incomplete_report(
    tmp_path: Path,
) -> None:
    result = scored_result([*default_test_scorers(), _Crashing()])
    folder = write_report(result, tmp_path)
    row = pq.read_table(folder / "crashing.parquet").to_pylist()[0]
    assert (row["value"], row["value_type"]) == ("N", "string")
    assert row["scan_error"] == "RuntimeError: scorer bug"
    assert "Traceback" in row["scan_error_traceback"]
    (line,) = [json.loads(text) for text in (folder / "_errors.jsonl").read_text().splitlines()]
    assert set(line) == {"transcript_id", "scanner", "error", "traceback", "refusal"}
    assert (line["scanner"], line["refusal"]) == ("crashing", False)
    summary = read_json(folder / "_summary.json")
    assert summary["complete"] is False
    assert summary["scanners"]["crashing"] == {
        "scans": 1,
        "results": 0,
        "errors": 1,
        "validation": None,
        "metrics": {"crashing": {"mean": 0.0}},
        "tokens": 0,
        "model_usage": {},
    }
    assert read_json(folder / "scores.json")["scores"]["percent_passing_tests"]["value"] == 100


@pytest.mark.parametrize(
    ("value", "text", "value_type"),
    [
        ("C", "C", "string"),
        (20.0, "20", "number"),
        (66.67, "66.67", "number"),
        (3, "3", "number"),
        (True, "true", "boolean"),
        (False, "false", "boolean"),
        (["a", 1], '["a",1]', "array"),
        ({"k": None}, '{"k":null}', "object"),
        (None, None, "null"),
    ],
)
def test_values_are_encoded_as_the_scout_recorder_does(
    value: object, text: str | None, value_type: str
) -> None:
    assert encode_value(value) == (text, value_type)


@pytest.mark.parametrize(
    ("name", "key"),
    [
        ("db_change", "db_change"),
        ("attack-succeeded.v2", "attack-succeeded.v2"),
        ("../../etc/passwd", "%2E.%2F..%2Fetc%2Fpasswd"),
        ("a\\b", "a%5Cb"),
        (".hidden", "%2Ehidden"),
        ("", "%00"),
    ],
)
def test_scorer_names_become_file_names_that_stay_in_the_folder(name: str, key: str) -> None:
    assert scanner_key(name) == key


def test_a_hostile_scorer_name_writes_its_parquet_inside_the_report(tmp_path: Path) -> None:
    class Named:
        name = "../../escaped"
        type = "named"
        metrics = (mean,)

        def score(self, context: ScoringContext) -> Score:
            return make_score("C", self.type)

    folder = write_report(scored_result([Named()]), tmp_path / "root")
    (parquet,) = folder.glob("*.parquet")
    assert parquet.parent == folder
    assert not list(tmp_path.glob("escaped*"))
    assert read_json(folder / "_scan.json")["scanners"][parquet.stem]["name"] == "../../escaped"
    assert pq.read_table(parquet).column("scanner_name").to_pylist() == ["../../escaped"]


def test_a_score_with_megabytes_of_metadata_still_gives_a_readable_parquet_file(
    tmp_path: Path,
) -> None:
    class Verbose:
        name = type = "verbose"
        metrics = (mean,)

        def score(self, context: ScoringContext) -> Score:
            return make_score("C", self.type, metadata={"log": "x" * 3_000_000})

    folder = write_report(scored_result([Verbose()]), tmp_path / "root")
    metadata = pq.read_table(folder / "verbose.parquet").column("metadata").to_pylist()
    assert json.loads(metadata[0])["log"] == "x" * 3_000_000


class _Unreportable:
    """A plugin scorer whose answer no JSON report can hold."""

    def __init__(self, name: str, answer: object) -> None:
        self.name = self.type = name
        self.metrics = (mean,)
        self.answer = answer

    def score(self, context: ScoringContext) -> Score:
        return self.answer  # type: ignore[return-value]


def test_a_scorer_answer_no_report_can_hold_is_scored_n_and_the_report_is_still_written(
    tmp_path: Path,
) -> None:
    tuple_keys = _Unreportable("tuple_keys", {"value": "C", "metadata": {(1, 2): "x"}})
    bare_value = _Unreportable("bare_value", "C")
    folder = write_report(
        scored_result([*default_test_scorers(), tuple_keys, bare_value]), tmp_path
    )
    scores = read_json(folder / "scores.json")["scores"]
    assert scores["percent_passing_tests"]["value"] == 100
    assert scores["tuple_keys"]["value"] == scores["bare_value"]["value"] == "N"
    assert "keys must be str" in scores["tuple_keys"]["metadata"]["error"]
    assert "returned str, not a Score dict" in scores["bare_value"]["metadata"]["error"]
    errors = (folder / "_errors.jsonl").read_text().splitlines()
    assert [json.loads(line)["scanner"] for line in errors] == ["tuple_keys", "bare_value"]


def test_text_that_is_not_valid_unicode_still_gives_a_readable_parquet_file(tmp_path: Path) -> None:
    class Undecodable:
        name = type = "undecodable"
        metrics = (mean,)

        def score(self, context: ScoringContext) -> Score:
            # What Python makes of a file name that is not UTF-8 (surrogateescape).
            return make_score("I", self.type, explanation="data/\udcff.db is not SQLite")

    folder = write_report(scored_result([Undecodable()]), tmp_path)
    row = pq.read_table(folder / "undecodable.parquet").to_pylist()[0]
    assert row["explanation"] == "data/?.db is not SQLite"
    scores = read_json(folder / "scores.json")["scores"]
    assert scores["undecodable"]["explanation"] == "data/\udcff.db is not SQLite"


def test_a_value_that_cannot_be_encoded_is_a_report_error_leaving_no_half_report(
    tmp_path: Path,
) -> None:
    from pytest_scoring.errors import ReportError

    result = scored_result(default_test_scorers())
    loop: list[Any] = []
    loop.append(loop)
    result.files["diff.json"] = loop
    with pytest.raises(
        ReportError, match=r"cannot write the report under .*(ValueError|RecursionError)"
    ):
        write_report(result, tmp_path)
    assert list(tmp_path.iterdir()) == []


def test_report_json_lists_one_item_per_line_and_reads_back_as_written(tmp_path: Path) -> None:
    """The JSON files are quick to write (issue 17) yet still indented for a reader: a grep
    for a test id finds that test's whole entry."""
    result = scored_result(default_test_scorers(), passed=3)
    result.files["diff.json"] = {"databases": {"app.db": {"rows": [{"id": 1}, {"id": 2}]}}}
    folder = write_report(result, tmp_path)
    text = (folder / "scores.json").read_text(encoding="utf-8")
    (line,) = [line for line in text.splitlines() if '"test_1"' in line]
    assert (
        json.loads(line.strip().rstrip(","))
        == read_json(folder / "scores.json")["tests"]["tests"][1]
    )
    assert '\n  "scan_id": ' in text
    assert read_json(folder / "diff.json") == result.files["diff.json"]
    assert '{"id": 2}' in (folder / "diff.json").read_text(encoding="utf-8")
