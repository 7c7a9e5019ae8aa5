"""Benchmark: the peak memory of ``pytest-scoring diff`` over one huge value changed (issue 32).

For each ``--megabytes`` size, two databases whose table holds a BLOB and a TEXT of that size
(the BLOB written with ``zeroblob``, the TEXT with ``printf``); the after side has one byte
of each changed, through incremental BLOB I/O. Each ``--python`` runs ``pytest-scoring diff
--json`` on them in a child; its peak RSS is the child's ``VmHWM`` (counted from its own
``exec``), its time the wall clock. Give another checkout's interpreter as the baseline.

    python bench/bench_large_values.py --megabytes 100 1000 \\
        --python .venv/bin/python /work/main/.venv/bin/python --baseline-up-to 100
"""

from __future__ import annotations

import argparse
import contextlib
import sqlite3
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Final

#: SQLite's default largest value is 1,000,000,000 bytes: "1000" MB is just under it.
LARGEST: Final = 999_999_000
#: Runs ``pytest_scoring`` as ``__main__`` and writes its peak RSS (kB) to file ``argv[1]``.
MEASURED = """
import atexit, runpy, sys
from pathlib import Path
from typing import Final

def peak(out=sys.argv[1]):
    status = Path("/proc/self/status").read_text().splitlines()
    Path(out).write_text(next(line.split()[1] for line in status if line.startswith("VmHWM:")))

atexit.register(peak)
sys.argv = sys.argv[1:]
runpy.run_module("pytest_scoring", run_name="__main__", alter_sys=True)
"""


def make(path: Path, size: int, changed: bool) -> None:
    """A ``size``-byte BLOB and TEXT; ``changed``: one byte in the middle of each differs."""
    with contextlib.closing(sqlite3.connect(path)) as db:
        db.execute("CREATE TABLE files (id INTEGER PRIMARY KEY, kind TEXT, body)")
        db.execute("INSERT INTO files VALUES (1, 'blob', zeroblob(?))", (size,))
        db.execute("INSERT INTO files VALUES (2, 'text', printf('%.*c', ?, 'y'))", (size,))
        db.commit()
        if changed:
            for row in (1, 2):
                with db.blobopen("files", "body", row) as blob:
                    blob.seek(size // 2)
                    blob.write(b"x")
            db.commit()


def measure(python: str, before: Path, after: Path, folder: Path) -> tuple[float, float, int]:
    """Peak RSS in MB, seconds and exit status of one ``diff`` by ``python``."""
    peak = folder / "peak.txt"
    peak.unlink(missing_ok=True)
    command = [python, "-c", MEASURED, str(peak), "diff", str(before), str(after), "--json"]
    start = time.perf_counter()
    done = subprocess.run(command, cwd=folder, stdout=subprocess.DEVNULL, check=False)
    seconds = time.perf_counter() - start
    rss = int(peak.read_text()) / 1024 if peak.exists() else float("nan")
    return rss, seconds, done.returncode


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--megabytes", type=int, nargs="+", default=[100, 1000])
    parser.add_argument("--python", nargs="+", default=[sys.executable])
    parser.add_argument(
        "--baseline-up-to", type=int, default=100, help="run the other interpreters up to this"
    )
    args = parser.parse_args()
    print(f"{'value':>8} {'python':<40} {'peak RSS':>9} {'seconds':>8} exit")
    for megabytes in args.megabytes:
        with tempfile.TemporaryDirectory() as name:
            folder = Path(name)
            before, after = folder / "before.db", folder / "after.db"
            size = min(megabytes * 1_000_000, LARGEST)
            make(before, size, changed=False)
            make(after, size, changed=True)
            for index, python in enumerate(args.python):
                if index and megabytes > args.baseline_up_to:
                    continue
                rss, seconds, status = measure(python, before, after, folder)
                print(f"{megabytes:>6}MB {python:<40} {rss:7.0f}MB {seconds:8.2f} {status}")


if __name__ == "__main__":
    main()
