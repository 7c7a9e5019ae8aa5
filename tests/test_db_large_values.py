"""A value of hundreds of megabytes changed in a database: the diff, the selectors and the
report hold its stub, hashed in chunks, and the evaluator's memory stays small (issue 32).

The peak memory is that of a child process (its ``VmHWM``, counted from its own ``exec``:
``ru_maxrss`` would carry this process's peak over), with a bound far above what it takes
(some 30 to 100 MB) and far below what reading the value whole took (gigabytes): it cannot
flake. ``bench/bench_large_values.py`` measures the 1 GB case.
"""

from __future__ import annotations

import base64
import contextlib
import hashlib
import json
import sqlite3
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from runs import scored_session

from pytest_scoring.core.score import DEFAULT_VALUE_CAP
from pytest_scoring.db.diff import diff_paths
from pytest_scoring.db.diff import diff_snapshots
from pytest_scoring.db.large_values import LARGE_VALUE
from pytest_scoring.db.large_values import UNREADABLE_VALUE
from pytest_scoring.db.snapshot import read_in_place

pytestmark = pytest.mark.slow

BLOB = 300_000_000
TEXT = 20_000_000
#: Far below twice the value (the diff of before and after), far above what the diff takes.
PEAK_BOUND = 200 * 1024 * 1024
#: Where the after side's BLOB differs from the before side's (all zeros).
CHANGED_AT = BLOB // 2


def zeros_then_x(size: int, at: int | None) -> str:
    """The SHA-256 of ``size`` zero bytes with an ``x`` at ``at`` (if any), hashed in chunks."""
    digest, chunk = hashlib.sha256(), bytes(1 << 20)
    done = 0
    while done < size:
        part = chunk[: min(len(chunk), size - done)]
        if at is not None and done <= at < done + len(part):
            part = part[: at - done] + b"x" + part[at - done + 1 :]
        digest.update(part)
        done += len(part)
    return digest.hexdigest()


def make_before(path: Path) -> None:
    """Rows: 1 a 300 MB BLOB, 2 a 20 MB TEXT, 3 a small text; zeroblob writes no buffer."""
    with contextlib.closing(sqlite3.connect(path)) as db:
        # The BLOB column last: SQLite then writes a zeroblob without a buffer of its size.
        db.execute("CREATE TABLE files (id INTEGER PRIMARY KEY, note TEXT, body)")
        db.execute("INSERT INTO files VALUES (1, 'big', zeroblob(?))", (BLOB,))
        db.execute("INSERT INTO files VALUES (2, 'text', printf('%.*c', ?, 'y'))", (TEXT,))
        db.execute("INSERT INTO files VALUES (3, 'small', 'small')")
        db.commit()


def change_after(path: Path) -> None:
    """One byte of the BLOB, through incremental I/O (no 300 MB buffer here either)."""
    with contextlib.closing(sqlite3.connect(path)) as db:
        with db.blobopen("files", "body", 1) as blob:
            blob.seek(CHANGED_AT)
            blob.write(b"x")
        db.execute("UPDATE files SET note = 'changed' WHERE id = 3")
        db.commit()


#: Runs module ``argv[2]`` as ``__main__`` and writes its peak RSS (kB) to file ``argv[1]``.
MEASURED = """
import atexit, runpy, sys
from pathlib import Path

def peak(out=sys.argv[1]):
    status = Path("/proc/self/status").read_text().splitlines()
    Path(out).write_text(next(line.split()[1] for line in status if line.startswith("VmHWM:")))

atexit.register(peak)
module, sys.argv = sys.argv[2], sys.argv[2:]
runpy.run_module(module, run_name="__main__", alter_sys=True)
"""


def run_measured(module: str, args: list[str], cwd: Path) -> tuple[int, str, int]:
    """Exit status, standard output and peak RSS in bytes of ``python -m module args``."""
    peak = cwd / "peak-rss.txt"
    command = [sys.executable, "-c", MEASURED, str(peak), module, *args]
    done = subprocess.run(command, cwd=cwd, stdout=subprocess.PIPE, text=True, check=False)
    return done.returncode, done.stdout, int(peak.read_text()) * 1024


def table_of(diff: dict[str, Any], database: str) -> dict[str, Any]:
    tables: dict[str, Any] = diff["comparisons"][database]["comparisons"]["data"]["tables"]
    return tables["files"]


def test_a_300_mb_blob_changed_is_a_stub_hashed_in_chunks_in_little_memory(
    tmp_path: Path,
) -> None:
    before, after = tmp_path / "before.db", tmp_path / "after.db"
    make_before(before)
    make_before(after)
    change_after(after)
    status, output, peak = run_measured(
        "pytest_scoring", ["diff", str(before), str(after), "--json"], tmp_path
    )
    assert status == 1  # different
    files = table_of(json.loads(output), "after.db")
    assert files["counts"] == {"added": 0, "removed": 0, "changed": 2}
    changed = {row["key"]["id"]: row["changes"] for row in files["rows_changed"]}
    assert set(changed) == {1, 3}  # the equal 20 MB texts compare equal
    old, new = changed[1]["body"]["old_value"], changed[1]["body"]["new_value"]
    head = {"$blob": base64.b64encode(bytes(DEFAULT_VALUE_CAP)).decode("ascii")}
    assert old == {"$truncated": BLOB, "sha256": zeros_then_x(BLOB, None), "head": head}
    assert new == {"$truncated": BLOB, "sha256": zeros_then_x(BLOB, CHANGED_AT), "head": head}
    assert peak < PEAK_BOUND, f"peak RSS {peak:,} bytes"


def test_a_large_text_is_a_text_stub_and_small_values_stay_whole(tmp_path: Path) -> None:
    before, after = tmp_path / "before.db", tmp_path / "after.db"
    with contextlib.closing(sqlite3.connect(before)) as db:
        db.execute("CREATE TABLE notes (id INTEGER PRIMARY KEY, body TEXT)")
        db.execute("INSERT INTO notes VALUES (1, 'short'), (2, 'kept')")
        db.commit()
    with contextlib.closing(sqlite3.connect(after)) as db:
        db.execute("CREATE TABLE notes (id INTEGER PRIMARY KEY, body TEXT)")
        db.execute("INSERT INTO notes VALUES (1, printf('%.*c', ?, 'y')), (2, 'kept')", (TEXT,))
        db.execute("INSERT INTO notes VALUES (3, 'new')")
        db.commit()
    status, output, _ = run_measured(
        "pytest_scoring", ["diff", str(before), str(after), "--json"], tmp_path
    )
    assert status == 1
    tables = json.loads(output)["comparisons"]["after.db"]["comparisons"]["data"]["tables"]
    notes = tables["notes"]
    (change,) = notes["rows_changed"]
    assert change["changes"]["body"]["old_value"] == "short"
    assert change["changes"]["body"]["new_value"] == {
        "$truncated": TEXT,
        "sha256": hashlib.sha256(b"y" * TEXT).hexdigest(),
        "head": "y" * DEFAULT_VALUE_CAP,
    }
    assert notes["rows_added"] == [{"id": 3, "body": "new"}]
    assert TEXT > LARGE_VALUE


def test_a_scored_session_that_changes_a_300_mb_blob_stays_small_and_reports_a_stub(
    pytester: pytest.Pytester,
) -> None:
    (pytester.path / "data").mkdir()
    database = pytester.path / "data" / "app.db"
    make_before(database)
    pytester.makepyfile(
        test_blob=f"""
        import sqlite3

        def test_changes_one_byte():
            db = sqlite3.connect("data/app.db")
            with db.blobopen("files", "body", 1) as blob:
                blob.seek({CHANGED_AT})
                blob.write(b"x")
            db.commit()
            db.close()
        """
    )
    selector = {"rows": {"changed": {"where": {"$changed_columns": {"$eq": "body"}}}}}
    args = ["-p", "no:cacheprovider", "--score-db-diff", f"--score-selector={json.dumps(selector)}"]
    status, _, peak = run_measured("pytest", args, pytester.path)
    assert status == 0
    db_change = scored_session(pytester).scores["db_change"]
    assert db_change["value"] == "C"
    (folder,) = (pytester.path / "scores").glob("scan_id=*")
    files = table_of(json.loads((folder / "diff.json").read_text()), "data/app.db")
    (change,) = files["rows_changed"]
    assert change["changes"]["body"]["new_value"]["sha256"] == zeros_then_x(BLOB, CHANGED_AT)
    assert peak < PEAK_BOUND, f"peak RSS {peak:,} bytes"


def test_rows_given_to_a_sink_are_stubs_given_once(tmp_path: Path) -> None:
    """The diff-of-diffs takes every row as it comes: a large table is guarded up front."""
    for name in ("before", "after"):
        (tmp_path / name).mkdir()
        with contextlib.closing(sqlite3.connect(tmp_path / name / "app.db")) as db:
            db.execute("CREATE TABLE notes (id INTEGER PRIMARY KEY, body TEXT)")
            db.execute("INSERT INTO notes VALUES (1, printf('%.*c', ?, ?))", (TEXT, name[0]))
            db.execute("INSERT INTO notes VALUES (2, ?)", (name,))
            db.commit()
    received: list[tuple[str, dict[str, Any]]] = []
    diff = diff_snapshots(
        read_in_place(tmp_path / "before", ["app.db"]),
        read_in_place(tmp_path / "after", ["app.db"]),
        row_sink=lambda _db, _table, kind, row, _times: received.append((kind, row)),
    )
    assert "error" not in diff["comparisons"]["app.db"]
    assert [(kind, row["key"]) for kind, row in received] == [
        ("changed", {"id": 1}),
        ("changed", {"id": 2}),
    ]
    stub = received[0][1]["changes"]["body"]["new_value"]
    assert stub["sha256"] == hashlib.sha256(b"a" * TEXT).hexdigest()
    assert stub["head"] == "a" * DEFAULT_VALUE_CAP


def _two_sides(tmp_path: Path, schema: str, rows: dict[str, list[tuple[Any, ...]]]) -> None:
    for name, values in rows.items():
        with contextlib.closing(sqlite3.connect(tmp_path / f"{name}.db")) as db:
            db.execute(schema)
            for row in values:
                marks = ", ".join("?" for _ in row)
                db.execute(f"INSERT INTO t VALUES ({marks})", row)
            db.commit()


def test_rows_paired_through_a_unique_column_show_a_large_value_as_its_stub(
    tmp_path: Path,
) -> None:
    big = "z" * TEXT
    _two_sides(
        tmp_path,
        "CREATE TABLE t (id INTEGER PRIMARY KEY, name TEXT UNIQUE, body TEXT)",
        {"before": [(1, "ann", "small")], "after": [(2, "ann", big)]},
    )
    diff = diff_paths(tmp_path / "before.db", tmp_path / "after.db")
    table = diff["comparisons"]["after.db"]["comparisons"]["data"]["tables"]["t"]
    (change,) = table["rows_changed"]
    assert change["paired_by"] == ["name"]
    stub = change["changes"]["body"]["new_value"]
    assert stub["$truncated"] == TEXT and stub["head"] == "z" * DEFAULT_VALUE_CAP


def test_a_large_value_in_a_without_rowid_table_is_an_error_not_its_size_in_memory(
    tmp_path: Path,
) -> None:
    _two_sides(
        tmp_path,
        "CREATE TABLE t (k TEXT PRIMARY KEY, body TEXT) WITHOUT ROWID",
        {"before": [("a", "small")], "after": [("a", "y" * TEXT)]},
    )
    status, output, peak = run_measured(
        "pytest_scoring",
        ["diff", str(tmp_path / "before.db"), str(tmp_path / "after.db"), "--json"],
        tmp_path,
    )
    assert status == 2  # a database could not be diffed
    entry = json.loads(output)["comparisons"]["after.db"]
    assert entry["error"] == f"after.db: {UNREADABLE_VALUE}"
    assert peak < PEAK_BOUND, f"peak RSS {peak:,} bytes"
