"""Options and ini settings: the exit status gate, usage errors, precedence."""

from __future__ import annotations

import json
import sqlite3
import textwrap

import pytest

HALF_PASSING = """
    def test_passes():
        pass

    def test_fails():
        assert False
"""


@pytest.mark.parametrize(
    ("threshold", "expected"),
    [("50", pytest.ExitCode.TESTS_FAILED), ("100", pytest.ExitCode.TESTS_FAILED)],
)
def test_fail_under_keeps_pytests_own_failure_status(
    pytester: pytest.Pytester, threshold: str, expected: pytest.ExitCode
) -> None:
    pytester.makepyfile(HALF_PASSING)
    assert pytester.runpytest(f"--score-fail-under={threshold}").ret == expected


def test_fail_under_says_by_how_much_the_pass_rate_fell_short(pytester: pytest.Pytester) -> None:
    pytester.makepyfile(HALF_PASSING)
    result = pytester.runpytest("--score-fail-under=60")
    result.stdout.fnmatch_lines(["FAIL: 50% of tests pass, below --score-fail-under=60"])


def test_fail_under_passes_when_the_rate_is_reached(pytester: pytest.Pytester) -> None:
    pytester.makepyfile("def test_one(): pass")
    result = pytester.runpytest("--score-fail-under=100")
    assert result.ret == pytest.ExitCode.OK
    assert (pytester.path / "scores").is_dir()


def test_fail_under_fails_a_session_without_tests_even_when_it_is_allowed(
    pytester: pytest.Pytester,
) -> None:
    pytester.makepyfile("x = 1")
    assert pytester.runpytest("--score-fail-under=1").ret == pytest.ExitCode.NO_TESTS_COLLECTED
    allowed = pytester.runpytest("--score-fail-under=1", "--score-allow-empty")
    assert allowed.ret == pytest.ExitCode.TESTS_FAILED


@pytest.mark.parametrize(
    ("value", "message"),
    [
        ("lots", "'lots' is not a number"),
        ("101", "'101' is not a percentage from 0 to 100"),
        ("nan", "'nan' is not a percentage"),
    ],
)
def test_a_bad_fail_under_value_is_a_usage_error(
    pytester: pytest.Pytester, value: str, message: str
) -> None:
    pytester.makepyfile("def test_one(): pass")
    result = pytester.runpytest(f"--score-fail-under={value}")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines([f"*--score-fail-under*{message}*"])


def test_a_bad_fail_under_in_the_ini_file_is_a_usage_error(pytester: pytest.Pytester) -> None:
    pytester.makeini("[pytest]\nscore_fail_under = most\n")
    pytester.makepyfile("def test_one(): pass")
    result = pytester.runpytest()
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines(["*score_fail_under (ini): 'most' is not a number*"])


def test_report_alone_turns_scoring_on_and_creates_missing_parents(
    pytester: pytest.Pytester,
) -> None:
    pytester.makepyfile("def test_one(): pass")
    pytester.runpytest("--score-report=out/deeper/reports").assert_outcomes(passed=1)
    assert len(list((pytester.path / "out/deeper/reports").glob("scan_id=*"))) == 1


def test_the_command_line_wins_over_the_repositorys_ini(pytester: pytest.Pytester) -> None:
    pytester.makeini("[pytest]\nscore = true\nscore_report = from-ini\n")
    pytester.makepyfile("def test_one(): pass")
    pytester.runpytest("--score-report=from-cli")
    assert list((pytester.path / "from-cli").glob("scan_id=*"))
    assert not (pytester.path / "from-ini").exists()


def test_ini_settings_turn_scoring_on(pytester: pytest.Pytester) -> None:
    pytester.makeini("[pytest]\nscore = true\nscore_report = from-ini\n")
    pytester.makepyfile("def test_one(): pass")
    pytester.runpytest()
    assert list((pytester.path / "from-ini").glob("scan_id=*"))


def test_an_unwritable_report_root_is_a_usage_error_before_any_test_runs(
    pytester: pytest.Pytester,
) -> None:
    pytester.makepyfile("def test_one(): open('ran', 'w').close()")
    (pytester.path / "blocked").write_text("a file where the report root should be")
    result = pytester.runpytest("--score-report=blocked/reports")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines(["ERROR: --score-report: cannot write the report under *blocked*"])
    assert not (pytester.path / "ran").exists()


def test_a_report_root_lost_during_the_session_keeps_the_test_results(
    pytester: pytest.Pytester,
) -> None:
    pytester.makepyfile(
        """
        import pathlib, shutil

        def test_replaces_the_report_root_with_a_file():
            shutil.rmtree("scores", ignore_errors=True)
            pathlib.Path("scores").write_text("not a folder")
        """
    )
    result = pytester.runpytest("--score")
    result.assert_outcomes(passed=1)
    assert result.ret == pytest.ExitCode.OK
    result.stdout.fnmatch_lines(["score report NOT written: cannot write the report under*"])


def test_without_scoring_options_the_plugin_does_nothing(pytester: pytest.Pytester) -> None:
    pytester.makepyfile("def test_one(): pass")
    result = pytester.runpytest()
    result.assert_outcomes(passed=1)
    assert not list(pytester.path.glob("scores/scan_id=*"))
    result.stdout.no_fnmatch_line("*- scores -*")


def test_the_plugin_can_be_disabled(pytester: pytest.Pytester) -> None:
    pytester.makepyfile("def test_one(): pass")
    result = pytester.runpytest("-p", "no:scoring", "--score")
    assert result.ret == pytest.ExitCode.USAGE_ERROR


#: A repository whose ini file names its scoring files relative to itself, and whose tests
#: live in ``tests/`` (where a user may ``cd`` before running pytest).
PATHS_INI = """
    [pytest]
    score_config = scoring/scorers.yaml
    score_selector = @scoring/selector.json
    score_report = reports
"""
PROMOTES_ALICE = """
    import sqlite3
    from pathlib import Path

    def test_promote():
        with sqlite3.connect(Path(__file__).parents[1] / "app.db") as db:
            db.execute("UPDATE users SET role = 'admin'")
"""


@pytest.fixture
def paths_repo(pytester: pytest.Pytester) -> pytest.Pytester:
    pytester.makeini(PATHS_INI)
    (pytester.path / "scoring").mkdir()
    (pytester.path / "scoring" / "scorers.yaml").write_text(
        "scorers:\n  - type: percent_passing_tests\n  - type: db_change\n"
    )
    (pytester.path / "scoring" / "selector.json").write_text(
        json.dumps({"rows": {"changed": {"where": {"role": "admin"}}}})
    )
    with sqlite3.connect(pytester.path / "app.db") as db:
        db.execute("CREATE TABLE users (id INTEGER PRIMARY KEY, role TEXT)")
        db.execute("INSERT INTO users VALUES (1, 'user')")
    db.close()
    (pytester.path / "tests").mkdir()
    (pytester.path / "tests" / "test_app.py").write_text(textwrap.dedent(PROMOTES_ALICE))
    return pytester


@pytest.mark.parametrize("start_in", [".", "tests"])
def test_ini_paths_resolve_against_the_ini_files_folder_wherever_pytest_starts(
    paths_repo: pytest.Pytester, monkeypatch: pytest.MonkeyPatch, start_in: str
) -> None:
    monkeypatch.chdir(paths_repo.path / start_in)
    result = paths_repo.runpytest("-p", "no:cacheprovider")
    result.assert_outcomes(passed=1)
    (scores,) = (paths_repo.path / "reports").glob("scan_id=*/scores.json")
    content = json.loads(scores.read_text())["scores"]
    assert set(content) == {"percent_passing_tests", "db_change"}  # the configured scorers
    assert content["db_change"]["value"] == "C"
    assert content["db_change"]["metadata"]["selector"] == {
        "rows": {"changed": {"where": {"role": "admin"}}}
    }
    assert not (paths_repo.path / "tests" / "reports").exists()


def test_an_override_ini_path_resolves_against_the_ini_files_folder_too(
    paths_repo: pytest.Pytester, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(paths_repo.path / "tests")
    paths_repo.runpytest("-o", "score_report=elsewhere", "-p", "no:cacheprovider")
    assert list((paths_repo.path / "elsewhere").glob("scan_id=*"))


def test_command_line_paths_resolve_against_the_folder_pytest_starts_in(
    paths_repo: pytest.Pytester, monkeypatch: pytest.MonkeyPatch
) -> None:
    tests = paths_repo.path / "tests"
    (tests / "mine.json").write_text(json.dumps({"rows": {"changed": {"has_one": "role"}}}))
    monkeypatch.chdir(tests)
    paths_repo.runpytest(
        "--score-report=here", "--score-selector=@mine.json", "-p", "no:cacheprovider"
    ).assert_outcomes(passed=1)
    (scores,) = (tests / "here").glob("scan_id=*/scores.json")
    selector = json.loads(scores.read_text())["scores"]["db_change"]["metadata"]["selector"]
    assert selector == {"rows": {"changed": {"has_one": "role"}}}


def test_the_default_report_root_is_scores_in_the_rootdir_wherever_pytest_starts(
    pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch
) -> None:
    pytester.makeini("[pytest]\n")
    (pytester.path / "tests").mkdir()
    (pytester.path / "tests" / "test_one.py").write_text("def test_one(): pass\n")
    monkeypatch.chdir(pytester.path / "tests")
    pytester.runpytest("--score", "-p", "no:cacheprovider").assert_outcomes(passed=1)
    assert list((pytester.path / "scores").glob("scan_id=*"))
    assert not (pytester.path / "tests" / "scores").exists()


def test_a_selector_file_the_ini_names_is_looked_for_beside_the_ini(
    pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch
) -> None:
    pytester.makeini("[pytest]\nscore_selector = @missing.json\n")
    (pytester.path / "tests").mkdir()
    monkeypatch.chdir(pytester.path / "tests")
    result = pytester.runpytest()
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines(
        [f"*score_selector (ini): {pytester.path / 'missing.json'}: cannot read: *"]
    )


def test_an_excluded_folder_in_the_ini_resolves_against_the_ini_files_folder(
    pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch
) -> None:
    pytester.makeini("[pytest]\nscore_db_exclude = vendor\n")
    (pytester.path / "vendor").mkdir()
    with sqlite3.connect(pytester.path / "vendor" / "cache.db") as db:
        db.execute("CREATE TABLE t (x)")
    db.close()
    (pytester.path / "tests").mkdir()
    (pytester.path / "tests" / "test_cache.py").write_text(
        "import sqlite3\n"
        "def test_fill():\n"
        f"    with sqlite3.connect({str(pytester.path / 'vendor' / 'cache.db')!r}) as db:\n"
        "        db.execute('INSERT INTO t VALUES (1)')\n"
    )
    monkeypatch.chdir(pytester.path / "tests")
    pytester.runpytest("--score-db-diff", "-p", "no:cacheprovider").assert_outcomes(passed=1)
    (scores,) = (pytester.path / "scores").glob("scan_id=*/scores.json")
    metadata = json.loads(scores.read_text())["scores"]["db_change"]["metadata"]
    assert metadata["counts"]["databases"] == 0
    assert metadata["unsearched_folders"] == ["vendor"]


def test_a_test_pattern_without_a_reference_is_a_usage_error(pytester: pytest.Pytester) -> None:
    pytester.makepyfile("def test_one(): pass")
    result = pytester.runpytest("--score-test-pattern=tests/*.py")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines(
        ["ERROR: --score-test-pattern: only db_diff_change copies test files, and none runs; *"]
    )
    assert not list(pytester.path.glob("scores/scan_id=*"))


@pytest.mark.parametrize(
    "option", ["--score-db-pattern=*.sqlite", "--score-db-reset", '--score-selector={"rows": {}}']
)
def test_a_database_option_alone_turns_on_db_change(pytester: pytest.Pytester, option: str) -> None:
    import contextlib
    import sqlite3

    with contextlib.closing(sqlite3.connect(pytester.path / "app.sqlite")) as db, db:
        db.execute("CREATE TABLE t (x)")
    pytester.makepyfile(
        """
        import sqlite3

        def test_write():
            with sqlite3.connect("app.sqlite") as db:
                db.execute("INSERT INTO t VALUES (1)")
            db.close()
        """
    )
    result = pytester.runpytest(option, "-p", "no:cacheprovider")
    result.assert_outcomes(passed=1)
    result.stdout.fnmatch_lines(["db_change: C *1 row added*"])


def test_db_reset_alone_restores_the_databases_on_every_run(pytester: pytest.Pytester) -> None:
    import contextlib
    import sqlite3

    with contextlib.closing(sqlite3.connect(pytester.path / "app.db")) as db, db:
        db.execute("CREATE TABLE t (x)")
    pytester.makepyfile(
        """
        import sqlite3

        def test_write():
            with sqlite3.connect("app.db") as db:
                assert db.execute("SELECT count(*) FROM t").fetchone() == (0,)
                db.execute("INSERT INTO t VALUES (1)")
            db.close()
        """
    )
    for _ in range(2):
        pytester.runpytest("--score-db-reset", "-p", "no:cacheprovider").assert_outcomes(passed=1)


def test_a_selector_with_a_configuration_lacking_a_database_scorer_adds_db_change(
    pytester: pytest.Pytester,
) -> None:
    pytester.makepyfile("def test_one(): pass")
    pytester.makefile(".yaml", scores="scorers:\n  - type: all_tests_pass\n")
    result = pytester.runpytest("--score-config=scores.yaml", '--score-selector={"rows": {}}')
    result.stdout.fnmatch_lines(["all_tests_pass: C *", "db_change: I *"])


@pytest.mark.parametrize(
    ("option", "message"),
    [
        ("--score-selector-timeout=0", "'0' is not a positive number of seconds"),
        ("--score-selector-timeout=soon", "'soon' is not a number of seconds"),
    ],
)
def test_a_bad_selector_timeout_is_a_usage_error(
    pytester: pytest.Pytester, option: str, message: str
) -> None:
    pytester.makepyfile("def test_one(): pass")
    result = pytester.runpytest("--score", option)
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    assert message in result.stderr.str()
