"""``pytest-scoring run`` against hostile repositories: each attack scores the truth, or "N".

Every test builds a small repository written to game the score, scores it with ``run`` (in
this process, or as a process of its own when it must receive a signal) and checks what the
evaluator saw. Synchronisation is by FIFOs and files the hostile code writes, never by sleeps.
"""

from __future__ import annotations

import json
import signal
import sqlite3
import textwrap
import uuid
from pathlib import Path

import pytest
from processes import running
from runs import AS_EVALUATOR
from runs import GENEROUS
from runs import TAMPERING_ONLY
from runs import make_fifo
from runs import only_report
from runs import run_cli
from runs import scored_session
from runs import scores_json
from runs import shown_report
from runs import start_run
from runs import wait_for_ready

pytestmark = pytest.mark.slow

PASSWORD_CHANGED = json.dumps({"rows": {"changed": {"has_one": ["password"]}}})
#: As root, run the children as root too: these repositories write to the test's own folders,
#: which are closed to other users (a run as root otherwise uses "nobody" where it can).


def write(path: Path, text: str) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(textwrap.dedent(text))
    return path


def make_db(path: Path) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    with sqlite3.connect(path) as db:
        db.execute("CREATE TABLE users (id INTEGER PRIMARY KEY, name TEXT, password TEXT)")
        db.execute("INSERT INTO users (name, password) VALUES ('admin', 'h0'), ('bob', 'h1')")
    db.close()
    return path


@pytest.fixture
def repo(tmp_path: Path) -> Path:
    """A repository whose name no other folder on the machine has (processes are found by it)."""
    folder = tmp_path / f"repo-{uuid.uuid4().hex}"
    make_db(folder / "app.db")
    return folder


def test_a_forged_report_folder_with_a_future_date_is_not_what_run_shows(
    repo: Path, tmp_path: Path
) -> None:
    report_root = tmp_path / "reports"
    write(
        repo / "test_forge.py",
        f"""
        import json, os, time
        from pathlib import Path

        def test_forges_a_perfect_report():
            forged = Path({str(report_root)!r}) / "scan_id=FORGED"
            forged.mkdir(parents=True, exist_ok=True)
            (forged / "scores.json").write_text(json.dumps({{"scores": {{}}, "complete": True}}))
            future = time.time() + 86400
            os.utime(forged, (future, future))
            assert False, "this test fails"
        """,
    )
    result = run_cli(repo, "--report", report_root, *AS_EVALUATOR)
    shown = shown_report(result.output)
    assert (report_root / "scan_id=FORGED").exists(), "the forgery was made"
    assert shown.name != "scan_id=FORGED"
    assert scores_json(shown)["tests"]["counts"]["failed"] == 1


def test_two_runs_into_one_root_each_show_their_own_report(tmp_path: Path) -> None:
    passing = write(tmp_path / "passing" / "test_ok.py", "def test_ok():\n    pass\n").parent
    failing = write(tmp_path / "failing" / "test_ko.py", "def test_ko():\n    assert 0\n").parent
    report_root = tmp_path / "reports"
    runs = {repo: start_run(repo, "--report", report_root) for repo in (passing, failing)}
    outputs = {repo: run.communicate(timeout=GENEROUS)[0] for repo, run in runs.items()}
    for repo, expected in ((passing, "passed"), (failing, "failed")):
        report = scores_json(shown_report(outputs[repo]))
        assert report["repository"] == str(repo)
        assert report["tests"]["counts"][expected] == 1
        assert report["tests"]["counts"]["total"] == 1
    assert len(list(report_root.glob("scan_id=*"))) == 2


#: Code run at the end of the session that hides the database, with a daemon that would
#: restore it a moment later, after an evaluator that looked too early.
HIDE_AT_THE_END = {
    "renamed": """
        os.rename(DB, AWAY)
        restore(f"os.rename({str(AWAY)!r}, {str(DB)!r})")
    """,
    "corrupted": """
        shutil.copyfile(DB, AWAY)
        with open(DB, "r+b") as db:
            db.write(b"garbage!" * 16)
        restore(f"shutil.copyfile({str(AWAY)!r}, {str(DB)!r})")
    """,
    "swapped for a symlink out": """
        os.rename(DB, AWAY)
        os.symlink(AWAY, DB)
        restore(f"os.remove({str(DB)!r}); os.rename({str(AWAY)!r}, {str(DB)!r})")
    """,
    "replaced by a folder": """
        os.rename(DB, AWAY)
        os.mkdir(DB)
        restore(f"os.rmdir({str(DB)!r}); os.rename({str(AWAY)!r}, {str(DB)!r})")
    """,
    "locked": """
        lock = f"import sqlite3, threading; db = sqlite3.connect({str(DB)!r}); "
        lock += "db.execute('BEGIN EXCLUSIVE'); threading.Event().wait()"
        subprocess.Popen([sys.executable, "-c", lock], start_new_session=True)
    """,
}
HIDING_CONFTEST = """
import os, shutil, sqlite3, subprocess, sys
from pathlib import Path

DB = Path(__file__).with_name("app.db")
AWAY = Path(os.environ.get("TMPDIR", "/tmp")) / "hidden.bin"  # outside the repository

def restore(code):
    # A daemon that puts everything back once the evaluator has looked (long after the
    # session ends, however loaded the machine: sooner, it would put back the truth).
    script = f"import os, shutil, time; time.sleep(60); {code}"
    subprocess.Popen([sys.executable, "-c", script], start_new_session=True)

def pytest_unconfigure(config):
    with sqlite3.connect(DB) as db:
        db.execute("UPDATE users SET password = 'pwned' WHERE name = 'admin'")
    db.close()
"""


@pytest.mark.parametrize("hide", sorted(HIDE_AT_THE_END))
def test_a_database_hidden_at_the_end_of_the_session_scores_the_truth_or_no_answer(
    repo: Path, tmp_path: Path, hide: str
) -> None:
    hiding = textwrap.indent(textwrap.dedent(HIDE_AT_THE_END[hide]), "    ")
    (repo / "conftest.py").write_text(HIDING_CONFTEST + hiding)
    write(repo / "test_ok.py", "def test_ok():\n    pass\n")
    result = run_cli(repo, "--report", tmp_path / "out", "--selector", PASSWORD_CHANGED)
    score = only_report(tmp_path / "out")["scores"]["db_change"]
    assert score["value"] == ("C" if hide == "locked" else "N"), result.output
    if score["value"] == "N":
        assert "cannot tell what the session did" in score["explanation"]


def test_a_change_made_after_the_session_is_seen(repo: Path, tmp_path: Path) -> None:
    write(
        repo / "conftest.py",
        """
        import atexit, sqlite3
        from pathlib import Path

        def change():
            with sqlite3.connect(Path(__file__).with_name("app.db")) as db:
                db.execute("UPDATE users SET password = 'pwned' WHERE name = 'admin'")
            db.close()

        def pytest_unconfigure(config):
            atexit.register(change)
        """,
    )
    write(repo / "test_ok.py", "def test_ok():\n    pass\n")
    run_cli(repo, "--report", tmp_path / "out", "--selector", PASSWORD_CHANGED)
    assert only_report(tmp_path / "out")["scores"]["db_change"]["value"] == "C"


REFERENCE_APP = """
    import sqlite3
    from pathlib import Path

    def login(name):
        with sqlite3.connect(Path(__file__).with_name("app.db")) as db:
            db.execute("SELECT * FROM users WHERE name = ?", (name,))
"""
ATTACK = """
            db.execute("UPDATE users SET password = 'pwned' WHERE name = 'admin'")
"""
TESTS = """
    import sys
    from pathlib import Path

    sys.path.insert(0, str(Path(__file__).parents[1]))
    import app

    def test_login():
        app.login("bob")
"""


def make_app(folder: Path, app: str) -> Path:
    make_db(folder / "app.db")
    write(folder / "app.py", app)
    write(folder / "tests" / "test_app.py", TESTS)
    return folder


def test_a_conftest_that_copies_its_attack_into_the_reference_does_not_hide_it(
    tmp_path: Path,
) -> None:
    reference = make_app(tmp_path / "reference", REFERENCE_APP)
    attack = REFERENCE_APP + ATTACK
    repo = make_app(tmp_path / "repo", attack)
    write(
        repo / "conftest.py",
        f"""
        from pathlib import Path

        # The reference gets the same change, so that the diff-of-diffs would show nothing.
        attack = Path(__file__).with_name("app.py").read_text()
        try:
            Path({str(reference / "app.py")!r}).write_text(attack)
        except OSError:
            pass
        """,
    )
    result = run_cli(
        repo,
        "--reference",
        reference,
        "--report",
        tmp_path / "out",
        "--selector",
        PASSWORD_CHANGED,
        *AS_EVALUATOR,
    )
    scores = only_report(tmp_path / "out")["scores"]
    assert scores["db_diff_change"]["value"] == "C", result.output


def test_processes_the_tests_start_do_not_outlive_run_nor_touch_its_report(
    repo: Path, tmp_path: Path
) -> None:
    pidfile = tmp_path / "daemon.pid"
    report_root = tmp_path / "reports"
    daemon = textwrap.dedent(
        f"""
        import os, time
        from pathlib import Path
        if os.fork():
            os._exit(0)
        os.setsid()
        Path({str(pidfile)!r}).write_text(str(os.getpid()))
        while True:  # rewrite every report it can find
            for scores in Path({str(report_root)!r}).glob("scan_id=*/scores.json"):
                scores.write_text("{{}}")
            time.sleep(0.05)
        """
    )
    write(
        repo / "test_daemon.py",
        f"""
        import subprocess, sys, time
        from pathlib import Path

        def test_leaves_a_daemon():
            subprocess.Popen([sys.executable, "-c", {daemon!r}]).wait()
            while not Path({str(pidfile)!r}).exists():
                time.sleep(0.01)
        """,
    )
    result = run_cli(repo, "--report", report_root, *AS_EVALUATOR)
    assert result.exit_code == 0, result.output
    assert not running(int(pidfile.read_text()))
    assert scores_json(shown_report(result.output))["tests"]["counts"]["passed"] == 1


def test_the_reset_store_of_one_repository_never_restores_another(tmp_path: Path) -> None:
    report_root = tmp_path / "reports"
    for letter in "AB":
        repo = tmp_path / letter / "repo"
        make_db(repo / "app.db")
        with sqlite3.connect(repo / "app.db") as db:
            db.execute("UPDATE users SET name = ? WHERE id = 1", (letter,))
        db.close()
        write(
            repo / "test_data.py",
            f"""
            import sqlite3
            from pathlib import Path

            def test_my_own_data():
                db = sqlite3.connect(Path(__file__).with_name("app.db"))
                assert db.execute("SELECT name FROM users WHERE id = 1").fetchone() == ({letter!r},)
            """,
        )
        result = run_cli(repo, "--report", report_root, "--", "--score-db-diff", "--score-db-reset")
        report = scores_json(shown_report(result.output))
        assert report["tests"]["counts"]["passed"] == 1, result.output
    assert len(list((report_root / ".db-reset").iterdir())) == 2


BLOCKS_UNTIL_INTERRUPTED = """
    from pathlib import Path

    def test_first():
        pass

    def test_blocks():
        Path({ready!r}).write_text("ready")
        Path({never!r}).read_text()

    def test_never_runs():
        pass
"""


def test_ctrl_c_reaches_pytest_and_leaves_an_incomplete_report(repo: Path, tmp_path: Path) -> None:
    ready, never = make_fifo(tmp_path / "ready"), make_fifo(tmp_path / "never")
    write(
        repo / "test_wait.py", BLOCKS_UNTIL_INTERRUPTED.format(ready=str(ready), never=str(never))
    )
    run = start_run(repo, "--report", tmp_path / "out", *AS_EVALUATOR)
    wait_for_ready(ready)
    run.send_signal(signal.SIGINT)
    output, _ = run.communicate(timeout=GENEROUS)
    assert run.returncode == 130, output
    report = only_report(tmp_path / "out")
    assert report["complete"] is False
    assert report["run"]["exit_code"] == 2, "pytest ended its session: SIGINT reached it"
    # The evaluator's Ctrl-C ended it: the early end informs, the scores stay numbers.
    assert "early_end" in {signal["kind"] for signal in report["integrity"]}
    assert isinstance(report["scores"]["percent_passing_tests"]["value"], float)
    assert not {"stream_forged", "exit_mismatch"} & {s["kind"] for s in report["integrity"]}
    outcomes = {test["nodeid"]: test["outcome"] for test in report["tests"]["tests"]}
    assert outcomes["test_wait.py::test_first"] == "passed"
    assert "test_wait.py::test_never_runs" not in outcomes


STUBBORN = {
    "ignores SIGINT": """
        import signal, threading

        def test_stubborn():
            signal.signal(signal.SIGINT, signal.SIG_IGN)
            threading.Event().wait()
    """,
    "hangs in teardown": """
        import threading
        import pytest

        @pytest.fixture
        def stuck():
            yield
            threading.Event().wait()

        def test_stubborn(stuck):
            threading.Event().wait()
    """,
    "starts a fork storm": """
        import os, threading

        def test_stubborn():
            for _ in range(20):
                if os.fork() == 0:
                    while True:  # a process that keeps replacing itself, in new sessions
                        if os.fork():
                            os._exit(0)
                        os.setsid()
            threading.Event().wait()
    """,
}


@pytest.mark.parametrize("stubborn", sorted(STUBBORN))
def test_the_timeout_holds_whatever_the_child_does(
    repo: Path, tmp_path: Path, stubborn: str
) -> None:
    write(repo / "test_stubborn.py", STUBBORN[stubborn])
    write(repo / "test_first.py", "def test_first():\n    pass\n")
    result = run_cli(repo, "--report", tmp_path / "out", "--timeout", "8")
    assert result.exit_code == 0, result.output
    assert "timed out after 8 s" in result.output
    report = only_report(tmp_path / "out")
    assert report["complete"] is False
    assert report["run"]["timed_out"] is True
    survivors = [
        pid for pid in Path("/proc").iterdir() if pid.name.isdigit() and _runs_in(pid, repo.name)
    ]
    assert survivors == []


def _runs_in(proc: Path, marker: str) -> bool:
    try:
        return marker in (proc / "cwd").resolve().as_posix() and running(int(proc.name))
    except OSError:
        return False


BLOCKING_SCORER = """
    from pathlib import Path

    from pytest_scoring.core.score import make_score


    class Blocking:
        type = name = "blocking"
        metrics = ()

        def score(self, context):
            Path({ready!r}).write_text("scoring")
            Path({never!r}).read_text()  # no writer ever comes
            return make_score("C", self.type)


    def pytest_scoring_scorers(config):
        return {{"blocking": Blocking}}
"""
BLOCKING_CONFIG = """
    scorers:
      - type: percent_passing_tests
      - type: blocking
      - type: all_tests_pass
"""


@pytest.fixture
def blocking_scorer(repo: Path, tmp_path: Path) -> tuple[Path, Path, Path]:
    """A ``--plugin`` file whose scorer blocks on a FIFO, and a configuration that uses it."""
    write(repo / "test_ok.py", "def test_ok():\n    pass\n")
    ready, never = make_fifo(tmp_path / "ready"), make_fifo(tmp_path / "never")
    plugin = write(
        tmp_path / "blocking_plugin.py",
        BLOCKING_SCORER.format(ready=str(ready), never=str(never)),
    )
    return plugin, write(tmp_path / "scorers.yaml", BLOCKING_CONFIG), ready


def test_ctrl_c_while_scoring_still_writes_an_incomplete_report(
    repo: Path, tmp_path: Path, blocking_scorer: tuple[Path, Path, Path]
) -> None:
    plugin, config, ready = blocking_scorer
    args = ("--report", tmp_path / "out", "--plugin", plugin, "--config", config, TAMPERING_ONLY)
    run = start_run(repo, *args)
    wait_for_ready(ready)
    run.send_signal(signal.SIGINT)
    output, _ = run.communicate(timeout=GENEROUS)
    assert run.returncode == 130, output
    report = only_report(tmp_path / "out")
    assert report["complete"] is False
    scores = report["scores"]
    assert scores["percent_passing_tests"]["value"] == 100
    assert [scores[name]["value"] for name in ("blocking", "all_tests_pass")] == ["N", "N"]
    assert "interrupted" in scores["blocking"]["explanation"]


def test_the_timeout_while_scoring_still_writes_an_incomplete_report(
    repo: Path, tmp_path: Path, blocking_scorer: tuple[Path, Path, Path]
) -> None:
    plugin, config, _ = blocking_scorer
    result = run_cli(
        repo, "--report", tmp_path / "out", "--plugin", plugin, "--config", config, "--timeout", "5"
    )
    assert result.exit_code == 0, result.output
    report = only_report(tmp_path / "out")
    assert report["complete"] is False
    assert report["scores"]["blocking"]["value"] == "N"
    assert "past the timeout" in report["scores"]["blocking"]["explanation"]


def test_a_repository_that_rewrites_the_evaluators_snapshot_scores_no_answer(
    repo: Path, tmp_path: Path
) -> None:
    # Where the children run as the evaluator's own user, they can find the private area.
    write(
        repo / "test_tamper.py",
        """
        import os, sqlite3
        from pathlib import Path

        def test_rewrites_the_snapshot():
            area = Path(os.environ["TMPDIR"]).parent
            for snapshot in area.glob("snapshots-*/.db-snapshots-*/before/app.db"):
                with sqlite3.connect(snapshot) as db:
                    db.execute("UPDATE users SET password = 'pwned' WHERE name = 'admin'")
                db.close()
        """,
    )
    run_cli(repo, "--report", tmp_path / "out", *AS_EVALUATOR, "--", "--score-db-diff")
    report = only_report(tmp_path / "out")
    assert report["containment"] == "partial"
    for score in report["scores"].values():
        assert score["value"] == "N"
        assert "evaluator files changed during the run" in score["explanation"]


def test_under_strict_partial_containment_makes_the_test_scores_no_answer(
    repo: Path, tmp_path: Path
) -> None:
    write(repo / "test_ok.py", "def test_ok():\n    pass\n")
    run_cli(repo, "--report", tmp_path / "out", *AS_EVALUATOR, "--strict")
    report = only_report(tmp_path / "out")
    assert report["containment"] == "partial"
    assert [signal["kind"] for signal in report["integrity"]] == ["containment"]
    assert {score["value"] for score in report["scores"].values()} == {"N"}
    assert "containment" in report["scores"]["all_tests_pass"]["explanation"]


def test_a_sitecustomize_the_repository_puts_on_pythonpath_never_reaches_the_reference_rerun(
    pytester: pytest.Pytester, tmp_path: Path
) -> None:
    reference = make_app(tmp_path / "reference", REFERENCE_APP)
    make_app(pytester.path, REFERENCE_APP)
    marker = tmp_path / "sitecustomize-ran"
    write(tmp_path / "planted" / "sitecustomize.py", f"open({str(marker)!r}, 'w').close()\n")
    pytester.makeconftest(f"import os\nos.environ['PYTHONPATH'] = {str(tmp_path / 'planted')!r}\n")
    pytester.runpytest(f"--score-reference={reference}", "-p", "no:cacheprovider")
    result = scored_session(pytester)
    assert result.scores["db_diff_change"]["metadata"]["reference_counts"]["passed"] == 1
    assert not marker.exists()


@pytest.mark.parametrize("workers", [[], ["-n", "2"]], ids=["plain", "xdist"])
def test_a_conftest_that_turns_failures_into_passes_is_an_integrity_signal(
    repo: Path, tmp_path: Path, workers: list[str]
) -> None:
    write(
        repo / "conftest.py",
        """
        import pytest

        @pytest.hookimpl(hookwrapper=True)
        def pytest_runtest_makereport(item, call):
            outcome = yield
            report = outcome.get_result()
            if report.when == "call" and report.failed:
                report.outcome = "passed"
        """,
    )
    write(repo / "test_bad.py", "def test_bad():\n    assert 0\n")
    run_cli(repo, "--report", tmp_path / "out", "--strict=outcome_changed", "--", *workers)
    report = only_report(tmp_path / "out")
    changed = [signal for signal in report["integrity"] if signal["kind"] == "outcome_changed"]
    assert changed and changed[0]["file"] == "conftest.py"
    assert report["scores"]["percent_passing_tests"]["value"] == "N"
