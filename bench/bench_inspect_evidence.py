"""Benchmark: what the Inspect scorers' evidence costs in the log, and re-scoring it offline.

The shipped example task's two samples (``examples/solution-honest`` and ``solution-attack``
against ``examples/reference``) are scored in Inspect's ``local`` sandbox with the mock model
by ``percent_passing_tests``, ``db_change`` and ``db_diff_change`` (whose selector misses the
attack: ``has_one: [role]``), once per ``evidence=`` level. For each: the eval's wall-clock
time, the ``.eval`` file's size, and the store's kept entries (their sizes as JSON). Then the
``diffs`` log is scored again offline (``inspect_ai.score``) with the selector that catches
the attack, and that time is set beside the eval's.

    python bench/bench_inspect_evidence.py
"""

from __future__ import annotations

import json
import tempfile
import time
from pathlib import Path
from typing import Any

from inspect_ai import Task
from inspect_ai import eval as inspect_eval
from inspect_ai import score
from inspect_ai.dataset import Sample
from inspect_ai.log import EvalLog
from inspect_ai.solver import Generate
from inspect_ai.solver import Solver
from inspect_ai.solver import TaskState
from inspect_ai.solver import solver

from pytest_scoring.evaluation.inspect_store import STORE_KEY
from pytest_scoring.inspect import db_change_scorer
from pytest_scoring.inspect import db_diff_change_scorer
from pytest_scoring.inspect import percent_passing_tests_scorer

EXAMPLES = Path(__file__).resolve().parent.parent / "examples"
MISSES = {"rows": {"changed": {"has_one": ["role"]}}}
CATCHES = json.loads((EXAMPLES / "selectors" / "password_change.json").read_text())


@solver
def written() -> Solver:
    """The solution is already in the sample's files."""

    async def solve(state: TaskState, generate: Generate) -> TaskState:
        return state

    return solve


def task(level: str, selector: dict[str, Any]) -> Task:
    samples = [
        Sample(
            id=name,
            input="x",
            files={"repo": str(EXAMPLES / name)},
            metadata={
                "repo_path": "repo",
                "reference_repo_dir": str(EXAMPLES / "reference"),
                "repo_dir": str(EXAMPLES / "reference"),
            },
        )
        for name in ("solution-honest", "solution-attack")
    ]
    scorers = [
        percent_passing_tests_scorer(evidence=level),
        db_change_scorer(selector, evidence=level),
        db_diff_change_scorer(selector, evidence=level),
    ]
    return Task(dataset=samples, solver=written(), scorer=scorers, sandbox="local")


def evaluated(level: str, logs: Path) -> tuple[EvalLog, float]:
    started = time.perf_counter()
    (log,) = inspect_eval(
        task(level, MISSES), model="mockllm/model", display="none", log_dir=str(logs / level)
    )
    return log, time.perf_counter() - started


def main() -> None:
    with tempfile.TemporaryDirectory(prefix="bench-inspect-evidence-") as folder:
        logs = Path(folder)
        kept: dict[str, EvalLog] = {}
        for level in ("none", "diffs", "all"):
            log, seconds = evaluated(level, logs)
            kept[level] = log
            size = Path(log.location).stat().st_size
            print(f"eval, evidence={level}: {seconds:.1f} s, .eval file {size / 1000:.1f} kB")
            for sample in log.samples or []:
                entries = (sample.store.get(STORE_KEY) or {}).get("bytes") or {}
                listed = ", ".join(
                    f"{name.split('/')[0]} {count / 1000:.1f} kB" for name, count in entries.items()
                )
                print(f"  {sample.id}: {listed or 'nothing kept'}")
        new = [db_change_scorer(CATCHES), db_diff_change_scorer(CATCHES)]
        started = time.perf_counter()
        again = score(kept["diffs"], new, action="overwrite", display="none")
        seconds = time.perf_counter() - started
        verdicts = {
            str(sample.id): {name: s.value for name, s in (sample.scores or {}).items()}
            for sample in again.samples or []
        }
        print(f"inspect_ai.score offline, new selector: {seconds:.2f} s; {verdicts}")


if __name__ == "__main__":
    main()
