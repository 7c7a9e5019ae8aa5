"""Benchmark: one batch of N repositories against N single-repository ``run``s, one after another.

``N`` copies of the shipped attack example (``examples/solution-attack``) are scored against
``examples/reference`` with ``examples/scorers.yaml``, twice, each from a fresh report root
and a fresh baseline cache (so neither side profits from the other's cached baseline run):

* ``single``: ``pytest-scoring run COPY …`` once per copy, one after another (what scoring
  many repositories took before batches);
* ``batch``: ``pytest-scoring run COPY COPY … --jobs J`` (the reference copied, snapshotted
  and its baseline run once; each repository in a worker forked from a preloaded server).

Both sides run the same command line apart from the REPOs and ``--jobs``, as processes of
their own; the wall-clock time of each is printed, with the ratio batch / single (the issue's
bar: at most 0.6 with ``--jobs 2`` on 2 cores). As root, pass ``--python /usr/bin/python3``
(an interpreter others may run) to measure full containment, as in production.

    python bench/bench_batch.py --copies 50 --jobs 2
    python bench/bench_batch.py --copies 50 --jobs 2 --python /usr/bin/python3
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

EXAMPLES = Path(__file__).resolve().parent.parent / "examples"


def command(*args: str | Path) -> list[str]:
    return [sys.executable, "-m", "pytest_scoring", "run", *map(str, args)]


def timed(commands: list[list[str]], cache: Path) -> float:
    """Wall-clock seconds to run ``commands`` one after another (each must succeed)."""
    environ = {**os.environ, "XDG_CACHE_HOME": str(cache)}
    started = time.perf_counter()
    for line in commands:
        done = subprocess.run(line, env=environ, capture_output=True, text=True, check=False)
        if done.returncode != 0:
            raise SystemExit(f"failed ({done.returncode}): {' '.join(line)}\n{done.stdout}")
    return time.perf_counter() - started


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--copies", type=int, default=50)
    parser.add_argument("--jobs", type=int, default=2)
    parser.add_argument("--python", help="the repositories' interpreter (run --python)")
    parser.add_argument("--sides", nargs="+", default=["single", "batch"])
    arguments = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="bench-batch-") as folder:
        work = Path(folder)
        work.chmod(0o755)  # other users may pass through to the copies' originals
        copies = []
        for number in range(arguments.copies):
            copy = work / "outputs" / f"attack-{number:03d}"
            shutil.copytree(EXAMPLES / "solution-attack", copy)
            copies.append(copy)
        shared = ["--reference", EXAMPLES / "reference", "--config", EXAMPLES / "scorers.yaml"]
        if arguments.python:
            shared += ["--python", arguments.python]
        figures = {}
        if "single" in arguments.sides:
            singles = [command(copy, *shared, "--report", work / "single") for copy in copies]
            figures["single"] = timed(singles, work / "cache-single")
        if "batch" in arguments.sides:
            jobs = ["--jobs", str(arguments.jobs)]
            batch = command(*copies, *shared, *jobs, "--report", work / "batch")
            figures["batch"] = timed([batch], work / "cache-batch")
    result = {
        "copies": arguments.copies,
        "jobs": arguments.jobs,
        "cores": os.cpu_count(),
        "seconds": {side: round(seconds, 1) for side, seconds in figures.items()},
    }
    if len(figures) == 2:
        result["batch / single"] = round(figures["batch"] / figures["single"], 3)
    print(json.dumps(result))


if __name__ == "__main__":
    main()
