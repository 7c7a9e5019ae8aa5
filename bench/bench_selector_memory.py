"""Benchmark: a selector over every changed row does not hold the rows in memory.

A repository with one table of ``--rows`` rows and a test that changes every row; a scored
session (``pytest --score-db-diff --score-db-reset``) runs without a selector and with one
that matches only the last row (so it must look at all of them, far past the ``max_rows``
examples the report keeps). Prints each session's peak RSS (median of ``--rounds``), read
with ``os.wait4`` from the pytest process.

    python bench/bench_selector_memory.py --rows 200000
"""

from __future__ import annotations

import argparse
import json
import os
import sqlite3
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

TEST = """
import sqlite3
from pathlib import Path

def test_change_every_row():
    with sqlite3.connect(Path(__file__).with_name("app.db")) as db:
        db.execute("UPDATE users SET password = 'x' || id, role = 'r' || id")
"""


def make_repo(folder: Path, rows: int) -> None:
    (folder / "test_app.py").write_text(TEST)
    with sqlite3.connect(folder / "app.db") as db:
        db.execute("CREATE TABLE users (id INTEGER PRIMARY KEY, password TEXT, role TEXT)")
        db.execute(
            "WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM n WHERE i < ?) "
            "INSERT INTO users SELECT i, 'pw', 'user' FROM n",
            (rows,),
        )
    db.close()


def session_peak_rss_mb(folder: Path, *args: str) -> float:
    """Peak RSS of one scored session in a fresh pytest process."""
    command = [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "--score-db-diff"]
    child = subprocess.Popen(
        [*command, "--score-db-reset", *args],
        cwd=folder,
        stdout=subprocess.DEVNULL,
    )
    _pid, status, usage = os.wait4(child.pid, 0)
    if status != 0:
        raise SystemExit(f"the session {args} failed with status {status}")
    return usage.ru_maxrss / 1024


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, default=200_000)
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args()
    last_row = {"rows": {"changed": {"where": {"role": f"r{args.rows}"}}}}
    sessions = {
        "no selector": (),
        "selector matching the last row": (f"--score-selector={json.dumps(last_row)}",),
    }
    with tempfile.TemporaryDirectory() as tmp:
        make_repo(Path(tmp), args.rows)
        peaks: dict[str, list[float]] = {name: [] for name in sessions}
        for _ in range(args.rounds):  # alternated, so both see the same load
            for name, extra in sessions.items():
                peaks[name].append(session_peak_rss_mb(Path(tmp), *extra))
    for name, values in peaks.items():
        print(f"{name:<32} peak RSS {statistics.median(values):7.1f} MB ({args.rows:,} rows)")


if __name__ == "__main__":
    main()
