"""Benchmark: the spread of scores over repeated runs of a suite with real flakiness, without
reruns and with ``--retries`` (docs/scoring.md#reruns).

The suite (tests/evaluator_flaky.py) holds a test that fails one time in three, a
timing-sensitive test and an order-dependent test. Seeded (``--seed 1``), the first one fails
its first attempt and passes its second in every run; unseeded (the default) it draws anew
each time, as a flaky test of a real suite does. Each mode scores the same repository
``--runs`` times with ``pytest-scoring run`` and reports the distinct values of
``percent_passing_tests``, their range, and how often each test was found flaky.

    python bench/bench_flaky.py --runs 10
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).parents[1] / "tests"))
from evaluator_flaky import flaky_suite  # the tests' suite, not a copy of it

#: The modes measured side by side: no reruns (the baseline), then reruns under each rule.
MODES: dict[str, list[str]] = {
    "no reruns": [],
    "--retries 2 (fail)": ["--retries", "2"],
    "--retries 2 --flaky pass": ["--retries", "2", "--flaky", "pass"],
    "--retries 2 --flaky exclude": ["--retries", "2", "--flaky", "exclude"],
}


def score_once(repo: Path, report: Path, args: list[str]) -> dict[str, Any]:
    """One ``pytest-scoring run`` of ``repo``; its ``scores.json``."""
    command = [sys.executable, "-m", "pytest_scoring", "run", str(repo), "--report", str(report)]
    command += ["--user", "root", "--strict=default", *args]
    subprocess.run(command, capture_output=True, check=False)
    (path,) = report.glob("scan_id=*/scores.json")
    content: dict[str, Any] = json.loads(path.read_text())
    return content


def measure(repo: Path, work: Path, args: list[str], runs: int) -> dict[str, Any]:
    values, flaky = [], Counter[str]()
    started = time.perf_counter()
    for run in range(runs):
        report = score_once(repo, work / f"{len(list(work.iterdir()))}-{run}", args)
        values.append(report["scores"]["percent_passing_tests"]["value"])
        flaky.update(list(report["tests"].get("flaky", {})))
    return {
        "values": sorted(set(values)),
        "spread": round(max(values) - min(values), 2),
        "flaky found (runs)": dict(flaky),
        "seconds per run": round((time.perf_counter() - started) / runs, 1),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--runs", type=int, default=10)
    parser.add_argument("--seed", type=int, default=None, help="seed the one-in-three test")
    options = parser.parse_args()
    with tempfile.TemporaryDirectory() as folder:
        repo = flaky_suite(Path(folder) / "repo", options.seed)
        work = Path(folder) / "reports"
        work.mkdir()
        for mode, args in MODES.items():
            print(mode, json.dumps(measure(repo, work, args, options.runs)), flush=True)


if __name__ == "__main__":
    main()
