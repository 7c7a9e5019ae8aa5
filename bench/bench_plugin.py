"""Plugin overhead over plain pytest on a generated suite of trivial tests (target: at most 5%).

Each round runs plain ``pytest`` and every variant once, in fresh processes and in a shuffled
order, so that a slow moment of a shared machine hits all of them alike. The overhead of a
variant is the median of its per-round ratios to the plain run of the same round, with the
interquartile range of those ratios. ``--callgrind`` adds instruction counts (one run each under
valgrind's callgrind, which counts instructions and so does not depend on the machine's load).

    python bench/bench_plugin.py [--tests 5000] [--pairs 15] [--callgrind]
"""

from __future__ import annotations

import argparse
import random
import re
import shutil
import sqlite3
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

PLAIN = "pytest"
VARIANTS = {
    "pytest --junitxml": ["--junitxml=junit.xml"],
    "pytest --score": ["--score"],
    "pytest --score --score-db-diff": ["--score", "--score-db-diff"],
}


def make_suite(folder: Path, tests: int) -> None:
    """``tests`` trivial tests in files of 500, plus a small SQLite database."""
    per_file = 500
    for start in range(0, tests, per_file):
        count = min(per_file, tests - start)
        body = "".join(
            f"def test_{n}():\n    assert {n} == {n}\n\n" for n in range(start, start + count)
        )
        (folder / f"test_gen_{start // per_file}.py").write_text(body)
    with sqlite3.connect(folder / "app.db") as db:
        db.execute("CREATE TABLE users (id INTEGER PRIMARY KEY, name TEXT)")
        db.executemany("INSERT INTO users (name) VALUES (?)", [(f"u{i}",) for i in range(1000)])
    db.close()


def command(args: list[str]) -> list[str]:
    return [
        sys.executable,
        "-m",
        "pytest",
        "-q",
        "-p",
        "no:cacheprovider",
        "-p",
        "no:randomly",
        *args,
    ]


def run_once(folder: Path, args: list[str]) -> float:
    started = time.perf_counter()
    subprocess.run(command(args), cwd=folder, check=True, stdout=subprocess.DEVNULL)
    elapsed = time.perf_counter() - started
    shutil.rmtree(folder / "scores", ignore_errors=True)  # every run writes a fresh report
    return elapsed


def instructions(folder: Path, args: list[str]) -> int | None:
    """Instructions executed by one run under callgrind, or None without valgrind."""
    if shutil.which("valgrind") is None:
        return None
    out = folder / "callgrind.out"
    done = subprocess.run(
        ["valgrind", "--tool=callgrind", f"--callgrind-out-file={out}", *command(args)],
        cwd=folder,
        capture_output=True,
        text=True,
        check=True,
    )
    out.unlink(missing_ok=True)
    shutil.rmtree(folder / "scores", ignore_errors=True)
    found = re.search(r"Collected : (\d+)", done.stderr)
    return int(found.group(1)) if found else None


def quartiles(values: list[float]) -> tuple[float, float, float]:
    q1, median, q3 = statistics.quantiles(values, n=4, method="inclusive")
    return q1, median, q3


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--tests", type=int, default=5000)
    parser.add_argument("--pairs", type=int, default=15, help="rounds of interleaved runs")
    parser.add_argument("--callgrind", action="store_true", help="also count instructions")
    options = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp)
        make_suite(folder, options.tests)
        run_once(folder, [])  # warm the file cache and bytecode
        plain: list[float] = []
        ratios: dict[str, list[float]] = {name: [] for name in VARIANTS}
        for _ in range(options.pairs):
            order = [PLAIN, *VARIANTS]
            random.shuffle(order)
            times = {name: run_once(folder, VARIANTS.get(name, [])) for name in order}
            plain.append(times[PLAIN])
            for name in VARIANTS:
                ratios[name].append(times[name] / times[PLAIN])
        counts = (
            {name: instructions(folder, VARIANTS.get(name, [])) for name in (PLAIN, *VARIANTS)}
            if options.callgrind
            else {}
        )
    print(f"{options.tests} tests, {options.pairs} interleaved rounds")
    print(f"  {PLAIN:32} median {statistics.median(plain):6.2f} s")
    for name, values in ratios.items():
        q1, median, q3 = quartiles(values)
        print(
            f"  {name:32} {100 * (median - 1):+6.1f}%  "
            f"(IQR {100 * (q1 - 1):+.1f}% to {100 * (q3 - 1):+.1f}%)"
        )
    if counts:
        base = counts[PLAIN]
        print("instructions (callgrind, one run each):")
        for name, count in counts.items():
            change = f"{100 * (count / base - 1):+6.1f}%" if count and base else ""
            print(f"  {name:32} {count or 0:>15,} {change}")


if __name__ == "__main__":
    main()
