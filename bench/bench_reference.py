"""How much wall time the reference rerun adds to a session (issue 4: overlap, not addition).

Builds a repository whose tests sleep (so they leave a core idle, like tests waiting on I/O)
and a reference checkout of it, then times side by side, in fresh processes:

* plain ``pytest --score`` in the repository;
* ``pytest --score --score-reference=…``, whose rerun runs the same tests in the copy.

Run: ``python bench/bench_reference.py --tests 20 --sleep 0.1 --rounds 3``
"""

from __future__ import annotations

import argparse
import json
import sqlite3
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path


def make_repo(path: Path, tests: int, sleep: float) -> Path:
    (path / "tests").mkdir(parents=True)
    with sqlite3.connect(path / "app.db") as conn:
        conn.execute("CREATE TABLE t (id INTEGER PRIMARY KEY, x)")
    conn.close()
    body = "\n".join(
        f"def test_{i}():\n    time.sleep({sleep})\n    write({i})\n" for i in range(tests)
    )
    (path / "tests" / "test_sleep.py").write_text(
        "import sqlite3, time\nfrom pathlib import Path\n\n"
        "def write(i):\n"
        "    with sqlite3.connect(Path(__file__).parents[1] / 'app.db') as conn:\n"
        "        conn.execute('INSERT INTO t (x) VALUES (?)', (i,))\n\n" + body
    )
    return path


def timed_session(repo: Path, *args: str) -> tuple[float, dict[str, object]]:
    report = repo.parent / "scores"
    started = time.perf_counter()
    subprocess.run(
        [
            sys.executable,
            "-m",
            "pytest",
            "-q",
            "-p",
            "no:cacheprovider",
            "--score",
            f"--score-report={report}",
            *args,
        ],
        cwd=repo,
        check=False,
        capture_output=True,
    )
    elapsed = time.perf_counter() - started
    newest = max(report.glob("scan_id=*/scores.json"), key=lambda p: p.stat().st_mtime)
    metadata = json.loads(newest.read_text())["scores"].get("db_diff_change", {})
    return elapsed, metadata.get("metadata", {})


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--tests", type=int, default=20)
    parser.add_argument("--sleep", type=float, default=0.1)
    parser.add_argument("--rounds", type=int, default=3)
    options = parser.parse_args()
    with tempfile.TemporaryDirectory() as folder:
        root = Path(folder)
        reference = make_repo(root / "reference", options.tests, options.sleep)
        plain, with_reference, rerun = [], [], []
        for round_number in range(options.rounds):
            repo = make_repo(root / f"repo{round_number}", options.tests, options.sleep)
            plain.append(timed_session(repo)[0])
            elapsed, metadata = timed_session(repo, f"--score-reference={reference}")
            with_reference.append(elapsed)
            rerun.append(float(metadata["reference_duration"]))  # type: ignore[arg-type]
    base, both, child = (statistics.median(x) for x in (plain, with_reference, rerun))
    print(f"tests: {options.tests} x {options.sleep}s sleep, median of {options.rounds}")
    print(f"plain session:                 {base:.2f} s")
    print(f"reference rerun alone:         {child:.2f} s")
    print(f"session with reference rerun:  {both:.2f} s  ({both / base:.2f}x plain)")
    print(f"if run one after the other:    {base + child:.2f} s")


if __name__ == "__main__":
    main()
