"""Benchmark: what the Inspect test scorers cost per sample beyond running the tests.

One offline Inspect eval (``sandbox="local"``, ``mockllm/model``, a solver that does
nothing) of N samples, each a copy of the shipped honest example (``examples/solution-
honest``), is run twice, one sample at a time, with a different scorer each time:

* ``plain``: a scorer that runs ``python3 -m pytest -p no:cacheprovider`` in the repository
  with ``sandbox().exec`` and scores its exit status: the tests and nothing else;
* ``ours``: ``percent_passing_tests_scorer()``: the kit written into the sandbox, the
  interpreter check, the launcher, the probe's authenticated stream, the supervisor, the
  database backups, the score.

The wall-clock time of each eval is printed, and the difference per sample (the issue's bar:
under 1 s per sample beyond the tests). inspect_toolkit's scorers are measured the same way
when ``inspect_toolkit`` is installed (``--toolkit``).

    python bench/bench_inspect_overhead.py --samples 20
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time
from pathlib import Path

from inspect_ai import Task
from inspect_ai import eval as inspect_eval
from inspect_ai.dataset import Sample
from inspect_ai.scorer import CORRECT
from inspect_ai.scorer import INCORRECT
from inspect_ai.scorer import Score
from inspect_ai.scorer import Scorer
from inspect_ai.scorer import Target
from inspect_ai.scorer import accuracy
from inspect_ai.scorer import scorer
from inspect_ai.solver import Generate
from inspect_ai.solver import Solver
from inspect_ai.solver import TaskState
from inspect_ai.solver import solver
from inspect_ai.util import sandbox

from pytest_scoring.inspect import percent_passing_tests_scorer

EXAMPLE = Path(__file__).resolve().parent.parent / "examples" / "solution-honest"


@solver
def agent_done() -> Solver:
    async def solve(state: TaskState, generate: Generate) -> TaskState:
        return state

    return solve


@scorer(metrics=[accuracy()])
def plain_pytest() -> Scorer:
    """The tests alone: pytest in the repository, scored by its exit status."""

    async def score(state: TaskState, target: Target) -> Score:
        ran = await sandbox().exec(
            ["python3", "-m", "pytest", "-p", "no:cacheprovider"], cwd="repo"
        )
        return Score(value=CORRECT if ran.success else INCORRECT)

    return score


def timed(scorer_: Scorer, samples: int, logs: Path) -> float:
    """Wall-clock seconds of one eval of ``samples`` samples, one at a time."""
    dataset = [
        Sample(id=index, input="x", files={"repo": str(EXAMPLE)}, metadata={"repo_path": "repo"})
        for index in range(samples)
    ]
    task = Task(dataset=dataset, solver=agent_done(), scorer=scorer_, sandbox="local")
    started = time.perf_counter()
    (log,) = inspect_eval(
        task, model="mockllm/model", display="none", log_dir=str(logs), max_samples=1
    )
    elapsed = time.perf_counter() - started
    if log.status != "success":
        raise SystemExit(f"the eval failed: {log.error}")
    return elapsed


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--samples", type=int, default=20)
    parser.add_argument("--toolkit", action="store_true", help="also inspect_toolkit's scorer")
    arguments = parser.parse_args()
    sides = {"plain": plain_pytest(), "ours": percent_passing_tests_scorer()}
    if arguments.toolkit:
        from inspect_toolkit.scorers import test_runner_scorer  # type: ignore[import-not-found]

        sides["inspect_toolkit"] = test_runner_scorer("percent-pass")
    with tempfile.TemporaryDirectory(prefix="bench-inspect-") as folder:
        os.environ["TMPDIR"] = folder
        times = {
            name: timed(side, arguments.samples, Path(folder) / name)
            for name, side in sides.items()
        }
    for name, seconds in times.items():
        print(f"{name:16} {seconds:7.2f} s  {seconds / arguments.samples:6.3f} s per sample")
    beyond = (times["ours"] - times["plain"]) / arguments.samples
    print(f"ours beyond the tests: {beyond:.3f} s per sample")
    if "inspect_toolkit" in times:
        print(f"ours / inspect_toolkit: {times['ours'] / times['inspect_toolkit']:.2f}")
    sys.stdout.flush()


if __name__ == "__main__":
    main()
