"""Cost of the report: writing it (scores.json + the Scout results directory) and reading it back.

Each step runs in a fresh interpreter, as it does at the end of a real session, so the import
of pyarrow is counted. Prints the median wall time of each step over several rounds, then the
cost of the report's page alone (index.html), timed in this process over the same JSON text
the writer pastes into it, and the page's size.

    python bench/bench_report.py [--tests 5000] [--rounds 5]
"""

from __future__ import annotations

import argparse
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

WRITE = """
import sys
from pathlib import Path
from pytest_scoring.core.outcomes import OutcomeTally
from pytest_scoring.report.result import SessionResult
from pytest_scoring.report.writer import write_report
from pytest_scoring.scorers import default_test_scorers
from pytest_scoring.scorers.base import ScoringContext, run_scorers

tally = OutcomeTally()
for n in range(int(sys.argv[2])):
    tally.record_outcome(f"tests/test_gen.py::test_{n}", "passed" if n % 10 else "failed", 0.001)
scorers = default_test_scorers()
scores = run_scorers(scorers, ScoringContext(root=Path("."), tally=tally))
write_report(SessionResult("repo", scorers, scores, tally.to_json()), Path(sys.argv[1]))
"""
READ = "import sys; from pytest_scoring import results_df; results_df(sys.argv[1])"
#: Failure messages as long as pytest's crash lines of assertion rewriting tend to be.
MESSAGE = "AssertionError: assert 'a' == 'b'\n  - b\n  + a"
NOTHING = "import pytest_scoring.report.writer"


def run_once(code: str, *args: str) -> float:
    started = time.perf_counter()
    subprocess.run([sys.executable, "-c", code, *args], check=True)
    return time.perf_counter() - started


def page_cost(tests: int, rounds: int) -> tuple[float, float, int]:
    """Median wall and CPU seconds of writing ``index.html`` for a ``tests``-test report (10%
    failing, with a message each), and the page's size in bytes. CPU time is given because it
    hardly moves when other work loads the machine."""
    from pytest_scoring.core.encoding import encode_json
    from pytest_scoring.core.outcomes import OutcomeTally
    from pytest_scoring.report.html import write_page
    from pytest_scoring.report.result import SCORES_FILE
    from pytest_scoring.report.result import SessionResult
    from pytest_scoring.scorers import default_test_scorers
    from pytest_scoring.scorers.base import ScoringContext
    from pytest_scoring.scorers.base import run_scorers

    tally = OutcomeTally()
    for n in range(tests):
        failing = n % 10 == 0
        outcome = "failed" if failing else "passed"
        tally.record_outcome(
            f"tests/test_gen.py::test_{n}", outcome, 0.001, MESSAGE if failing else None
        )
    scorers = default_test_scorers()
    scores = run_scorers(scorers, ScoringContext(root=Path("."), tally=tally))
    result = SessionResult("repo", scorers, scores, tally.to_json())
    texts = {SCORES_FILE: encode_json(result.scores_json())}
    wall, cpu = [], []
    with tempfile.TemporaryDirectory() as folder:
        for _ in range(rounds):
            started, started_cpu = time.perf_counter(), time.process_time()
            page = write_page(Path(folder), texts)
            wall.append(time.perf_counter() - started)
            cpu.append(time.process_time() - started_cpu)
        size = page.stat().st_size
    return statistics.median(wall), statistics.median(cpu), size


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--tests", type=int, default=5000)
    parser.add_argument("--rounds", type=int, default=5)
    options = parser.parse_args()
    steps: dict[str, list[float]] = {"import only": [], "write report": [], "results_df": []}
    with tempfile.TemporaryDirectory() as root:
        for _ in range(options.rounds):
            steps["import only"].append(run_once(NOTHING))
            steps["write report"].append(run_once(WRITE, root, str(options.tests)))
            steps["results_df"].append(run_once(READ, root))
    for name, timings in steps.items():
        print(f"{name:14} median {statistics.median(timings):.3f}s over {len(timings)} runs")
    wall, cpu, size = page_cost(options.tests, max(options.rounds, 20))
    page = f"median {1000 * wall:.1f}ms, CPU {1000 * cpu:.1f}ms ({size / 1024:.0f} KiB)"
    print(f"{'index.html':14} {page}")


if __name__ == "__main__":
    main()
