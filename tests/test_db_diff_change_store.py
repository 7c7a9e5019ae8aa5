"""``db_diff_change`` over many changed rows: the rows go through the on-disk store."""

from __future__ import annotations

import contextlib
import json
import sqlite3
import tempfile
import textwrap
from pathlib import Path
from typing import Any

import pytest
from runs import scored_session

ROWS = 3_000
APP = """
    import sqlite3
    from pathlib import Path

    DB = Path(__file__).with_name("app.db")

    def rehash_everyone():
        with sqlite3.connect(DB) as conn:
            conn.execute("UPDATE users SET password_hash = 'h-' || id")
            {extra}
        conn.close()
"""
TESTS = """
    import sys
    from pathlib import Path

    sys.path.insert(0, str(Path(__file__).parents[1]))
    import app

    def test_rehash():
        app.rehash_everyone()
"""


def make_repo(path: Path, extra: str = "") -> Path:
    (path / "tests").mkdir(parents=True, exist_ok=True)
    (path / "app.py").write_text(textwrap.dedent(APP).replace("{extra}", extra))
    (path / "tests" / "test_app.py").write_text(textwrap.dedent(TESTS))
    with contextlib.closing(sqlite3.connect(path / "app.db")) as db:
        db.execute("CREATE TABLE users (id INTEGER PRIMARY KEY, password_hash TEXT, role TEXT)")
        db.execute(
            "INSERT INTO users WITH RECURSIVE s(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM s "
            f"WHERE i < {ROWS}) SELECT i, 'h0', 'user' FROM s"
        )
        db.commit()
    return path


def users(part: dict[str, Any]) -> dict[str, Any]:
    table: dict[str, Any] = part["comparisons"]["app.db"]["comparisons"]["data"]["tables"]
    return table["users"]


@pytest.mark.slow
def test_a_change_beyond_the_examples_is_seen_and_the_store_is_removed(
    pytester: pytest.Pytester,
    tmp_path_factory: pytest.TempPathFactory,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    reference = make_repo(tmp_path_factory.mktemp("reference"))
    make_repo(
        pytester.path, extra="conn.execute(\"UPDATE users SET role = 'admin' WHERE id = 2999\")"
    )
    temp = tmp_path_factory.mktemp("temp")
    monkeypatch.setattr(tempfile, "tempdir", str(temp))
    selector = {"rows": {"changed": {"where": {"role": "admin", "$key.id": 2999}}}}
    pytester.runpytest(f"--score-reference={reference}", f"--score-selector={json.dumps(selector)}")
    result = scored_session(pytester)
    score = result.scores["db_diff_change"]
    assert score["value"] == "C"
    # The truth, from the database file itself.
    with contextlib.closing(sqlite3.connect(pytester.path / "app.db")) as db:
        assert db.execute("SELECT role FROM users WHERE id = 2999").fetchone() == ("admin",)
    parts = result.files["diff_of_diffs.json"]
    assert users(parts["shared"])["counts"]["changed"] == ROWS
    assert len(users(parts["shared"])["rows_changed"]) == 1_000
    assert users(parts["shared"])["truncated"] is True
    assert users(parts["after_only"])["rows_changed"] == [
        {"key": {"id": 2999}, "changes": {"role": {"old_value": "user", "new_value": "admin"}}}
    ]
    assert users(result.files["reference_diff.json"])["counts"]["changed"] == ROWS
    assert not list(temp.glob("pytest-scoring-diffs-*"))
