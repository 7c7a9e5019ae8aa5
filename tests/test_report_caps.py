"""Report data files are bounded: values over the cap become stubs, files over 64 MiB shrink."""

from __future__ import annotations

import base64
import hashlib
import json
from typing import Any

import pytest
from diff_samples import data_table
from diff_samples import database
from diff_samples import diff

from pytest_scoring.core.score import cap_value
from pytest_scoring.core.score import cap_values
from pytest_scoring.db.diff_shape import fit_diff
from pytest_scoring.db.diff_shape import json_size
from pytest_scoring.report.writer import encode_data_file


@pytest.mark.parametrize("text", ["é" * 6_000, "x" * 10_001])
def test_a_text_over_the_cap_becomes_a_stub_with_its_size_hash_and_head(text: str) -> None:
    data = text.encode("utf-8")
    stub = cap_value(text, 10_000)
    assert stub["$truncated"] == len(data)
    assert stub["sha256"] == hashlib.sha256(data).hexdigest()
    assert len(stub["head"].encode("utf-8")) <= 10_000
    assert text.startswith(stub["head"]) and len(stub["head"]) >= 4_999


def test_a_text_holding_a_lone_surrogate_is_capped_too() -> None:
    assert cap_value("a\ud800b" * 4_000, 10_000)["$truncated"] == 20_000


def test_values_at_the_cap_and_other_types_are_kept() -> None:
    kept = {"n": 10**30, "t": "y" * 10_000, "b": {"$blob": base64.b64encode(b"z" * 7_000).decode()}}
    assert cap_values(kept, 10_000) == kept


def test_a_blob_whose_base64_passes_the_cap_but_its_bytes_do_not_is_kept_whole() -> None:
    blob = {"$blob": base64.b64encode(b"z" * 10_000).decode()}
    stub = cap_value({"$blob": base64.b64encode(b"z" * 20_000).decode()}, 10_000)
    assert cap_values({"b": blob, "s": stub}, 10_000) == {"b": blob, "s": stub}
    assert stub["head"] == blob


def test_a_blob_stub_keeps_a_blob_head() -> None:
    blob = bytes(range(256)) * 100
    stub = cap_value({"$blob": base64.b64encode(blob).decode()}, 1_000)
    assert stub["$truncated"] == len(blob)
    assert base64.b64decode(stub["head"]["$blob"]) == blob[:1_000]


def many_rows(count: int, width: int) -> dict[str, Any]:
    rows = [{"id": i, "body": "x" * width} for i in range(count)]
    return diff({"app.db": database(data={"users": data_table("changed", added=rows)})})


def test_a_diff_too_large_for_its_file_keeps_fewer_examples_and_exact_counts() -> None:
    fitted = fit_diff(many_rows(1_000, 5_000), 1_000, 10_000, max_bytes=1_000_000)
    users = fitted["comparisons"]["app.db"]["comparisons"]["data"]["tables"]["users"]
    assert json_size(fitted) <= 1_000_000
    assert 0 < len(users["rows_added"]) < 1_000
    assert users["counts"]["added"] == 1_000
    assert users["truncated"] is True


def test_a_data_file_that_still_would_not_fit_is_one_stub(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr("pytest_scoring.report.writer.REPORT_FILE_CAP", 50_000)
    text = encode_data_file(many_rows(100, 1_000), value_cap=10_000)
    stub = json.loads(text)
    assert len(text) < 12_000
    assert stub["$truncated"] > 50_000
    assert stub["head"].startswith("{")


def test_a_data_file_caps_every_value() -> None:
    text = encode_data_file(many_rows(3, 50_000), value_cap=1_000)
    users = json.loads(text)["comparisons"]["app.db"]["comparisons"]["data"]
    bodies = [row["body"] for row in users["tables"]["users"]["rows_added"]]
    assert [body["$truncated"] for body in bodies] == [50_000] * 3
    assert len(text) < 10_000
