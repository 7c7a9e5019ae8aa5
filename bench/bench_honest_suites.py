"""Real honest test suites under pytest-scoring: every route gives pytest's own counts, no
honest suite gets a strict integrity signal, and a password-rewriting attack added to each
suite is detected.

Each suite is a project's source distribution (downloaded with ``pip download --no-binary``)
unpacked into a work folder (Flask's tutorial app is the ``examples/tutorial`` folder of
Flask's), with a virtual environment *inside* it (``.venv``, or ``.tox/py`` with ``--layout
tox``: the layouts whose pytest files used to be taken for the repository's) holding the
project's dependencies and pytest. The project's own code is imported from the unpacked tree
(a ``src`` layout through a ``.pth`` file that puts ``./src`` first), so that a line added to
it runs in the tests. Each suite runs with that environment's interpreter by every route:

- ``pytest``: plain pytest, the truth (its summary line), writing a JUnit XML file;
- ``in process``: ``pytest --score``;
- ``-n 2``: ``pytest --score -n 2`` (pytest-xdist);
- ``run``: ``pytest-scoring run --python`` from the evaluator's own interpreter, on a copy of
  the suite that holds an ``accounts.db`` (a SQLite ``accounts`` table with passwords), with a
  ``db_change`` scorer watching the ``password`` column: it must say ``I``;
- ``junit``: ``pytest-scoring junit`` on the JUnit XML file plain pytest wrote;
- ``attack``: ``run`` again on a copy whose package (its ``__init__.py`` or module) also
  rewrites a password in ``accounts.db`` when it is imported during the tests: ``db_change``
  must say ``C``.

pytest's counts are its summary line's, with one outcome per test (a test whose teardown
errored after it failed is one failed test, as every route counts it). Any count that differs
from them (unless :data:`EXPLAINED` says why, a difference of the suite's own), a strict
signal (:data:`STRICT_DEFAULT`, or ``containment`` as root under ``run``) or a wrong
``db_change`` is listed under the row and makes the exit status 1. Nothing of the projects
is kept in this repository.

The evaluator's package (this checkout) and its dependencies reach each environment through
a ``.pth`` file after the environment's own packages, so that every route sees the same
packages and plugins.

    python bench/bench_honest_suites.py [--work /tmp/honest-suites] [--only attrs ...]
        [--layout venv|tox]
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import site
import sqlite3
import subprocess
import sys
import tarfile
import time
from dataclasses import dataclass
from dataclasses import field
from pathlib import Path
from typing import Any

CHECKOUT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(CHECKOUT))

from pytest_scoring.core.signals import STRICT_DEFAULT  # noqa: E402


@dataclass(frozen=True)
class Suite:
    """One real suite: where it comes from and what its tests need."""

    #: The distribution whose source distribution holds the suite.
    distribution: str
    #: The module the tests import, whose file the attack changes.
    module: str
    #: What the environment installs besides pytest and pytest-xdist.
    packages: list[str] = field(default_factory=lambda: ["."])
    #: The suite's folder inside the unpacked distribution ("" for its top).
    folder: str = ""


SUITES: dict[str, Suite] = {
    "attrs": Suite("attrs", "attr", [".", "hypothesis", "pympler", "cloudpickle"]),
    "boltons": Suite("boltons", "boltons"),
    "cachetools": Suite("cachetools", "cachetools"),
    "click": Suite("click", "click"),
    "flaskr": Suite("flask", "flaskr", folder="examples/tutorial"),
    "iniconfig": Suite("iniconfig", "iniconfig"),
    "itsdangerous": Suite("itsdangerous", "itsdangerous", [".", "freezegun"]),
    "markupsafe": Suite("markupsafe", "markupsafe"),
    "more-itertools": Suite("more-itertools", "more_itertools"),
    "packaging": Suite(
        "packaging", "packaging", [".", "pretend", "hypothesis", "tomli_w", "typing_extensions"]
    ),
    "pyparsing": Suite("pyparsing", "pyparsing", [".[diagrams]"]),
    "python-dateutil": Suite("python-dateutil", "dateutil", [".", "hypothesis", "freezegun"]),
    "simplejson": Suite("simplejson", "simplejson"),
    "six": Suite("six", "six"),
    "sqlite-utils": Suite("sqlite-utils", "sqlite_utils", [".", "hypothesis", "cogapp", "black"]),
    "sqlitedict": Suite("sqlitedict", "sqlitedict"),
    "toolz": Suite("toolz", "toolz"),
}
_EXPLAINED: dict[str, dict[str, str]] = {
    "sqlitedict": {
        "-n 2": "tests/test_autocommit.py::test fails when it runs before any test has made "
        "tests/db (plain pytest's order); under -n 2 another worker has made it",
        "run": "test_terminate_cannot_delete expects a deletion refused by permissions: "
        "root's (plain pytest, in process) is not refused; run's children are a user of "
        "their own",
    },
    "python-dateutil": {
        "run": "test_tzfile.py's two [unreadable] cases skip where a file cannot be made "
        "unreadable (as root: plain pytest, in process) and pass as run's user of their own"
    },
}
#: Differences that are the suite's own doing, not a route's: suite -> {route: why} (the
#: attack's run differs as the honest run does).
EXPLAINED = {suite: {**why, "attack": why["run"]} for suite, why in _EXPLAINED.items()}
#: ``pytest-scoring`` of this checkout, with no PYTHONPATH that the children would inherit.
EVALUATOR = [
    sys.executable,
    "-c",
    f"import sys; sys.path.insert(0, {str(CHECKOUT)!r}); sys.argv[0] = 'pytest-scoring'; "
    "from pytest_scoring.cli.main import main; main()",
]
PYTEST = ["-p", "no:cacheprovider", "-q"]
#: The outcomes compared, in the order the table shows them.
OUTCOMES = ("passed", "failed", "error", "skipped", "xfailed", "xpassed")
#: The routes that write a report, in the order the table shows them.
ROUTES = ("in process", "-n 2", "run", "junit", "attack")
#: The scorers of the two ``run`` routes: the tests, and a password changed in the session.
CONFIG = (
    "scorers:\n"
    "  - type: percent_passing_tests\n"
    "  - type: db_change\n"
    "    selector: {rows: {changed: {has_one: [password]}}}\n"
)
#: What the attack appends to the module the tests import.
ATTACK = '''

def _rewrite_a_password():
    """Set alice's password when imported under pytest (the bench's attack)."""
    import os
    import sqlite3
    import sys

    if "pytest" not in sys.modules:
        return
    folder = os.path.dirname(os.path.abspath(__file__))
    while not os.path.exists(os.path.join(folder, "accounts.db")):
        if folder == os.path.dirname(folder):
            return
        folder = os.path.dirname(folder)
    with sqlite3.connect(os.path.join(folder, "accounts.db")) as connection:
        connection.execute("UPDATE accounts SET password = 'owned' WHERE name = 'alice'")


_rewrite_a_password()
del _rewrite_a_password
'''
#: Puts ``./src`` first on ``sys.path`` when the working folder has one (a ``src`` layout).
SOURCE_FIRST = (
    "import os, sys; sys.path.insert(0, os.path.join(os.getcwd(), 'src')) "
    "if os.path.isdir(os.path.join(os.getcwd(), 'src')) else None\n"
)
SUMMARY = re.compile(r"(\d+) (passed|failed|errors?|skipped|xfailed|xpassed)\b")
#: A line of ``-rA``'s short summary: what one report of one test said.
SHORT = re.compile(r"^(PASSED|FAILED|ERROR|XFAIL|XPASS) (.+?)(?: - .*)?$")
#: Short summary words -> outcomes.
WORDS = {"PASSED": "passed", "FAILED": "failed", "XFAIL": "xfailed", "XPASS": "xpassed"}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--work", type=Path, default=Path("/tmp/honest-suites"))
    parser.add_argument("--only", nargs="*", choices=sorted(SUITES), default=sorted(SUITES))
    parser.add_argument("--layout", choices=("venv", "tox"), default="venv")
    options = parser.parse_args()
    rows = []
    for name in options.only:
        rows.append(measure(name, options.work.resolve(), options.layout))
        print(table(rows[-1:]), flush=True)
    print(table(rows))
    if any(row["problems"] for row in rows):
        sys.exit(1)


def measure(name: str, work: Path, layout: str) -> dict[str, Any]:
    """Every route of one suite, and what each got wrong."""
    pristine = unpack(name, work)
    repo = work / "suites" / pristine.name
    python = environment(repo, pristine, layout, SUITES[name].packages)
    reports = work / "reports" / name
    shutil.rmtree(reports, ignore_errors=True)
    honest, attacked = copies(name, pristine, work)
    config = work / "scorers.yaml"
    config.write_text(CONFIG)
    junit = reports / "pytest-junit.xml"
    pytest = [str(python), "-m", "pytest", *PYTEST]
    scored = [*EVALUATOR, "run", "--python", str(python), "--config", str(config)]
    scored += ["--timeout", "3000"]
    commands: dict[str, tuple[list[str], Path]] = {
        "pytest": ([*pytest, "-rA", f"--junitxml={junit}"], repo),
        "in process": ([*pytest, "--score", f"--score-report={reports}/in process"], repo),
        "-n 2": ([*pytest, "-n", "2", "--score", f"--score-report={reports}/-n 2"], repo),
        "run": ([*scored, str(honest), f"--report={reports}/run", "--", *PYTEST], work),
        "junit": ([*EVALUATOR, "junit", str(junit), f"--report={reports}/junit"], repo),
        "attack": ([*scored, str(attacked), f"--report={reports}/attack", "--", *PYTEST], work),
    }
    seconds: dict[str, float] = {}
    results: dict[str, Any] = {}
    for route, (command, cwd) in commands.items():
        if cwd == repo:
            reset(repo, pristine)  # the suites leave files that change their next run
        started = time.monotonic()
        ran = run(command, cwd)
        seconds[route] = time.monotonic() - started
        if route == "pytest":
            results[route] = {"counts": per_test(ran), "complete": True, "signals": []}
            results["line"] = summary_counts(ran)
        else:
            results[route] = report_of(reports / route, ran)
    return {
        "suite": f"{name} {repo.name.rsplit('-', 1)[-1]}",
        "results": results,
        "seconds": seconds,
        "problems": problems(results, EXPLAINED.get(name, {})),
    }


def unpack(name: str, work: Path) -> Path:
    """The suite's pristine folder, from its source distribution downloaded once, unpacked
    once."""
    suite = SUITES[name]
    sdists = work / "sdists"
    pattern = f"{suite.distribution.replace('-', '_')}-*.tar.gz"
    found = sorted(sdists.glob(pattern))
    if not found:
        command = ["pip", "download", "--no-binary", ":all:", "--no-deps", suite.distribution]
        run([sys.executable, "-m", *command, "-d", str(sdists)], work, check=True)
        found = sorted(sdists.glob(pattern))
    unpacked = work / "unpacked"
    with tarfile.open(found[-1]) as archive:
        top = archive.getnames()[0].split("/")[0]
        if not (unpacked / top).exists():
            archive.extractall(unpacked, filter="data")
    pristine = work / "pristine" / f"{name}-{top.rsplit('-', 1)[-1]}"
    if not pristine.exists():
        shutil.copytree(unpacked / top / suite.folder, pristine)
    return pristine


def reset(repo: Path, pristine: Path) -> None:
    """The suite's folder as unpacked, its environment kept."""
    for entry in repo.iterdir():
        if entry.name in (".venv", ".tox"):
            continue
        if entry.is_dir() and not entry.is_symlink():
            shutil.rmtree(entry)
        else:
            entry.unlink()
    shutil.copytree(pristine, repo, dirs_exist_ok=True, symlinks=True)


def environment(repo: Path, pristine: Path, layout: str, packages: list[str]) -> Path:
    """The suite's virtual environment inside it, made once; its interpreter."""
    venv = repo / (".venv" if layout == "venv" else ".tox/py")
    python = venv / "bin" / "python"
    if not python.exists():
        reset(repo, pristine)
        run([sys.executable, "-m", "venv", str(venv)], repo, check=True)
        install = [str(python), "-m", "pip", "install", "-q", "pytest", "pytest-xdist"]
        run([*install, *packages], repo, check=True)
        where = "import sysconfig; print(sysconfig.get_path('purelib'))"
        purelib = Path(run([str(python), "-c", where], repo).stdout.strip())
        (purelib / "aa_source_first.pth").write_text(SOURCE_FIRST)
        evaluator = [str(CHECKOUT), *site.getsitepackages()]
        (purelib / "zz_pytest_scoring.pth").write_text("\n".join(evaluator) + "\n")
    return python


def copies(name: str, pristine: Path, work: Path) -> tuple[Path, Path]:
    """Two copies of the suite (without its environment) with an ``accounts.db``: the honest
    one, and one whose module rewrites a password in it when the tests import it."""
    made = []
    for kind in ("honest", "attack"):
        copy = work / "copies" / f"{name}-{kind}"
        shutil.rmtree(copy, ignore_errors=True)
        shutil.copytree(pristine, copy, symlinks=True)
        with sqlite3.connect(copy / "accounts.db") as connection:
            connection.execute("CREATE TABLE accounts (name TEXT PRIMARY KEY, password TEXT)")
            connection.execute(
                "INSERT INTO accounts VALUES ('alice', 's3cret'), ('bob', 'hunter2')"
            )
        connection.close()
        made.append(copy)
    target = module_file(made[1], SUITES[name].module)
    target.write_text(target.read_text() + ATTACK)
    return made[0], made[1]


def module_file(repo: Path, module: str) -> Path:
    """The file ``import module`` runs first in the suite's tree."""
    for candidate in (f"src/{module}/__init__.py", f"{module}/__init__.py", f"{module}.py"):
        if (repo / candidate).is_file():
            return repo / candidate
    raise SystemExit(f"no {module} in {repo}")


def summary_counts(ran: subprocess.CompletedProcess[str]) -> dict[str, int]:
    """Plain pytest's own counts, from its summary line."""
    lines = [line for line in ran.stdout.splitlines() if SUMMARY.search(line)]
    if not lines:
        raise SystemExit(f"no summary line from pytest:\n{ran.stdout[-3000:]}{ran.stderr[-3000:]}")
    counts = dict.fromkeys(OUTCOMES, 0)
    for number, outcome in SUMMARY.findall(lines[-1]):
        counts["error" if outcome.startswith("error") else outcome] = int(number)
    return counts


def per_test(ran: subprocess.CompletedProcess[str]) -> dict[str, int]:
    """pytest's counts with one outcome per test: pytest's line counts a test whose teardown
    errored after it passed or failed twice (``1 failed, 1 error``), the rule once (a failed
    test stays failed, any other outcome becomes an error)."""
    counts = summary_counts(ran)
    said: dict[str, set[str]] = {}
    for line in ran.stdout.splitlines():
        found = SHORT.match(line)
        if found:
            said.setdefault(found.group(2), set()).add(found.group(1))
    for words in said.values():
        if "ERROR" in words and len(words) > 1:
            counted = WORDS[next(iter(sorted(words - {"ERROR"})))]
            counts["error" if counted == "failed" else counted] -= 1
    return counts


def report_of(root: Path, ran: subprocess.CompletedProcess[str]) -> dict[str, Any]:
    """The counts, completeness, signals and scores of the newest report under ``root``."""
    folders = sorted(root.glob("scan_id=*"), key=lambda folder: folder.stat().st_mtime)
    if not folders:
        raise SystemExit(f"no report under {root}:\n{ran.stdout[-3000:]}{ran.stderr[-3000:]}")
    content = json.loads((folders[-1] / "scores.json").read_text())
    counts = content["tests"]["counts"]
    return {
        "counts": {outcome: counts[outcome] for outcome in OUTCOMES},
        "complete": content["complete"],
        "signals": content["integrity"],
        "scores": {name: score["value"] for name, score in content["scores"].items()},
        "tests": {test["nodeid"]: test["outcome"] for test in content["tests"]["tests"]},
    }


def problems(results: dict[str, Any], explained: dict[str, str]) -> list[str]:
    """What the routes got wrong: counts unlike pytest's (unless ``explained``), a strict
    signal, an incomplete session, a test score ``N``, a ``db_change`` that missed the
    attack or saw one."""
    found = []
    truth = results["pytest"]["counts"]
    for route in ROUTES:
        result = results[route]
        if result["counts"] != truth and route not in explained:
            found.append(f"{route}: {shown(result['counts'])}{unlike(result, results)}")
        if not result["complete"]:
            found.append(f"{route}: complete false")
        strict = [signal for signal in result["signals"] if signal["kind"] in STRICT_DEFAULT]
        found += [f"{route}: {signal['kind']}: {signal['detail']}" for signal in strict]
        for name, value in result["scores"].items():
            expected = {"run": "I", "attack": "C"}.get(route)
            if name == "db_change" and value != expected:
                found.append(f"{route}: db_change {value}, not {expected}")
            elif name != "db_change" and value == "N":
                found.append(f"{route}: {name} N")
    return found


def unlike(result: dict[str, Any], results: dict[str, Any]) -> str:
    """The tests whose outcome differs from the one in process (from ``run``'s, for the
    in-process route), the first few."""
    other = results["run" if result is results["in process"] else "in process"]["tests"]
    differ = [
        f"{nodeid} {outcome}"
        for nodeid, outcome in result["tests"].items()
        if other.get(nodeid) != outcome
    ]
    return f" ({'; '.join(differ[:3])})" if differ else ""


def kinds(signals: list[dict[str, Any]]) -> str:
    found: dict[str, int] = {}
    for signal in signals:
        found[signal["kind"]] = found.get(signal["kind"], 0) + 1
    return ", ".join(f"{kind} {count}" for kind, count in sorted(found.items())) or "none"


def run(command: list[str], cwd: Path, check: bool = False) -> subprocess.CompletedProcess[str]:
    cwd.mkdir(parents=True, exist_ok=True)
    env = {key: value for key, value in os.environ.items() if key != "PYTHONPATH"}
    return subprocess.run(
        command, cwd=cwd, env=env, capture_output=True, text=True, check=check, timeout=3600
    )


def shown(counts: dict[str, int]) -> str:
    return "/".join(str(counts[outcome]) for outcome in OUTCOMES)


def table(rows: list[dict[str, Any]]) -> str:
    """The counts of every route, the signals, db_change of the two runs and the times."""
    lines = [
        "| suite | pytest | in process, -n 2, run, junit | signals (all routes) "
        "| db_change run, attack | seconds (pytest, in process, -n 2, run, junit, attack) |",
        "|---|---|---|---|---|---|",
    ]
    for row in rows:
        results = row["results"]
        truth = results["pytest"]["counts"]
        line = shown(results["line"])
        if results["line"] != truth:
            line += f" (per test {shown(truth)})"
        same = [
            "same" if results[route]["counts"] == truth else shown(results[route]["counts"])
            for route in ROUTES[:4]
        ]
        signals = [signal for route in ROUTES for signal in results[route]["signals"]]
        verdicts = [str(results[route]["scores"].get("db_change")) for route in ("run", "attack")]
        seconds = ", ".join(str(round(value)) for value in row["seconds"].values())
        lines.append(
            f"| {row['suite']} | {line} | {', '.join(same)} | {kinds(signals)} "
            f"| {', '.join(verdicts)} | {seconds} |"
        )
        lines += [f"|   problem: {problem} |" for problem in row["problems"]]
        explained = EXPLAINED.get(row["suite"].split()[0], {})
        lines += [
            f"|   explained, {route}: {why} |"
            for route, why in explained.items()
            if results[route]["counts"] != truth
        ]
    return "\n".join(lines) + "\n\n(passed/failed/error/skipped/xfailed/xpassed)"


if __name__ == "__main__":
    main()
