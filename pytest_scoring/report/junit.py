"""JUnit XML in: score any runner's JUnit files.

pytest, jest-junit, go-junit-report and Maven Surefire (one file per class; several files
are one repository's suite) all write ``<testsuites>``/``<testsuite>`` with ``<testcase>``
elements; a case holding ``<failure>`` failed, ``<error>`` errored, ``<skipped>`` was skipped
(pytest's ``type="pytest.xfail"`` is an xfail), else it passed. Cases with one id in one
suite are one test (:func:`~pytest_scoring.core.rule.merged`); ``todo``/``pending`` tests
count as skipped where the XML says so (docs/scoring.md#junit).

The files come from the tests' own run: they are read as a stream, within the bounds of
:mod:`pytest_scoring.report.xml_stream` and :data:`MAX_CASES` (docs/security.md#bounds).
"""

from __future__ import annotations

import contextlib
import math
import os
from collections.abc import Callable
from collections.abc import Mapping
from collections.abc import Sequence
from dataclasses import dataclass
from dataclasses import field
from pathlib import Path
from typing import Final

from pytest_scoring.core.outcomes import OutcomeTally
from pytest_scoring.core.rule import MESSAGE_CAP
from pytest_scoring.core.rule import Outcome
from pytest_scoring.core.rule import merged
from pytest_scoring.core.rule import worse
from pytest_scoring.core.score import cap_text
from pytest_scoring.core.signals import NO_STRICT
from pytest_scoring.core.signals import Signal
from pytest_scoring.core.signals import StrictKinds
from pytest_scoring.core.signals import cap_signals
from pytest_scoring.core.signals import make_signal
from pytest_scoring.errors import JUnitError
from pytest_scoring.fs.walk import TreeWalk
from pytest_scoring.kit.integrity import find_ini
from pytest_scoring.kit.integrity import hooks_in_source
from pytest_scoring.kit.integrity import ini_signals
from pytest_scoring.process.witness import NotStarted
from pytest_scoring.process.witness import internal_error
from pytest_scoring.report.provenance import path_digest
from pytest_scoring.report.provenance import provenance
from pytest_scoring.report.result import SessionResult
from pytest_scoring.report.xml_stream import BoundedParser
from pytest_scoring.report.xml_stream import ByteBudget
from pytest_scoring.report.xml_stream import Cut
from pytest_scoring.report.xml_stream import Stop
from pytest_scoring.report.xml_stream import byte_text
from pytest_scoring.report.xml_stream import open_regular
from pytest_scoring.scorers import default_test_scorers
from pytest_scoring.scorers.base import ScoringContext
from pytest_scoring.scorers.base import run_scorers

_XFAIL_TYPE: Final = "pytest.xfail"
#: ``status`` values of a ``<testcase>`` that say the test did not run.
_NOT_RUN_STATUSES: Final = frozenset({"todo", "pending", "skipped", "disabled", "notrun"})
#: Test cases read in one reading (of all its files together): the tally keeps each one.
#: As many as ``run`` records by default (``--limit tests``): a real suite (packaging's 64,204
#: tests) scores the same by both routes.
MAX_CASES: Final = 100_000
#: Characters of test ids kept in one reading (a jest-junit id qualified by its suite's name
#: counts whole). Each id is written several times (``scores.json``, the page).
MAX_ID_CHARS: Final = 6 * 1024 * 1024
#: Characters of failure messages kept in one reading (each test's is capped at
#: :data:`~pytest_scoring.core.rule.MESSAGE_CAP` too); later tests keep none.
MAX_MESSAGE_CHARS: Final = 2 * 1024 * 1024
#: The tags of a case's result elements.
_RESULTS: Final = frozenset({"failure", "error", "skipped"})
_ROOTS: Final = frozenset({"testsuites", "testsuite"})


@dataclass(slots=True)
class ReadBudget:
    """What one reading may still read and keep, shared by its files: it bounds the
    evaluator's memory whatever the files hold (docs/security.md#bounds)."""

    bytes: ByteBudget = field(default_factory=ByteBudget)
    cases: int = MAX_CASES
    id_chars: int = MAX_ID_CHARS
    message_chars: int = MAX_MESSAGE_CHARS

    def take_case(self) -> None:
        """Count one more case; :class:`Stop` when the reading has read its last."""
        if self.cases <= 0:
            raise Stop(f"{MAX_CASES:,} test cases")
        self.cases -= 1

    def take_id(self, nodeid: str) -> None:
        """Count a test id kept; :class:`Stop` when the reading may keep no more."""
        self.id_chars -= len(nodeid)
        if self.id_chars < 0:
            raise Stop(f"{byte_text(MAX_ID_CHARS)} characters of test ids")

    def keep(self, message: str | None) -> str | None:
        """``message`` capped, while the reading may still keep messages; else None."""
        if message is None or self.message_chars <= 0:
            return None
        message = cap_text(message, MESSAGE_CAP)
        self.message_chars -= len(message)
        return message


@dataclass(slots=True)
class _Entry:
    """One ``<testcase>`` as read: only what the outcome rule and the message need."""

    nodeid: str
    #: Its ``status`` says it did not run (``todo``, ``pending``…).
    not_run: bool
    time: float
    #: The tags of its result elements (``failure``, ``error``, ``skipped``).
    results: set[str] = field(default_factory=set)
    #: One of its ``<skipped>`` elements is pytest's xfail.
    xfail: bool = False
    message: str | None = None

    def outcome(self) -> Outcome:
        if "failure" in self.results:
            return "failed"
        if "error" in self.results:
            return "error"
        if "skipped" in self.results or self.not_run:
            return "xfailed" if self.xfail else "skipped"
        return "passed"


@dataclass(slots=True)
class _Suite:
    """One ``<testsuite>`` while it is read: its own cases (not those of suites inside it)."""

    name: str | None
    #: The ``tests`` count it declares, as written.
    tests: str | None
    #: Its element's depth in the file.
    depth: int
    entries: list[_Entry] = field(default_factory=list)


class _JUnitFile(BoundedParser):
    """One JUnit file read as a stream: each ``<testsuite>`` is handed on when it ends."""

    def __init__(
        self, budget: ReadBudget, on_suite: Callable[[_Suite], None], modules: _ModuleFiles
    ):
        super().__init__()
        self.budget, self.on_suite, self.modules = budget, on_suite, modules
        self.suites: list[_Suite] = []
        self.case: _Entry | None = None
        #: The text of the result element being read while its message is wanted, and how
        #: many characters of it are kept.
        self.collecting: list[str] | None = None
        self.collected = 0

    def start(self, tag: str, attributes: dict[str, str]) -> None:
        if self.depth == 1 and tag not in _ROOTS:
            raise JUnitError("not JUnit XML (the root element must be <testsuites> or <testsuite>)")
        if tag == "testsuite":
            self.suites.append(_Suite(attributes.get("name"), attributes.get("tests"), self.depth))
        elif tag == "testcase" and self._in_suite():
            self.budget.take_case()
            name, classname = attributes.get("name", ""), attributes.get("classname")
            file = attributes.get("file") or self.modules.file_of(classname)
            nodeid = case_nodeid(name, classname, file)
            status = attributes.get("status", "").lower()
            time = _seconds(attributes.get("time"))
            self.case = _Entry(nodeid, status in _NOT_RUN_STATUSES, time)
        elif tag in _RESULTS and self._in_case():
            self._result(tag, attributes)

    def _in_suite(self) -> bool:
        return bool(self.suites) and self.suites[-1].depth == self.depth - 1 and not self.case

    def _in_case(self) -> bool:
        return self.case is not None and self.suites[-1].depth == self.depth - 2

    def _result(self, tag: str, attributes: dict[str, str]) -> None:
        assert self.case is not None
        self.case.results.add(tag)
        self.case.xfail |= tag == "skipped" and attributes.get("type") == _XFAIL_TYPE
        if self.case.message is None and self.collecting is None:
            message = (attributes.get("message") or "").strip()
            self.case.message = message[: 2 * MESSAGE_CAP] or None
            self.collecting, self.collected = (None, 0) if message else ([], 0)

    def text(self, data: str) -> None:
        if self.collecting is not None and self.collected < 2 * MESSAGE_CAP:
            self.collecting.append(data)
            self.collected += len(data)

    def end(self, tag: str) -> None:
        if self.collecting is not None and tag in _RESULTS and self.case is not None:
            self.case.message = "".join(self.collecting).strip() or None
            self.collecting = None
        elif tag == "testcase" and self.case is not None and self._closes_case():
            self.budget.take_id(self.case.nodeid)
            self.case.message = self.budget.keep(self.case.message)
            self.suites[-1].entries.append(self.case)
            self.case = None
        elif tag == "testsuite" and self.suites and self.suites[-1].depth == self.depth:
            self.on_suite(self.suites.pop())

    def _closes_case(self) -> bool:
        return self.suites[-1].depth == self.depth - 1

    def flush(self) -> None:
        """Hand on the suites a cut left open, with the cases read whole (a bound reached
        meanwhile changes nothing: the file is cut already)."""
        with contextlib.suppress(Stop):
            while self.suites:
                self.on_suite(self.suites.pop())


def _seconds(text: str | None) -> float:
    """A case's ``time`` in seconds; 0 when absent or not a finite, positive number."""
    try:
        value = float(text or 0.0)
    except ValueError:
        return 0.0
    return value if math.isfinite(value) and value > 0 else 0.0


def _todo_cases(suite: _Suite, ids: Sequence[str]) -> set[int]:
    """Positions of the cases jest-junit wrote for ``it.todo`` tests.

    jest-junit writes a todo test as an empty ``<testcase>`` like a pass, but leaves it out
    of the suite's ``tests`` count. When the suite declares ``k`` tests fewer than it has
    distinct ids and exactly ``k`` of its empty cases took no time, those are the todo tests;
    when more did, which ones cannot be told and none is changed.
    """
    try:
        declared = int(suite.tests or "")
    except ValueError:
        return set()
    todo = len(set(ids)) - declared
    if todo <= 0:
        return set()
    empty = [
        index for index, entry in enumerate(suite.entries) if not entry.results and entry.time <= 0
    ]
    return set(empty) if len(empty) == todo else set()


def case_nodeid(name: str, classname: str | None, file: str | None) -> str:
    """A test id from a case's ``file``, ``classname`` and ``name``.

    ``tests/test_a.py`` + ``tests.test_a.TestX`` + ``test_y`` gives pytest's own id
    ``tests/test_a.py::TestX::test_y``: the module part the file already says is dropped.
    A classname equal to the name (jest-junit's default) is said once.
    """
    classname = None if classname == name else classname
    if file and classname:
        module = os.path.splitext(file)[0].replace("/", ".").replace("\\", ".")
        classname = None if classname == module else classname.removeprefix(f"{module}.")
    return "::".join(part for part in (file, classname, name) if part)


@dataclass
class _ModuleFiles:
    """The test file a dotted classname names (``tests.test_more.LastTests`` ->
    ``tests/test_more.py``), looked up once per classname under the repository: pytest's JUnit
    writes no ``file``, and the other routes' ids name the file (docs/scoring.md#junit)."""

    #: The repository (None: ids stay as the XML writes them).
    root: Path | None
    _found: dict[str, str | None] = field(default_factory=dict)

    def file_of(self, classname: str | None) -> str | None:
        """The longest leading part of ``classname`` that is a ``.py`` file of the
        repository (never through a link), as a relative path; None when there is none."""
        if self.root is None or not classname:
            return None
        if classname not in self._found:
            self._found[classname] = self._lookup(classname.split("."))
        return self._found[classname]

    def _lookup(self, parts: list[str]) -> str | None:
        assert self.root is not None
        for end in range(len(parts), 0, -1):
            relpath = "/".join(parts[:end]) + ".py"
            if all(parts[:end]) and _plain_file(self.root, relpath):
                return relpath
        return None


def _plain_file(root: Path, relpath: str) -> bool:
    """``relpath`` is a regular file under ``root`` with no link on the way."""
    path = root
    for part in relpath.split("/"):
        path = path / part
        if path.is_symlink():
            return False
    return path.is_file()


#: pytest's JUnit entry for an INTERNALERROR: no test, the session's own end.
INTERNAL_CASE: Final = "pytest::internal"


@dataclass(slots=True)
class _Result:
    """One test's outcome as one file says it."""

    outcome: Outcome
    time: float
    message: str | None


@dataclass
class JUnitReading:
    """What JUnit files said: one tally, the tests whose files disagree, the files cut at a
    bound."""

    #: Where the files' names in signals are relative to (the repository), or None.
    root: Path | None = None
    tally: OutcomeTally = field(default_factory=OutcomeTally)
    #: ``junit_conflict`` signals: a test one file gives another outcome than an earlier one.
    conflicts: list[Signal] = field(default_factory=list)
    #: The files whose reading stopped at a bound (docs/security.md#bounds).
    cuts: list[Cut] = field(default_factory=list)
    #: pytest's session ended with an INTERNALERROR: its exception's line (or ``""``).
    internal_error: str | None = None
    #: The file each test's counted outcome comes from.
    _source: dict[str, Path] = field(default_factory=dict, repr=False)

    def add_file(self, path: Path, results: Mapping[str, _Result]) -> None:
        """One file's tests. A test an earlier file had keeps the worse of the two outcomes:
        a later file is no rerun (a rerun counts only inside its own ``<testcase>``), and a
        test's own run may write files into the folder being read (issue 26)."""
        tests = self.tally.tests
        for nodeid, result in results.items():
            if nodeid == INTERNAL_CASE and result.outcome == "error":
                self.internal_error = _last_line(result.message)
                continue
            earlier = tests.get(nodeid)
            if earlier is not None:
                previous = earlier.final()
                if previous != result.outcome:
                    self.conflicts.append(self._conflict(nodeid, previous, result.outcome, path))
                if worse(previous, result.outcome) == previous:
                    continue
            self.tally.record_outcome(nodeid, result.outcome, result.time, result.message)
            self.tally.collected.add(nodeid)
            self._source[nodeid] = path

    def _conflict(
        self, nodeid: str, previous: Outcome | None, outcome: Outcome, path: Path
    ) -> Signal:
        detail = (
            f"{nodeid} is {previous} in {self._source[nodeid]} and {outcome} in {path}: the "
            "worse counts (a rerun counts only inside its own <testcase>)"
        )
        return make_signal("junit_conflict", detail, self._relative(path))

    def _relative(self, path: Path) -> str | None:
        if self.root is None:
            return None
        try:
            return path.resolve().relative_to(self.root.resolve()).as_posix()
        except (ValueError, OSError):
            return None


def _last_line(text: str | None) -> str:
    lines = [line.strip() for line in (text or "").splitlines() if line.strip()]
    return lines[-1] if lines else ""


def read_junit(
    paths: Sequence[Path], root: Path | None = None, budget: ReadBudget | None = None
) -> JUnitReading:
    """Fold the test cases of JUnit XML files into one tally.

    Cases with one id in one suite of a file are one test (attempts, or a call failure and a
    teardown error: :func:`~pytest_scoring.core.rule.merged`); a test that several files
    have counts with the worse outcome, and a ``junit_conflict`` signal when they disagree.

    :param root: the repository, which the files' names in signals are relative to.
    :param budget: what the reading may read (by default
        :data:`~pytest_scoring.report.xml_stream.MAX_BYTES` and :data:`MAX_CASES` for all
        files together).
    :raises JUnitError: naming the file that is missing, empty, malformed or not JUnit.
    """
    reading, budget = JUnitReading(root), budget or ReadBudget()
    modules = _ModuleFiles(root)
    for path in paths:
        _FileFold(path, budget).read(reading, modules)
    return reading


class _FileFold:
    """One file's suites, folded as each ends into what the file says of each test."""

    def __init__(self, path: Path, budget: ReadBudget):
        self.path, self.budget = path, budget
        self.results: dict[str, _Result] = {}
        self.suite_of: dict[str, int] = {}  # test id -> the suite of this file that had it first
        self.suites = 0

    def read(self, reading: JUnitReading, modules: _ModuleFiles) -> None:
        parser = _JUnitFile(self.budget, self.add_suite, modules)
        with open_regular(self.path) as source:
            cut = parser.feed(self.path, source, self.budget.bytes)
        parser.flush()
        if cut is not None:
            reading.cuts.append(cut)
        reading.add_file(self.path, self.results)

    def add_suite(self, suite: _Suite) -> None:
        number = self.suites
        self.suites += 1
        ids = [entry.nodeid for entry in suite.entries]
        todo = _todo_cases(suite, ids)
        for index, (entry, nodeid) in enumerate(zip(suite.entries, ids, strict=True)):
            qualified = _distinct(nodeid, suite.name, number, self.suite_of)
            if qualified != nodeid:
                self.budget.take_id(qualified[: -len(nodeid)])
            nodeid = qualified
            outcome = "skipped" if index in todo else entry.outcome()
            result = _Result(outcome, entry.time, entry.message)
            earlier = self.results.get(nodeid)
            if earlier is not None and merged(earlier.outcome, outcome) != outcome:
                result = _Result(earlier.outcome, entry.time, earlier.message)
            self.suite_of.setdefault(nodeid, number)
            self.results[nodeid] = result


def _distinct(nodeid: str, suite_name: str | None, suite: int, suite_of: dict[str, int]) -> str:
    """``nodeid``, or that id qualified by its suite's name when another suite of the same
    file had it.

    jest-junit names a case only by its describe path, so two test files (two suites) with
    the same test title would share an id and the later would hide the earlier's failure.
    Within one suite, cases with one id are one test and merge. (Across files the worse
    outcome counts: :meth:`JUnitReading.add_file`.)
    """
    if suite_of.get(nodeid, suite) != suite and suite_name:
        return f"{suite_name}::{nodeid}"
    return nodeid


def repository_signals(repository: Path, selection: bool) -> list[Signal]:
    """The integrity signals a repository's files show without running it: its pytest
    settings (``plugin_disabled``; ``selection`` when ``selection``) and the outcome hooks
    its ``conftest.py`` files define (docs/scoring.md#integrity)."""
    signals = ini_signals(find_ini(repository), repository, selection)
    for entry in TreeWalk(repository):
        if entry.is_file and entry.path.name == "conftest.py":
            try:
                source = entry.path.read_text(encoding="utf-8", errors="replace")
            except OSError:
                continue
            signals.extend(
                make_signal("outcome_hook", f"{hook} implemented in {entry.relpath}", entry.relpath)
                for hook in hooks_in_source(source)
            )
    return cap_signals(signals)


def score_junit(
    reading: JUnitReading,
    repository: Path,
    strict: StrictKinds = NO_STRICT,
    inputs: Mapping[str, Path] | None = None,
) -> SessionResult:
    """Score what JUnit files said with the three test scorers.

    A file cut at a bound makes the test scores ``"N"`` (``unscored: "repository"``): what
    was not read could hold any outcome of any test, a later failure of a test read as
    passing included.

    :param strict: the signal kinds that make the test scores ``"N"``.
    :param inputs: the files the tally was read from (JUnit XML, expected tests), by name;
        the report's provenance holds their hashes.
    """
    tally, scorers = reading.tally, default_test_scorers()
    selection = tally.expected is None
    integrity = cap_signals([*repository_signals(repository, selection), *reading.conflicts])
    context = ScoringContext(root=repository, tally=tally, integrity=integrity, strict=strict.kinds)
    if reading.cuts:
        context.not_started = NotStarted(_cut_reason(reading.cuts))
    elif reading.internal_error is not None:
        context.not_started, context.complete = internal_error(reading.internal_error), False
    scores = run_scorers(scorers, context)
    return SessionResult(
        repository=str(repository),
        scorers=scorers,
        scores=scores,
        tests=tally.to_json(),
        complete=context.complete and not any(error["traceback"] for error in context.errors),
        errors=context.errors,
        integrity=integrity,
        provenance=provenance(
            "junit",
            {"strict": sorted(strict.kinds), "expected_tests": tally.expected_source},
            {name: path_digest(path) for name, path in (inputs or {}).items()},
        ),
    )


def _cut_reason(cuts: Sequence[Cut]) -> str:
    """The test scores' explanation when a file was cut at a bound."""
    more = f" (and {len(cuts) - 1} more file(s))" if len(cuts) > 1 else ""
    return f"JUnit XML {cuts[0].describe()}{more}: what was not read could change every test score"
