"""Benchmark: ``db_diff_change``'s three runs beside a plain scored session (issue 32).

A repository whose tests each spend ``--busy`` seconds of CPU and ``--sleep`` seconds waiting
(as tests waiting on I/O do), then insert ``--rows`` rows into a SQLite database (rows the
diffs after the runs read), and a reference
checkout of it. Timed side by side in one run, ``pytest-scoring run`` in fresh processes,
``--rounds`` rounds, each command first in turn:

* ``plain``: ``run REPO`` (the scored session alone);
* ``db_diff_change``: ``run REPO --reference REF`` with an empty baseline cache: the session,
  the reference rerun and the baseline (the reference's own tests);
* ``cached baseline``: the same, the baseline read from a cache filled before the rounds.

Prints each command's median, fastest and slowest wall time, the medians' ratio to
``plain``'s, and the load average before and after the rounds (the machine may be shared).
``--evaluators`` names the interpreters of several checkouts of pytest-scoring (this one and
the code before a change): their commands join the same rounds.

As root every run has a user id of its own and the runs overlap; as any other user they run
one after the other (docs/reference.md). As root, give ``--python /usr/bin/python3`` (an
interpreter the runs' users can execute, with pytest).

    python bench/bench_overlap.py --tests 20 --busy 0.1 --sleep 0.1 --rounds 5 \\
        --python /usr/bin/python3 --evaluators .venv/bin/python /work/main/.venv/bin/python
"""

from __future__ import annotations

import argparse
import os
import sqlite3
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

#: A command: the evaluator's interpreter and what it runs.
Key = tuple[str, str]

TEST = """
import sqlite3, time
from pathlib import Path

def work(i):
    end = time.process_time() + {busy}
    while time.process_time() < end:
        pass
    time.sleep({sleep})
    with sqlite3.connect(Path(__file__).parents[1] / "app.db") as conn:
        conn.executemany("INSERT INTO t (x) VALUES (?)", [(i,)] * {rows})
    conn.close()
"""


def make_repo(path: Path, tests: int, busy: float, sleep: float, rows: int) -> Path:
    """A checkout of ``tests`` tests, each busy then asleep, then writing ``rows`` rows."""
    (path / "tests").mkdir(parents=True)
    with sqlite3.connect(path / "app.db") as conn:
        conn.execute("CREATE TABLE t (id INTEGER PRIMARY KEY, x)")
    conn.close()
    body = "".join(f"\ndef test_{i}():\n    work({i})\n" for i in range(tests))
    (path / "tests" / "test_work.py").write_text(
        TEST.format(busy=busy, sleep=sleep, rows=rows) + body
    )
    for folder in (path, path / "tests"):
        folder.chmod(0o755)
    return path


def timed(command: list[str], cache: Path) -> float:
    """Wall-clock seconds of one ``pytest-scoring`` command (its exit status checked), run
    from the root folder: ``-m pytest_scoring`` imports the evaluator's checkout, not this
    folder's."""
    environ = {**os.environ, "XDG_CACHE_HOME": str(cache)}
    started = time.perf_counter()
    done = subprocess.run(
        command, env=environ, cwd="/", capture_output=True, text=True, check=False
    )
    seconds = time.perf_counter() - started
    if done.returncode not in (0, 1):
        raise SystemExit(f"{' '.join(command)} failed ({done.returncode}):\n{done.stderr}")
    return seconds


def interleaved(commands: dict[Key, Callable[[int], float]], rounds: int) -> dict[Key, list[float]]:
    """Each command timed once per round, the round's first command moving along by one (so
    no command always runs first, after a quiet spell, or last)."""
    names = list(commands)
    times: dict[Key, list[float]] = {name: [] for name in names}
    for round_ in range(rounds):
        for step in range(len(names)):
            name = names[(round_ + step) % len(names)]
            times[name].append(commands[name](round_))
    return times


def load() -> str:
    """The 1-, 5- and 15-minute load averages."""
    return " ".join(f"{figure:.2f}" for figure in os.getloadavg())


def commands(
    evaluator: str, work: Path, repo: Path, reference: Path, python: str | None
) -> dict[str, Callable[[int], float]]:
    """One evaluator's three commands, each taking the round's number (its empty cache's
    name); the cached baseline's cache (under ``work``, of this evaluator's own) is filled
    here, before the rounds."""
    evaluator = os.path.abspath(evaluator)
    run = [evaluator, "-m", "pytest_scoring", "run", str(repo), "--report", str(work / "r")]
    if python:
        run += ["--python", python]
    diff = [*run, "--reference", str(reference)]
    timed(diff, work / "warm")
    return {
        "plain": lambda round_: timed(run, work / f"plain-{round_}"),
        "db_diff_change": lambda round_: timed(diff, work / f"empty-{round_}"),
        "cached baseline": lambda round_: timed(diff, work / "warm"),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--tests", type=int, default=20)
    parser.add_argument("--busy", type=float, default=0.1, help="CPU seconds per test")
    parser.add_argument("--sleep", type=float, default=0.1, help="seconds asleep per test")
    parser.add_argument("--rows", type=int, default=1, help="rows each test inserts")
    parser.add_argument("--rounds", type=int, default=5, help="rounds of the commands")
    parser.add_argument("--python", help="the repository's interpreter (run --python)")
    parser.add_argument(
        "--evaluators",
        nargs="+",
        default=[sys.executable],
        help="interpreters of pytest-scoring checkouts to compare (their commands interleaved)",
    )
    arguments = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="bench-overlap-") as folder:
        work = Path(folder)
        work.chmod(0o755)  # the runs' users pass through to the checkouts
        shape = (arguments.tests, arguments.busy, arguments.sleep, arguments.rows)
        repo, reference = make_repo(work / "repo", *shape), make_repo(work / "reference", *shape)
        everything = {}
        for number, evaluator in enumerate(arguments.evaluators):
            caches = work / f"caches-{number}"
            found = commands(evaluator, caches, repo, reference, arguments.python)
            everything.update({(evaluator, name): command for name, command in found.items()})
        before = load()
        times = interleaved(everything, arguments.rounds)
        after = load()
    as_root = "as root: users of their own" if os.geteuid() == 0 else "one user: one after another"
    each = f"{arguments.busy} s busy + {arguments.sleep} s asleep + {arguments.rows} rows each"
    print(f"{arguments.tests} tests, {each}; {as_root}; {arguments.rounds} rounds")
    print(f"load average before {before}, after {after}")
    for evaluator in arguments.evaluators:
        print(f"{evaluator}: {'median':>8} {'min':>8} {'max':>8}  against plain")
        plain = statistics.median(times[evaluator, "plain"])
        for (which, name), seconds in times.items():
            if which == evaluator:
                middle = statistics.median(seconds)
                spread = f"{middle:7.2f}s {min(seconds):7.2f}s {max(seconds):7.2f}s"
                print(f"  {name:<16} {spread}  {middle / plain:5.2f}x", flush=True)


if __name__ == "__main__":
    main()
