"""Benchmark: re-scoring a batch's report with a new selector against running the batch.

``N`` copies of the shipped attack example (``examples/solution-attack``) are scored against
``examples/reference`` as one batch with a configuration whose ``db_diff_change`` selector
misses the attack (``has_one: [email]``), then:

* ``run (--evidence none)``: the same batch run keeping no evidence (the cost baseline);
* ``run (--evidence diffs)``: the batch run keeping the default evidence (its size is shown);
* ``rescore``: ``pytest-scoring rescore`` of that report with ``examples/scorers.yaml`` (the
  selector that catches the attack), ``--jobs J``: no repository is run.

Each side is a process of its own with a fresh report root and baseline cache; the
wall-clock time of each is printed, the report's and the evidence's sizes, and the ratio
rescore / run (the issue's bar: under 5 %). As root, pass ``--python /usr/bin/python3``.

    python bench/bench_rescore.py --copies 50 --jobs 2 --python /usr/bin/python3
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


def timed(line: list[str], cache: Path) -> float:
    """Wall-clock seconds of one command (which must succeed)."""
    environ = {**os.environ, "XDG_CACHE_HOME": str(cache)}
    started = time.perf_counter()
    done = subprocess.run(line, env=environ, capture_output=True, text=True, check=False)
    if done.returncode != 0:
        raise SystemExit(f"failed ({done.returncode}): {' '.join(line)}\n{done.stdout}")
    return time.perf_counter() - started


def size(folder: Path, part: str = "") -> int:
    """Bytes of every file under ``folder`` (only under folders named ``part``, if given)."""
    return sum(
        path.stat().st_size
        for path in folder.rglob("*")
        if path.is_file() and (not part or part in path.relative_to(folder).parts)
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--copies", type=int, default=50)
    parser.add_argument("--jobs", type=int, default=2)
    parser.add_argument("--python", help="the repositories' interpreter (run --python)")
    arguments = parser.parse_args()
    tool = [sys.executable, "-m", "pytest_scoring"]
    with tempfile.TemporaryDirectory(prefix="bench-rescore-") as folder:
        work = Path(folder)
        work.chmod(0o755)  # other users may pass through to the copies' originals
        copies = []
        for number in range(arguments.copies):
            copy = work / "outputs" / f"attack-{number:03d}"
            shutil.copytree(EXAMPLES / "solution-attack", copy)
            copies.append(copy)
        loose = work / "loose.yaml"
        text = (EXAMPLES / "scorers.yaml").read_text()
        loose.write_text(text.replace("[password, password_hash]", "[email]"))
        run = [*tool, "run", *map(str, copies), "--reference", str(EXAMPLES / "reference")]
        run += ["--config", str(loose), "--jobs", str(arguments.jobs)]
        run += ["--python", arguments.python] if arguments.python else []
        figures: dict[str, float] = {}
        sizes: dict[str, int] = {}
        for level in ("none", "diffs"):
            root = work / f"run-{level}"
            line = [*run, "--evidence", level, "--report", str(root)]
            figures[f"run (--evidence {level})"] = timed(line, work / f"cache-{level}")
            sizes[f"report (--evidence {level})"] = size(root)
        sizes["evidence (--evidence diffs)"] = size(work / "run-diffs", "evidence")
        (report,) = (work / "run-diffs").glob("scan_id=*")
        rescore = [*tool, "rescore", str(report), "--config", str(EXAMPLES / "scorers.yaml")]
        rescore += ["--jobs", str(arguments.jobs), "--report", str(work / "rescored")]
        figures["rescore"] = timed(rescore, work / "cache-rescore")
    result = {
        "copies": arguments.copies,
        "jobs": arguments.jobs,
        "cores": os.cpu_count(),
        "seconds": {name: round(value, 2) for name, value in figures.items()},
        "bytes": sizes,
        "rescore / run": round(figures["rescore"] / figures["run (--evidence diffs)"], 4),
        "run diffs / run none": round(
            figures["run (--evidence diffs)"] / figures["run (--evidence none)"], 3
        ),
    }
    print(json.dumps(result, indent=2))


if __name__ == "__main__":
    main()
