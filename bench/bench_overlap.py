"""Benchmark: ``db_diff_change``'s three runs beside a plain scored session (issue 32).

A repository whose tests each spend ``--busy`` seconds of CPU and ``--sleep`` seconds waiting
(as tests waiting on I/O do), writing one row each to a SQLite database, and a reference
checkout of it. Timed side by side in one run, with ``pytest-scoring run`` in fresh processes:

* ``plain``: ``run REPO`` (the scored session alone);
* ``db_diff_change``: ``run REPO --reference REF`` with a fresh baseline cache: the session,
  the reference rerun and the baseline (the reference's own tests);
* ``cached baseline``: the same again, the baseline read from the cache of the run before.

As root every run has a user id of its own and the runs overlap; as any other user they run
one after the other (docs/reference.md). As root, give ``--python /usr/bin/python3`` (an
interpreter the runs' users can execute, with pytest).

    python bench/bench_overlap.py --tests 20 --busy 0.1 --sleep 0.1 --python /usr/bin/python3
"""

from __future__ import annotations

import argparse
import os
import sqlite3
import subprocess
import sys
import tempfile
import time
from pathlib import Path

TEST = """
import sqlite3, time
from pathlib import Path

def work(i):
    end = time.process_time() + {busy}
    while time.process_time() < end:
        pass
    time.sleep({sleep})
    with sqlite3.connect(Path(__file__).parents[1] / "app.db") as conn:
        conn.execute("INSERT INTO t (x) VALUES (?)", (i,))
    conn.close()
"""


def make_repo(path: Path, tests: int, busy: float, sleep: float) -> Path:
    """A checkout of ``tests`` tests, each busy then asleep, then writing one row."""
    (path / "tests").mkdir(parents=True)
    with sqlite3.connect(path / "app.db") as conn:
        conn.execute("CREATE TABLE t (id INTEGER PRIMARY KEY, x)")
    conn.close()
    body = "".join(f"\ndef test_{i}():\n    work({i})\n" for i in range(tests))
    (path / "tests" / "test_work.py").write_text(TEST.format(busy=busy, sleep=sleep) + body)
    for folder in (path, path / "tests"):
        folder.chmod(0o755)
    return path


def timed(command: list[str], cache: Path) -> float:
    """Wall-clock seconds of one ``pytest-scoring`` command (its exit status checked)."""
    environ = {**os.environ, "XDG_CACHE_HOME": str(cache)}
    started = time.perf_counter()
    done = subprocess.run(command, env=environ, capture_output=True, text=True, check=False)
    seconds = time.perf_counter() - started
    if done.returncode not in (0, 1):
        raise SystemExit(f"{' '.join(command)} failed ({done.returncode}):\n{done.stderr}")
    return seconds


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--tests", type=int, default=20)
    parser.add_argument("--busy", type=float, default=0.1, help="CPU seconds per test")
    parser.add_argument("--sleep", type=float, default=0.1, help="seconds asleep per test")
    parser.add_argument("--python", help="the repository's interpreter (run --python)")
    arguments = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="bench-overlap-") as folder:
        work = Path(folder)
        work.chmod(0o755)  # the runs' users pass through to the checkouts
        shape = (arguments.tests, arguments.busy, arguments.sleep)
        repo, reference = make_repo(work / "repo", *shape), make_repo(work / "reference", *shape)
        run = [
            sys.executable,
            "-m",
            "pytest_scoring",
            "run",
            str(repo),
            "--report",
            str(work / "r"),
        ]
        if arguments.python:
            run += ["--python", arguments.python]
        diff = [*run, "--reference", str(reference)]
        cache = work / "cache"
        figures = {
            "plain": timed(run, work / "cache-plain"),
            "db_diff_change": timed(diff, cache),
            "cached baseline": timed(diff, cache),
        }
    plain = figures["plain"]
    as_root = "as root: users of their own" if os.geteuid() == 0 else "one user: one after another"
    each = f"{arguments.busy} s busy + {arguments.sleep} s asleep each"
    print(f"{arguments.tests} tests, {each}; {as_root}")
    for name, seconds in figures.items():
        print(f"{name:<16} {seconds:7.2f} s  {seconds / plain:5.2f}x", flush=True)


if __name__ == "__main__":
    main()
