"""Sessions that end badly still leave a readable report, flagged incomplete when they should."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pandas  # noqa: F401  # imported before in-process runs (see test_report.py)
import pytest

from pytest_scoring import results_df

INTERRUPTED = """
    def test_before():
        pass

    def test_ctrl_c():
        raise KeyboardInterrupt

    def test_never_runs():
        pass
"""

CRASHING_SCORER_CONFTEST = """
    import pytest

    class Crashing:
        name = type = "crashing"
        metrics = ()

        def score(self, context):
            raise ZeroDivisionError("scorer bug")

    @pytest.hookimpl
    def pytest_sessionstart(session):
        session.config.pluginmanager.get_plugin("scoring-session").scorers.append(Crashing())
"""


def only_report(pytester: pytest.Pytester) -> Path:
    (folder,) = (pytester.path / "scores").glob("scan_id=*")
    return folder


def completeness(folder: Path) -> tuple[Any, Any]:
    """The complete flag as scores.json and _summary.json say it."""
    scores = json.loads((folder / "scores.json").read_text())
    summary = json.loads((folder / "_summary.json").read_text())
    return scores["complete"], summary["complete"]


def test_a_session_stopped_by_ctrl_c_leaves_an_incomplete_readable_report(
    pytester: pytest.Pytester,
) -> None:
    pytester.makepyfile(INTERRUPTED)
    # no_reraise_ctrlc: let the in-process run end as a real Ctrl-C does, with exit status 2.
    result = pytester.runpytest("--score", no_reraise_ctrlc=True)
    assert result.ret == pytest.ExitCode.INTERRUPTED
    folder = only_report(pytester)
    assert completeness(folder) == (False, False)
    read_back = results_df(folder)
    assert read_back.complete is False
    # An incomplete session never passes: the two tests Ctrl-C kept from running count.
    assert read_back.scanners["all_tests_pass"]["value"].tolist() == ["I"]
    counts = json.loads((folder / "scores.json").read_text())["tests"]["counts"]
    assert (counts["passed"], counts["failed"], counts["not_run"]) == (1, 2, 2)


def test_a_crashing_scorer_leaves_the_other_scores_and_an_incomplete_report(
    pytester: pytest.Pytester,
) -> None:
    pytester.makeconftest(CRASHING_SCORER_CONFTEST)
    pytester.makepyfile("def test_ok(): pass")
    result = pytester.runpytest("--score")
    result.assert_outcomes(passed=1)
    assert result.ret == pytest.ExitCode.OK
    folder = only_report(pytester)
    assert completeness(folder) == (False, False)
    read_back = results_df(folder)
    assert read_back.scanners["crashing"]["scan_error"].tolist() == [
        "ZeroDivisionError: scorer bug"
    ]
    assert read_back.scanners["percent_passing_tests"]["value"].tolist() == [100]
    assert [error["scanner"] for error in read_back.errors] == ["crashing"]


@pytest.mark.parametrize(
    ("source", "args"),
    [
        ("def test_a(): assert False\ndef test_b(): pass", ["-x"]),
        ("import no_such_module_here\ndef test_a(): pass", []),
    ],
    ids=["stopped-by-x", "collection-error"],
)
def test_a_session_pytest_stops_early_is_scored_as_it_ended_and_complete(
    pytester: pytest.Pytester, source: str, args: list[str]
) -> None:
    pytester.makepyfile(source)
    pytester.runpytest("--score", *args)
    assert completeness(only_report(pytester)) == (True, True)
