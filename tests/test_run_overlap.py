"""``db_diff_change``'s runs overlap only as users of their own (issue 32): under one user id the
session, the reference rerun and the baseline run one after the other."""

from __future__ import annotations

import contextlib
import itertools
import sqlite3
import textwrap
from pathlib import Path

import pytest
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


@pytest.mark.slow
def test_runs_under_one_user_id_never_overlap(
    pytester: pytest.Pytester, tmp_path_factory: pytest.TempPathFactory
) -> None:
    log = tmp_path_factory.mktemp("log") / "runs.log"
    reference = make_repo(tmp_path_factory.mktemp("reference"), log, pytester.path)
    make_repo(pytester.path, log, pytester.path)
    # In process, every run is this user's: the rerun waits for the session, the baseline for
    # the rerun (before issue 32, the rerun ran beside the session from its start).
    pytester.runpytest(
        f"--score-reference={reference}", "--score-db-diff", "-p", "no:cacheprovider"
    )
    assert scored_session(pytester).scores["db_diff_change"]["value"] == "I"
    runs = sorted(
        (float(start), float(end), where)
        for start, end, where in (line.split(" ", 2) for line in log.read_text().splitlines())
    )
    assert len(runs) >= 2  # the session and the rerun (the baseline may come from its cache)
    assert runs[0][2] == str(pytester.path)  # the session ran first
    for (_start, end, _where), (start, _end, _next) in itertools.pairwise(runs):
        assert end <= start
