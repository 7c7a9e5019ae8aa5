"""A batch against one reference: what depends only on the reference is made once.

The reference copy, its initial snapshot and the baseline run of its own tests are the
batch's, not each repository's; a changed reference rescores every repository.
"""

from __future__ import annotations

import json
import re
import shutil
import sqlite3
import textwrap
from pathlib import Path
from typing import Any

import pytest
from runs import TAMPERING_ONLY
from runs import run_cli
from runs import scores_json
from runs import shown_report

pytestmark = pytest.mark.slow

APP = """
import sqlite3
from pathlib import Path

DB = Path(__file__).with_name("app.db")

def register(name):
    with sqlite3.connect(DB) as db:
        db.execute("INSERT INTO users (name, password_hash) VALUES (?, 'h0')", (name,))
    db.close()
"""
#: The reference's own tests: each run (the baseline's, only) adds a line to ``log``.
REFERENCE_TESTS = """
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parents[1]))
import app

def test_register():
    with open({log!r}, "a") as log:
        log.write("baseline\\n")
    app.register("carol")
"""
REPO_TESTS = """
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parents[1]))
import app

def test_register():
    app.register("carol")
"""
CONFIG = {
    "scorers": [
        {"type": "percent_passing_tests"},
        {
            "type": "db_diff_change",
            "selector": {"rows": {"changed": {"has_one": ["password_hash"]}}},
        },
    ]
}


def make_app(folder: Path, tests: str) -> Path:
    (folder / "tests").mkdir(parents=True)
    (folder / "app.py").write_text(APP)
    (folder / "tests" / "test_app.py").write_text(textwrap.dedent(tests))
    with sqlite3.connect(folder / "app.db") as db:
        db.execute("CREATE TABLE users (id INTEGER PRIMARY KEY, name TEXT, password_hash TEXT)")
        db.execute("INSERT INTO users (name, password_hash) VALUES ('alice', 'h0')")
    db.close()
    return folder


def batch(*args: str | Path) -> tuple[dict[str, Any], str]:
    """A batch in process (partial containment as root accepted: these tests are about the
    work a batch shares)."""
    result = run_cli(TAMPERING_ONLY, *args)
    assert result.exit_code == 0, result.output
    return scores_json(shown_report(result.output)), result.output


def kept_areas(output: str) -> tuple[Path, list[Path]]:
    """The shared private area and each repository's, as ``--keep`` names them."""
    (shared,) = re.findall(r"^the shared private area is kept: (.+)$", output, re.MULTILINE)
    own = re.findall(r"^.+: the private area is kept: (.+)$", output, re.MULTILINE)
    return Path(shared), [Path(folder) for folder in own]


def test_the_reference_is_copied_snapshotted_and_run_once_per_batch(
    tmp_path: Path, drop: Path
) -> None:
    log = drop / "baseline.log"  # the baseline runs as a user of its own
    log.touch()
    log.chmod(0o666)  # a later batch's baseline may run as another user id: it appends too
    reference = make_app(tmp_path / "reference", REFERENCE_TESTS.format(log=str(log)))
    repos = [make_app(tmp_path / name, REPO_TESTS) for name in ("first", "second", "third")]
    config = tmp_path / "scorers.json"
    config.write_text(json.dumps(CONFIG))
    options = ["--reference", reference, "--config", config, "--report", tmp_path / "out"]
    report, output = batch(*repos, *options, "--jobs", "2", "--keep")
    shared, own = kept_areas(output)
    try:
        assert log.read_text() == "baseline\n", "one baseline run for three repositories"
        assert len(own) == 3
        assert [path.name for path in shared.glob("reference-*/reference")] == ["reference"]
        assert len(list(shared.glob("initial-*"))) == 1
        assert len(list(shared.glob("baseline-*"))) == 1
        for area in own:
            assert not list(area.glob("reference-*/reference")), "no copy of its own"
            assert not list(area.glob("baseline-*"))
    finally:
        for area in [shared, *own]:
            shutil.rmtree(area, ignore_errors=True)
    for sample in report["samples"]:
        score = sample["scores"]["db_diff_change"]
        assert (score["value"], sample["scores"]["percent_passing_tests"]["value"]) == ("I", 100)
        assert score["metadata"]["baseline"]["counts"]["passed"] == 1
    baselines = {
        json.dumps(s["scores"]["db_diff_change"]["metadata"]["baseline"]) for s in report["samples"]
    }
    assert len(baselines) == 1

    again, _ = batch(*repos, *options, "--jobs", "2")
    assert again["batch"]["kept"] == 3
    (reference / "README").write_text("a new version of the reference\n")
    changed, _ = batch(*repos, *options, "--jobs", "2")
    assert (changed["batch"]["kept"], changed["batch"]["scored"]) == (0, 3)
    inputs = [sample["inputs"] for sample in changed["samples"]]
    assert inputs[0]["reference"] != report["samples"][0]["inputs"]["reference"]
    assert [s["id"] for s in changed["samples"]] == [s["id"] for s in report["samples"]]
    assert log.read_text() == "baseline\n" * 2
