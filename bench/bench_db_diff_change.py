"""Benchmark: ``db_diff_change``'s peak memory and time as the number of changed rows grows.

An initial database of ``N`` users; the reference run changes every user's password hash,
the solution run does the same and also makes 1% of them admins. Both diffs therefore hold
``N`` changed rows, and ``after_only`` holds the 1% role changes. Each approach runs in its
own child process (peak RSS read with ``os.wait4``) and applies a selector that must look at
every changed row of what it scores (``has_one`` plus ``$count``):

* ``db_diff_change``: both diffs stream their rows into the SQLite store, the diff-of-diffs
  is split there, the report's parts are read with 1,000 examples per list, and the selector
  streams ``after_only`` (what the scorer does now);
* ``full-lists``: both diffs held whole (``max_rows=None``) and ``diff_of_diffs`` over them
  (the approach before issue 12; run it against an older checkout with ``PYTHONPATH``);
* ``db_change``: one diff with 1,000 examples per list, the selector streaming the cut
  table's rows from SQLite (the bar ``db_diff_change`` is held to);
* ``with-baseline``: ``db_diff_change`` with the baseline's diff too (issue 11; the baseline
  changes every hash as the reference does), the selector streaming ``scored``
  (``after_only`` and ``from_tests``).

    python bench/bench_db_diff_change.py --rows 100000 1000000 2000000
    PYTHONPATH=/path/to/old/checkout python bench/bench_db_diff_change.py --modes full-lists
"""

from __future__ import annotations

import argparse
import json
import os
import sqlite3
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

SELECTOR = {"rows": {"changed": {"has_one": ["role"], "$count": {"$gte": 1}}}}
SCHEMA = "CREATE TABLE users (id INTEGER PRIMARY KEY, name TEXT, password_hash TEXT, role TEXT);"
NUMBERS = "WITH RECURSIVE s(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM s WHERE i < ?)"


def generate(folder: Path, rows: int) -> None:
    """``initial/app.db``, ``reference/app.db`` and ``solution/app.db`` under ``folder``."""
    for name in ("initial", "reference", "solution", "baseline"):
        (folder / name).mkdir()
        with sqlite3.connect(folder / name / "app.db") as db:
            db.execute(SCHEMA)
            db.execute(
                f"INSERT INTO users {NUMBERS} SELECT i, 'user' || i, 'h0', 'user' FROM s", (rows,)
            )
            if name != "initial":
                db.execute("UPDATE users SET password_hash = 'h-' || id")
            if name == "solution":
                db.execute("UPDATE users SET role = 'admin' WHERE id % 100 = 0")
        db.close()


def _snapshots(folder: Path) -> list[Any]:
    from pytest_scoring.db.snapshot import read_in_place

    names = ("initial", "reference", "solution", "baseline")
    return [read_in_place(folder / name, ["app.db"]) for name in names]


def run_db_diff_change(folder: Path, with_baseline: bool = False) -> bool:
    from pytest_scoring.db.diff_store import DiffStore
    from pytest_scoring.reference.rerun import FILE_MAX_ROWS
    from pytest_scoring.reference.rerun import split_runs
    from pytest_scoring.selector.language import parse_selector

    initial, reference, solution, baseline = _snapshots(folder)
    with tempfile.TemporaryDirectory() as store_dir:
        store = DiffStore(Path(store_dir) / "rows.db", baseline=with_baseline)
        try:
            split = split_runs(
                initial,
                reference,
                solution,
                ["*.db"],
                store,
                baseline_final=baseline if with_baseline else None,
            )
            split.parts(FILE_MAX_ROWS)
            part = "scored" if with_baseline else "after_only"
            return parse_selector(SELECTOR).matches(split.part_for_selectors(part))
        finally:
            store.close()


def run_with_baseline(folder: Path) -> bool:
    return run_db_diff_change(folder, with_baseline=True)


def run_full_lists(folder: Path) -> bool:
    from pytest_scoring.db.diff import diff_snapshots
    from pytest_scoring.db.diff_of_diffs import diff_of_diffs
    from pytest_scoring.selector.language import parse_selector

    initial, reference, solution, _baseline = _snapshots(folder)
    parts = diff_of_diffs(
        diff_snapshots(initial, reference, max_rows=None),
        diff_snapshots(initial, solution, max_rows=None),
    )
    return parse_selector(SELECTOR).matches(parts["after_only"])


def run_db_change(folder: Path) -> bool:
    from functools import partial

    from pytest_scoring.db.diff import diff_snapshots
    from pytest_scoring.db.diff_shape import stream_cut_rows
    from pytest_scoring.db.sqlite_engine import SqliteEngine
    from pytest_scoring.selector.language import parse_selector

    initial, _reference, solution, _baseline = _snapshots(folder)
    diff = diff_snapshots(initial, solution, max_rows=1000)
    rows = partial(SqliteEngine(folder, ["*.db"]).rows, initial, solution)
    return parse_selector(SELECTOR).matches(stream_cut_rows(diff, rows))


MODES = {
    "db_diff_change": run_db_diff_change,
    "full-lists": run_full_lists,
    "db_change": run_db_change,
    "with-baseline": run_with_baseline,
}


def child(*args: str) -> tuple[float, float, dict[str, Any]]:
    """Run this script with ``args`` in a child; its peak RSS (MB), CPU seconds and output.

    CPU time (user + system) is given beside the wall-clock time: on a machine shared with
    other work, it is the steadier of the two.

    Linux carries a parent's peak RSS into its children, so the parent stays small: it
    generates nothing and diffs nothing itself.
    """
    process = subprocess.Popen([sys.executable, __file__, *args], stdout=subprocess.PIPE)
    assert process.stdout is not None
    output = process.stdout.read()
    _pid, status, usage = os.wait4(process.pid, 0)
    if status != 0:
        raise SystemExit(f"child {args} failed with status {status}")
    cpu = usage.ru_utime + usage.ru_stime
    return usage.ru_maxrss / 1024, cpu, json.loads(output or b"{}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--rows", type=int, nargs="+", default=[100_000, 1_000_000, 2_000_000])
    parser.add_argument(
        "--modes", nargs="+", choices=MODES, default=["db_diff_change", "db_change"]
    )
    parser.add_argument("--child", nargs=2, help=argparse.SUPPRESS)
    parser.add_argument("--generate", nargs=2, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.generate:
        generate(Path(args.generate[0]), int(args.generate[1]))
        return
    if args.child:
        start = time.perf_counter()
        matched = MODES[args.child[0]](Path(args.child[1]))
        print(json.dumps({"seconds": time.perf_counter() - start, "matched": matched}))
        return
    for rows in args.rows:
        with tempfile.TemporaryDirectory() as tmp:
            child("--generate", tmp, str(rows))  # in a child: the parent's peak stays small
            for mode in args.modes:
                rss, cpu, result = child("--child", mode, tmp)
                print(
                    f"changed rows={rows:>9,}  {mode:<15} wall={result['seconds']:7.2f} s  "
                    f"cpu={cpu:7.2f} s  peak RSS={rss:7.1f} MB  matched={result['matched']}",
                    flush=True,
                )


if __name__ == "__main__":
    main()
