"""PostgreSQL, hardened (issue 31): a killed evaluator's start snapshots are swept, reports
record each server database without its password, and a database the scored repository's
ini file names is its choice, not the evaluator's."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import psycopg
import pytest
from postgres_cluster import Cluster
from psycopg.conninfo import conninfo_to_dict
from runs import GENEROUS
from runs import make_fifo
from runs import only_report
from runs import wait_for_ready

from pytest_scoring.db.postgres import admin
from pytest_scoring.db.postgres.engine import PostgresEngine
from pytest_scoring.errors import DatabaseError

pytestmark = pytest.mark.slow

ACCOUNTS = (
    "CREATE TABLE users (id serial PRIMARY KEY, username text UNIQUE, role text);"
    "INSERT INTO users (username, role) VALUES ('alice', 'admin'), ('bob', 'user')"
)
#: A test that adds a user (another each time) through the URL the session gives it.
ADDS_CAROL = """
import os
import psycopg

def test_add():
    with psycopg.connect(os.environ["APP_DATABASE"], autocommit=True) as connection:
        connection.execute("INSERT INTO users (username) VALUES (md5(random()::text))")
"""


def query(url: str, statement: str) -> list[tuple[Any, ...]]:
    with psycopg.connect(url, autocommit=True) as connection:
        cursor = connection.execute(statement)  # type: ignore[arg-type]
        return cursor.fetchall() if cursor.description else []


def ours(postgres: Cluster, kind: str) -> set[str]:
    """The evaluator's databases of one kind (``snap``, ``keep``) on the server."""
    rows = query(postgres.admin_url, "SELECT datname FROM pg_database")
    return {name for (name,) in rows if name.startswith(f"{admin.PREFIX}{kind}_")}


def repository(folder: Path, test: str) -> Path:
    folder.mkdir(parents=True)
    (folder / "pytest.ini").write_text("[pytest]\n")
    (folder / "test_app.py").write_text(test)
    return folder


def in_process(repo: Path, app_url: str, postgres: Cluster) -> list[str]:
    """``pytest`` with the plugin in ``repo``, scoring ``app_url`` as the evaluator names it."""
    return [
        sys.executable, "-m", "pytest", "-p", "no:cacheprovider", f"--score-db-url={app_url}",
        f"--score-db-admin-url={postgres.admin_url}", f"--score-report={repo / 'scores'}",
    ]  # fmt: skip


def test_a_killed_evaluators_start_snapshot_is_dropped_by_the_next_run_on_that_server(
    tmp_path: Path, postgres: Cluster
) -> None:
    """Three evaluators on one server: one killed while its test runs, one still running, and
    the next run. The next run drops the killed one's start snapshot; the running one's, and
    a keep snapshot of ``--score-db-reset``, stay."""
    kept = PostgresEngine(postgres.admin_url, {"kept": postgres.application(ACCOUNTS)})
    kept.reset(["kept"], tmp_path / "store", None)
    keeps, before = ours(postgres, "keep"), ours(postgres, "snap")
    go = make_fifo(tmp_path / "go")
    live = start_evaluator(tmp_path / "live", postgres, f"open({str(go)!r}).read()")
    live_snapshot = ours(postgres, "snap") - before
    killed = start_evaluator(tmp_path / "killed", postgres, "time.sleep(3600)")
    (left,) = ours(postgres, "snap") - before - live_snapshot
    os.killpg(killed.pid, signal.SIGKILL)
    killed.wait(GENEROUS)
    claim_ended(postgres, left)
    app_url = postgres.application(ACCOUNTS)
    next_run = repository(tmp_path / "next", ADDS_CAROL)
    done = subprocess.run(
        in_process(next_run, app_url, postgres),
        cwd=next_run,
        env={**os.environ, "APP_DATABASE": app_url},
        capture_output=True,
        text=True,
        timeout=GENEROUS,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    assert left not in ours(postgres, "snap")
    assert live_snapshot and live_snapshot <= ours(postgres, "snap")
    assert ours(postgres, "keep") == keeps and keeps
    with open(go, "w") as release:
        release.write("go")
    assert live.wait(GENEROUS) == 0
    score = only_report(tmp_path / "live" / "scores")["scores"]["db_change"]
    assert score["value"] == "I", score["explanation"]  # diffed against its own snapshot
    assert not live_snapshot & ours(postgres, "snap")


def start_evaluator(folder: Path, postgres: Cluster, wait: str) -> subprocess.Popen[bytes]:
    """An evaluator scoring in process, returned once its test runs (its start snapshot
    exists); the test then does ``wait``."""
    ready = make_fifo(folder.with_name(f"{folder.name}-ready"))
    test = f"import time\n\ndef test_waits():\n    open({str(ready)!r}, 'w').write('x')\n" \
        f"    {wait}\n"  # fmt: skip
    repo = repository(folder, test)
    process = subprocess.Popen(
        in_process(repo, postgres.application(ACCOUNTS), postgres),
        cwd=repo,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        start_new_session=True,
    )
    try:
        wait_for_ready(ready)
    except BaseException:
        os.killpg(process.pid, signal.SIGKILL)
        raise
    return process


def claim_ended(postgres: Cluster, snapshot: str) -> None:
    """Wait until the server has ended the killed evaluator's session claiming ``snapshot``
    (it notices the closed socket on its own)."""
    deadline = time.monotonic() + GENEROUS
    statement = f"SELECT 1 FROM pg_stat_activity WHERE application_name = '{snapshot}'"
    while query(postgres.admin_url, statement) and time.monotonic() < deadline:
        time.sleep(0.1)
    assert not query(postgres.admin_url, statement)


def test_an_older_reset_store_keeps_working_under_the_kept_prefix(
    tmp_path: Path, postgres: Cluster
) -> None:
    """An older pytest-scoring kept its snapshot under the session's prefix: the store is
    moved to the kept prefix, so that no sweep drops it, and still resets."""
    app_url = postgres.application(ACCOUNTS)
    database = str(conninfo_to_dict(app_url)["dbname"])
    older = admin.snapshot(postgres.admin_url, database)  # unclaimed, as an older one made
    store = tmp_path / "store"
    store.mkdir()
    (store / "postgresql.json").write_text(json.dumps({database: older.name}))
    query(app_url, "DELETE FROM users")
    engine = PostgresEngine(postgres.admin_url, {database: app_url})
    assert engine.reset([database], store, None) == [database]
    assert query(app_url, "SELECT username FROM users ORDER BY id") == [("alice",), ("bob",)]
    (kept,) = json.loads((store / "postgresql.json").read_text()).values()
    assert kept.startswith(admin.KEEP_PREFIX)
    engine.release(engine.snapshot([database], tmp_path, "a later session"))  # sweeps
    assert kept in ours(postgres, "keep")
    assert older.name not in ours(postgres, "snap")


def test_a_reset_store_whose_kept_state_is_gone_leaves_the_database_alone(
    tmp_path: Path, postgres: Cluster
) -> None:
    app_url = postgres.application(ACCOUNTS)
    database = str(conninfo_to_dict(app_url)["dbname"])
    store = tmp_path / "store"
    store.mkdir()
    gone = f"{admin.KEEP_PREFIX}000000000000"
    (store / "postgresql.json").write_text(json.dumps({database: gone}))
    engine = PostgresEngine(postgres.admin_url, {database: app_url})
    with pytest.raises(DatabaseError) as raised:
        engine.reset([database], store, None)
    assert str(raised.value) == (
        f"{store / 'postgresql.json'}: the kept state of {database} ({gone}) is gone from the "
        f"server; remove {store} to keep the current state instead"
    )
    assert query(app_url, "SELECT count(*) FROM users") == [(2,)]


def test_the_provenance_records_each_server_database_and_no_password(
    pytester: pytest.Pytester, postgres: Cluster, monkeypatch: pytest.MonkeyPatch
) -> None:
    given = postgres.application(ACCOUNTS)
    params = conninfo_to_dict(given)
    password = str(params["password"])
    # The password in a query parameter this time: it leaves the report as well.
    app_url = given.replace(f":{password}@", "@") + f"&password={password}"
    monkeypatch.setenv("APP_DATABASE", app_url)
    pytester.makepyfile(ADDS_CAROL)
    options = [f"--score-db-url={app_url}", f"--score-db-admin-url={postgres.admin_url}"]
    states = []
    for _ in range(2):
        result = pytester.runpytest_subprocess(*options)
        result.assert_outcomes(passed=1)
        output = result.stdout.str() + result.stderr.str()
        assert password not in output and postgres.password not in output
        (recorded,) = newest_report(pytester.path / "scores")["provenance"]["databases"]
        states.append(recorded.pop("start_state"))
        assert recorded == {
            "name": params["dbname"],
            "url": f"postgresql://{params['user']}@/{params['dbname']}?host={params['host']}",
            "server_version": query(postgres.admin_url, "SHOW server_version")[0][0],
        }
    assert states[0] != states[1]  # the first session added carol
    assert all(len(state) == 64 for state in states)
    for path in (pytester.path / "scores").rglob("*"):
        if path.is_file():
            content = path.read_bytes()
            assert password.encode() not in content, path
            assert postgres.password.encode() not in content, path


def newest_report(root: Path) -> dict[str, Any]:
    folder = max(root.glob("scan_id=*"), key=lambda found: found.stat().st_mtime_ns)
    content: dict[str, Any] = json.loads((folder / "scores.json").read_text())
    return content


@pytest.fixture
def production(postgres: Cluster) -> str:
    """A database on the evaluator's server that the repository's own role owns (the ini
    names it with its owner's URL): what the repository may name."""
    return postgres.application(ACCOUNTS)


def test_a_database_the_ini_names_is_scored_with_a_signal_naming_it(
    pytester: pytest.Pytester, postgres: Cluster, production: str
) -> None:
    database = conninfo_to_dict(production)["dbname"]
    pytester.makeini(f"[pytest]\nscore_db_urls = {production}\n")
    pytester.makepyfile("def test_one(): pass")
    result = pytester.runpytest_subprocess(
        "--score-db-diff", f"--score-db-admin-url={postgres.admin_url}"
    )
    result.assert_outcomes(passed=1)
    assert {
        "kind": "selection",
        "detail": f"score_db_urls (ini): database {database} is named by the scored repository, "
        "not by the evaluator",
        "file": "tox.ini",
    } in only_report(pytester.path / "scores")["integrity"]


def test_db_reset_never_resets_a_database_the_ini_names(
    pytester: pytest.Pytester, postgres: Cluster, production: str
) -> None:
    database = conninfo_to_dict(production)["dbname"]
    pytester.makeini(f"[pytest]\nscore_db_urls = {production}\n")
    pytester.makepyfile("def test_one(): pass")
    keeps = ours(postgres, "keep")
    result = pytester.runpytest_subprocess(
        "--score-db-diff", "--score-db-reset", f"--score-db-admin-url={postgres.admin_url}"
    )
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines(
        [
            f"*score_db_urls (ini): --score-db-reset never resets database {database}, which "
            "the scored repository names; name it with --score-db-url"
        ]
    )
    assert "Traceback" not in result.stderr.str()
    assert ours(postgres, "keep") == keeps
    assert query(production, "SELECT count(*) FROM users") == [(2,)]


@pytest.mark.parametrize(
    ("ini", "message"),
    [
        ("score_db_urls = ${SOME_SECRET}",
         "score_db_urls (ini): ${SOME_SECRET} does not hold a postgresql:// URL"),
        ("score_db_urls = postgresql://app@/${SOME_SECRET}",
         "score_db_urls (ini): the scored repository may give ${NAME} only as a whole URL"),
        ("score_config = scores.yaml",
         "scores.yaml: databases[[]0[]].name: the scored repository may give ${NAME} only as "
         "a whole URL"),
    ],
)  # fmt: skip
def test_an_ini_url_cannot_carry_the_evaluators_secret_into_a_message_or_report(
    pytester: pytest.Pytester,
    postgres: Cluster,
    monkeypatch: pytest.MonkeyPatch,
    ini: str,
    message: str,
) -> None:
    """Also through a configuration file the ini names: its ``databases:`` are the
    repository's too."""
    secret = "s3cr3t-token-of-the-evaluator"
    monkeypatch.setenv("SOME_SECRET", secret)
    pytester.makeini(f"[pytest]\n{ini}\n")
    app_url = postgres.application()
    pytester.path.joinpath("scores.yaml").write_text(
        f"databases: [{{url: '{app_url}', name: '${{SOME_SECRET}}'}}]\n"
        "scorers: [{type: db_change}]\n"
    )
    pytester.makepyfile("def test_one(): pass")
    result = pytester.runpytest_subprocess(
        "--score-db-diff", f"--score-db-admin-url={postgres.admin_url}"
    )
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines([f"*{message}"])
    output = result.stdout.str() + result.stderr.str()
    assert secret not in output
    for path in pytester.path.rglob("*"):
        if path.is_file():
            assert secret.encode() not in path.read_bytes(), path


def test_an_ini_url_may_be_a_variable_holding_a_url(
    pytester: pytest.Pytester, postgres: Cluster, monkeypatch: pytest.MonkeyPatch
) -> None:
    app_url = postgres.application(ACCOUNTS)
    monkeypatch.setenv("APP_DATABASE", app_url)
    pytester.makeini("[pytest]\nscore_db_urls = ${APP_DATABASE}\n")
    pytester.makepyfile(ADDS_CAROL)
    result = pytester.runpytest_subprocess(f"--score-db-admin-url={postgres.admin_url}")
    result.assert_outcomes(passed=1)
    report = only_report(pytester.path / "scores")
    assert report["scores"]["db_change"]["value"] == "C"
    (recorded,) = report["provenance"]["databases"]
    assert str(conninfo_to_dict(app_url)["password"]) not in json.dumps(report)
    assert recorded["name"] == conninfo_to_dict(app_url)["dbname"]


@pytest.mark.parametrize("credentials", ["another role's", "no password"])
def test_the_ini_cannot_name_a_database_its_role_does_not_control(
    pytester: pytest.Pytester, postgres: Cluster, credentials: str
) -> None:
    """The evaluator's admin URL reaches every database of the server; the ini names the
    evaluator's ``production``. Nothing is snapshotted, and its sessions keep running."""
    owner_url = postgres.application(ACCOUNTS)
    owner, database = (conninfo_to_dict(owner_url)[key] for key in ("user", "dbname"))
    if credentials == "no password":
        named, why = (
            postgres.url(str(owner), None, str(database)),
            (f"role '{owner}' does not log in to {database} with the password its URL gives"),
        )
    else:
        app = conninfo_to_dict(postgres.application())
        named = postgres.url(str(app["user"]), str(app["password"]), str(database))
        why = f"database {database} belongs to role '{owner}', not to '{app['user']}'"
    pytester.makeini(f"[pytest]\nscore_db_urls = {named}\n")
    pytester.makepyfile("def test_one(): pass")
    snapshots = ours(postgres, "snap")
    with psycopg.connect(owner_url, autocommit=True) as working:
        result = pytester.runpytest_subprocess(
            "--score-db-diff", f"--score-db-admin-url={postgres.admin_url}"
        )
        assert working.execute("SELECT count(*) FROM users").fetchone() == (2,)
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines(
        [f"*score_db_urls (ini): {why}, and the scored repository names it; name it with "
         "--score-db-url"]
    )  # fmt: skip
    assert "Traceback" not in result.stderr.str()
    assert ours(postgres, "snap") == snapshots


def test_a_session_whose_kept_state_is_gone_says_so_in_one_line(
    pytester: pytest.Pytester, postgres: Cluster
) -> None:
    app_url = postgres.application(ACCOUNTS)
    database = conninfo_to_dict(app_url)["dbname"]
    pytester.makepyfile("def test_one(): pass")
    options = ["--score-db-reset", f"--score-db-url={app_url}",
               f"--score-db-admin-url={postgres.admin_url}"]  # fmt: skip
    keeps = ours(postgres, "keep")
    pytester.runpytest_subprocess(*options).assert_outcomes(passed=1)
    (kept,) = ours(postgres, "keep") - keeps
    admin.drop(postgres.admin_url, kept)
    pytester.runpytest_subprocess(*options).assert_outcomes(passed=1)
    score = newest_report(pytester.path / "scores")["scores"]["db_change"]
    assert score["value"] == "N"
    assert score["explanation"].startswith("db_change could not score: --score-db-reset: ")
    assert (
        f"the kept state of {database} ({kept}) is gone from the server" in (score["explanation"])
    )
    assert query(app_url, "SELECT count(*) FROM users") == [(2,)]


def test_the_inis_db_reset_resets_no_server_database(
    pytester: pytest.Pytester, postgres: Cluster, monkeypatch: pytest.MonkeyPatch
) -> None:
    """``score_db_reset = true`` in the repository's ini resets its own SQLite files only:
    the evaluator's database keeps what happened between the runs."""
    app_url = postgres.application(ACCOUNTS)
    monkeypatch.setenv("APP_DATABASE", app_url)
    pytester.makeini("[pytest]\nscore_db_reset = true\n")
    pytester.makepyfile(ADDS_CAROL)
    keeps = ours(postgres, "keep")
    options = [f"--score-db-url={app_url}", f"--score-db-admin-url={postgres.admin_url}"]
    for _ in range(2):
        pytester.runpytest_subprocess(*options).assert_outcomes(passed=1)
    assert query(app_url, "SELECT count(*) FROM users") == [(4,)]
    assert ours(postgres, "keep") == keeps
    assert {
        "kind": "selection",
        "detail": "score_db_reset = true: server databases not reset, only the command line "
        "resets them",
        "file": "tox.ini",
    } in newest_report(pytester.path / "scores")["integrity"]


def test_a_database_of_a_configuration_the_ini_names_is_the_repositorys_too(
    pytester: pytest.Pytester, postgres: Cluster, production: str
) -> None:
    database = conninfo_to_dict(production)["dbname"]
    pytester.makeini("[pytest]\nscore_config = scores.yaml\n")
    pytester.path.joinpath("scores.yaml").write_text(
        f"databases: [{{url: '{production}'}}]\nscorers: [{{type: db_change}}]\n"
    )
    pytester.makepyfile("def test_one(): pass")
    admin_url = f"--score-db-admin-url={postgres.admin_url}"
    pytester.runpytest_subprocess(admin_url).assert_outcomes(passed=1)
    assert {
        "kind": "selection",
        "detail": f"scores.yaml: databases[0]: database {database} is named by the scored "
        "repository, not by the evaluator",
        "file": "tox.ini",
    } in only_report(pytester.path / "scores")["integrity"]
    refused = pytester.runpytest_subprocess(admin_url, "--score-db-reset")
    assert refused.ret == pytest.ExitCode.USAGE_ERROR
    refused.stderr.fnmatch_lines(["*scores.yaml: databases[[]0[]]: --score-db-reset never resets*"])
