"""The test scorers end to end: real pytest sessions, outcomes tallied from pytest's reports."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

EVERY_OUTCOME = """
    import pytest

    def test_passes():
        pass

    def test_passes_too(record_property):
        record_property("answer", 42)

    def test_fails():
        assert 1 == 2

    @pytest.fixture
    def broken():
        raise RuntimeError("setup breaks")

    def test_errors_in_setup(broken):
        pass

    @pytest.fixture
    def breaks_after():
        yield
        raise RuntimeError("teardown breaks")

    def test_errors_in_teardown(breaks_after):
        pass

    @pytest.mark.skip(reason="not today")
    def test_skipped():
        pass

    @pytest.mark.xfail(reason="known bug")
    def test_xfailed():
        assert False

    @pytest.mark.xfail(reason="fixed already")
    def test_xpassed():
        pass
"""


def read_scores(pytester: pytest.Pytester) -> dict[str, Any]:
    """The ``scores.json`` of the only report under ``./scores``."""
    (report,) = (pytester.path / "scores").glob("scan_id=*")
    content: dict[str, Any] = json.loads((report / "scores.json").read_text())
    return content


@pytest.fixture
def every_outcome(pytester: pytest.Pytester) -> pytest.Pytester:
    pytester.makepyfile(test_outcomes=EVERY_OUTCOME)
    return pytester


@pytest.mark.parametrize("workers", [[], ["-n", "2"], ["-p", "no:xdist"]])
@pytest.mark.slow
def test_every_outcome_kind_is_counted_the_same_with_and_without_xdist(
    every_outcome: pytest.Pytester, workers: list[str]
) -> None:
    result = every_outcome.runpytest_subprocess("--score", *workers)
    result.assert_outcomes(passed=3, failed=1, errors=2, skipped=1, xfailed=1, xpassed=1)
    report = read_scores(every_outcome)
    assert report["tests"]["counts"] == {
        "passed": 2,
        "failed": 1,
        "error": 2,
        "skipped": 1,
        "xfailed": 1,
        "xpassed": 1,
        "missing": 0,
        "extra": 0,
        "not_run": 0,
        "total": 5,
    }
    scores = report["scores"]
    assert scores["all_tests_pass"]["value"] == "I"
    assert scores["percent_passing_tests"]["value"] == 40.0
    assert scores["percent_failing_tests"]["value"] == 60.0
    metadata = scores["percent_passing_tests"]["metadata"]
    assert metadata["failed_tests"] == ["test_outcomes.py::test_fails"]
    assert sorted(metadata["error_tests"]) == [
        "test_outcomes.py::test_errors_in_setup",
        "test_outcomes.py::test_errors_in_teardown",
    ]


def test_each_test_keeps_its_outcome_duration_and_recorded_properties(
    every_outcome: pytest.Pytester,
) -> None:
    every_outcome.runpytest("--score")
    tests = {t["nodeid"]: t for t in read_scores(every_outcome)["tests"]["tests"]}
    recorded = tests["test_outcomes.py::test_passes_too"]
    assert recorded["outcome"] == "passed"
    assert recorded["user_properties"] == [["answer", 42]]
    assert recorded["duration"] >= 0
    assert tests["test_outcomes.py::test_xpassed"]["outcome"] == "xpassed"


def test_all_tests_pass_when_nothing_fails(pytester: pytest.Pytester) -> None:
    pytester.makepyfile("def test_one(): pass\ndef test_two(): pass")
    pytester.runpytest("--score").assert_outcomes(passed=2)
    scores = read_scores(pytester)["scores"]
    assert scores["all_tests_pass"]["value"] == "C"
    assert scores["percent_passing_tests"]["value"] == 100.0
    assert scores["percent_failing_tests"]["value"] == 0.0


def test_a_session_without_tests_does_not_pass(pytester: pytest.Pytester) -> None:
    pytester.makepyfile("x = 1")
    pytester.runpytest("--score")
    scores = read_scores(pytester)["scores"]
    # No score to give, and counted as a failed sample: never a pass.
    assert scores["all_tests_pass"]["value"] == "N"
    assert scores["all_tests_pass"]["metadata"]["counted_as"] == "I"
    assert scores["percent_passing_tests"]["metadata"]["counted_as"] == 0


@pytest.mark.slow
def test_a_flaky_test_counts_with_its_final_outcome_after_reruns(
    pytester: pytest.Pytester,
) -> None:
    pytester.makepyfile(
        """
        import pathlib

        def test_flaky():
            marker = pathlib.Path(__file__).with_name("attempted")
            if not marker.exists():
                marker.write_text("once")
                assert False, "first attempt fails"

        def test_always_fails():
            assert False
        """
    )
    result = pytester.runpytest_subprocess("--score", "--reruns", "2")
    assert result.parseoutcomes()["rerun"] == 3
    counts = read_scores(pytester)["tests"]["counts"]
    assert counts["passed"] == 1
    assert counts["failed"] == 1
    assert counts["total"] == 2


def test_a_test_failing_in_call_and_in_teardown_counts_once_as_failed(
    pytester: pytest.Pytester,
) -> None:
    pytester.makepyfile(
        """
        import pytest

        @pytest.fixture
        def breaks_after():
            yield
            raise RuntimeError("teardown breaks")

        def test_fails_twice(breaks_after):
            assert False
        """
    )
    pytester.runpytest("--score").assert_outcomes(failed=1, errors=1)
    report = read_scores(pytester)
    assert report["tests"]["counts"]["failed"] == report["tests"]["counts"]["total"] == 1
    assert report["scores"]["percent_passing_tests"]["metadata"]["error_tests"] == []


def test_each_failing_collector_is_one_error(pytester: pytest.Pytester) -> None:
    pytester.makepyfile(
        test_ok="def test_ok(): pass",
        test_broken="import no_such_module_here",
        test_broken_too="raise SyntaxError('nope')",
    )
    pytester.runpytest("--score", "--continue-on-collection-errors")
    report = read_scores(pytester)
    assert report["tests"]["counts"]["error"] == 2
    assert report["tests"]["counts"]["passed"] == 1
    assert report["complete"] is True


@pytest.mark.slow
def test_collection_errors_under_xdist_count_once_per_collector(
    pytester: pytest.Pytester,
) -> None:
    pytester.makepyfile(test_ok="def test_ok(): pass", test_broken="import no_such_module_here")
    pytester.runpytest_subprocess("--score", "-n", "2")
    counts = read_scores(pytester)["tests"]["counts"]
    assert counts["error"] == 1


def test_test_runner_selects_a_scorer_by_method() -> None:
    from pytest_scoring import test_runner_scorer
    from pytest_scoring.errors import ConfigError

    assert test_runner_scorer("pass-fail").type == "all_tests_pass"
    assert test_runner_scorer().type == "percent_passing_tests"
    assert test_runner_scorer("percent-fail").type == "percent_failing_tests"
    with pytest.raises(ConfigError, match="'sometimes' is not one of"):
        test_runner_scorer("sometimes")


def test_the_summary_shows_each_score_and_the_report_path(
    every_outcome: pytest.Pytester,
) -> None:
    result = every_outcome.runpytest("--score")
    result.stdout.fnmatch_lines(
        [
            "*- scores -*",
            "all_tests_pass: I  (2 passed, 1 failed, 2 errors = 5 counted; not counted: 1 skipped, "
            "1 xfailed, 1 xpassed)",
            "percent_passing_tests: 40  *",
            "percent_failing_tests: 60  *",
            f"score report: {Path(every_outcome.path, 'scores')}*scan_id=*",
        ]
    )


def test_scores_are_readable_from_code_after_pytest_main(pytester: pytest.Pytester) -> None:
    import pytest_scoring

    pytester.makepyfile("def test_one(): pass")
    assert pytest.main([str(pytester.path), "--score", "-q", "-p", "no:cacheprovider"]) == 0
    result = pytest_scoring.last_result()
    assert result is not None
    assert result.scores["all_tests_pass"]["value"] == "C"


def test_a_plugin_object_passed_to_pytest_main_receives_the_scored_session(
    pytester: pytest.Pytester,
) -> None:
    class Receiver:
        def __init__(self) -> None:
            self.calls: list[tuple[dict[str, Any], Path | None]] = []

        @pytest.hookimpl
        def pytest_scoring_session_scored(
            self, config: pytest.Config, result: Any, report_path: Path | None
        ) -> None:
            self.calls.append((result.scores, report_path))

    pytester.makepyfile("def test_one(): pass\ndef test_two(): assert False")
    receiver = Receiver()
    pytest.main([str(pytester.path), "--score", "-q", "-p", "no:cacheprovider"], plugins=[receiver])
    ((scores, report_path),) = receiver.calls
    assert scores["percent_passing_tests"]["value"] == 50.0
    assert report_path is not None
    assert (report_path / "scores.json").is_file()


def test_failing_ids_in_metadata_are_capped_at_100_and_say_so() -> None:
    from pytest_scoring import percent_passing_tests_scorer
    from pytest_scoring.core.outcomes import OutcomeTally
    from pytest_scoring.scorers.base import ScoringContext

    tally = OutcomeTally()
    for number in range(101):
        tally.record_outcome(f"test_{number}", "failed")
    tally.record_outcome("test_setup", "error")
    context = ScoringContext(root=Path("."), tally=tally)
    metadata = percent_passing_tests_scorer().score(context)["metadata"]
    assert metadata["failed_tests"] == [f"test_{number}" for number in range(100)]
    assert metadata["error_tests"] == ["test_setup"]
    assert metadata["counts"]["failed"] == 101
    assert metadata["truncated"] is True
    tally.tests.pop("test_100")
    assert percent_passing_tests_scorer().score(context)["metadata"]["truncated"] is False


@pytest.mark.parametrize("workers", [["-n", "2"], ["-p", "no:xdist"]])
def test_each_test_that_did_not_pass_keeps_the_reason_pytest_gave(
    every_outcome: pytest.Pytester, workers: list[str]
) -> None:
    every_outcome.runpytest_subprocess("--score", *workers)
    tests = {t["nodeid"]: t for t in read_scores(every_outcome)["tests"]["tests"]}
    message = {nodeid.split("::")[1]: test.get("message") for nodeid, test in tests.items()}
    assert message["test_fails"].startswith("assert 1 == 2")
    assert message["test_errors_in_setup"] == "RuntimeError: setup breaks"
    assert message["test_errors_in_teardown"] == "RuntimeError: teardown breaks"
    assert message["test_skipped"] == "Skipped: not today"
    assert message["test_xfailed"] == "known bug"
    assert message["test_passes"] is None
    assert message["test_xpassed"] is None


def test_a_huge_failure_message_is_capped(pytester: pytest.Pytester) -> None:
    from pytest_scoring.core.rule import MESSAGE_CAP

    pytester.makepyfile("def test_shouts():\n    raise ValueError('x' * 1_000_000)\n")
    pytester.runpytest("--score")
    (test,) = read_scores(pytester)["tests"]["tests"]
    assert test["message"].startswith("ValueError: xxx")
    assert MESSAGE_CAP < len(test["message"]) < MESSAGE_CAP + 100
    assert test["message"].endswith("more characters cut]")


def test_a_collection_error_keeps_its_message(pytester: pytest.Pytester) -> None:
    pytester.makepyfile(test_broken="import no_such_module_here\n")
    pytester.runpytest("--score")
    (test,) = read_scores(pytester)["tests"]["tests"]
    assert test["outcome"] == "error"
    assert "No module named 'no_such_module_here'" in test["message"]
