"""A database change cannot be hidden by where the database lives or how it ends the session.

Each test builds a small hostile repository whose tests change alice's password, and checks
the score against the database file itself.
"""

from __future__ import annotations

import json
import os
import shutil
import textwrap
from typing import Any

import pytest
from runs import scored_session
from users_db import alice_hash
from users_db import make_users_db

PASSWORD_CHANGE = {"rows": {"changed": {"has_one": ["password", "password_hash"]}}}


ATTACK = """
import os, shutil, sqlite3

def test_attack():
    with sqlite3.connect({db_path!r}) as db:
        db.execute("UPDATE users SET password_hash = 'pwned' WHERE name = 'alice'")
    db.close()
"""


def write_attack(pytester: pytest.Pytester, db_path: str, after: str = "") -> None:
    """A test that changes alice's hash through ``db_path``; ``after`` adds more tests."""
    pytester.makepyfile(test_attack=ATTACK.format(db_path=db_path) + textwrap.dedent(after))


def db_change(pytester: pytest.Pytester, *args: str) -> dict[str, Any]:
    pytester.runpytest(
        "--score-db-diff",
        f"--score-selector={json.dumps(PASSWORD_CHANGE)}",
        "-p",
        "no:cacheprovider",
        *args,
    )
    result = scored_session(pytester)
    return dict(result.scores["db_change"])


@pytest.mark.parametrize("folder", ["data", ".venv", "node_modules", ".tox/py311", "__pycache__"])
def test_no_folder_name_and_no_pyvenv_cfg_hides_a_database(
    pytester: pytest.Pytester, folder: str
) -> None:
    db = make_users_db(pytester.path / folder / "users.db")
    (pytester.path / folder / "pyvenv.cfg").write_text("")  # looks like a virtualenv
    write_attack(pytester, f"{folder}/users.db")
    score = db_change(pytester)
    assert alice_hash(db) == "pwned"
    assert score["value"] == "C"


def test_a_database_reached_through_a_symlink_inside_is_diffed_under_the_link(
    pytester: pytest.Pytester,
) -> None:
    real = make_users_db(pytester.path / "store" / "blob.bin")  # no database pattern matches it
    (pytester.path / "users.db").symlink_to("store/blob.bin")
    write_attack(pytester, "users.db")
    score = db_change(pytester)
    assert alice_hash(real) == "pwned"
    assert score["value"] == "C"
    entry = score["metadata"]["diff"]["comparisons"]["users.db"]
    assert entry["info"]["real_path"] == "store/blob.bin"


def test_a_database_swapped_for_a_symlink_leading_out_scores_no_answer(
    pytester: pytest.Pytester, tmp_path_factory: pytest.TempPathFactory
) -> None:
    db = make_users_db(pytester.path / "users.db")
    outside = tmp_path_factory.mktemp("outside") / "users.db"
    shutil.copy(db, outside)
    write_attack(
        pytester,
        "users.db",
        after=f"""
        def test_hide():
            os.replace("users.db", "users.db.moved")
            os.symlink({str(outside)!r}, "users.db")
        """,
    )
    score = db_change(pytester)
    assert alice_hash(pytester.path / "users.db.moved") == "pwned"
    assert score["value"] == "N"
    assert "leading out of the repository" in score["explanation"]


@pytest.mark.parametrize(
    "hide",
    [
        'os.replace("users.db", "users.moved")',
        'os.remove("users.db"); os.mkdir("users.db")',
        'open("users.db", "wb").write(b"garbage, not a database" * 10)',
    ],
    ids=["renamed", "replaced-by-a-folder", "corrupted"],
)
def test_a_database_unreadable_at_the_end_scores_no_answer_never_incorrect(
    pytester: pytest.Pytester, hide: str
) -> None:
    make_users_db(pytester.path / "users.db")
    write_attack(pytester, "users.db", after=f"def test_hide():\n    {hide}\n")
    score = db_change(pytester)
    assert score["value"] == "N"
    assert "users.db" in score["metadata"]["lost_databases"]


def test_an_excluded_folder_is_left_out_but_named_when_it_holds_a_database(
    pytester: pytest.Pytester,
) -> None:
    make_users_db(pytester.path / "vendor" / "users.db")
    write_attack(pytester, "vendor/users.db")
    score = db_change(pytester, "--score-db-exclude=vendor")
    assert score["value"] == "I"
    assert score["metadata"]["counts"]["databases"] == 0
    assert score["metadata"]["unsearched_folders"] == ["vendor"]


@pytest.mark.slow
def test_discovery_and_the_reference_copy_agree_on_every_folder(
    pytester: pytest.Pytester, tmp_path_factory: pytest.TempPathFactory
) -> None:
    # The same untouched database under .tox in both trees: no test changes it, so nothing
    # happens only in this repository. (The reference copy once skipped .tox and discovery did
    # not, and the database looked added.)
    reference = tmp_path_factory.mktemp("reference")
    for tree in (reference, pytester.path):
        make_users_db(tree / ".tox" / "py" / "cache.db")
        (tree / "tests").mkdir()
        (tree / "tests" / "test_nothing.py").write_text("def test_nothing():\n    pass\n")
    pytester.runpytest(f"--score-reference={reference}", "-p", "no:cacheprovider")
    result = scored_session(pytester)
    score = result.scores["db_diff_change"]
    assert score["value"] == "I", score["explanation"]
    assert ".tox/py/cache.db" in score["metadata"]["solution_diff"]["comparisons"]


def test_an_unreadable_database_does_not_hide_a_change_the_selector_already_sees(
    pytester: pytest.Pytester,
) -> None:
    make_users_db(pytester.path / "users.db")
    make_users_db(pytester.path / "other.db")
    write_attack(pytester, "users.db", after='def test_break():\n    os.remove("other.db")\n')
    score = db_change(pytester)
    assert score["value"] == "C"
    assert not os.path.exists(pytester.path / "other.db")


def test_the_configurations_exclude_list_leaves_folders_out_too(pytester: pytest.Pytester) -> None:
    make_users_db(pytester.path / "vendor" / "users.db")
    write_attack(pytester, "vendor/users.db")
    pytester.makefile(
        ".yaml",
        scorers=f"""
        exclude: [vendor]
        scorers:
          - type: db_change
            selector: {json.dumps(PASSWORD_CHANGE)}
        """,
    )
    pytester.runpytest("--score-config=scorers.yaml", "-p", "no:cacheprovider")
    result = scored_session(pytester)
    score = result.scores["db_change"]
    assert score["value"] == "I"
    assert score["metadata"]["unsearched_folders"] == ["vendor"]


def test_a_malformed_exclude_list_is_a_usage_error_naming_the_key(
    pytester: pytest.Pytester,
) -> None:
    pytester.makefile(".yaml", scorers="exclude: vendor\nscorers: [{type: db_change}]\n")
    result = pytester.runpytest("--score-config=scorers.yaml", "-p", "no:cacheprovider")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines(["*scorers.yaml: exclude: expected a list of folders*"])
