"""Benchmark: our database diff against SQLite's ``sqldiff``.

Two generated databases with a table paired by INTEGER PRIMARY KEY, one paired by rowid and
one WITHOUT ROWID table, each with ``--rows`` rows; 1% of each table's rows are added,
removed and changed. Prints our time and ``sqldiff``'s side by side (best of ``--repeat``),
and the peak RSS of a child process that runs only our diff, at 100,000 rows and at
``--rows`` rows.

``--workload unique`` adds a fourth table, ``accounts``, whose ``username`` is UNIQUE; 1% of
its rows are also deleted and inserted again under a new rowid with a new password hash, so
the diff's UNIQUE pass pairs them (docs/databases.md). ``--workload nopk`` declares no primary
key anywhere: every table is paired by its rowid (as ``sqldiff`` pairs it too).

    python bench/bench_diff.py --rows 1000000
    python bench/bench_diff.py --rows 1000000 --workload unique
    python bench/bench_diff.py --sizes 1000000 --repeat 5 --baseline /work/main/.venv/bin/python

Each line gives the best of ``--repeat`` interleaved pairs and the median of the pairs'
ratios, of wall-clock time and of CPU time (``sqldiff`` runs in this process, one thread; the
CPU time is the one figure another process's load on the shared cores hardly moves). Our
diff is timed inside a child process, as are the ``--baseline`` interpreters (other
checkouts, each importing its own ``pytest_scoring``), in the same pairs.

Needs ``sqlite3-sqldiff`` (the ``bench`` dependency group).
"""

from __future__ import annotations

import argparse
import os
import random
import sqlite3
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

SCHEMA = """
CREATE TABLE users (id INTEGER PRIMARY KEY, name TEXT, email TEXT, score INTEGER);
CREATE TABLE events (name TEXT, value INTEGER, payload BLOB);
CREATE TABLE settings (key TEXT PRIMARY KEY, value TEXT) WITHOUT ROWID;
"""
NOPK_SCHEMA = """
CREATE TABLE users (id INTEGER, name TEXT, email TEXT, score INTEGER);
CREATE TABLE events (name TEXT, value INTEGER, payload BLOB);
CREATE TABLE settings (key TEXT, value TEXT);
"""
UNIQUE_SCHEMA = """
CREATE TABLE accounts (id INTEGER PRIMARY KEY, username TEXT UNIQUE, password_hash TEXT);
"""


def generate(folder: Path, rows: int, workload: str) -> tuple[Path, Path]:
    """``before.db`` and ``after.db`` with 1% of rows added, removed and changed per table."""
    before, after = folder / "before.db", folder / "after.db"
    with sqlite3.connect(before) as db:
        db.executescript(NOPK_SCHEMA if workload == "nopk" else SCHEMA)
        if workload == "unique":
            db.executescript(UNIQUE_SCHEMA)
            db.executemany(
                "INSERT INTO accounts VALUES (?, ?, 'h0')", ((i, f"user{i}") for i in range(rows))
            )
        db.executemany(
            "INSERT INTO users VALUES (?, ?, ?, ?)",
            ((i, f"user {i}", f"user{i}@example.com", i % 97) for i in range(rows)),
        )
        db.executemany(
            "INSERT INTO events VALUES (?, ?, ?)",
            ((f"event {i}", i, i.to_bytes(4, "big")) for i in range(rows)),
        )
        db.executemany(
            "INSERT INTO settings VALUES (?, ?)", ((f"key{i:08d}", f"v{i}") for i in range(rows))
        )
    db.close()
    after.write_bytes(before.read_bytes())
    _change(after, rows, keyed=workload != "nopk")
    if workload == "unique":
        _reinsert(after, rows)
    return before, after


def _change(path: Path, rows: int, keyed: bool) -> None:
    """1% of each table's rows removed, changed and added; without keys, found by rowid."""
    pick = random.Random(1).sample(range(rows), 3 * (rows // 100))
    third = len(pick) // 3
    removed, changed = pick[:third], pick[third : 2 * third]
    added = range(rows, rows + third)
    # Row i has rowid i + 1 in every table (inserted in order); a key is looked up by index.
    user, setting = ("id", "key") if keyed else ("rowid", "rowid")
    with sqlite3.connect(path) as db:
        db.executemany(f"DELETE FROM users WHERE {user} = ?", ((_id(i, keyed),) for i in removed))
        db.executemany(
            f"UPDATE users SET email = 'x' || email WHERE {user} = ?",
            ((_id(i, keyed),) for i in changed),
        )
        db.executemany("INSERT INTO users VALUES (?, 'new', 'n@x', 1)", ((i,) for i in added))
        db.executemany("DELETE FROM events WHERE rowid = ?", ((i + 1,) for i in removed))
        db.executemany(
            "UPDATE events SET value = -value WHERE rowid = ?", ((i + 1,) for i in changed)
        )
        db.executemany("INSERT INTO events VALUES ('new', ?, NULL)", ((i,) for i in added))
        db.executemany(
            f"DELETE FROM settings WHERE {setting} = ?", ((_key(i, keyed),) for i in removed)
        )
        db.executemany(
            f"UPDATE settings SET value = 'changed' WHERE {setting} = ?",
            ((_key(i, keyed),) for i in changed),
        )
        db.executemany("INSERT INTO settings VALUES (?, 'new')", ((f"key{i:08d}",) for i in added))
    db.close()


def _id(i: int, keyed: bool) -> int:
    return i if keyed else i + 1


def _key(i: int, keyed: bool) -> str | int:
    return f"key{i:08d}" if keyed else i + 1


def _reinsert(path: Path, rows: int) -> None:
    """Accounts: 1% added, removed, changed, and 1% deleted and inserted again (new rowid)."""
    pick = random.Random(2).sample(range(rows), 4 * (rows // 100))
    quarter = len(pick) // 4
    removed, changed, again = (
        pick[:quarter],
        pick[quarter : 2 * quarter],
        pick[2 * quarter :][:quarter],
    )
    with sqlite3.connect(path) as db:
        db.executemany("DELETE FROM accounts WHERE id = ?", ((i,) for i in removed))
        db.executemany(
            "UPDATE accounts SET password_hash = 'h1' WHERE id = ?", ((i,) for i in changed)
        )
        db.executemany(
            "INSERT INTO accounts (username, password_hash) VALUES (?, 'new')",
            ((f"new{i}",) for i in range(quarter)),
        )
        db.executemany("DELETE FROM accounts WHERE id = ?", ((i,) for i in again))
        db.executemany(
            "INSERT INTO accounts (username, password_hash) VALUES (?, 'h2')",
            ((f"user{i}",) for i in again),
        )
    db.close()


def ours(before: Path, after: Path) -> tuple[float, float]:
    """Wall-clock and CPU seconds of our diff."""
    from pytest_scoring.db.diff import diff_paths

    start, cpu = time.perf_counter(), time.process_time()
    diff_paths(before, after)
    return time.perf_counter() - start, time.process_time() - cpu


def theirs(before: Path, after: Path) -> tuple[float, float]:
    """Wall-clock and CPU seconds of ``sqldiff`` (this process runs nothing else meanwhile)."""
    import sqldiff  # type: ignore[import-untyped]

    start, cpu = time.perf_counter(), time.process_time()
    sqldiff.diff(str(before), str(after))
    return time.perf_counter() - start, time.process_time() - cpu


def child_peak_rss_mb(*args: str) -> float:
    """Run this script with ``args`` in a child process; return the child's peak RSS.

    Linux carries the parent's peak RSS over ``fork``/``exec`` into the child's, so the
    parent stays small: it generates nothing and diffs nothing before this is measured.
    """
    child = subprocess.Popen([sys.executable, __file__, *args])
    _pid, status, usage = os.wait4(child.pid, 0)
    if status != 0:
        raise SystemExit(f"child {args} failed with status {status}")
    return usage.ru_maxrss / 1024


def child_seconds(python: str, before: Path, after: Path) -> tuple[float, float]:
    """The wall-clock and CPU time ``python``'s own ``pytest_scoring`` takes to diff, timed
    inside its child."""
    done = subprocess.run(
        [python, __file__, "--time", str(before), str(after)],
        capture_output=True,
        text=True,
        check=True,
    )
    wall, cpu = done.stdout.split()
    return float(wall), float(cpu)


def _medians(ours_pairs: list[tuple[float, float]], theirs_pairs: list[tuple[float, float]]) -> str:
    """The median of the pairs' ratios, wall clock then CPU, with the wall-clock ratios."""
    walls = sorted(o[0] / t[0] for o, t in zip(ours_pairs, theirs_pairs, strict=True))
    cpus = sorted(o[1] / t[1] for o, t in zip(ours_pairs, theirs_pairs, strict=True))
    return (
        f"median of pairs {statistics.median(walls):4.2f} [{' '.join(f'{r:.2f}' for r in walls)}]"
        f", CPU {statistics.median(cpus):4.2f} [{' '.join(f'{r:.2f}' for r in cpus)}]"
    )


def measure(rows: int, repeat: int, workload: str, baselines: list[str]) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        child_peak_rss_mb("--generate", tmp, str(rows), workload)
        before, after = Path(tmp) / "before.db", Path(tmp) / "after.db"
        rss = child_peak_rss_mb("--child", str(before), str(after))
        size = before.stat().st_size / 1e6
        # Interleaved, so both see the same page cache and the same load from other work.
        timings = [
            (
                child_seconds(sys.executable, before, after),
                theirs(before, after),
                *(child_seconds(python, before, after) for python in baselines),
            )
            for _ in range(repeat)
        ]
        columns = list(zip(*timings, strict=True))
        ours_s, theirs_s, *others = (min(wall for wall, _cpu in column) for column in columns)
        print(
            f"{workload}  rows/table={rows:>9,}  db={size:6.1f} MB  ours={ours_s:6.2f} s  "
            f"sqldiff={theirs_s:6.2f} s  ratio={ours_s / theirs_s:4.2f} (best of {repeat}), "
            f"{_medians(list(columns[0]), list(columns[1]))}  ours peak RSS={rss:5.1f} MB"
        )
        for python, seconds, column in zip(baselines, others, columns[2:], strict=True):
            print(
                f"    baseline {python}: {seconds:6.2f} s (best), against sqldiff "
                f"{_medians(list(column), list(columns[1]))}"
            )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--rows", type=int, default=1_000_000)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--child", nargs=2, type=Path, help=argparse.SUPPRESS)
    parser.add_argument("--workload", choices=("plain", "unique", "nopk"), default="plain")
    parser.add_argument("--generate", nargs=3, help=argparse.SUPPRESS)
    parser.add_argument("--time", nargs=2, type=Path, help=argparse.SUPPRESS)
    parser.add_argument(
        "--baseline", nargs="*", default=[], help="interpreters of other checkouts to time too"
    )
    parser.add_argument(
        "--sizes", type=int, nargs="+", help="row counts (default: 100000 and --rows)"
    )
    args = parser.parse_args()
    if args.child:
        ours(*args.child)
        return
    if args.time:
        print(*ours(*args.time))
        return
    if args.generate:
        generate(Path(args.generate[0]), int(args.generate[1]), args.generate[2])
        return
    for rows in args.sizes or sorted({100_000, args.rows}):
        measure(rows, args.repeat, args.workload, args.baseline)


if __name__ == "__main__":
    main()
