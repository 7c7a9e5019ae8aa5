"""Benchmark: the session's database snapshots against one plain copy of the files.

A session copies each database once at its start (:func:`take_snapshot`, under a read
transaction) and reads the finish state in place (:func:`read_in_place`, no copy). This
compares that cost with ``shutil.copyfile`` of the same files (main file, plus ``-wal`` in WAL
mode), best of ``--repeat``, for a rollback-journal database and for a WAL database whose
last 1% of changes still sit in ``-wal`` behind an open connection.

    python bench/bench_snapshot.py --rows 1000000

Targets: at most 1.3x the plain copy (rollback journal), 2.5x (WAL).
"""

from __future__ import annotations

import argparse
import shutil
import sqlite3
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

from pytest_scoring.db.snapshot import read_in_place
from pytest_scoring.db.snapshot import take_snapshot


def generate(path: Path, rows: int, wal: bool) -> sqlite3.Connection:
    """A database of ``rows`` users; in WAL mode the connection stays open with a full ``-wal``."""
    db = sqlite3.connect(path, isolation_level=None)
    if wal:
        db.execute("PRAGMA journal_mode = WAL")
    db.execute("CREATE TABLE users (id INTEGER PRIMARY KEY, email TEXT, password TEXT)")
    db.execute("BEGIN")
    db.executemany(
        "INSERT INTO users VALUES (?, ?, 'hash')",
        ((i, f"user{i}@example.com") for i in range(rows)),
    )
    db.execute("COMMIT")
    db.execute("PRAGMA wal_autocheckpoint = 0")
    db.execute("UPDATE users SET password = 'changed' WHERE id % 100 = 0")
    return db


def best(action: Callable[[Path], None], scratch: Path, repeat: int) -> float:
    """Best time of ``action(dest)``, each run into a fresh folder (removal not timed)."""
    times = []
    for i in range(repeat):
        dest = scratch / str(i)
        dest.mkdir(parents=True)
        start = time.perf_counter()
        action(dest)
        times.append(time.perf_counter() - start)
        shutil.rmtree(dest)
    return min(times)


def measure(rows: int, wal: bool, repeat: int) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp) / "repo"
        root.mkdir()
        writer = generate(root / "app.db", rows, wal)
        files = [p for p in root.iterdir() if not p.name.endswith("-shm")]

        def plain(dest: Path) -> None:
            for path in files:
                shutil.copyfile(path, dest / path.name)

        def session(dest: Path) -> None:
            take_snapshot(root, ["app.db"], dest)
            read_in_place(root, ["app.db"])

        scratch = Path(tmp) / "scratch"
        plain_s, ours_s = best(plain, scratch, repeat), best(session, scratch, repeat)
        size = sum(p.stat().st_size for p in files) / 1e6
        writer.close()
        mode = "WAL     " if wal else "rollback"
        print(
            f"{mode} rows={rows:>9,}  files={size:6.1f} MB  plain copy={plain_s * 1000:7.1f} ms  "
            f"session snapshots={ours_s * 1000:7.1f} ms  ratio={ours_s / plain_s:4.2f}"
        )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--rows", type=int, default=1_000_000)
    parser.add_argument("--repeat", type=int, default=5)
    args = parser.parse_args()
    for wal in (False, True):
        measure(args.rows, wal, args.repeat)


if __name__ == "__main__":
    main()
