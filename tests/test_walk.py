"""The one tree walk: each folder's names in order before its subfolders' contents, symlinks
reported and never followed."""

from __future__ import annotations

from pathlib import Path

from pytest_scoring.fs.walk import TreeWalk


def touch(root: Path, *relpaths: str) -> None:
    for relpath in relpaths:
        (root / relpath).parent.mkdir(parents=True, exist_ok=True)
        (root / relpath).write_text("")


def kinds(walk: TreeWalk) -> list[tuple[str, str]]:
    return [
        (entry.relpath, "dir" if entry.is_dir else "link" if entry.is_symlink else "file")
        for entry in walk
    ]


def test_a_folders_names_in_order_then_its_subfolders_contents(tmp_path: Path) -> None:
    touch(tmp_path, "b.txt", "a/z.txt", "a/b/c.txt", ".venv/lib/x.py")
    assert kinds(TreeWalk(tmp_path)) == [
        (".venv", "dir"),
        ("a", "dir"),
        ("b.txt", "file"),
        (".venv/lib", "dir"),
        (".venv/lib/x.py", "file"),
        ("a/b", "dir"),
        ("a/z.txt", "file"),
        ("a/b/c.txt", "file"),
    ]


def test_git_and_excluded_folders_are_not_entered_but_named(tmp_path: Path) -> None:
    touch(tmp_path, ".git/HEAD", "sub/.git/HEAD", "scores/x.json", "kept.txt")
    walk = TreeWalk(tmp_path, exclude=[tmp_path / "scores"])
    assert kinds(walk) == [("kept.txt", "file"), ("sub", "dir")]
    assert walk.skipped == [".git", "scores", "sub/.git"]


def test_symlinks_are_reported_and_never_followed(tmp_path: Path) -> None:
    touch(tmp_path, "real/x.txt")
    (tmp_path / "to_real").symlink_to("real", target_is_directory=True)
    (tmp_path / "to_file").symlink_to("real/x.txt")
    (tmp_path / "dangling").symlink_to("nowhere")
    (tmp_path / "loop").symlink_to("loop")
    assert kinds(TreeWalk(tmp_path)) == [
        ("dangling", "link"),
        ("loop", "link"),
        ("real", "dir"),
        ("to_file", "link"),
        ("to_real", "link"),
        ("real/x.txt", "file"),
    ]


def test_a_walk_from_a_subfolder_gives_paths_relative_to_the_root(tmp_path: Path) -> None:
    touch(tmp_path, "src/a.py", "src/deep/b.py", "other.py")
    assert kinds(TreeWalk(tmp_path, top=tmp_path / "src", recursive=False)) == [
        ("src/a.py", "file")
    ]
