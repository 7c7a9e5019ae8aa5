"""``db_diff_change``'s runs overlap only as users of their own (issue 32): under one user id the
session, the reference rerun and the baseline run one after the other."""

from __future__ import annotations

import contextlib
import itertools
import json
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
