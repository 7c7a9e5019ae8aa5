"""Benchmark: ``$regex`` selectors on RE2 (what pytest-scoring uses) against Python's ``re``.

A generated diff of one table with ``--rows`` changed rows; each selector is a
``rows.changed.where`` ``$regex`` that no row matches, so every row is searched. The same
selector runs with the engine swapped for Python's ``re`` (the baseline, what selectors used
before). The hostile pattern of the issue (``^(\\w+\\s?)*$``, values of 30 letters and a ``!``)
runs on every row with RE2; with ``re`` one value already takes exponential time, so the
baseline is timed on one value of growing length instead.

    python bench/bench_regex.py --rows 100000
"""

from __future__ import annotations

import argparse
import re
import time
from collections.abc import Callable
from typing import Any
from unittest import mock

from pytest_scoring.selector import where
from pytest_scoring.selector.language import parse_selector

PATTERNS = {
    "anchored literal": "^x",
    "alternation": "password|secret|token",
    "character class run": "[A-Za-z0-9+/]{40,}=",
    "case-insensitive": "/ADMIN$/i",
}
HOSTILE = r"^(\w+\s?)*$"


def make_diff(rows: int, value: Callable[[int], str]) -> dict[str, Any]:
    """A diff of one table with ``rows`` changed rows whose new password is ``value(i)``."""
    changed = [
        {"key": {"id": i}, "changes": {"password": {"old_value": f"p{i}", "new_value": value(i)}}}
        for i in range(rows)
    ]
    table = {
        "status": "changed",
        "rows_added": [],
        "rows_removed": [],
        "rows_changed": changed,
        "counts": {"added": 0, "removed": 0, "changed": rows},
        "truncated": False,
    }
    planes = {"data": {"has_changes": True, "tables": {"users": table}}}
    return {"status": "success", "comparisons": {"app.db": {"comparisons": planes, "info": {}}}}


def python_re(raw: Any, path: str) -> re.Pattern[bytes]:
    """The baseline engine: Python's ``re`` on the same bytes the selector searches."""
    pattern, flags = raw, 0
    if raw.startswith("/") and raw.rfind("/") > 0:
        closing = raw.rfind("/")
        pattern = raw[1:closing]
        flags = re.IGNORECASE if "i" in raw[closing + 1 :] else 0
    return re.compile(pattern.encode(), flags)


def seconds(work: Callable[[], object], repeat: int) -> float:
    """The best wall-clock time of ``repeat`` runs."""
    times = []
    for _ in range(repeat):
        start = time.perf_counter()
        work()
        times.append(time.perf_counter() - start)
    return min(times)


def match_time(pattern: str, diff: dict[str, Any], repeat: int, engine: str) -> float:
    selector = {"rows": {"changed": {"where": {"password": {"$regex": pattern}}}}}
    if engine == "re":
        with mock.patch.object(where, "compile_regex", python_re):
            parsed = parse_selector(selector)
    else:
        parsed = parse_selector(selector)
    assert not parsed.matches(diff)
    return seconds(lambda: parsed.matches(diff), repeat)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, default=100_000)
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args()
    hashes = make_diff(args.rows, lambda i: f"h{i:08x}" * 4)
    print(f"{'pattern':<22} {'RE2':>9} {'Python re':>10}  ({args.rows:,} changed rows)")
    for name, pattern in PATTERNS.items():
        fast = match_time(pattern, hashes, args.repeat, "re2")
        slow = match_time(pattern, hashes, args.repeat, "re")
        print(f"{name:<22} {fast:8.3f}s {slow:9.3f}s")
    hostile = make_diff(args.rows, lambda i: "a" * 30 + "!")
    print(f"{'hostile ' + HOSTILE:<22} {match_time(HOSTILE, hostile, 1, 're2'):8.3f}s", end="")
    print("  (Python re: one value, below)")
    for length in (16, 18, 20, 22):
        one = make_diff(1, lambda i, n=length: "a" * n + "!")
        print(f"  Python re, one value of {length + 1} characters: ", end="", flush=True)
        print(f"{match_time(HOSTILE, one, 1, 're'):8.3f}s")


if __name__ == "__main__":
    main()
