"""Helpers for tests that score a repository with ``pytest-scoring run``."""

from __future__ import annotations

import json
import os
import re
import select
import subprocess
import sys
import textwrap
from pathlib import Path
from typing import Any
from typing import NamedTuple

import pytest
from click.testing import CliRunner
from click.testing import Result

from pytest_scoring.cli.main import main
from pytest_scoring.report.result import SessionResult

#: Long enough for any loaded machine; no test waits for it to pass.
GENEROUS = 600.0
#: Debian's interpreter: other users can run it (a pyenv interpreter under /root is closed).
SYSTEM_PYTHON = Path("/usr/bin/python3")
#: Where the tests run as root and other users cannot run this interpreter (pyenv's, under
#: /root), the repository's processes run as root: without ``--strict`` that partial
#: containment makes the test scores "N". A test about something else names the default
#: set, which keeps every tampering kind strict and leaves partial containment out.
TAMPERING_ONLY = "--strict=default"
#: ``run`` options for a test about something else than containment: as root, the
#: repository's processes run as the evaluator's own user, with every tampering kind strict.
AS_EVALUATOR = ["--user", "root", TAMPERING_ONLY] if os.geteuid() == 0 else []


def run_cli(*args: str | Path) -> Result:
    """``pytest-scoring run ARGS`` in this process."""
    return CliRunner().invoke(main, ["run", *map(str, args)])


def start_run(*args: str | Path) -> subprocess.Popen[str]:
    """``pytest-scoring run ARGS`` as a process of its own (to send it signals)."""
    return subprocess.Popen(
        [sys.executable, "-m", "pytest_scoring", "run", *map(str, args)],
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )


def shown_report(output: str) -> Path:
    """The report folder a run's output names."""
    found = re.findall(r"^report: (.+)$", output, flags=re.MULTILINE)
    assert found, output
    return Path(found[-1].strip())


def scores_json(folder: Path) -> dict[str, Any]:
    content: dict[str, Any] = json.loads((folder / "scores.json").read_text())
    return content


def only_report(report_root: Path) -> dict[str, Any]:
    (folder,) = report_root.glob("scan_id=*")
    return scores_json(folder)


def repository(folder: Path, test: str) -> Path:
    """A repository at ``folder`` whose one test file holds ``test`` (dedented)."""
    (folder / "tests").mkdir(parents=True)
    (folder / "tests" / "test_app.py").write_text(textwrap.dedent(test))
    return folder


def make_fifo(path: Path) -> Path:
    os.mkfifo(path)
    path.chmod(0o666)
    return path


def wait_for_ready(path: Path) -> None:
    """Block until a child wrote to the FIFO ``path``: a rendezvous, never a sleep.

    Our own write end stays open meanwhile, so that the read end shows data, never its end.
    """
    reader = os.open(path, os.O_RDONLY | os.O_NONBLOCK)
    writer = os.open(path, os.O_WRONLY)
    try:
        readable, _, _ = select.select([reader], [], [], GENEROUS)
        assert readable, "the child never got ready"
    finally:
        os.close(writer)
        os.close(reader)


def system_python_with_pytest() -> bool:
    if not SYSTEM_PYTHON.exists():
        return False
    check = [SYSTEM_PYTHON, "-c", "import pytest"]
    return subprocess.run(check, capture_output=True, check=False).returncode == 0


#: Marks for tests of ``run``'s unprivileged users: they need root and an interpreter that
#: other users can run (Debian's python3 with python3-pytest).
AS_OTHER_USERS = [
    pytest.mark.skipif(os.geteuid() != 0, reason="only a run as root drops to other users"),
    pytest.mark.skipif(
        not system_python_with_pytest(),
        reason="needs /usr/bin/python3 with pytest (apt-get install python3-pytest)",
    ),
]


#: Python text for a hostile ``conftest.py`` (a ``str.format`` template: braces doubled):
#: ``attempt(action)`` says whether ``action`` was done or refused, and by what error.
ATTEMPT = """
def attempt(action):
    try:
        action()
    except OSError as error:
        return f"refused ({{type(error).__name__}})"
    return "done"
"""


class ReportedSession(NamedTuple):
    """A scored session as its report folder has it."""

    scores: dict[str, Any]
    tests: dict[str, Any]
    #: The folder's other JSON files (``diff.json``…), by name.
    files: dict[str, Any]


def scored_session(pytester: pytest.Pytester, report_root: Path | None = None) -> ReportedSession:
    """The last session a test's ``pytester`` scored, read back from the report it wrote."""
    root = pytester.path / "scores" if report_root is None else report_root
    folder = max(root.glob("scan_id=*"), key=lambda found: found.stat().st_mtime_ns)
    content = scores_json(folder)
    own = {"scores.json", "_scan.json", "_summary.json"}
    files = {
        path.name: json.loads(path.read_text(encoding="utf-8"))
        for path in folder.glob("*.json")
        if path.name not in own
    }
    return ReportedSession(content["scores"], content["tests"], files)


class ScoredSessions:
    """A plugin object for ``pytest.main(plugins=[...])``: the results of the sessions it
    scores, through our own hook (for sessions whose report could not be written)."""

    def __init__(self) -> None:
        self.results: list[SessionResult] = []

    @pytest.hookimpl
    def pytest_scoring_session_scored(
        self, config: pytest.Config, result: SessionResult, report_path: Path | None
    ) -> None:
        self.results.append(result)


def pytest_version_of(python: Path) -> str:
    """The pytest version ``python`` imports."""
    check = [str(python), "-c", "import pytest; print(pytest.__version__)"]
    return subprocess.run(check, capture_output=True, text=True, check=True).stdout.strip()
