"""A test set fixed by the evaluator: --score-expected-tests (and run/junit --expected-tests)."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

from pytest_scoring.cli.main import main
from pytest_scoring.errors import OptionError
from pytest_scoring.process import environment
from pytest_scoring.reference.expected import CACHE_KIND
from pytest_scoring.reference.expected import parse_expected
from pytest_scoring.reference.private_cache import PrivateCache

SUITE = """
    import pytest

    def test_a(): pass
    def test_b(): pass
    def test_c(): assert False

    @pytest.mark.skip(reason="needs a GPU")
    def test_gpu(): pass

    @pytest.mark.xfail(reason="known bug")
    def test_known(): assert False
"""
IDS = [f"test_suite.py::test_{name}" for name in ("a", "b", "c", "gpu", "known")]


def scores_json(where: pytest.Pytester | Path) -> dict[str, Any]:
    """The only report under a report root (a pytester's: ``./scores``)."""
    root = where if isinstance(where, Path) else where.path / "scores"
    (report,) = root.glob("scan_id=*")
    content: dict[str, Any] = json.loads((report / "scores.json").read_text())
    return content


@pytest.fixture
def suite(pytester: pytest.Pytester, tmp_path_factory: pytest.TempPathFactory) -> pytest.Pytester:
    pytester.makepyfile(test_suite=SUITE)
    # Source folders' runs are cached: keep each test's cache to itself.
    pytester._monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path_factory.mktemp("cache")))
    return pytester


def counts_with(pytester: pytest.Pytester, source: object, *args: str) -> dict[str, int]:
    path = pytester.path.parent / "expected.txt"
    text = source if isinstance(source, str) else json.dumps(source)
    path.write_text(text)
    pytester.runpytest("--score", f"--score-expected-tests={path}", *args)
    counts: dict[str, int] = scores_json(pytester)["tests"]["counts"]
    return counts


def test_ids_one_per_line_must_each_pass(suite: pytest.Pytester) -> None:
    counts = counts_with(suite, "# the pass list\n" + "\n".join(IDS) + "\n")
    # gpu (skipped) and known (xfailed) were asked to pass: they fail; c failed.
    assert (counts["passed"], counts["failed"], counts["total"]) == (2, 3, 5)
    report = scores_json(suite)
    records = {r["nodeid"]: r for r in report["tests"]["tests"]}
    assert records["test_suite.py::test_gpu"]["outcome"] == "skipped"  # as observed
    assert records["test_suite.py::test_gpu"]["expected"] == "passed"
    metadata = report["scores"]["percent_passing_tests"]["metadata"]
    assert metadata["failed_tests"] == IDS[2:]
    assert metadata["expected_tests"]["tests"] == 5


def test_a_json_object_makes_a_skip_or_xfail_the_source_had_neutral(suite: pytest.Pytester) -> None:
    expected = {IDS[0]: "passed", IDS[2]: "passed", IDS[3]: "skipped", IDS[4]: "xfailed"}
    counts = counts_with(suite, expected)
    assert (counts["passed"], counts["failed"], counts["skipped"], counts["xfailed"]) == (
        1,
        1,
        1,
        1,
    )
    assert counts["total"] == 2
    assert counts["extra"] == 1  # test_b is outside the set: listed, not counted
    assert scores_json(suite)["tests"]["extra"] == [IDS[1]]


def test_swe_bench_style_pass_lists_are_a_json_list(suite: pytest.Pytester) -> None:
    fail_to_pass, pass_to_pass = [IDS[2]], [IDS[0], IDS[1]]
    counts = counts_with(suite, [*fail_to_pass, *pass_to_pass])
    assert (counts["passed"], counts["failed"], counts["total"]) == (2, 1, 3)
    assert scores_json(suite)["scores"]["all_tests_pass"]["value"] == "I"


def test_an_expected_test_that_never_reported_is_missing(suite: pytest.Pytester) -> None:
    counts = counts_with(suite, [IDS[0], "test_suite.py::test_renamed"], "--deselect", IDS[0])
    assert (counts["missing"], counts["passed"], counts["total"]) == (2, 0, 2)
    report = scores_json(suite)
    assert report["tests"]["missing"] == [IDS[0], "test_suite.py::test_renamed"]
    assert report["scores"]["percent_passing_tests"]["value"] == 0


def test_ids_are_matched_relative_to_the_repository_root(pytester: pytest.Pytester) -> None:
    tests = pytester.mkdir("tests")
    (tests / "pytest.ini").write_text("[pytest]\n")  # moves pytest's rootdir to tests/
    (tests / "test_a.py").write_text("def test_a(): pass\ndef test_b(): assert False\n")
    ids = pytester.path / "ids.txt"
    ids.write_text("./tests/test_a.py::test_a\ntests/test_a.py::test_b\n")
    report = pytester.path / "scores"
    pytester.runpytest("tests", f"--score-expected-tests={ids}", f"--score-report={report}")
    counts = scores_json(pytester)["tests"]["counts"]
    assert (counts["passed"], counts["failed"], counts["missing"]) == (1, 1, 0)


def reference_folder(pytester: pytest.Pytester) -> Path:
    """The evaluator's source folder: its own ini, a test that fails there too."""
    folder = pytester.mkdir("reference")
    (folder / "pytest.ini").write_text("[pytest]\ntestpaths = checks\n")
    (folder / "checks").mkdir()
    (folder / "checks" / "test_suite.py").write_text(
        "import pytest\n"
        "def test_a(): pass\n"
        "def test_b(): pass\n"
        "def test_broken_there_too(): assert False\n"
        "@pytest.mark.skip(reason='no GPU')\n"
        "def test_gpu(): pass\n"
    )
    return folder


@pytest.mark.slow
def test_a_folder_runs_once_and_its_outcomes_are_the_set(suite: pytest.Pytester) -> None:
    folder = reference_folder(suite)
    checks = suite.mkdir("checks")
    (checks / "test_suite.py").write_text(
        "import pytest\n"
        "def test_a(): pass\n"
        "def test_b(): assert False\n"
        "@pytest.mark.skip(reason='no GPU')\n"
        "def test_gpu(): pass\n"
        "def test_added(): pass\n"
    )
    suite.runpytest("checks", "--score", f"--score-expected-tests={folder}")
    report = scores_json(suite)
    counts = report["tests"]["counts"]
    assert (counts["passed"], counts["failed"], counts["skipped"], counts["extra"]) == (1, 1, 1, 1)
    dropped = ["checks/test_suite.py::test_broken_there_too"]
    assert report["tests"]["expected_tests"]["dropped"] == dropped
    (cached,) = expected_cache("in-process").glob("*.json")
    # The second session reads the entry (rewritten here, as the evaluator would write it, to
    # show that it is read) instead of running the folder again.
    key = cached.stem
    document = json.loads(cached.read_text())
    del document["content"]["expected"]["checks/test_suite.py::test_b"]
    cache = PrivateCache.open(CACHE_KIND, "in-process", [])
    cached.write_bytes(cache.document(key, document["content"]))
    for old in (suite.path / "scores").glob("scan_id=*"):
        os.rename(old, suite.path / f"old-{old.name}")
    suite.runpytest("checks", "--score", f"--score-expected-tests={folder}")
    assert scores_json(suite)["tests"]["counts"]["failed"] == 0


def expected_cache(route: str) -> Path:
    """The folder of expected-tests entries of ``route`` in this test's evaluator cache."""
    home = Path(environment.captured_environment()["XDG_CACHE_HOME"])
    return home / "pytest-scoring" / CACHE_KIND / route


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("", "lists no tests"),
        ("[1, 2]", "[0] is 1, not a test id"),
        ('{"t.py::a": "failed"}', "['t.py::a'] is 'failed', expected one of"),
        ("[oops", "is not valid JSON"),
        ('"t.py::a"', "expected a JSON list of ids or an object of outcomes, got str"),
    ],
)
def test_a_malformed_source_names_what_is_wrong(text: str, message: str) -> None:
    with pytest.raises(OptionError, match=message.replace("[", r"\[")):
        parse_expected(text, "ids.json")


def test_a_bad_source_stops_pytest_with_a_usage_error(suite: pytest.Pytester) -> None:
    result = suite.runpytest("--score-expected-tests=nowhere.txt")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines(["ERROR: --score-expected-tests: cannot read *nowhere.txt: *"])


def test_an_expected_set_in_the_repositorys_ini_is_ignored_and_said_in_process(
    pytester: pytest.Pytester,
) -> None:
    pytester.makepyfile(test_suite="def test_a(): pass\ndef test_b(): assert False\n")
    pytester.makeini("[pytest]\nscore_expected_tests = mine.txt\n")
    (pytester.path / "mine.txt").write_text("test_suite.py::test_a\n")
    pytester.runpytest("--score", "-p", "no:cacheprovider")
    report = scores_json(pytester.path / "scores")
    assert report["tests"]["counts"]["total"] == 2, "the repository chose none of its tests"
    (ignored,) = [s for s in report["integrity"] if "score_expected_tests" in s["detail"]]
    assert ignored["kind"] == "selection"


def test_the_repository_cannot_choose_its_own_set_under_run(
    pytester: pytest.Pytester, tmp_path: Path
) -> None:
    pytester.makepyfile(test_suite="def test_a(): pass\ndef test_b(): assert False\n")
    pytester.makeini("[pytest]\nscore_expected_tests = mine.txt\n")
    (pytester.path / "mine.txt").write_text("test_suite.py::test_a\n")
    result = CliRunner().invoke(main, ["run", str(pytester.path), "--report", str(tmp_path)])
    assert result.exit_code == 0, result.output
    assert scores_json(tmp_path)["tests"]["counts"]["total"] == 2


@pytest.mark.slow
def test_run_takes_a_folder_source_resolved_on_the_evaluators_side(
    suite: pytest.Pytester, tmp_path: Path
) -> None:
    folder = reference_folder(suite)
    repo = suite.mkdir("repo")
    (repo / "checks").mkdir()
    (repo / "checks" / "test_suite.py").write_text("def test_a(): pass\n")
    result = CliRunner().invoke(
        main, ["run", str(repo), "--report", str(tmp_path), "--expected-tests", str(folder)]
    )
    assert result.exit_code == 0, result.output
    counts = scores_json(tmp_path)["tests"]["counts"]
    assert (counts["passed"], counts["missing"], counts["skipped"]) == (1, 2, 0)


def test_junit_takes_an_expected_set_too(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    xml = tmp_path / "j.xml"
    xml.write_text(
        '<testsuites><testsuite name="s" tests="1">'
        '<testcase classname="Cart" name="adds" file="cart.test.js" time="0.1"/>'
        "</testsuite></testsuites>"
    )
    (tmp_path / "ids.txt").write_text("cart.test.js::Cart::adds\ncart.test.js::Cart::pays\n")
    monkeypatch.chdir(tmp_path)
    result = CliRunner().invoke(main, ["junit", str(xml), "--expected-tests", "ids.txt"])
    assert result.exit_code == 0, result.output
    assert "percent_passing_tests: 50  (1 passed, 1 missing = 2 counted)" in result.output
