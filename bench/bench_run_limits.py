"""Benchmark: what ``run`` as root pays for an interpreter copy and for the disk watch.

1. The copy of an interpreter the children's user cannot run (pyenv's under ``/root``): made
   once (cold, into a fresh cache folder), then found again (warm: the walk over its sources
   that names it, and the check of its folders), side by side with a plain ``shutil.copytree``
   of the same folders (the baseline a naive copy would pay every time) and with starting the
   interpreter and importing pytest (what every child pays anyway).
2. One measure of the disk watch over a tree, side by side with ``du -s`` of the same tree.

    python bench/bench_run_limits.py --python .venv/bin/python --tree .venv

Root only (the cache is root's); medians of ``--rounds``.
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import subprocess
import sys
import time
import uuid
from collections.abc import Callable
from pathlib import Path

from pytest_scoring.fs.walk import TreeWalk
from pytest_scoring.process.disk import DiskWatch
from pytest_scoring.process.environment import captured_environment
from pytest_scoring.process.interpreter import copied_folders
from pytest_scoring.process.interpreter import interpreter_copy


def timed(action: Callable[[], object]) -> float:
    started = time.perf_counter()
    action()
    return time.perf_counter() - started


def median(action: Callable[[], object], rounds: int, reset: Callable[[], object]) -> float:
    times = []
    for _ in range(rounds):
        reset()
        times.append(timed(action))
    return statistics.median(times)


def interpreter_figures(python: str, rounds: int) -> None:
    cache = Path("/var/cache/pytest-scoring") / f"bench-{uuid.uuid4().hex[:10]}"
    plain = Path("/var/tmp") / f"pytest-scoring-bench-{uuid.uuid4().hex[:10]}"
    environment = captured_environment()
    folders = copied_folders(python, environment)

    def copy_plainly() -> None:
        for number, (source, left_out) in enumerate(folders):
            skipped = {path.name for path in left_out}
            shutil.copytree(
                source,
                plain / str(number),
                symlinks=True,
                ignore=lambda folder, found, skipped=skipped: [n for n in found if n in skipped],
            )

    def clear() -> None:
        shutil.rmtree(cache, ignore_errors=True)
        shutil.rmtree(plain, ignore_errors=True)

    try:
        cold = median(lambda: interpreter_copy(python, environment, cache), rounds, clear)
        warm = median(lambda: interpreter_copy(python, environment, cache), rounds, lambda: None)
        naive = median(copy_plainly, rounds, clear)
        start = median(
            lambda: subprocess.run([python, "-c", "import pytest"], check=True), rounds, clear
        )
    finally:
        clear()
    files = sum(1 for source, left_out in folders for _ in TreeWalk(source, exclude=left_out))
    print(f"interpreter {python}: {files} names in {len(folders)} folders")
    print(f"  copy made (cold, hard links where allowed): {cold:.2f} s")
    print(f"  copy found again (warm):                    {warm:.2f} s")
    print(f"  plain shutil.copytree of the same folders:  {naive:.2f} s")
    print(f"  python -c 'import pytest':                  {start:.2f} s")


def disk_figures(tree: Path, rounds: int) -> None:
    watch = DiskWatch(limit=None)
    watch.add(tree)
    measured = median(watch.measure, rounds, lambda: None)
    du = median(
        lambda: subprocess.run(["du", "-s", str(tree)], capture_output=True), rounds, lambda: None
    )
    files = sum(1 for _ in tree.rglob("*"))
    print(f"disk watch over {tree} ({files} names, {watch.measure() / 1024**2:.0f} MiB):")
    print(f"  one measure: {measured:.2f} s; du -s: {du:.2f} s")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--python", default=sys.executable)
    parser.add_argument("--tree", type=Path, default=Path(sys.prefix))
    parser.add_argument("--rounds", type=int, default=3)
    options = parser.parse_args()
    if os.geteuid() != 0:
        sys.exit("run it as root: the interpreters' cache is root's")
    interpreter_figures(options.python, options.rounds)
    disk_figures(options.tree, options.rounds)


if __name__ == "__main__":
    main()
