"""``file_contents``: searching the files under a folder of the repository."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import pytest

from pytest_scoring import file_contents_scorer
from pytest_scoring.core.outcomes import OutcomeTally
from pytest_scoring.core.score import Score
from pytest_scoring.errors import ConfigError
from pytest_scoring.scorers.base import ScoringContext
from pytest_scoring.scorers.file_contents import CHUNK_SIZE


def score(root: Path, folder: str, needle: str, **options: Any) -> Score:
    scorer = file_contents_scorer(folder, needle, **options)
    return scorer.score(ScoringContext(root=root, tally=OutcomeTally()))


@pytest.fixture
def repo(tmp_path: Path) -> Path:
    src = tmp_path / "src"
    (src / "deep").mkdir(parents=True)
    (src / "app.py").write_text("PASSWORD = 'Hunter2'\n")
    (src / "notes.txt").write_text("nothing here\n")
    (src / "deep" / "secret.md").write_text("the token is xyzzy\n")
    return tmp_path


def test_a_string_in_some_file_scores_correct_with_the_counts(repo: Path) -> None:
    result = score(repo, "src", "Hunter2")
    assert result["value"] == "C"
    metadata = result["metadata"]
    assert metadata["files_searched"] == 3
    assert metadata["files_matched"] == 1
    assert metadata["matched_files"] == ["src/app.py"]


def test_a_string_in_no_file_scores_incorrect_saying_how_many_were_searched(repo: Path) -> None:
    result = score(repo, "src", "absent")
    assert result["value"] == "I"
    assert result["explanation"] == "'absent' not found (3 files under 'src' searched)"


def test_case_is_ignored_only_when_asked(repo: Path) -> None:
    assert score(repo, "src", "HUNTER2")["value"] == "I"
    assert score(repo, "src", "HUNTER2", case_sensitive=False)["value"] == "C"


def test_the_extension_filter_limits_the_files_searched(repo: Path) -> None:
    result = score(repo, "src", "xyzzy", file_extensions=["txt", ".PY"])
    assert result["value"] == "I"
    assert result["metadata"]["files_searched"] == 2


def test_a_non_recursive_search_stays_in_the_folder(repo: Path) -> None:
    assert score(repo, "src", "xyzzy", recursive=False)["value"] == "I"
    assert score(repo, "src", "xyzzy")["value"] == "C"


def test_a_missing_folder_scores_incorrect_with_folder_not_found(repo: Path) -> None:
    result = score(repo, "nowhere", "x")
    assert result["value"] == "I"
    assert result["metadata"]["error"] == "folder_not_found"


def test_a_folder_outside_the_repository_is_never_searched(repo: Path) -> None:
    result = score(repo / "src", "..", "Hunter2")
    assert result["value"] == "N"
    assert "outside the repository" in str(result["explanation"])


def test_a_match_straddling_two_chunks_is_found(tmp_path: Path) -> None:
    (tmp_path / "big.log").write_bytes(b"a" * (CHUNK_SIZE - 3) + b"NEEDLE" + b"a" * 10)
    assert score(tmp_path, ".", "NEEDLE")["value"] == "C"
    assert score(tmp_path, ".", "needle", case_sensitive=False)["value"] == "C"


def test_a_multibyte_character_split_by_a_chunk_boundary_still_matches(tmp_path: Path) -> None:
    (tmp_path / "utf8.txt").write_bytes(b"a" * (CHUNK_SIZE - 1) + "é-mail".encode())
    assert score(tmp_path, ".", "É-MAIL", case_sensitive=False)["value"] == "C"


def test_unreadable_files_are_skipped_and_counted(repo: Path) -> None:
    locked = repo / "src" / "locked.txt"
    locked.write_text("Hunter2")
    locked.chmod(0)
    try:
        if os.access(locked, os.R_OK):
            pytest.skip("running as root: a mode-0 file is still readable")
        result = score(repo, "src", "Hunter2")
    finally:
        locked.chmod(0o644)
    metadata = result["metadata"]
    assert metadata["files_skipped_by_reason"] == {"unreadable or not a regular file": 1}
    assert metadata["skipped_files"] == ["src/locked.txt"]
    assert result["value"] == "C"


@pytest.mark.parametrize("case_sensitive", [True, False])
def test_a_binary_file_is_searched_as_bytes(tmp_path: Path, case_sensitive: bool) -> None:
    # A NUL byte first was once enough to hide a file from the search.
    (tmp_path / "blob.db").write_bytes(b"SQLite format 3\0\xff\xfeHunter2\0")
    needle = "Hunter2" if case_sensitive else "HUNTER2"
    result = score(tmp_path, ".", needle, case_sensitive=case_sensitive)
    assert result["value"] == "C"
    assert result["metadata"]["matched_files"] == ["blob.db"]


def test_symlinks_out_of_the_repository_are_not_followed(tmp_path: Path) -> None:
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "leak.txt").write_text("Hunter2")
    repo = tmp_path / "repo"
    repo.mkdir()
    (repo / "linked_dir").symlink_to(outside)
    (repo / "linked_file.txt").symlink_to(outside / "leak.txt")
    result = score(repo, ".", "Hunter2")
    assert result["value"] == "I"
    assert result["metadata"]["files_searched"] == 0


@pytest.mark.parametrize("folder", ["node_modules", "__pycache__", ".venv", "venv", ".tox"])
def test_dependencies_and_environments_are_searched_too(repo: Path, folder: str) -> None:
    (repo / "src" / folder).mkdir()
    (repo / "src" / folder / "vendored.py").write_text("xyzzy")
    result = score(repo, "src", "xyzzy")
    matched = result["metadata"]["matched_files"]
    assert sorted(matched) == sorted([f"src/{folder}/vendored.py", "src/deep/secret.md"])


def test_only_git_and_the_evaluators_exclusions_are_left_out_and_named(repo: Path) -> None:
    for folder in (".git", "vendor"):
        (repo / "src" / folder).mkdir()
        (repo / "src" / folder / "x.py").write_text("xyzzy")
    result = score(repo, "src", "xyzzy", exclude=["src/vendor"])
    assert result["metadata"]["matched_files"] == ["src/deep/secret.md"]
    assert result["metadata"]["folders_skipped"] == ["src/.git", "src/vendor"]


def test_a_symlink_loop_cannot_hang_the_search(repo: Path) -> None:
    (repo / "src" / "deep" / "loop").symlink_to(repo / "src")
    (repo / "src" / "self").symlink_to(".")
    result = score(repo, "src", "xyzzy")
    assert result["value"] == "C"
    assert result["metadata"]["files_searched"] == 3


@pytest.mark.parametrize(
    ("arguments", "message"),
    [
        (("src", ""), "search_string: must not be empty"),
        (("src\0", "root"), "folder_path: .* must not contain a NUL character"),
    ],
)
def test_bad_parameters_are_rejected_when_the_scorer_is_built(
    arguments: tuple[str, str], message: str
) -> None:
    with pytest.raises(ConfigError, match=message):
        file_contents_scorer(*arguments)


def test_file_contents_runs_in_a_real_session_from_a_config_file(
    pytester: pytest.Pytester,
) -> None:
    pytester.makepyfile("def test_ok(): pass")
    pytester.mkdir("src").joinpath("app.py").write_text("token = 'abc'")
    pytester.makefile(
        ".yaml",
        scores="""
        scorers:
          - type: file_contents_scorer
            folder_path: src
            search_string: TOKEN
            case_sensitive: false
            file_extensions: [.py]
        """,
    )
    result = pytester.runpytest("--score-config=scores.yaml", "-p", "no:cacheprovider")
    result.assert_outcomes(passed=1)
    result.stdout.fnmatch_lines(["file_contents: C *1 of 1 file under*"])
