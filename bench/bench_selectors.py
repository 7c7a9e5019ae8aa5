"""Benchmark: selector matching and diff-of-diffs over a diff with many changed rows.

A generated diff of one table with ``--rows`` added rows and ``--rows`` changed rows (two
columns each). Prints the time to parse and match three selectors that must look at every
row (no early match), and the time of ``diff_of_diffs`` between two diffs that share half
of the changes (best of ``--repeat``).

    python bench/bench_selectors.py --rows 100000
"""

from __future__ import annotations

import argparse
import time
from collections.abc import Callable
from typing import Any

from pytest_scoring.db.diff_of_diffs import diff_of_diffs
from pytest_scoring.selector.language import parse_selector

SELECTORS: dict[str, Any] = {
    "changed where (regex)": {"rows": {"changed": {"where": {"password": {"$regex": "^x"}}}}},
    "added has_one template": {"rows": {"added": {"has_one": [{"role": "admin"}]}}},
    "changed $count": {"rows": {"changed": {"has_one": "role", "$count": {"$eq": 0}}}},
}


def make_diff(rows: int, variant: str) -> dict[str, Any]:
    """A diff of one table; ``variant`` changes the new values of every other row."""
    changed = [
        {
            "key": {"id": i},
            "changes": {
                "password": {"old_value": f"p{i}", "new_value": f"h{i}{variant * (i % 2)}"},
                "email": {"old_value": f"a{i}", "new_value": f"b{i}"},
            },
        }
        for i in range(rows)
    ]
    added = [{"id": rows + i, "email": f"n{i}", "role": "user"} for i in range(rows)]
    table = {
        "status": "changed",
        "rows_added": added,
        "rows_removed": [],
        "rows_changed": changed,
        "counts": {"added": rows, "removed": 0, "changed": rows},
        "truncated": False,
    }
    planes = {"data": {"has_changes": True, "tables": {"users": table}}}
    return {"status": "success", "comparisons": {"app.db": {"comparisons": planes, "info": {}}}}


def best(repeat: int, work: Callable[[], object]) -> float:
    """The best wall-clock time of ``repeat`` runs."""
    times = []
    for _ in range(repeat):
        start = time.perf_counter()
        work()
        times.append(time.perf_counter() - start)
    return min(times)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, default=100_000)
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args()
    reference, solution = make_diff(args.rows, ""), make_diff(args.rows, "x")
    for name, raw in SELECTORS.items():
        seconds = best(args.repeat, lambda raw=raw: parse_selector(raw).matches(solution))
        print(f"match {name:<26} {seconds:8.3f} s  ({2 * args.rows:,} rows)")
    seconds = best(args.repeat, lambda: diff_of_diffs(reference, solution))
    print(f"diff_of_diffs {'':<20} {seconds:8.3f} s  ({4 * args.rows:,} rows)")


if __name__ == "__main__":
    main()
