"""A hostile repository against snapshots and ``--score-db-reset``: nothing written outside.

Real SQLite files and real pytest sessions; the repository plants symlinks, loops and FIFOs.
"""

from __future__ import annotations

import contextlib
import json
import os
import sqlite3
from pathlib import Path

import pytest
from processes import HANG_GUARD

from pytest_scoring.db.snapshot import reset_databases

STORE = Path("scores") / ".db-reset"


def make_db(path: Path) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    with contextlib.closing(sqlite3.connect(path)) as db:
        db.execute("CREATE TABLE t (x)")
        db.execute("INSERT INTO t VALUES (1)")
        db.commit()
    return path


@pytest.fixture
def victim(tmp_path: Path) -> Path:
    """A file outside the repository that must keep its content."""
    path = tmp_path / "outside" / "victim.txt"
    path.parent.mkdir()
    path.write_text("precious")
    return path


@pytest.fixture
def repo(tmp_path: Path) -> Path:
    make_db(tmp_path / "repo" / "app.db")
    return tmp_path / "repo"


def test_a_symlink_planted_in_the_reset_store_is_replaced_not_written_through(
    repo: Path, victim: Path
) -> None:
    (repo / STORE).mkdir(parents=True)
    (repo / STORE / "app.db").symlink_to(victim)
    (repo / STORE / "manifest.json").symlink_to(victim)
    reset_databases(repo, ["app.db"], repo / STORE)
    assert victim.read_text() == "precious"
    assert not (repo / STORE / "app.db").is_symlink()
    assert json.loads((repo / STORE / "manifest.json").read_text()) == ["app.db"]


def test_a_folder_in_the_reset_store_symlinked_out_of_it_is_never_written_through(
    tmp_path: Path, victim: Path
) -> None:
    repo = tmp_path / "repo"
    make_db(repo / "data" / "app.db")
    (repo / STORE).mkdir(parents=True)
    (repo / STORE / "data").symlink_to(victim.parent, target_is_directory=True)
    reset_databases(repo, ["data/app.db"], repo / STORE)
    assert os.listdir(victim.parent) == ["victim.txt"]


def test_a_reset_store_symlinked_out_of_the_repository_is_never_written_through(
    pytester: pytest.Pytester, victim: Path
) -> None:
    make_db(pytester.path / "app.db")
    pytester.makepyfile(test_app="def test_ok():\n    pass\n")
    (pytester.path / "scores").mkdir()
    (pytester.path / STORE).symlink_to(victim.parent, target_is_directory=True)
    result = pytester.runpytest("--score-db-diff", "--score-db-reset", "-p", "no:cacheprovider")
    result.stdout.fnmatch_lines(["db_change: N *"])
    assert os.listdir(victim.parent) == ["victim.txt"]


def test_a_reset_manifest_that_is_not_a_list_of_paths_is_ignored(repo: Path) -> None:
    (repo / STORE).mkdir(parents=True)
    (repo / STORE / "manifest.json").write_text('[1, {"a": 2}]')
    reset_databases(repo, ["app.db"], repo / STORE)
    with contextlib.closing(sqlite3.connect(repo / "app.db")) as db, db:
        db.execute("INSERT INTO t VALUES (2)")  # a test changes it; the next run restores it
    assert reset_databases(repo, ["app.db"], repo / STORE) == ["app.db"]
    with contextlib.closing(sqlite3.connect(repo / "app.db")) as db:
        assert db.execute("SELECT count(*) FROM t").fetchone() == (1,)


def test_a_database_folder_replaced_by_a_symlink_loop_is_left_alone_by_the_reset(
    tmp_path: Path,
) -> None:
    repo = tmp_path / "repo"
    make_db(repo / "data" / "app.db")
    reset_databases(repo, ["data/app.db"], repo / STORE)
    (repo / "data" / "app.db").unlink()
    (repo / "data").rmdir()
    (repo / "data").symlink_to("data")
    assert reset_databases(repo, [], repo / STORE) == []
    assert (repo / "data").is_symlink()


@pytest.mark.slow
def test_a_database_a_test_replaces_with_a_fifo_is_an_error_not_a_hang(
    pytester: pytest.Pytester,
) -> None:
    make_db(pytester.path / "app.db")
    pytester.makepyfile(
        test_app="import os\n\ndef test_swap():\n    os.unlink('app.db')\n    os.mkfifo('app.db')\n"
    )
    pytester.runpytest_subprocess("--score-db-diff", "-p", "no:cacheprovider", timeout=HANG_GUARD)
    (report,) = (pytester.path / "scores").glob("scan_id=*/scores.json")
    db_change = json.loads(report.read_text())["scores"]["db_change"]
    assert "app.db is not a regular file" in json.dumps(db_change)


def test_each_repository_has_its_own_reset_store_under_a_shared_report_root(
    pytester: pytest.Pytester,
) -> None:
    for name, value in (("first", 1), ("second", 2)):
        make_db(pytester.path / name / "app.db")
        with contextlib.closing(sqlite3.connect(pytester.path / name / "app.db")) as db:
            db.execute("UPDATE t SET x = ?", (value,))
            db.commit()
        (pytester.path / name / "pytest.ini").write_text("[pytest]\n")
        (pytester.path / name / "test_app.py").write_text(
            "import sqlite3\nfrom pathlib import Path\n\n"
            "def test_own_data():\n"
            "    db = sqlite3.connect(Path(__file__).with_name('app.db'))\n"
            f"    assert db.execute('SELECT x FROM t').fetchall() == [({value},)]\n"
        )
        result = pytester.runpytest(
            name,
            "--score-db-diff",
            "--score-db-reset",
            f"--score-report={pytester.path / 'shared'}",
        )
        result.assert_outcomes(passed=1)
    stores = sorted(path.name for path in (pytester.path / "shared" / ".db-reset").iterdir())
    assert [store.rsplit("-", 1)[0] for store in stores] == ["first", "second"]
