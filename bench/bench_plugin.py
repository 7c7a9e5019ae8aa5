"""Plugin overhead over plain pytest on a generated suite of trivial tests (target: at most 5%).

Each round runs plain ``pytest`` and every variant once, in fresh processes and in a shuffled
order, so that a slow moment of a shared machine hits all of them alike. The overhead of a
variant is the median of its per-round ratios to the plain run of the same round, with the
interquartile range of those ratios; the CPU time (user + system, the process and the
children it waited for) is compared the same way. ``--callgrind`` adds instruction counts:
one run each under valgrind's callgrind, which counts instructions and so does not depend on
the machine's load; the report's helper process is counted on its own.

Yardsticks, when their plugins are installed beside pytest-scoring (``--python`` may name
another environment's interpreter): pytest-json-report and pytest-html. Each run turns off
the yardstick plugins it does not use, so plain ``pytest`` pays for none of them.

Runs with Python's bytecode cache on, as a user's runs do (``PYTHONDONTWRITEBYTECODE`` is
removed from the runs' environment): otherwise every run would compile every module anew.

    python bench/bench_plugin.py [--tests 5000] [--pairs 15] [--callgrind] [--python PY]
"""

from __future__ import annotations

import argparse
import os
import random
import re
import shutil
import sqlite3
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

PLAIN = "pytest"
SCORED = ["--score", "--score-db-diff"]
#: Variant → its arguments and the yardstick plugin it needs (None: ours or pytest's own).
VARIANTS: dict[str, tuple[list[str], str | None]] = {
    "pytest --junitxml": (["--junitxml=junit.xml"], None),
    "pytest --score": (["--score"], None),
    "pytest --score --score-db-diff": (SCORED, None),
    "  + --score-markdown": ([*SCORED, "--score-markdown=summary.md"], None),
    "pytest --json-report": (["--json-report", "--json-report-file=report.json"], "json"),
    "pytest --html": (["--html=report.html"], "html"),
}
#: The yardsticks' plugin names (``-p no:NAME`` turns one off) and the module that has them.
YARDSTICKS = {
    "json": (["pytest_jsonreport"], "pytest_jsonreport"),
    "html": (["html", "html_fixtures", "metadata"], "pytest_html"),
}
#: What a run leaves behind that the next must not find.
OUTPUTS = ("scores", "junit.xml", "summary.md", "report.json", "report.html", "assets")


def make_suite(folder: Path, tests: int) -> None:
    """``tests`` parametrized trivial tests in files of 500, plus a small SQLite database."""
    per_file = 500
    for start in range(0, tests, per_file):
        count = min(per_file, tests - start)
        body = (
            "import pytest\n\n\n"
            f"@pytest.mark.parametrize('n', range({start}, {start + count}))\n"
            "def test_trivial(n):\n    assert n == n\n"
        )
        (folder / f"test_gen_{start // per_file}.py").write_text(body)
    with sqlite3.connect(folder / "app.db") as db:
        db.execute("CREATE TABLE users (id INTEGER PRIMARY KEY, name TEXT)")
        db.executemany("INSERT INTO users (name) VALUES (?)", [(f"u{i}",) for i in range(1000)])
    db.close()


def installed(python: str, module: str) -> bool:
    check = [
        python,
        "-c",
        f"import importlib.util, sys; sys.exit(not importlib.util.find_spec({module!r}))",
    ]
    return subprocess.run(check, check=False).returncode == 0


class Runs:
    """How the runs are made: the interpreter, the yardsticks present, the environment."""

    def __init__(self, python: str, folder: Path):
        self.python = python
        self.folder = folder
        self.present = {
            name for name, (_, module) in YARDSTICKS.items() if installed(python, module)
        }
        self.env = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}

    def variants(self) -> list[str]:
        return [
            name for name, (_, needs) in VARIANTS.items() if needs is None or needs in self.present
        ]

    def command(self, name: str) -> list[str]:
        args, needs = VARIANTS.get(name, ([], None))
        off = [
            option
            for yardstick in self.present - {needs}
            for plugin in YARDSTICKS[yardstick][0]
            for option in ("-p", f"no:{plugin}")
        ]
        return [
            self.python,
            "-m",
            "pytest",
            "-q",
            "-p",
            "no:cacheprovider",
            "-p",
            "no:randomly",
            *off,
            *args,
        ]

    def clean(self) -> None:
        for output in OUTPUTS:
            path = self.folder / output
            if path.is_dir():
                shutil.rmtree(path)
            else:
                path.unlink(missing_ok=True)

    def run_once(self, name: str) -> tuple[float, float]:
        """Wall-clock and CPU seconds (the process and its waited-for children) of one run."""
        started = time.perf_counter()
        process = subprocess.Popen(
            self.command(name), cwd=self.folder, stdout=subprocess.DEVNULL, env=self.env
        )
        _, status, usage = os.wait4(process.pid, 0)
        elapsed = time.perf_counter() - started
        process.returncode = os.waitstatus_to_exitcode(status)
        if process.returncode != 0:
            raise SystemExit(f"{name} failed with exit code {process.returncode}")
        self.clean()
        return elapsed, usage.ru_utime + usage.ru_stime

    def instructions(self, name: str) -> tuple[int, int] | None:
        """Instructions of one run under callgrind: the pytest process, and every other
        process it started (the report's helper); None without valgrind."""
        if shutil.which("valgrind") is None:
            return None
        out = self.folder / "callgrind"
        out.mkdir()
        done = subprocess.run(
            [
                "valgrind",
                "--tool=callgrind",
                "--trace-children=yes",
                f"--callgrind-out-file={out}/%p",
                *self.command(name),
            ],
            cwd=self.folder,
            capture_output=True,
            text=True,
            check=True,
            env=self.env,
        )
        shutil.rmtree(out)
        self.clean()
        counts = [int(n) for n in re.findall(r"==\d+== Collected : (\d+)", done.stderr)]
        # valgrind reports each process as it ends; the pytest process, which waits for the
        # others, ends last.
        return (counts[-1], sum(counts[:-1])) if counts else None


def quartiles(values: list[float]) -> tuple[float, float, float]:
    q1, median, q3 = statistics.quantiles(values, n=4, method="inclusive")
    return q1, median, q3


def ratio_text(values: list[float]) -> str:
    q1, median, q3 = quartiles(values)
    return f"{100 * (median - 1):+6.1f}%  (IQR {100 * (q1 - 1):+.1f}% to {100 * (q3 - 1):+.1f}%)"


def load_average() -> str:
    return " ".join(f"{value:.1f}" for value in os.getloadavg())


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--tests", type=int, default=5000)
    parser.add_argument("--pairs", type=int, default=15, help="rounds of interleaved runs")
    parser.add_argument("--callgrind", action="store_true", help="also count instructions")
    parser.add_argument("--python", default=sys.executable, help="the interpreter that runs pytest")
    parser.add_argument(
        "--only", nargs="*", help="run only the variants whose name holds one of these"
    )
    options = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp)
        make_suite(folder, options.tests)
        runs = Runs(options.python, folder)
        variants = [
            name
            for name in runs.variants()
            if not options.only or any(part in name for part in options.only)
        ]
        for name in [PLAIN, *variants]:
            runs.run_once(name)  # warm the file cache and write the bytecode
        loads = [load_average()]
        plain: list[float] = []
        wall: dict[str, list[float]] = {name: [] for name in variants}
        cpu: dict[str, list[float]] = {name: [] for name in variants}
        for _ in range(options.pairs):
            order = [PLAIN, *variants]
            random.shuffle(order)
            times = {name: runs.run_once(name) for name in order}
            plain.append(times[PLAIN][0])
            for name in variants:
                wall[name].append(times[name][0] / times[PLAIN][0])
                cpu[name].append(times[name][1] / times[PLAIN][1])
        loads.append(load_average())
        counts = (
            {name: runs.instructions(name) for name in (PLAIN, *variants)}
            if options.callgrind
            else {}
        )
    print(
        f"{options.tests} tests, {options.pairs} interleaved rounds, "
        f"load average {loads[0]} / {loads[-1]}"
    )
    print(f"  {PLAIN:32} median {statistics.median(plain):6.2f} s")
    print(f"  {'':32} {'wall clock':32} CPU")
    for name in variants:
        print(f"  {name:32} {ratio_text(wall[name]):32} {ratio_text(cpu[name])}")
    if counts:
        base = (counts.get(PLAIN) or (0, 0))[0]
        print("instructions (callgrind, one run each): pytest process, helper process")
        for name, count in counts.items():
            main_count, others = count or (0, 0)
            change = f"{100 * (main_count / base - 1):+6.1f}%" if base else ""
            print(f"  {name:32} {main_count:>15,} {change}  {others:>15,}")


if __name__ == "__main__":
    main()
