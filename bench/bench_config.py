"""Benchmark: loading and checking a configuration of many scorers (issue 32).

Writes a JSON configuration of each ``--scorers`` size (file_contents, db_change, test and
composite entries in turn, each composite reading the one before: a chain as long as the file)
and times ``load_configuration`` with a command-line selector of ``--clauses`` clauses, which
every ``db_change`` entry takes. Each figure is the best of ``--rounds`` runs in a child process
of each ``--python`` (the first is the one measured; give another checkout's interpreter as the
baseline), so each interpreter loads its own ``pytest_scoring``. Time per scorer staying flat
as the size grows is what linear means.

    python bench/bench_config.py --scorers 2000 20000 --clauses 100 \\
        --python .venv/bin/python /work/main/.venv/bin/python
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

#: What each child runs: load the configuration, print the seconds it took.
CHILD = """
import json, sys, time
from pathlib import Path
from pytest_scoring.scorers.config_file import load_configuration
from pytest_scoring.scorers.registry import BUILTIN_TYPES
selector = json.loads(Path(sys.argv[2]).read_text())
start = time.perf_counter()
loaded = load_configuration(Path(sys.argv[1]), BUILTIN_TYPES, {"selector": selector})
print(time.perf_counter() - start, len(loaded.scorers))
"""


def entry(index: int) -> dict[str, Any]:
    """Entry ``index`` of the configuration (four kinds in turn)."""
    kind = index % 4
    if kind == 0:
        return {"type": "file_contents", "name": f"todo{index}", "folder_path": "src",
                "search_string": f"TODO{index}"}  # fmt: skip
    if kind == 1:
        return {"type": "db_change", "name": f"db{index}"}
    if kind == 2:
        return {"type": "percent_passing_tests", "name": f"tests{index}"}
    reads = [f"tests{index - 1}"] + ([f"chain{index - 4}"] if index >= 4 else [])
    return {"type": "composite", "name": f"chain{index}", "scorers": reads,
            "formula": f"tests{index - 1}.value == 100"}  # fmt: skip


def load_seconds(python: str, config: Path, selector: Path, rounds: int) -> float | None:
    """The best time of ``rounds`` loads in children of ``python`` (None when one fails)."""
    times = []
    for _ in range(rounds):
        done = subprocess.run(
            [python, "-c", CHILD, str(config), str(selector)],
            capture_output=True,
            text=True,
            cwd=config.parent,  # never this checkout's pytest_scoring by way of sys.path[0]
        )
        if done.returncode != 0:
            print(f"{python}: {done.stderr.strip().splitlines()[-1:]}", file=sys.stderr)
            return None
        times.append(float(done.stdout.split()[0]))
    return min(times)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--scorers", type=int, nargs="+", default=[2_000, 20_000])
    parser.add_argument("--clauses", type=int, default=100)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--python", nargs="+", default=[sys.executable])
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as folder:
        selector = Path(folder, "selector.json")
        clauses = [{"rows": {"changed": {"has_one": [f"c{i}"]}}} for i in range(args.clauses)]
        selector.write_text(json.dumps({"$or": clauses}))
        print(f"{'scorers':>8} {'python':<40} {'seconds':>8} {'ms/scorer':>9}")
        for size in args.scorers:
            config = Path(folder, f"scores-{size}.json")
            config.write_text(json.dumps({"scorers": [entry(i) for i in range(size)]}))
            for python in args.python:
                seconds = load_seconds(python, config, selector, args.rounds)
                per_scorer = f"{seconds:8.2f} {seconds / size * 1e3:9.3f}" if seconds else ""
                shown = per_scorer or "failed"
                print(f"{size:>8} {python:<40} {shown}", flush=True)


if __name__ == "__main__":
    main()
