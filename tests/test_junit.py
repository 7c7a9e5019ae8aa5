"""JUnit XML in (any runner's files into a tally) and out (scores as suite properties)."""

from __future__ import annotations

import shutil
from pathlib import Path

import pandas  # noqa: F401  # imported before in-process runs (see test_report.py)
import pytest
from junitparser import JUnitXml

from pytest_scoring.core.score import make_score
from pytest_scoring.errors import JUnitError
from pytest_scoring.report.junit import case_nodeid
from pytest_scoring.report.junit import read_junit
from pytest_scoring.report.junit_write import add_score_properties

SAMPLES = Path(__file__).parent / "data" / "junit"
SUREFIRE = [
    SAMPLES / "TEST-com.example.shop.CartTest.xml",
    SAMPLES / "TEST-com.example.shop.OrderTest.xml",
]


def counts_of(*paths: Path) -> dict[str, int]:
    return dict(read_junit(list(paths)).tally.counts())


@pytest.mark.parametrize(
    ("paths", "expected"),
    [
        (
            [SAMPLES / "pytest.xml"],
            {"passed": 2, "failed": 1, "error": 1, "skipped": 1, "xfailed": 1, "total": 4},
        ),
        ([SAMPLES / "jest-junit.xml"], {"passed": 2, "failed": 1, "skipped": 1, "total": 3}),
        (
            [SAMPLES / "go-junit-report.xml"],
            {"passed": 1, "failed": 1, "error": 1, "skipped": 1, "total": 3},
        ),
        (SUREFIRE, {"passed": 2, "failed": 1, "error": 1, "skipped": 1, "total": 4}),
    ],
    ids=["pytest", "jest-junit", "go-junit-report", "surefire-two-files"],
)
def test_each_runners_junit_file_is_tallied_by_outcome(
    paths: list[Path], expected: dict[str, int]
) -> None:
    counts = counts_of(*paths)
    assert {outcome: n for outcome, n in counts.items() if n} == expected


def test_failing_and_erroring_cases_are_named_by_classname_and_name() -> None:
    tally = read_junit(SUREFIRE).tally
    assert tally.ids_with("failed") == ["com.example.shop.CartTest::appliesCoupon"]
    assert tally.ids_with("error") == ["com.example.shop.OrderTest::placesOrder"]
    assert read_junit([SAMPLES / "jest-junit.xml"]).tally.ids_with("failed") == [
        "Cart applies a coupon"
    ]


@pytest.mark.parametrize(
    ("name", "classname", "file", "nodeid"),
    [
        ("test_y", "tests.test_a.TestX", "tests/test_a.py", "tests/test_a.py::TestX::test_y"),
        ("test_y", "tests.test_a", "tests/test_a.py", "tests/test_a.py::test_y"),
        ("TestOpen", "example.com/shop/store", None, "example.com/shop/store::TestOpen"),
        ("adds", "Cart", "src/cart.test.js", "src/cart.test.js::Cart::adds"),
        ("Cart adds", "Cart adds", None, "Cart adds"),
        ("lonely", None, None, "lonely"),
    ],
)
def test_a_case_id_joins_file_classname_and_name(
    name: str, classname: str | None, file: str | None, nodeid: str
) -> None:
    assert case_nodeid(name, classname, file) == nodeid


@pytest.mark.parametrize(
    ("content", "message"),
    [
        ("", "empty file"),
        ("   \n", "empty file"),
        ("<testsuites><testsuite>", "not well-formed XML"),
        ("<html><body>build log</body></html>", "not JUnit XML"),
    ],
    ids=["empty", "blank", "truncated", "other-xml"],
)
def test_an_unusable_junit_file_is_an_error_naming_the_file(
    tmp_path: Path, content: str, message: str
) -> None:
    bad = tmp_path / "report.xml"
    bad.write_text(content)
    with pytest.raises(JUnitError, match=message) as raised:
        read_junit([SAMPLES / "pytest.xml", bad])
    assert str(raised.value).startswith(str(bad))


def test_a_missing_junit_file_is_an_error_naming_it(tmp_path: Path) -> None:
    with pytest.raises(JUnitError, match="cannot read"):
        read_junit([tmp_path / "missing.xml"])


def suite_properties(path: Path) -> dict[str, str]:
    (suite,) = JUnitXml.fromfile(str(path))
    return {prop.name: prop.value for prop in suite.properties()}


def test_scores_replace_earlier_score_properties_and_keep_the_others(tmp_path: Path) -> None:
    xml = tmp_path / "go.xml"
    shutil.copy(SAMPLES / "go-junit-report.xml", xml)
    add_score_properties(xml, {"old": make_score("I", "old"), "pct": make_score(10.0, "pct")})
    add_score_properties(xml, {"pct": make_score(62.5, "pct")})
    assert suite_properties(xml) == {"go.version": "go1.22.4 linux/amd64", "score:pct": "62.5"}
    assert read_junit([xml]).tally.counts()["total"] == 3


def test_pytest_junitxml_gets_the_scores_as_suite_properties(pytester: pytest.Pytester) -> None:
    pytester.makepyfile("def test_a(): pass\ndef test_b(): assert False")
    result = pytester.runpytest("--score", "--junitxml=out/junit.xml")
    result.assert_outcomes(passed=1, failed=1)
    assert suite_properties(pytester.path / "out" / "junit.xml") == {
        "score:all_tests_pass": "I",
        "score:percent_passing_tests": "50",
        "score:percent_failing_tests": "50",
    }


def test_a_junit_file_that_cannot_be_read_back_is_reported_not_fatal(
    pytester: pytest.Pytester,
) -> None:
    pytester.makeconftest(
        """
        import pytest

        @pytest.hookimpl  # after junitxml wrote the file, before scoring (trylast)
        def pytest_sessionfinish(session):
            open(session.config.option.xmlpath, "w").close()
        """
    )
    pytester.makepyfile("def test_a(): pass")
    result = pytester.runpytest("--score", "--junitxml=junit.xml")
    assert result.ret == pytest.ExitCode.OK
    result.stdout.fnmatch_lines(["scores NOT added to JUnit XML: *junit.xml: empty file*"])
    assert list((pytester.path / "scores").glob("scan_id=*"))


def test_score_properties_come_before_the_test_cases_as_the_junit_schema_requires(
    tmp_path: Path,
) -> None:
    xml = tmp_path / "jest.xml"
    shutil.copy(SAMPLES / "jest-junit.xml", xml)
    add_score_properties(xml, {"pct": make_score(50.0, "pct")})
    (suite,) = JUnitXml.fromfile(str(xml))
    assert [child.tag for child in suite._elem][:2] == ["properties", "testcase"]


def test_same_named_cases_of_two_suites_each_count_so_a_failure_is_not_hidden(
    tmp_path: Path,
) -> None:
    case = '<testcase classname="Cart adds" name="Cart adds" time="0.1">{}</testcase>'
    cases = [("src/a.test.js", "<failure/>"), ("src/b.test.js", ""), ("src/b.test.js", "")]
    suites = "".join(
        f'<testsuite name="{file}" tests="1">{case.format(result)}</testsuite>'
        for file, result in cases
    )
    xml = tmp_path / "jest.xml"
    xml.write_text(f"<testsuites>{suites}</testsuites>")
    tally = read_junit([xml]).tally
    assert tally.ids_with("failed") == ["Cart adds"]
    assert tally.ids_with("passed") == ["src/b.test.js::Cart adds"]
    assert tally.counts()["total"] == 2  # b's two suites name one file: its case is one test


def junit_file(tmp_path: Path, suite_attributes: str, cases: str) -> Path:
    xml = tmp_path / "junit.xml"
    xml.write_text(f"<testsuites><testsuite {suite_attributes}>{cases}</testsuite></testsuites>")
    return xml


@pytest.mark.parametrize(
    ("entries", "outcome"),
    [
        (["<failure/>", "<error/>"], "failed"),  # pytest: a call failure, then a teardown error
        (["", "<error/>"], "error"),
        (["", "<failure/>"], "failed"),  # pytest-rerunfailures: a failed attempt is empty
        (["", ""], "passed"),
        (["<skipped/>", "<error/>"], "error"),
    ],
)
def test_entries_with_one_id_in_one_suite_merge_into_one_test(
    tmp_path: Path, entries: list[str], outcome: str
) -> None:
    cases = "".join(f'<testcase classname="t" name="a" time="0.1">{e}</testcase>' for e in entries)
    tally = read_junit([junit_file(tmp_path, 'name="pytest"', cases)]).tally
    assert [record["outcome"] for record in tally.records()] == [outcome]


def test_jest_junit_todo_tests_count_as_skipped_where_the_suite_counts_say_so(
    tmp_path: Path,
) -> None:
    # jest-junit leaves todo tests out of the suite's tests="…" and writes them empty, time 0.
    cases = (
        '<testcase classname="c adds" name="c adds" time="0.004"/>'
        '<testcase classname="c pays" name="c pays" time="0"/>'
        '<testcase classname="c fails" name="c fails" time="0.1"><failure/></testcase>'
    )
    counts = read_junit([junit_file(tmp_path, 'name="cart" tests="2"', cases)]).tally.counts()
    assert (counts["passed"], counts["skipped"], counts["failed"]) == (1, 1, 1)


def test_an_empty_case_cannot_be_told_from_a_todo_when_several_took_no_time(
    tmp_path: Path,
) -> None:
    cases = "".join(f'<testcase classname="{n}" name="{n}" time="0"/>' for n in "abc")
    counts = read_junit([junit_file(tmp_path, 'name="cart" tests="2"', cases)]).tally.counts()
    assert (counts["passed"], counts["skipped"]) == (3, 0)


@pytest.mark.parametrize("status", ["todo", "pending", "skipped"])
def test_a_case_whose_status_says_it_did_not_run_is_skipped(tmp_path: Path, status: str) -> None:
    cases = f'<testcase classname="c" name="later" time="0" status="{status}"/>'
    counts = read_junit([junit_file(tmp_path, 'name="s"', cases)]).tally.counts()
    assert counts["skipped"] == 1
    assert counts["passed"] == 0
