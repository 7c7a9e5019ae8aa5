"""JUnit XML a repository's run wrote is read and copied within bounds: past them it is cut,
the cut says how much was left, and the scores say they saw a cut file."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner
from junitparser import JUnitXml
from runs import TAMPERING_ONLY
from runs import only_report

from pytest_scoring.cli.main import main
from pytest_scoring.report.junit import MAX_CASES
from pytest_scoring.report.xml_stream import MAX_BYTES
from pytest_scoring.report.xml_stream import MAX_DEPTH
from pytest_scoring.report.xml_stream import MAX_TOKEN


def junit(tmp_path: Path, *files: Path) -> Any:
    report = tmp_path / "scores"
    return CliRunner().invoke(main, ["junit", *map(str, files), "--report", str(report)])


def cases(count: int) -> str:
    return "".join(f'<testcase classname="t" name="test_{i}" time="0.1"/>' for i in range(count))


@pytest.mark.parametrize(
    ("content", "bound"),
    [
        (f"<testsuites><testsuite>{cases(MAX_CASES + 1)}</testsuite></testsuites>", "test cases"),
        (
            f'<testsuite>{cases(3)}<testcase name="{"x" * 2 * MAX_TOKEN}"/></testsuite>',
            "a tag, comment or processing instruction longer than 1 MiB",
        ),
        (
            f"<testsuites>{cases(0)}<testsuite>{cases(3)}</testsuite>" + "<testsuite>" * MAX_DEPTH,
            f"elements nested {MAX_DEPTH} deep",
        ),
    ],
    ids=["cases", "token", "depth"],
)
def test_a_file_past_a_bound_is_cut_and_the_test_scores_are_n(
    tmp_path: Path, content: str, bound: str
) -> None:
    xml = tmp_path / "reports" / "TEST-big.xml"
    xml.parent.mkdir()
    xml.write_text(content)
    result = junit(tmp_path, xml)
    assert result.exit_code == 0, result.output
    assert f"JUnit XML {xml}: cut at " in result.output
    report = only_report(tmp_path / "scores")
    for score in report["scores"].values():
        assert score["value"] == "N"
        assert score["metadata"]["unscored"] == "repository"
        assert bound in score["explanation"]
        assert (
            "bytes not read: what was not read could change every test score"
            in (score["explanation"])
        )
    assert report["tests"]["counts"]["passed"] == (MAX_CASES if bound == "test cases" else 3)


def test_a_large_honest_suite_is_read_whole_as_run_reads_it(tmp_path: Path) -> None:
    """packaging's 64,204 tests (more than the 50,000 cases junit once read): the file holds
    fewer cases than run's default ``--limit tests``, so junit scores them all, as run does."""
    xml = tmp_path / "pytest-junit.xml"
    xml.write_text(f"<testsuites><testsuite>{cases(64_204)}</testsuite></testsuites>")
    result = junit(tmp_path, xml)
    assert result.exit_code == 0, result.output
    report = only_report(tmp_path / "scores")
    assert report["tests"]["counts"]["passed"] == 64_204
    assert report["scores"]["percent_passing_tests"]["value"] == 100


BILLION_LAUGHS = """<?xml version="1.0"?>
<!DOCTYPE lolz [
 <!ENTITY lol "lol">
 <!ENTITY lol2 "&lol;&lol;&lol;&lol;&lol;&lol;&lol;&lol;&lol;&lol;">
 <!ENTITY lol3 "&lol2;&lol2;&lol2;&lol2;&lol2;&lol2;&lol2;&lol2;&lol2;&lol2;">
]>
<testsuites><testsuite><testcase name="&lol3;"/></testsuite></testsuites>
"""


def test_a_file_that_declares_an_entity_is_refused_with_one_line(tmp_path: Path) -> None:
    xml = tmp_path / "laughs.xml"
    xml.write_text(BILLION_LAUGHS)
    result = junit(tmp_path, xml)
    assert result.exit_code == 2
    assert (
        result.output.strip()
        .splitlines()[-1]
        .endswith(f"{xml}: declares an XML entity (refused: JUnit XML needs none)")
    )
    assert not (tmp_path / "scores").exists()


def test_a_fifo_or_a_device_is_refused_without_waiting_for_it(tmp_path: Path) -> None:
    fifo = tmp_path / "results.xml"
    os.mkfifo(fifo)
    for path in (fifo, Path("/dev/zero")):
        result = junit(tmp_path, path)
        assert result.exit_code == 2
        assert f"{path}: cannot read (not a regular file)" in result.output


#: A repository whose conftest swaps pytest's JUnit file, once pytest wrote it, for its real
#: cases followed by one case whose output runs past the copy's bound.
BLOATING_CONFTEST = """
import pytest

@pytest.hookimpl(trylast=True)
def pytest_unconfigure(config):
    path = config.option.xmlpath
    if not path:
        return
    text = open(path, encoding="utf-8").read()
    head, tail = text.rsplit("</testsuite>", 1)
    with open(path, "w", encoding="utf-8") as junit:
        junit.write(head)
        junit.write('<testcase classname="test_app" name="test_bloat"><system-out>')
        block = "x" * (1024 * 1024)
        for _ in range({megabytes}):
            junit.write(block)
        junit.write("</system-out></testcase></testsuite>" + tail)
"""
PASS_AND_FAIL = "def test_ok():\n    pass\n\ndef test_broken():\n    assert False\n"


def test_run_copies_a_bloated_junit_file_cut_with_a_stub_and_scores_from_the_probe(
    tmp_path: Path,
) -> None:
    repo = tmp_path / "repo"
    repo.mkdir()
    (repo / "test_app.py").write_text(PASS_AND_FAIL)
    megabytes = MAX_BYTES // (1024 * 1024) + 4
    (repo / "conftest.py").write_text(BLOATING_CONFTEST.format(megabytes=megabytes))
    copy = tmp_path / "junit.xml"
    args = [str(repo), "--report", str(tmp_path / "out"), TAMPERING_ONLY, "--"]
    result = CliRunner().invoke(main, ["run", *args, f"--junitxml={copy}"])
    assert "JUnit XML " in result.output and ": cut at 64 MiB, " in result.output
    report = only_report(tmp_path / "out")
    assert report["scores"]["percent_passing_tests"]["value"] == 50
    assert copy.stat().st_size < MAX_BYTES
    text = copy.read_text()
    assert "bytes not copied -->" in text and "<!-- pytest-scoring: " in text
    assert "test_bloat" not in text  # the case the cut fell in is left out whole
    (suite,) = JUnitXml.fromfile(str(copy))
    assert sorted(case.name for case in suite) == ["test_broken", "test_ok"]
    properties = {prop.name: prop.value for prop in suite.properties()}
    assert properties["score:percent_passing_tests"] == "50"
