"""Benchmark: the evaluator's peak memory on a bloated JUnit file the repository's run wrote.

Generates JUnit files of the given sizes (1.5 million ``<testcase>`` elements make 108 MB,
as in issue 26) and measures, in fresh processes:

- ``pytest-scoring junit FILE``;
- ``pytest-scoring run REPO -- --junitxml=J`` on a two-test repository whose ``conftest.py``
  replaces pytest's JUnit file at ``pytest_unconfigure`` with one of that size.

Each command runs in-process in a small wrapper, which reports its own peak RSS
(``getrusage(RUSAGE_SELF)``: the evaluator alone) and wall time; the figure in brackets is
the whole tree's (``os.wait4``: the test child, the supervisor and the report's helper
included). With ``--baseline SRC`` the same commands run again with ``PYTHONPATH=SRC`` (a
checkout of an earlier version, e.g. ``git archive 2e37f11 pytest_scoring | tar -x -C SRC``),
side by side, for files up to ``--baseline-max`` bytes (the old code holds the whole tree).

    python bench/bench_junit_memory.py --sizes 108M 2G --baseline /tmp/junit-baseline
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

#: Runs pytest-scoring's command line in this process and reports its own peak RSS.
WRAPPER = """
import json, resource, sys, time
from pytest_scoring.cli.main import main
started = time.monotonic()
try:
    main(sys.argv[2:], prog_name="pytest-scoring")
except SystemExit as exit:
    status = exit.code
peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
with open(sys.argv[1], "w") as out:
    json.dump({"peak_mb": peak, "seconds": time.monotonic() - started, "status": status}, out)
"""
CASE = '<testcase classname="tests.test_bloat" name="test_{:08d}" time="0.001"/>\n'
#: Writes a bloated JUnit file of SIZE bytes where pytest wrote its own, as a stream.
CONFTEST = """
import pytest

@pytest.hookimpl(trylast=True)
def pytest_unconfigure(config):
    if config.option.xmlpath:
        with open(config.option.xmlpath, "w") as junit:
            with open({source!r}) as source:
                while block := source.read(1 << 20):
                    junit.write(block)
"""
TESTS = "def test_ok():\n    pass\n\ndef test_broken():\n    assert False\n"


def size_bytes(text: str) -> int:
    units = {"K": 1000, "M": 1000**2, "G": 1000**3}
    return int(float(text[:-1]) * units[text[-1]]) if text[-1] in units else int(text)


def make_junit(path: Path, size: int) -> int:
    """A JUnit file of about ``size`` bytes of passing cases; the number of cases."""
    head = '<?xml version="1.0" encoding="utf-8"?><testsuites><testsuite name="bloat">\n'
    tail = "</testsuite></testsuites>\n"
    count = max(1, (size - len(head) - len(tail)) // len(CASE.format(0)))
    with path.open("w") as out:
        out.write(head)
        for start in range(0, count, 10_000):
            out.write("".join(CASE.format(i) for i in range(start, min(count, start + 10_000))))
        out.write(tail)
    return count


def measure(command: list[str], pythonpath: str | None, cwd: Path) -> dict[str, float]:
    """Peak RSS (MB) and wall time of one pytest-scoring command in a fresh process."""
    with tempfile.NamedTemporaryFile(suffix=".json") as answer:
        env = dict(os.environ)
        if pythonpath:
            env["PYTHONPATH"] = pythonpath
        child = subprocess.Popen(
            [sys.executable, "-c", WRAPPER, answer.name, *command],
            cwd=cwd,
            env=env,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        _pid, _status, usage = os.wait4(child.pid, 0)
        figures: dict[str, float] = json.loads(Path(answer.name).read_text())
    figures["tree_peak_mb"] = usage.ru_maxrss / 1024
    return figures


def make_repo(folder: Path, junit: Path) -> None:
    folder.mkdir()
    (folder / "test_app.py").write_text(TESTS)
    (folder / "conftest.py").write_text(CONFTEST.format(source=str(junit)))


def row(name: str, size: int, figures: dict[str, float]) -> str:
    return (
        f"{name:<34} {size / 1e6:>8.0f} MB  peak RSS {figures['peak_mb']:7.1f} MB "
        f"(tree {figures['tree_peak_mb']:7.1f} MB)  {figures['seconds']:6.1f} s  "
        f"exit {figures['status']}"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", nargs="+", default=["108M", "2G"])
    parser.add_argument("--baseline", help="a checkout of an earlier pytest_scoring")
    parser.add_argument("--baseline-max", default="200M", help="largest file for the baseline")
    parser.add_argument("--work", type=Path, help="where the files go (default: a temp dir)")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(dir=args.work) as tmp:
        work = Path(tmp)
        work.chmod(0o755)  # the repository's processes may run as another user
        versions = {"current": None}
        for text in args.sizes:
            size = size_bytes(text)
            junit = work / f"bloat-{text}.xml"
            cases = make_junit(junit, size)
            actual = junit.stat().st_size
            print(f"{junit.name}: {actual:,} bytes, {cases:,} test cases", flush=True)
            if args.baseline and actual <= size_bytes(args.baseline_max):
                versions["baseline"] = args.baseline
            else:
                versions.pop("baseline", None)
            repo = work / f"repo-{text}"
            make_repo(repo, junit)
            for version, pythonpath in versions.items():
                report = work / f"scores-{version}-{text}"
                figures = measure(["junit", str(junit), "--report", str(report)], pythonpath, work)
                print(row(f"junit FILE ({version})", actual, figures), flush=True)
                copy = work / f"copy-{version}-{text}.xml"
                command = ["run", str(repo), "--report", str(report), "--strict=default"]
                figures = measure([*command, "--", f"--junitxml={copy}"], pythonpath, work)
                copied = copy.stat().st_size if copy.exists() else 0
                print(
                    row(f"run -- --junitxml=J ({version})", actual, figures)
                    + f"  J {copied / 1e6:.0f} MB",
                    flush=True,
                )
                copy.unlink(missing_ok=True)
            junit.unlink()


if __name__ == "__main__":
    started = time.monotonic()
    main()
    print(f"done in {time.monotonic() - started:.0f} s")
