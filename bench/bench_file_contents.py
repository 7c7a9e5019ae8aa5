"""Benchmark: ``file_contents`` over a large text tree, side by side with ``grep -r -F``.

Writes ``--files`` text files of ``--megabytes`` MiB in all (no match, so every byte is
read), then prints the time of the scorer (case-sensitive and case-insensitive) and of
``grep -r -F -l`` / ``grep -r -F -i -l`` on the same tree (best of ``--repeat``), and the
scorer's peak memory measured in a child process.

    python bench/bench_file_contents.py --megabytes 200 --files 20
"""

from __future__ import annotations

import argparse
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

from pytest_scoring import file_contents_scorer
from pytest_scoring.core.outcomes import OutcomeTally
from pytest_scoring.scorers.base import ScoringContext

LINE = b"the quick brown fox jumps over the lazy dog 0123456789 ABCDEFGHIJ\n"


def make_tree(root: Path, megabytes: int, files: int) -> None:
    """``files`` files of text lines, ``megabytes`` MiB in all, none holding the needle."""
    per_file = megabytes * (1 << 20) // files
    block = LINE * (per_file // len(LINE))
    for index in range(files):
        folder = root / "src" / f"pkg{index % 4}"
        folder.mkdir(parents=True, exist_ok=True)
        (folder / f"module{index}.py").write_bytes(block)


def best_of(repeat: int, action: Callable[[], object]) -> float:
    times = []
    for _ in range(repeat):
        started = time.perf_counter()
        action()
        times.append(time.perf_counter() - started)
    return min(times)


def scorer_run(root: Path, case_sensitive: bool) -> None:
    scorer = file_contents_scorer("src", "NEEDLE-NOT-THERE", case_sensitive=case_sensitive)
    score = scorer.score(ScoringContext(root=root, tally=OutcomeTally()))
    assert score["value"] == "I", score


def grep_run(root: Path, *flags: str) -> None:
    subprocess.run(["grep", "-r", "-F", "-l", *flags, "NEEDLE-NOT-THERE", str(root / "src")])


def peak_memory_mib(root: Path) -> float:
    """Peak RSS of a child process that runs the scorer once."""
    code = (
        "import sys, resource; from pathlib import Path; "
        f"sys.path.insert(0, {str(Path(__file__).parent)!r}); "
        "from bench_file_contents import scorer_run; "
        f"scorer_run(Path({str(root)!r}), False); "
        "print(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss)"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    return int(out.stdout.strip()) / 1024


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--megabytes", type=int, default=200)
    parser.add_argument("--files", type=int, default=20)
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as folder:
        root = Path(folder)
        make_tree(root, args.megabytes, args.files)
        rows = {
            "file_contents (case-sensitive)": lambda: scorer_run(root, True),
            "grep -r -F -l": lambda: grep_run(root),
            "file_contents (case_sensitive=false)": lambda: scorer_run(root, False),
            "grep -r -F -i -l": lambda: grep_run(root, "-i"),
        }
        print(f"{args.megabytes} MiB in {args.files} files, best of {args.repeat}")
        for name, action in rows.items():
            print(f"{name:40} {best_of(args.repeat, action):7.2f} s")
        print(f"{'peak RSS of a scorer run':40} {peak_memory_mib(root):7.1f} MiB")


if __name__ == "__main__":
    main()
