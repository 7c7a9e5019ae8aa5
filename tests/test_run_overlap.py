"""``db_diff_change``'s runs overlap only as users of their own (issue 32): under one user id the
session, the reference rerun and the baseline take turns; as root they run at once."""

from __future__ import annotations

import contextlib
import itertools
import json
import sqlite3
import textwrap
from pathlib import Path

import pytest
from runs import AS_OTHER_USERS
from runs import SYSTEM_PYTHON
from runs import only_report
from runs import run_cli
from runs import scored_session

TESTS = """
    import time
    from pathlib import Path

    def test_slow():
        started = time.monotonic()
        # The session's run is long enough for a rerun started beside it to start too.
        time.sleep(5 if Path(__file__).parents[1] == Path({session!r}) else 0.5)
        with open({log!r}, "a") as log:
            log.write(f"{{started}} {{time.monotonic()}} {{Path(__file__).parents[1]}}\\n")
"""


def make_repo(path: Path, log: Path, session: Path) -> Path:
    """A checkout whose one test takes a while and logs when it ran, and where."""
    (path / "tests").mkdir(parents=True, exist_ok=True)
    test = textwrap.dedent(TESTS).format(log=str(log), session=str(session))
    (path / "tests" / "test_slow.py").write_text(test)
    with contextlib.closing(sqlite3.connect(path / "app.db")) as db:
        db.execute("CREATE TABLE t (id INTEGER PRIMARY KEY)")
    return path


#: One ``db_diff_change``, and two with test patterns of their own: two reruns, one baseline.
CONFIGS = {
    "one rerun": [{"type": "db_diff_change"}],
    "two reruns": [
        {"type": "db_diff_change", "name": "first"},
        {"type": "db_diff_change", "name": "second", "test_patterns": ["tests/test_*.py"]},
    ],
}


@pytest.mark.slow
@pytest.mark.parametrize("scorers", CONFIGS.values(), ids=CONFIGS)
def test_runs_under_one_user_id_never_overlap(
    pytester: pytest.Pytester,
    tmp_path_factory: pytest.TempPathFactory,
    scorers: list[dict[str, object]],
) -> None:
    log = tmp_path_factory.mktemp("log") / "runs.log"
    reference = make_repo(tmp_path_factory.mktemp("reference"), log, pytester.path)
    make_repo(pytester.path, log, pytester.path)
    pytester.makefile(".json", scores=json.dumps({"scorers": scorers}))
    # In process, every run is this user's: the reruns wait for the session, then all take
    # turns (before issue 32, a rerun ran beside the session from its start).
    pytester.runpytest(
        f"--score-reference={reference}", "--score-config=scores.json", "-p", "no:cacheprovider"
    )
    values = [score["value"] for score in scored_session(pytester).scores.values()]
    assert values == ["I"] * len(scorers)
    runs = sorted(
        (float(start), float(end), where)
        for start, end, where in (line.split(" ", 2) for line in log.read_text().splitlines())
    )
    # The session and each rerun (the baseline may come from its cache).
    assert len(runs) >= 1 + len(scorers)
    assert runs[0][2] == str(pytester.path)  # the session ran first
    for (_start, end, _where), (start, _end, _next) in itertools.pairwise(runs):
        assert end <= start


MEETS_THE_OTHER_RUNS = """
import os, time
from pathlib import Path

def test_meet_the_other_runs():
    meeting = Path({meeting!r})
    meeting.joinpath(str(os.getpid())).touch()
    deadline = time.monotonic() + 300
    while len(list(meeting.iterdir())) < 3:
        assert time.monotonic() < deadline, "the other runs never started: not overlapped"
        time.sleep(0.05)
"""


@pytest.mark.slow
@AS_OTHER_USERS[0]
@AS_OTHER_USERS[1]
def test_runs_as_users_of_their_own_overlap(open_folder: Path, drop: Path) -> None:
    # The session, the rerun and the baseline each wait until all three have started.
    tests = MEETS_THE_OTHER_RUNS.format(meeting=str(drop))
    checkouts = []
    for name in ("reference", "repo"):
        folder = open_folder / name
        (folder / "tests").mkdir(parents=True)
        (folder / "tests" / "test_meet.py").write_text(tests)
        with contextlib.closing(sqlite3.connect(folder / "app.db")) as db:
            db.execute("CREATE TABLE t (id INTEGER PRIMARY KEY)")
        checkouts.append(folder)
    reference, repo = checkouts
    args = ["--reference", reference, "--python", SYSTEM_PYTHON, "--report", open_folder / "out"]
    result = run_cli(repo, *args)
    assert result.exit_code == 0, result.output
    report = only_report(open_folder / "out")
    assert report["scores"]["db_diff_change"]["metadata"]["reference_counts"]["passed"] == 1
    assert report["tests"]["counts"]["passed"] == 1
    assert len(list(drop.iterdir())) == 3
