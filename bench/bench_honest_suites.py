"""Real honest test suites under pytest-scoring: the counts pytest gives, and no integrity
signal that would call them tampered with (``tripwire``, ``patched``, ``stream_forged``).

Each suite is a project's source distribution (downloaded with ``pip download --no-binary``)
unpacked into a work folder, with a virtual environment *inside* it (``.venv``, or ``.tox/py``
with ``--layout tox``: the layouts whose pytest files used to be taken for the repository's)
holding the project and its test dependencies. The suite runs three times with that
environment's interpreter: plain ``pytest`` (the truth), ``pytest --score`` in process, and
``pytest-scoring run --python`` from the evaluator's own interpreter. The table shows each
run's counts, the signals each report holds and the time each run took; any signal listed in
``FLAGGED`` is a false signal to fix. Nothing of the projects is kept in this repository.

The evaluator's package (this checkout) and its dependencies reach each environment through
a ``.pth`` file after the environment's own packages, so that all three runs see the same
packages and plugins.

    python bench/bench_honest_suites.py [--work /tmp/honest-suites] [--only attrs ...]
        [--layout venv|tox]
"""

from __future__ import annotations

import argparse
import json
import os
import site
import subprocess
import sys
import tarfile
import time
import xml.etree.ElementTree as ElementTree
from pathlib import Path
from typing import Any

#: Suite -> (the distribution to download, what to install into its environment).
SUITES: dict[str, tuple[str, list[str]]] = {
    "attrs": ("attrs", [".", "pytest", "hypothesis", "pympler", "cloudpickle"]),
    "more-itertools": ("more-itertools", [".", "pytest"]),
    "python-dateutil": ("python-dateutil", [".", "pytest", "hypothesis", "freezegun"]),
    "sqlite-utils": ("sqlite-utils", [".", "pytest", "hypothesis", "cogapp", "black"]),
    "pyparsing": ("pyparsing", [".[diagrams]", "pytest"]),
}
#: Signals an honest suite must never get.
FLAGGED = ("tripwire", "patched", "stream_forged")
CHECKOUT = Path(__file__).resolve().parents[1]
#: ``pytest-scoring`` of this checkout, with no PYTHONPATH that the children would inherit.
EVALUATOR = [
    sys.executable,
    "-c",
    f"import sys; sys.path.insert(0, {str(CHECKOUT)!r}); sys.argv[0] = 'pytest-scoring'; "
    "from pytest_scoring.cli.main import main; main()",
]
PYTEST = ["-p", "no:cacheprovider", "-q"]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--work", type=Path, default=Path("/tmp/honest-suites"))
    parser.add_argument("--only", nargs="*", choices=sorted(SUITES), default=sorted(SUITES))
    parser.add_argument("--layout", choices=("venv", "tox"), default="venv")
    options = parser.parse_args()
    rows = [measure(name, options.work, options.layout) for name in options.only]
    print(table(rows))
    if any(row["flagged"] for row in rows):
        sys.exit(1)


def measure(name: str, work: Path, layout: str) -> dict[str, Any]:
    """The three runs of one suite."""
    repo = unpack(name, work)
    python = environment(repo, layout, SUITES[name][1])
    reports = work / "reports" / name
    started = time.monotonic()
    plain = counts_of_junit(repo, python)
    plain_time = time.monotonic() - started
    started = time.monotonic()
    inside = run(
        [str(python), "-m", "pytest", *PYTEST, "--score", f"--score-report={reports}-process"],
        repo,
    )
    in_process = report_of(reports.parent / f"{name}-process", inside)
    process_time = time.monotonic() - started
    started = time.monotonic()
    arguments = ["--python", str(python), "--report", f"{reports}-run", "--timeout", "3000"]
    outside = run([*EVALUATOR, "run", str(repo), *arguments, "--", *PYTEST], work)
    under_run = report_of(reports.parent / f"{name}-run", outside)
    run_time = time.monotonic() - started
    signals = [*in_process["integrity"], *under_run["integrity"]]
    return {
        "suite": name,
        "pytest": plain,
        "in process": in_process["counts"],
        "run": under_run["counts"],
        "signals in process": kinds(in_process["integrity"]),
        "signals under run": kinds(under_run["integrity"]),
        "flagged": [signal for signal in signals if signal["kind"] in FLAGGED],
        "seconds": (round(plain_time), round(process_time), round(run_time)),
    }


def unpack(name: str, work: Path) -> Path:
    """The suite's source distribution, downloaded once, unpacked afresh."""
    sdists = work / "sdists"
    distribution = SUITES[name][0]
    found = sorted(sdists.glob(f"{distribution.replace('-', '_')}-*.tar.gz"))
    if not found:
        command = ["pip", "download", "--no-binary", ":all:", "--no-deps", distribution]
        run([sys.executable, "-m", *command, "-d", str(sdists)], work, check=True)
        found = sorted(sdists.glob(f"{distribution.replace('-', '_')}-*.tar.gz"))
    folder = work / "suites"
    with tarfile.open(found[-1]) as archive:
        top = archive.getnames()[0].split("/")[0]
        if not (folder / top).exists():
            archive.extractall(folder, filter="data")
    return folder / top


def environment(repo: Path, layout: str, packages: list[str]) -> Path:
    """The suite's virtual environment inside it, made once; its interpreter."""
    venv = repo / (".venv" if layout == "venv" else ".tox/py")
    python = venv / "bin" / "python"
    if not python.exists():
        run([sys.executable, "-m", "venv", str(venv)], repo, check=True)
        run([str(python), "-m", "pip", "install", "-q", *packages], repo, check=True)
        where = "import sysconfig; print(sysconfig.get_path('purelib'))"
        purelib = Path(run([str(python), "-c", where], repo).stdout.strip())
        evaluator = [str(CHECKOUT), *site.getsitepackages()]
        (purelib / "zz_pytest_scoring.pth").write_text("\n".join(evaluator) + "\n")
    return python


def counts_of_junit(repo: Path, python: Path) -> dict[str, int]:
    """Plain pytest's own counts, from its JUnit XML."""
    junit = repo.parent / f"{repo.name}-junit.xml"
    run([str(python), "-m", "pytest", *PYTEST, f"--junitxml={junit}"], repo)
    counts = {"passed": 0, "failed": 0, "error": 0, "skipped": 0}
    for case in ElementTree.parse(junit).iter("testcase"):
        outcome = next((child.tag for child in case if child.tag != "system-out"), "passed")
        outcome = {"failure": "failed", "error": "error", "skipped": "skipped"}.get(outcome)
        counts[outcome or "passed"] += 1
    return counts


def report_of(root: Path, ran: subprocess.CompletedProcess[str]) -> dict[str, Any]:
    """The counts and signals of the newest report under ``root``."""
    folders = sorted(root.glob("scan_id=*"), key=lambda folder: folder.stat().st_mtime)
    if not folders:
        raise SystemExit(f"no report under {root}:\n{ran.stdout[-3000:]}{ran.stderr[-3000:]}")
    content = json.loads((folders[-1] / "scores.json").read_text())
    counts = content["tests"]["counts"]
    shown = {name: counts[name] for name in ("passed", "failed", "error", "skipped")}
    shown["skipped"] += counts.get("xfailed", 0)
    shown["passed"] += counts.get("xpassed", 0)
    return {"counts": shown, "integrity": content["integrity"]}


def kinds(signals: list[dict[str, Any]]) -> str:
    found: dict[str, int] = {}
    for signal in signals:
        found[signal["kind"]] = found.get(signal["kind"], 0) + 1
    return ", ".join(f"{kind} {count}" for kind, count in sorted(found.items())) or "none"


def run(command: list[str], cwd: Path, check: bool = False) -> subprocess.CompletedProcess[str]:
    cwd.mkdir(parents=True, exist_ok=True)
    env = {key: value for key, value in os.environ.items() if key != "PYTHONPATH"}
    return subprocess.run(command, cwd=cwd, env=env, capture_output=True, text=True, check=check)


def table(rows: list[dict[str, Any]]) -> str:
    def shown(counts: dict[str, int]) -> str:
        return "/".join(str(counts[name]) for name in ("passed", "failed", "error", "skipped"))

    lines = [
        "| suite | pytest | in process | run | signals in process | signals under run "
        "| seconds (pytest, in process, run) |",
        "|---|---|---|---|---|---|---|",
    ]
    for row in rows:
        lines.append(
            f"| {row['suite']} | {shown(row['pytest'])} | {shown(row['in process'])} "
            f"| {shown(row['run'])} | {row['signals in process']} | {row['signals under run']} "
            f"| {', '.join(map(str, row['seconds']))} |"
        )
        lines += [f"|   flagged: {signal} |" for signal in row["flagged"]]
    return "\n".join(lines) + "\n\n(passed/failed/error/skipped; xfailed counted as skipped)"


if __name__ == "__main__":
    main()
