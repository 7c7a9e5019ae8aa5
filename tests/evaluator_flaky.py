"""A suite with real flakiness, for ``run --retries`` (tests and bench/bench_flaky.py).

* ``test_one_in_three`` fails one time in three: attempt k of a run (counted in ``HOME``,
  which each run gets fresh) draws the k-th number of ``random.Random(SEED)``; with SEED 1
  the first attempt fails and the second passes, in every run. Without a seed (the bench) it
  draws a new number each time.
* ``test_timing_sensitive`` fails when a slow test ran just before it in the same process,
  and passes alone.
* ``test_order_b`` fails after ``test_order_a`` in the same process, and passes alone.
* ``test_broken`` always fails; ``test_fine`` always passes.
"""

from __future__ import annotations

from pathlib import Path

SUITE = """
import random, time
from pathlib import Path

SEED = {seed}

def _attempt():
    counter = Path.home() / ".attempts"
    number = int(counter.read_text()) + 1 if counter.exists() else 1
    counter.write_text(str(number))
    return number

def test_one_in_three():
    number = _attempt()
    draws = random.Random(SEED) if SEED is not None else random.SystemRandom()
    value = [draws.random() for _ in range(number)][-1]
    assert value >= 1 / 3, f"attempt {{number}} drew {{value:.2f}}"

STARTED = []

def test_slow_neighbour():
    STARTED.append(time.monotonic())
    time.sleep(0.6)

def test_timing_sensitive():
    began = STARTED[0] if STARTED else time.monotonic()
    assert time.monotonic() - began < 0.5

SEEN = []

def test_order_a():
    SEEN.append("a")

def test_order_b():
    assert SEEN == []

def test_broken():
    assert False

def test_fine():
    pass
"""

#: The tests whose attempts differ in every run of the seeded suite.
FLAKY = (
    "tests/test_flaky.py::test_one_in_three",
    "tests/test_flaky.py::test_timing_sensitive",
    "tests/test_flaky.py::test_order_b",
)


def flaky_suite(folder: Path, seed: int | None = 1) -> Path:
    """Write the suite into ``folder`` (a repository), seeded or not."""
    (folder / "tests").mkdir(parents=True)
    (folder / "tests" / "test_flaky.py").write_text(SUITE.format(seed=seed))
    return folder
