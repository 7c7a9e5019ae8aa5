"""Hostile repositories against the test scores: with an expected set the score is the truth
or ``N``; without one, a score above the truth carries an integrity signal."""

from __future__ import annotations

import json
import shutil
import site
import subprocess
import sys
import textwrap
from pathlib import Path
from typing import Any

import _pytest
import pluggy
import pytest
from click.testing import CliRunner

import pytest_scoring.core.signals
import pytest_scoring.kit.integrity
from pytest_scoring.cli.main import main

#: The honest suite: 3 of 5 tests pass, so the truth is 60 %.
HONEST = """
    def test_pass_one(): pass
    def test_pass_two(): pass
    def test_pass_three(): pass
    def test_fail_one(): assert False
    def test_fail_two(): assert False
"""
TRUTH = 60.0
IDS = [
    f"test_calc.py::test_{name}"
    for name in ("pass_one", "pass_two", "pass_three", "fail_one", "fail_two")
]


def marked(mark: str) -> str:
    """The honest suite with its failing tests marked (skip, xfail) by the repository."""
    return "import pytest\n" + textwrap.dedent(HONEST).replace(
        "def test_fail", f"@pytest.mark.{mark}\ndef test_fail"
    )


REWRITES_FAILURES = """
    import pytest

    @pytest.hookimpl(wrapper=True)
    def pytest_runtest_makereport(item, call):
        report = yield
        if report.failed:
            report.outcome, report.longrepr = "passed", None
        return report
"""
EXITS_BEFORE_FAILURES = """
    import pytest

    def pytest_runtest_setup(item):
        if "fail" in item.name:
            pytest.exit("all done", returncode=0)
"""
PATCHES_THE_TALLY = """
    from pytest_scoring.core.outcomes import OutcomeTally

    record_phase = OutcomeTally.record_phase

    def forgiving(self, record):
        record_phase(self, {**record, "outcome": "passed"} if record["when"] == "call" else record)

    OutcomeTally.record_phase = forgiving
"""

#: name -> (files the repository adds or replaces, ini text or None)
ATTACKS: dict[str, tuple[dict[str, str], str | None]] = {
    "addopts -k": ({}, '[pytest]\naddopts = -k "not fail"\n'),
    "addopts --deselect": (
        {},
        f"[pytest]\naddopts = --deselect {IDS[3]} --deselect {IDS[4]}\n",
    ),
    "python_functions": ({}, "[pytest]\npython_functions = test_pass*\n"),
    "deleted": ({"test_calc": HONEST.split("    def test_fail_one")[0]}, None),
    "renamed": (
        {"test_calc": HONEST.replace("fail_", "renamed_").replace("assert False", "pass")},
        None,
    ),
    "skipped": ({"test_calc": marked("skip")}, None),
    "xfail-marked": ({"test_calc": marked("xfail")}, None),
    "pytest.exit": ({"conftest": EXITS_BEFORE_FAILURES}, None),
    "hookwrapper": ({"conftest": REWRITES_FAILURES}, None),
    "patched tally": ({"conftest": PATCHES_THE_TALLY}, None),
}
#: Attacks an in-process session without an expected set can see (deleting, renaming,
#: skipping or xfail-marking tests looks like an honest suite: that is what the set is for).
VISIBLE_WITHOUT_A_SET = [
    "addopts -k",
    "addopts --deselect",
    "python_functions",
    "pytest.exit",
    "hookwrapper",
    "patched tally",
]


def hostile_repository(pytester: pytest.Pytester, attack: str) -> None:
    pytester.makepyfile(test_calc=HONEST)
    files, ini = ATTACKS[attack]
    for name, content in files.items():
        if name == "conftest":
            pytester.makeconftest(content)
        else:
            pytester.makepyfile(**{name: content})
    if ini is not None:
        pytester.makeini(ini)


def scores_json(root: Path) -> dict[str, Any]:
    (report,) = root.glob("scan_id=*")
    content: dict[str, Any] = json.loads((report / "scores.json").read_text())
    return content


def scored(pytester: pytest.Pytester, *args: str) -> dict[str, Any]:
    report_root = pytester.path.parent / f"{pytester.path.name}-scores"
    pytester.runpytest_subprocess(f"--score-report={report_root}", *args)
    return scores_json(report_root)


@pytest.mark.slow
@pytest.mark.parametrize("attack", list(ATTACKS))
def test_with_an_expected_set_an_attack_scores_the_truth_or_no_answer(
    pytester: pytest.Pytester, attack: str
) -> None:
    hostile_repository(pytester, attack)
    ids = pytester.path.parent / "expected.json"
    ids.write_text(json.dumps(IDS))
    report = scored(pytester, f"--score-expected-tests={ids}", "--score-strict")
    value = report["scores"]["percent_passing_tests"]["value"]
    assert value in (TRUTH, "N"), report["integrity"]
    assert report["scores"]["all_tests_pass"]["value"] in ("I", "N")


@pytest.mark.slow
@pytest.mark.parametrize("attack", VISIBLE_WITHOUT_A_SET)
def test_without_a_set_a_score_above_the_truth_carries_a_signal(
    pytester: pytest.Pytester, attack: str
) -> None:
    hostile_repository(pytester, attack)
    report = scored(pytester)
    score = report["scores"]["percent_passing_tests"]
    assert score["value"] <= TRUTH or report["integrity"], score
    assert score["metadata"]["integrity"] == report["integrity"]


@pytest.mark.slow
def test_995_trivial_tests_do_not_dilute_two_failures_under_an_expected_set(
    pytester: pytest.Pytester,
) -> None:
    pytester.makepyfile(test_calc=HONEST)
    pytester.makepyfile(test_padding="".join(f"def test_{n}(): pass\n" for n in range(995)))
    ids = pytester.path.parent / "ids.txt"
    ids.write_text("\n".join(IDS))
    report = scored(pytester, f"--score-expected-tests={ids}")
    assert report["scores"]["percent_passing_tests"]["value"] == TRUTH
    assert report["tests"]["counts"]["extra"] == 995


def signal_kinds(report: dict[str, Any]) -> list[str]:
    return sorted({signal["kind"] for signal in report["integrity"]})


def test_a_rewriting_hookwrapper_is_seen_as_a_changed_outcome(pytester: pytest.Pytester) -> None:
    hostile_repository(pytester, "hookwrapper")
    report = scored(pytester)
    assert report["scores"]["percent_passing_tests"]["value"] == 100.0  # what it claims…
    assert signal_kinds(report) == ["outcome_changed", "outcome_hook"]  # …and what we saw
    changed = [s for s in report["integrity"] if s["kind"] == "outcome_changed"]
    assert changed[0]["detail"] == (
        f"{IDS[3]} call: pytest computed failed, the report says passed"
    )
    assert changed[0]["file"] == "conftest.py"


@pytest.mark.slow
def test_a_changed_outcome_is_seen_on_the_xdist_controller(pytester: pytest.Pytester) -> None:
    hostile_repository(pytester, "hookwrapper")
    report = scored(pytester, "-n", "2", "--score-strict")
    assert "outcome_changed" in signal_kinds(report)
    assert report["scores"]["percent_passing_tests"]["value"] == "N"


def test_reports_changed_after_they_were_logged_change_no_score(pytester: pytest.Pytester) -> None:
    # The tally folds the phases in at the end (issue 17): what it folds is what each report
    # said when it was logged, not what the terminal's list of reports says by then.
    pytester.makepyfile(test_calc=HONEST)
    pytester.makeconftest(
        """
        import pytest

        @pytest.hookimpl(tryfirst=True)
        def pytest_sessionfinish(session):
            reporter = session.config.pluginmanager.get_plugin("terminalreporter")
            for report in reporter.stats.pop("failed", []):
                report.outcome, report.longrepr = "passed", None
                reporter.stats.setdefault("passed", []).append(report)
        """
    )
    report = scored(pytester)
    assert report["scores"]["percent_passing_tests"]["value"] == TRUTH
    assert report["tests"]["counts"]["failed"] == 2


def test_a_report_made_outside_pytest_is_a_changed_outcome(pytester: pytest.Pytester) -> None:
    pytester.makepyfile(test_calc=HONEST)
    pytester.makeconftest(
        """
        import pytest

        def pytest_runtest_protocol(item, nextitem):
            item.ihook.pytest_runtest_logstart(nodeid=item.nodeid, location=item.location)
            report = pytest.TestReport(item.nodeid, item.location, {}, "passed", None, "call")
            item.ihook.pytest_runtest_logreport(report=report)
            return True
        """
    )
    report = scored(pytester)
    details = [s["detail"] for s in report["integrity"] if s["kind"] == "outcome_changed"]
    assert f"{IDS[3]} call: a passed report that pytest's makereport did not make" in details


def test_an_honest_makereport_recipe_gets_only_outcome_hook_and_keeps_its_score(
    pytester: pytest.Pytester,
) -> None:
    # The recipe "Making test result information available in fixtures" of pytest's docs.
    pytester.makeconftest(
        """
        import pytest

        phase_report_key = pytest.StashKey[dict]()

        @pytest.hookimpl(wrapper=True, tryfirst=True)
        def pytest_runtest_makereport(item, call):
            rep = yield
            item.stash.setdefault(phase_report_key, {})[rep.when] = rep
            return rep

        @pytest.fixture
        def something(request):
            yield
            report = request.node.stash[phase_report_key]
            if report["setup"].failed:
                print("setting up a test failed or skipped", request.node.nodeid)
        """
    )
    pytester.makepyfile(test_calc=HONEST.replace("():", "(something):"))
    report = scored(pytester, "--score-strict")
    assert signal_kinds(report) == ["outcome_hook"]
    assert report["integrity"] == [
        {
            "kind": "outcome_hook",
            "detail": "pytest_runtest_makereport implemented in conftest.py",
            "file": "conftest.py",
        }
    ]
    assert report["scores"]["percent_passing_tests"]["value"] == TRUTH


def test_selection_in_the_ini_is_a_signal_only_without_an_expected_set(
    pytester: pytest.Pytester,
) -> None:
    hostile_repository(pytester, "addopts -k")
    report = scored(pytester)
    assert report["integrity"] == [
        {"kind": "selection", "detail": "addopts: -k not fail", "file": "tox.ini"}
    ]
    ids = pytester.path.parent / "ids.txt"
    ids.write_text("\n".join(IDS))
    (old,) = (pytester.path.parent / f"{pytester.path.name}-scores").glob("scan_id=*")
    old.rename(pytester.path.parent / "old-report")
    assert scored(pytester, f"--score-expected-tests={ids}")["integrity"] == []


def test_pytest_exit_counts_the_tests_it_kept_from_running_and_fails_the_gate(
    pytester: pytest.Pytester,
) -> None:
    hostile_repository(pytester, "pytest.exit")
    report_root = pytester.path.parent / f"{pytester.path.name}-scores"
    result = pytester.runpytest_subprocess(f"--score-report={report_root}", "--score-fail-under=50")
    assert result.ret == 1  # pytest.exit(returncode=0) asked for 0
    report = scores_json(report_root)
    assert report["complete"] is False
    counts = report["tests"]["counts"]
    assert (counts["passed"], counts["failed"], counts["not_run"]) == (3, 2, 2)
    assert report["scores"]["all_tests_pass"]["value"] == "I"
    assert report["tests"]["not_run"] == [IDS[3], IDS[4]]
    (ended,) = [s for s in report["integrity"] if s["kind"] == "early_end"]
    assert ended["detail"] == (
        "pytest.exit('all done') called at conftest.py:5; 2 collected test(s) did not run"
    )
    assert ended["file"] == "conftest.py"


@pytest.mark.parametrize("stop", [["-x"], ["--maxfail=1"]])
def test_tests_a_stopped_session_never_ran_count_as_failed(
    pytester: pytest.Pytester, stop: list[str]
) -> None:
    pytester.makepyfile(test_calc=HONEST.replace("def test_fail_one", "def test_aaa_fail_one"))
    report = scored(pytester, *stop)
    counts = report["tests"]["counts"]
    assert (counts["passed"], counts["failed"], counts["not_run"]) == (3, 2, 1)
    assert report["complete"] is True  # pytest ended it as asked
    (ended,) = [s for s in report["integrity"] if s["kind"] == "early_end"]
    assert ended["detail"].endswith("1 collected test(s) did not run")


def test_a_patched_tally_is_seen_and_strict_withholds_the_scores(
    pytester: pytest.Pytester,
) -> None:
    hostile_repository(pytester, "patched tally")
    report = scored(pytester, "--score-strict")
    (patched,) = [s for s in report["integrity"] if s["kind"] == "patched"]
    assert patched == {
        "kind": "patched",
        "detail": "OutcomeTally.record_phase was replaced",
        "file": "conftest.py",
    }
    for name in ("all_tests_pass", "percent_passing_tests", "percent_failing_tests"):
        score = report["scores"][name]
        assert score["value"] == "N"
        assert score["explanation"].startswith("not scored: integrity signal patched")


def test_plugin_disabled_in_the_ini_is_seen_when_the_plugin_is_loaded_anyway(
    pytester: pytest.Pytester,
) -> None:
    pytester.makepyfile(test_calc=HONEST)
    pytester.makeini("[pytest]\naddopts = -p no:scoring\n")
    report = scored(pytester, "-p", "pytest_scoring.plugin", "--score-strict=plugin_disabled")
    assert report["integrity"] == [
        {"kind": "plugin_disabled", "detail": "addopts: -p no:scoring", "file": "tox.ini"}
    ]
    assert report["scores"]["percent_passing_tests"]["value"] == "N"


def test_the_junit_route_reads_the_signals_of_the_repositorys_files(
    pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch
) -> None:
    pytester.makepyfile(test_calc=HONEST)
    pytester.makeini('[pytest]\naddopts = -p no:scoring -k "not fail"\n')
    pytester.makeconftest(REWRITES_FAILURES)
    pytester.runpytest_subprocess("--junitxml=session.xml")
    monkeypatch.chdir(pytester.path)
    result = CliRunner().invoke(main, ["junit", "session.xml", "--strict"])
    assert result.exit_code == 0, result.output
    report = scores_json(pytester.path / "scores")
    assert signal_kinds(report) == ["outcome_hook", "plugin_disabled", "selection"]
    assert report["scores"]["all_tests_pass"]["value"] == "N"


#: The kinds that only inform, as the documentation lists them.
INFORMS = {"outcome_hook", "selection", "tests_modified"}
#: The default strict set, as the documentation lists it.
DEFAULT_SET = {
    "outcome_changed",
    "patched",
    "plugin_disabled",
    "early_end",
    "tripwire",
    "stream_forged",
    "exit_mismatch",
    "id_collision",
    "junit_conflict",
    "interpreter_modified",
}


@pytest.mark.parametrize(
    ("text", "kinds"),
    [
        ("none", set()),
        ("", DEFAULT_SET | {"containment"}),
        ("default", DEFAULT_SET),
        ("all", set(pytest_scoring.core.signals.KINDS) - INFORMS),
        ("patched, tripwire", {"patched", "tripwire"}),
        ("default,containment", DEFAULT_SET | {"containment"}),
        ("none,patched", {"patched"}),
    ],
)
def test_strict_names_none_default_all_or_kinds(text: str, kinds: set[str]) -> None:
    assert pytest_scoring.core.signals.parse_strict(text).kinds == kinds


def test_only_runs_default_makes_containment_strict_and_only_as_root() -> None:
    signals = pytest_scoring.core.signals
    assert "containment" in signals.DEFAULT_STRICT.for_run(as_root=True).kinds
    assert "containment" not in signals.DEFAULT_STRICT.for_run(as_root=False).kinds
    named = signals.parse_strict("default")
    assert "containment" not in named.for_run(as_root=True).kinds


@pytest.mark.parametrize("kind", ["outcome_hook", "selection", "tests_modified"])
def test_a_kind_that_only_informs_cannot_be_made_strict(kind: str) -> None:
    with pytest.raises(ValueError, match=f"'{kind}' only informs"):
        pytest_scoring.core.signals.parse_strict(f"patched,{kind}")


def test_an_unknown_strict_kind_is_a_usage_error(pytester: pytest.Pytester) -> None:
    result = pytester.runpytest("--score-strict=sneaky")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines(["ERROR: --score-strict: 'sneaky' is not a signal kind *"])


@pytest.mark.slow
@pytest.mark.parametrize("layout", [".venv", ".tox/py311"])
def test_pytests_own_files_in_an_environment_inside_the_repository_are_not_outcome_hooks(
    tmp_path: Path, layout: str
) -> None:
    # The README's .venv layout and tox's .tox/…: pytest's own plugins live in the repository's
    # folder, and implement nearly every outcome hook. They are the interpreter's, not the
    # repository's.
    repo = tmp_path / "repo"
    (repo / "tests").mkdir(parents=True)
    (repo / "tests" / "test_calc.py").write_text(textwrap.dedent(HONEST))
    environment = repo / layout
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", environment], check=True)
    version = f"python{sys.version_info.major}.{sys.version_info.minor}"
    packages = environment / "lib" / version / "site-packages"
    for module in (_pytest, pytest, pluggy):
        folder = Path(str(module.__file__)).parent
        shutil.copytree(folder, packages / folder.name, ignore=shutil.ignore_patterns("*.pyc"))
    # What else the session imports (the checkout, the evaluator's dependencies), after them.
    checkout = Path(pytest_scoring.__file__).parents[1]
    (packages / "evaluator.pth").write_text("\n".join([str(checkout), *site.getsitepackages()]))
    report_root = tmp_path / "scores"
    scored = ["--score", f"--score-report={report_root}"]
    ran = subprocess.run(
        [environment / "bin" / "python", "-m", "pytest", "-p", "no:cacheprovider", *scored],
        cwd=repo,
        capture_output=True,
        text=True,
        env={"PATH": "/usr/bin:/bin"},
        check=False,
    )
    assert ran.returncode == 1, ran.stdout + ran.stderr
    report = scores_json(report_root)
    assert report["integrity"] == []
    assert report["scores"]["percent_passing_tests"]["value"] == TRUTH
