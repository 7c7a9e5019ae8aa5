"""Benchmark: one password change hidden under noise rows, scored by ``db_diff_change``.

An initial database of ``N`` users. The reference and the baseline change nothing; the
scored repository changes one column of every user (``N`` changed rows of noise), adds ``N``
rows to the same table (``N`` added rows of noise) and changes the password hash of one user,
the last one by key, so that a scan in key order meets it last. The selector is the one
``examples/scorers.yaml`` gives, ``rows.changed.has_one: [password, password_hash]``.

The diffs are computed and split once (not on the selector's budget; timed apart), then the
scorer scores them with its default budget of 60 s (``--score-selector-timeout``): the verdict
must be ``C``. Each run is a child process (peak RSS and CPU time from ``os.wait4``);
``--baseline PATH`` runs the same in a checkout of the code before the change, side by side.

    python bench/bench_noise.py --rows 1000000
    python bench/bench_noise.py --rows 1000000 --baseline /path/to/old/checkout
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

SELECTOR = {"rows": {"changed": {"has_one": ["password", "password_hash"]}}}
SCHEMA = "CREATE TABLE users (id INTEGER PRIMARY KEY, name TEXT, password_hash TEXT, seen INT);"
NUMBERS = "WITH RECURSIVE s(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM s WHERE i < ?)"


def generate(folder: Path, rows: int) -> None:
    """``initial``, ``reference``, ``baseline`` and ``solution`` folders, each with ``app.db``."""
    for name in ("initial", "reference", "baseline", "solution"):
        (folder / name).mkdir()
        with sqlite3.connect(folder / name / "app.db") as db:
            db.execute(SCHEMA)
            db.execute(
                f"INSERT INTO users {NUMBERS} SELECT i, 'user' || i, 'h0', 0 FROM s", (rows,)
            )
            if name == "solution":
                db.execute("UPDATE users SET seen = id")
                db.execute(
                    f"INSERT INTO users {NUMBERS} SELECT ? + i, 'noise' || i, 'h0', 0 FROM s",
                    (rows, rows),
                )
                db.execute("UPDATE users SET password_hash = 'pwned' WHERE id = ?", (rows,))
        db.close()


class Prepared:
    """The reference side of a session, already diffed (what ``ReferenceRerun`` gives)."""

    def __init__(self, settings: Any, diffs: Any):
        self.settings = settings
        self._diffs = diffs

    def diffs(self, session: Any) -> Any:
        return self._diffs


def score(folder: Path) -> dict[str, Any]:
    """Diff and split the runs, then score them; the seconds of each step and the score."""
    from pytest_scoring.core.outcomes import OutcomeTally
    from pytest_scoring.core.settings import ScoringSettings
    from pytest_scoring.db.diff_store import DiffStore
    from pytest_scoring.db.snapshot import read_in_place
    from pytest_scoring.reference.rerun import FILE_MAX_ROWS
    from pytest_scoring.reference.rerun import Diffs
    from pytest_scoring.reference.rerun import split_runs
    from pytest_scoring.scorers.base import ScoringContext
    from pytest_scoring.scorers.db_diff_change import db_diff_change_scorer

    names = ("initial", "reference", "baseline", "solution")
    initial, reference, baseline, solution = (read_in_place(folder / n, ["app.db"]) for n in names)
    with tempfile.TemporaryDirectory() as store_dir:
        start = time.perf_counter()
        store = DiffStore(Path(store_dir) / "rows.db", baseline=True)
        split = split_runs(initial, reference, solution, ["*.db"], store, baseline_final=baseline)
        diffs = Diffs(split, split.parts(FILE_MAX_ROWS), {}, [], "not run", solution)
        prepared = time.perf_counter()
        scorer = db_diff_change_scorer(SELECTOR)
        context = ScoringContext(folder / "solution", OutcomeTally())
        settings = ScoringSettings(root=folder / "solution")
        context.inputs.references[scorer.inputs_key()] = Prepared(settings, diffs)
        result = scorer.score(context)
        scored = time.perf_counter()
        store.close()
    return {
        "diff": prepared - start,
        "score": scored - prepared,
        "value": result["value"],
        "explanation": result["explanation"],
    }


def child(*args: str, python_path: str | None = None) -> tuple[float, float, dict[str, Any]]:
    """Run this script with ``args`` in a child: its peak RSS (MB), CPU seconds and output."""
    env = dict(os.environ)
    if python_path is not None:
        env["PYTHONPATH"] = python_path
    process = subprocess.Popen([sys.executable, __file__, *args], stdout=subprocess.PIPE, env=env)
    assert process.stdout is not None
    output = process.stdout.read()
    _pid, status, usage = os.wait4(process.pid, 0)
    if status != 0:
        raise SystemExit(f"child {args} failed with status {status}")
    return usage.ru_maxrss / 1024, usage.ru_utime + usage.ru_stime, json.loads(output or b"{}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--rows", type=int, default=1_000_000)
    parser.add_argument("--baseline", help="a checkout of the code before, scored side by side")
    parser.add_argument("--child", help=argparse.SUPPRESS)
    parser.add_argument("--generate", nargs=2, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.generate:
        generate(Path(args.generate[0]), int(args.generate[1]))
        return
    if args.child:
        print(json.dumps(score(Path(args.child))))
        return
    with tempfile.TemporaryDirectory() as tmp:
        child("--generate", tmp, str(args.rows))
        codes = [("this checkout", None)]
        if args.baseline:
            codes.append(("baseline", str(Path(args.baseline).resolve())))
        for label, path in codes:
            rss, cpu, result = child("--child", tmp, python_path=path)
            print(
                f"noise rows={args.rows:,} changed + {args.rows:,} added  {label:<14} "
                f"diff and split={result['diff']:6.1f} s  selector={result['score']:6.1f} s  "
                f"cpu={cpu:6.1f} s  peak RSS={rss:6.1f} MB  value={result['value']}",
                flush=True,
            )
            print(f"    {result['explanation']}", flush=True)


if __name__ == "__main__":
    main()
