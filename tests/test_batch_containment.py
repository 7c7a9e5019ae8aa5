"""A batch as root: each repository contained, and none can reach another's score.

These tests need root and an interpreter other users may run (Debian's ``/usr/bin/python3``
with ``python3-pytest``), as in ``test_run_user.py``. Every repository's name carries a token
of the test, so that its attempts can only ever aim at this test's own repositories.
"""

from __future__ import annotations

import json
import shutil
import sqlite3
import tempfile
import textwrap
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from runs import AS_OTHER_USERS
from runs import SYSTEM_PYTHON
from runs import run_cli
from runs import scores_json
from runs import shown_report

from pytest_scoring.process.users import FIRST_UID

pytestmark = [pytest.mark.slow, *AS_OTHER_USERS]

#: Both repositories' test: meet the other one while both run, try to overwrite its
#: ``data.txt`` in its private copy, then check that its own was not overwritten.
TOGETHER = """
import json, os, time
from pathlib import Path

DROP = Path({drop!r})

def wait_for(path):
    deadline = time.monotonic() + 300
    while not path.exists():
        assert time.monotonic() < deadline, f"never saw {{path.name}}: not run at the same time"
        time.sleep(0.05)

def test_together():
    here = Path(__file__).resolve().parent
    (DROP / {me!r}).write_text(json.dumps(os.getuid()))
    wait_for(DROP / {other!r})
    area, slot = here.parents[1], here.parent.name
    tried = {{}}
    for other_area in area.parent.glob("pytest-scoring-run-*"):
        target = other_area / slot / {other!r} / "data.txt"
        if other_area != area:
            try:
                target.write_text("overwritten by {me}")
                tried[str(target)] = "written"
            except OSError as error:
                tried[str(target)] = type(error).__name__
    (DROP / ({me!r} + ".tried")).write_text(json.dumps(tried))
    wait_for(DROP / ({other!r} + ".tried"))
    assert (here / "data.txt").read_text() == "original"
"""


@pytest.fixture
def open_folder() -> Iterator[Path]:
    """A folder other users may pass through and read (as a checkout under /srv would be)."""
    folder = Path(tempfile.mkdtemp(prefix="pytest-scoring-test-"))
    folder.chmod(0o755)
    yield folder
    shutil.rmtree(folder, ignore_errors=True)


def token_names(*roles: str) -> list[str]:
    token = uuid.uuid4().hex[:10]
    return [f"{role}-{token}" for role in roles]


def batch(*args: str | Path) -> dict[str, Any]:
    result = run_cli(*args, "--python", SYSTEM_PYTHON)
    assert result.exit_code == 0, result.output
    return scores_json(shown_report(result.output))


def by_name(report: dict[str, Any]) -> dict[str, dict[str, Any]]:
    return {Path(sample["repository"]).name: sample for sample in report["samples"]}


def test_jobs_run_at_the_same_time_each_as_a_user_of_its_own(tmp_path: Path, drop: Path) -> None:
    first, second = token_names("first", "second")
    repos = []
    for me, other in ((first, second), (second, first)):
        repo = tmp_path / me
        repo.mkdir()
        (repo / "data.txt").write_text("original")
        (repo / "test_together.py").write_text(TOGETHER.format(drop=str(drop), me=me, other=other))
        repos.append(repo)
    report = batch(*repos, "--jobs", "2", "--report", tmp_path / "out")
    samples = by_name(report)
    for name in (first, second):
        assert samples[name]["scores"]["percent_passing_tests"]["value"] == 100, name
        assert samples[name]["containment"] == "full"
        tried = json.loads((drop / f"{name}.tried").read_text())
        assert "written" not in tried.values()
        assert "PermissionError" in tried.values(), "the other job's copy was found and refused"
    uids = {json.loads((drop / name).read_text()) for name in (first, second)}
    assert len(uids) == 2 and min(uids) >= FIRST_UID
    assert {samples[name]["run"]["user"] for name in (first, second)} == set(map(str, uids))


APP = """
import sqlite3
from pathlib import Path

DB = Path(__file__).with_name("app.db")

def register(name):
    with sqlite3.connect(DB) as db:
        db.execute("INSERT INTO users (name, password_hash) VALUES (?, 'h0')", (name,))
    db.close()
"""
TESTS = """
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parents[1]))
import app

def test_register():
    app.register("carol")

def test_broken():
    assert False
"""
#: The hostile repository: it passes its own tests, and meanwhile
#: * leaves a daemon (double fork, new session) that keeps trying to reach the victim's copy,
#:   the shared copy of the reference and the batch's folder, for as long as it lives;
#: * plants, in a report root others may write, a forged copy of every finished scan of the
#:   batch, newer than the real one, in which every repository passes every test.
HOSTILE = """
import json, os, time
from pathlib import Path

DROP, REPORTS, VICTIM = Path({drop!r}), Path({reports!r}), {victim!r}
BROKEN_APP = "def register(name):\\n    raise SystemExit('sabotaged')\\n"

def attempt(target, content):
    try:
        target.write_text(content)
    except OSError:
        return False
    return True

def sabotage(area_root):
    done = []
    for area in area_root.glob("pytest-scoring-run-*"):
        for slot in range(1, 40):
            for target in (
                area / f"repo-{{slot}}" / VICTIM / "app.py",
                area / f"reference-{{slot}}" / "reference" / "app.py",
                area / f"initial-{{slot}}" / "app.db",
            ):
                if attempt(target, BROKEN_APP):
                    done.append(str(target))
    for building in REPORTS.glob(".scan_id=*"):
        if attempt(building / "scores.json", "{{}}"):
            done.append(str(building))
    return done

def forge():
    for scan in REPORTS.glob("scan_id=*"):
        forged = REPORTS / (scan.name + "forged")
        try:
            spec = json.loads((scan / "_scan.json").read_text())
            spec["timestamp"] = "9999-12-31T00:00:00+00:00"
            forged.mkdir()
            (forged / "_scan.json").write_text(json.dumps(spec))
            for sample in (scan / "samples").iterdir():
                entry = json.loads((sample / "sample.json").read_text())
                for score in entry["scores"].values():
                    score["value"] = 100 if isinstance(score["value"], (int, float)) else "C"
                (forged / "samples" / sample.name).mkdir(parents=True)
                (forged / "samples" / sample.name / "sample.json").write_text(json.dumps(entry))
        except OSError as error:
            (DROP / "forge-failed").write_text(repr(error))

def test_hostile():
    area_root = Path(__file__).resolve().parents[4]
    forge()
    if os.fork() == 0:
        os.setsid()
        if os.fork() == 0:
            (DROP / "daemon.pid").write_text(str(os.getpid()))
            deadline = time.monotonic() + 600
            while time.monotonic() < deadline:
                done = sabotage(area_root)
                if done:
                    (DROP / "sabotaged").write_text(json.dumps(done))
                time.sleep(0.05)
        os._exit(0)
    while not (DROP / "daemon.pid").exists():
        time.sleep(0.05)
"""


def make_app(folder: Path, tests: str) -> Path:
    (folder / "tests").mkdir(parents=True)
    (folder / "app.py").write_text(APP)
    (folder / "tests" / "test_app.py").write_text(textwrap.dedent(tests))
    with sqlite3.connect(folder / "app.db") as db:
        db.execute("CREATE TABLE users (id INTEGER PRIMARY KEY, name TEXT, password_hash TEXT)")
        db.execute("INSERT INTO users (name, password_hash) VALUES ('alice', 'h0')")
    db.close()
    return folder


def values(sample: dict[str, Any]) -> dict[str, Any]:
    return {name: score["value"] for name, score in sample["scores"].items()}


def test_a_hostile_repository_cannot_change_a_later_repositorys_score(
    open_folder: Path, drop: Path
) -> None:
    hostile_name, victim_name = token_names("hostile", "victim")
    reports = open_folder / "reports"
    reports.mkdir(mode=0o777)
    reports.chmod(0o777)  # the worst case: a report root anyone may write
    reference = make_app(open_folder / "reference", TESTS)
    victim = make_app(open_folder / victim_name, TESTS)
    hostile = make_app(
        open_folder / hostile_name,
        HOSTILE.format(drop=str(drop), reports=str(reports), victim=victim_name),
    )
    config = open_folder / "scorers.json"
    selector = {"rows": {"changed": {"has_one": ["password_hash"]}}}
    config.write_text(
        json.dumps(
            {
                "scorers": [
                    {"type": "percent_passing_tests"},
                    {"type": "db_change", "selector": selector},
                    {"type": "db_diff_change", "selector": selector},
                ]
            }
        )
    )
    options = ["--reference", reference, "--config", config]
    (open_folder / "alone.txt").write_text(f"{victim}\n")
    alone = by_name(
        batch(f"@{open_folder / 'alone.txt'}", *options, "--report", open_folder / "alone")
    )
    expected = values(alone[victim_name])
    assert expected == {"percent_passing_tests": 50, "db_change": "I", "db_diff_change": "I"}

    first = batch(hostile, victim, *options, "--report", reports)
    samples = by_name(first)
    assert values(samples[hostile_name])["percent_passing_tests"] == 100
    assert values(samples[victim_name]) == expected
    assert samples[victim_name]["id"] == alone[victim_name]["id"], "same input, same transcript"
    assert samples[victim_name]["tests"]["counts"] == alone[victim_name]["tests"]["counts"]
    assert not (drop / "sabotaged").exists(), (drop / "sabotaged").read_text()
    daemon = int((drop / "daemon.pid").read_text())
    assert not Path(f"/proc/{daemon}").exists(), "the daemon outlived its repository's run"

    (hostile / "README").write_text("the agent's next attempt\n")
    (drop / "daemon.pid").unlink()
    second = batch(hostile, victim, *options, "--report", reports)
    assert second["batch"]["kept"] == 1
    assert list(reports.glob("scan_id=*forged")), "the forgery was planted"
    third = batch(hostile, victim, *options, "--report", reports)
    assert third["batch"]["kept"] == 2
    victim_sample = by_name(third)[victim_name]
    assert victim_sample["kept_from"] == second["scan_id"]
    assert values(victim_sample) == expected
