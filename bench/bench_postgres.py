"""Benchmark: PostgreSQL snapshots and diff against the server's own plain operations.

A throwaway cluster (tests/postgres_cluster.py) gets a table of ``--rows`` rows; then a
share of its rows (each of ``--changes``) is added, removed and changed. Side by side, in
one run:

* our snapshot (``admin.snapshot``: terminate, copy closed, revoke) against a plain
  ``CREATE DATABASE … TEMPLATE … STRATEGY FILE_COPY`` of the same database (median of
  ``--repeat`` interleaved pairs, each side first in turn, each copy after a ``CHECKPOINT``
  and ``sync``: the machine's writeback of earlier steps otherwise swings one copy from 0.1 s
  to 2.5 s);
* our diff of the two snapshots (``diff_databases``, ``max_rows=1000``) against reading both
  tables once in full (``COPY … TO STDOUT`` of both, thrown away), read two ways: by
  psycopg's ``Copy`` in this process, and by ``psql`` into ``/dev/null`` (libpq's C client:
  the cheaper read, the stricter yardstick); median of ``--repeat`` interleaved rounds, each
  of the three first in turn;
* the peak RSS of a child process that imports ``pytest_scoring`` and runs only our diff
  (read with ``os.wait4``; the diff is timed inside it), per share of changed rows: flat
  means it does not grow with that share.

    python bench/bench_postgres.py --rows 1000000 --changes 0.01 0.3
"""

from __future__ import annotations

import argparse
import contextlib
import os
import statistics
import subprocess
import sys
import time
from collections.abc import Callable
from collections.abc import Iterator
from pathlib import Path

import psycopg

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "tests"))

from postgres_cluster import ADMIN
from postgres_cluster import Cluster
from postgres_cluster import running_cluster

from pytest_scoring.db.postgres import admin
from pytest_scoring.db.postgres import claims

CHILD = """
import sys, time
from pytest_scoring.db.postgres.diff import Side, diff_databases
start = time.perf_counter()
entry = diff_databases(sys.argv[1], Side(sys.argv[2]), Side(sys.argv[3]), "bench")
print(time.perf_counter() - start)
print(entry["comparisons"]["data"]["tables"]["items"]["counts"])
"""


def _fill(app: str, rows: int) -> None:
    with psycopg.connect(app, autocommit=True) as db:
        db.execute(
            "CREATE TABLE items (id int PRIMARY KEY, name text, email text UNIQUE, score int)"
        )
        db.execute(
            "INSERT INTO items SELECT n, 'user ' || n, 'user' || n || '@example.com', n %% 97 "
            "FROM generate_series(1, %s) n",
            (rows,),
        )


def _change(app: str, rows: int, share: float) -> None:
    step = max(1, round(1 / share))
    with psycopg.connect(app, autocommit=True) as db:
        db.execute("DELETE FROM items WHERE id %% %s = 1", (step,))
        db.execute("UPDATE items SET score = score + 1 WHERE id %% %s = 2", (step,))
        db.execute(
            "INSERT INTO items SELECT n, 'new ' || n, 'new' || n || '@example.com', 0 "
            "FROM generate_series(%s, %s) n",
            (rows + 1, rows + rows // step),
        )


def _settle(cluster: Cluster) -> None:
    """Write out what earlier steps left dirty, so that no timed copy pays for it."""
    with psycopg.connect(cluster.admin_url, autocommit=True) as db:
        db.execute("CHECKPOINT")
    os.sync()


def _timed(action: Callable[..., object], *args: object) -> float:
    start = time.perf_counter()
    action(*args)
    return time.perf_counter() - start


def _plain_copy(cluster: Cluster, database: str) -> str:
    name = admin.new_name("plain")
    with psycopg.connect(cluster.admin_url, autocommit=True) as db:
        db.execute(f"CREATE DATABASE {name} TEMPLATE {database} STRATEGY FILE_COPY")  # type: ignore[arg-type]
    return name


def _our_snapshot(cluster: Cluster, database: str) -> admin.Snapshot:
    return admin.snapshot(cluster.admin_url, database)


def _read_both(cluster: Cluster, first: str, second: str) -> None:
    for database in (first, second):
        with (
            admin.opened(cluster.admin_url, database) as db,
            db.cursor() as cursor,
            cursor.copy("COPY public.items TO STDOUT") as copy,
        ):
            for _block in copy:
                pass


@contextlib.contextmanager
def _open_to_psql(cluster: Cluster, *databases: str) -> Iterator[None]:
    """Snapshots that let connections in meanwhile (outside the timing): ``psql`` cannot
    use :func:`admin.opened`."""
    with psycopg.connect(cluster.admin_url, autocommit=True) as db:
        for allowed in (True, False):
            for database in databases:
                db.execute(f"ALTER DATABASE {database} ALLOW_CONNECTIONS {allowed}")  # type: ignore[arg-type]
            if allowed:
                yield


def _psql_both(cluster: Cluster, first: str, second: str) -> None:
    for database in (first, second):
        subprocess.run(
            [str(cluster.bindir / "psql"), "-X", "-q",
             cluster.url(ADMIN, cluster.password, database), "-c", "COPY public.items TO STDOUT"],
            stdout=subprocess.DEVNULL,
            check=True,
        )  # fmt: skip


def _diff_in_child(cluster: Cluster, first: str, second: str) -> tuple[float, float, str]:
    child = subprocess.Popen(
        [sys.executable, "-c", CHILD, cluster.admin_url, first, second],
        stdout=subprocess.PIPE,
        text=True,
    )
    out = child.stdout.read() if child.stdout else ""
    _pid, status, usage = os.wait4(child.pid, 0)
    if status:
        raise SystemExit(f"the diff failed: {status}")
    seconds, counts = out.strip().splitlines()
    return float(seconds), usage.ru_maxrss / 1024, counts


def _rotated(steps: tuple[str, ...], turn: int) -> tuple[str, ...]:
    first = turn % len(steps)
    return steps[first:] + steps[:first]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, default=1_000_000)
    parser.add_argument("--changes", type=float, nargs="+", default=[0.01, 0.3])
    parser.add_argument("--repeat", type=int, default=5, help="Pairs timed (median)")
    options = parser.parse_args()
    with running_cluster() as cluster:
        if isinstance(cluster, str):
            raise SystemExit(cluster)
        print(f"{options.rows:,} rows; rows added, removed and changed: each share below")
        for share in options.changes:
            app = cluster.application()
            _fill(app, options.rows)
            database = admin.database_of(app)
            before = admin.snapshot(cluster.admin_url, database)
            _plain_copy(cluster, database)  # the first copy warms the cache for the timed ones
            plain, ours = [], []
            for pair in range(options.repeat):  # interleaved, each first in turn
                for take in (_plain_copy, _our_snapshot)[:: 1 if pair % 2 else -1]:
                    _settle(cluster)
                    seconds = _timed(take, cluster, database)
                    (plain if take is _plain_copy else ours).append(seconds)
            _change(app, options.rows, share)
            after = admin.snapshot(cluster.admin_url, database)
            _settle(cluster)
            reads, psqls, diffs, peak = [], [], [], 0.0
            for turn in range(options.repeat):  # interleaved, each first in turn
                for step in _rotated(("copy", "psql", "diff"), turn):
                    if step == "copy":
                        reads.append(_timed(_read_both, cluster, before.name, after.name))
                    elif step == "psql":
                        with _open_to_psql(cluster, before.name, after.name):
                            psqls.append(_timed(_psql_both, cluster, before.name, after.name))
                    else:
                        diff_s, rss, counts = _diff_in_child(cluster, before.name, after.name)
                        diffs.append(diff_s)
                        peak = max(peak, rss)
            plain_s, ours_s = statistics.median(plain), statistics.median(ours)
            read_s, psql_s = statistics.median(reads), statistics.median(psqls)
            diff_s = statistics.median(diffs)
            print(
                f"share {share:.0%}: snapshot {ours_s:.2f} s vs plain copy {plain_s:.2f} s "
                f"({ours_s / plain_s:.2f}x); diff {diff_s:.2f} s vs COPY both by psycopg "
                f"{read_s:.2f} s ({diff_s / read_s:.2f}x), by psql {psql_s:.2f} s "
                f"({diff_s / psql_s:.2f}x); diff peak RSS {peak:.1f} MB; {counts}; "
                f"load average {os.getloadavg()[0]:.1f}"
            )
            claims.sweep(cluster.admin_url, admin.PREFIX)


if __name__ == "__main__":
    main()
