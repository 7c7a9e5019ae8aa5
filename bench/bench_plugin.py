"""Plugin overhead on a generated suite of 5,000 trivial tests (at most 5%).

Runs plain ``pytest`` and ``pytest --score`` (and ``--score --score-db-diff`` with a small
database in the suite) alternately, several rounds, and prints the median wall time of each.

    python bench/bench_plugin.py [--tests 5000] [--rounds 5]
"""

from __future__ import annotations

import argparse
import sqlite3
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

VARIANTS = {
    "plain pytest": [],
    "pytest --score": ["--score"],
    "pytest --score --score-db-diff": ["--score", "--score-db-diff"],
}


def make_suite(folder: Path, tests: int) -> None:
    """``tests`` trivial tests in files of 500, plus a small SQLite database."""
    per_file = 500
    for start in range(0, tests, per_file):
        body = "".join(
            f"def test_{n}():\n    assert {n} == {n}\n\n" for n in range(start, start + per_file)
        )
        (folder / f"test_gen_{start // per_file}.py").write_text(body)
    with sqlite3.connect(folder / "app.db") as db:
        db.execute("CREATE TABLE users (id INTEGER PRIMARY KEY, name TEXT)")
        db.executemany("INSERT INTO users (name) VALUES (?)", [(f"u{i}",) for i in range(1000)])
    db.close()


def run_once(folder: Path, args: list[str]) -> float:
    command = [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", *args]
    started = time.perf_counter()
    subprocess.run(command, cwd=folder, check=True, stdout=subprocess.DEVNULL)
    return time.perf_counter() - started


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--tests", type=int, default=5000)
    parser.add_argument("--rounds", type=int, default=5)
    options = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp)
        make_suite(folder, options.tests)
        run_once(folder, [])  # warm the file cache and bytecode
        timings: dict[str, list[float]] = {name: [] for name in VARIANTS}
        for _ in range(options.rounds):
            for name, args in VARIANTS.items():
                timings[name].append(run_once(folder, args))
    baseline = statistics.median(timings["plain pytest"])
    print(f"{options.tests} tests, median of {options.rounds} rounds")
    for name, values in timings.items():
        median = statistics.median(values)
        print(f"  {name:32} {median:7.2f} s  {100 * (median / baseline - 1):+6.1f}%")


if __name__ == "__main__":
    main()
