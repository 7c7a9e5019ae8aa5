"""JUnit XML in and out: score any runner's JUnit files, add scores to pytest's.

Read: pytest, jest-junit, go-junit-report and Maven Surefire (one file per class; several
files are one repository's suite) all write ``<testsuites>``/``<testsuite>`` with
``<testcase>`` elements; a case holding ``<failure>`` failed, ``<error>`` errored,
``<skipped>`` was skipped (pytest's ``type="pytest.xfail"`` is an xfail), else it passed.
Cases with one id in one suite are one test (:func:`~pytest_scoring.core.rule.merged`);
``todo``/``pending`` tests count as skipped where the XML says so (docs/scoring.md#junit).

Write: when pytest writes ``--junitxml``, the scores become test-suite properties
``score:<name>`` = value.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from collections.abc import Mapping
from collections.abc import Sequence
from pathlib import Path
from typing import Any
from typing import Final

from junitparser import Attr
from junitparser import JUnitXml
from junitparser import JUnitXmlError
from junitparser import Properties
from junitparser import TestCase

from pytest_scoring.core.outcomes import OutcomeTally
from pytest_scoring.core.rule import Outcome
from pytest_scoring.core.rule import merged
from pytest_scoring.core.score import Score
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
from pytest_scoring.report.provenance import path_digest
from pytest_scoring.report.provenance import provenance
from pytest_scoring.report.result import SessionResult
from pytest_scoring.scorers import default_test_scorers
from pytest_scoring.scorers.base import ScoringContext
from pytest_scoring.scorers.base import run_scorers
from pytest_scoring.text import value_text

#: The prefix of the test-suite properties that carry scores.
PROPERTY_PREFIX: Final = "score:"

_XFAIL_TYPE: Final = "pytest.xfail"
#: ``status`` values of a ``<testcase>`` that say the test did not run.
_NOT_RUN_STATUSES: Final = frozenset({"todo", "pending", "skipped", "disabled", "notrun"})


def _load(path: Path) -> JUnitXml:
    """The parsed file as a ``JUnitXml``; every way it can be unusable is a :class:`JUnitError`."""
    try:
        if path.stat().st_size == 0 or not path.read_bytes().strip():
            raise JUnitError(f"{path}: empty file, expected JUnit XML")
        return JUnitXml.fromfile(str(path))
    except OSError as error:
        raise JUnitError(f"{path}: cannot read ({error.strerror})") from None
    except SyntaxError as error:  # ElementTree's ParseError and lxml's both derive from it
        raise JUnitError(f"{path}: not well-formed XML ({error})") from None
    except JUnitXmlError:
        raise JUnitError(
            f"{path}: not JUnit XML (the root element must be <testsuites> or <testsuite>)"
        ) from None


def _suites(container: Any) -> Iterator[Any]:
    """Every ``<testsuite>`` at any depth (jest and Surefire nest them at times)."""
    for suite in container:
        yield suite
        yield from _suites(suite.testsuites())


def _outcome(case: _Case) -> Outcome:
    if case.is_failure:
        return "failed"
    if case.is_error:
        return "error"
    if case.is_skipped or (case.status or "").lower() in _NOT_RUN_STATUSES:
        skips = [result.type for result in case.result]
        return "xfailed" if _XFAIL_TYPE in skips else "skipped"
    return "passed"


def _message(case: Any) -> str | None:
    """The ``message`` (else the text) of a case's failure, error or skip element."""
    for result in case.result:
        text = result.message or result.text
        if text:
            return str(text).strip()
    return None


class _Case(TestCase):
    """A test case with the ``file`` attribute that pytest (xunit1) and jest-junit may add,
    and the ``status`` some runners write."""

    file = Attr()
    status = Attr()


def _todo_cases(suite: Any, cases: Sequence[_Case], ids: Sequence[str]) -> set[int]:
    """Positions of the cases jest-junit wrote for ``it.todo`` tests.

    jest-junit writes a todo test as an empty ``<testcase>`` like a pass, but leaves it out
    of the suite's ``tests`` count. When the suite declares ``k`` tests fewer than it has
    distinct ids and exactly ``k`` of its empty cases took no time, those are the todo tests;
    when more did, which ones cannot be told and none is changed.
    """
    try:
        declared = int(suite.tests)
    except (TypeError, ValueError):
        return set()
    todo = len(set(ids)) - declared
    if todo <= 0:
        return set()
    empty = [
        index
        for index, case in enumerate(cases)
        if not list(case.result) and not float(case.time or 0.0) > 0
    ]
    return set(empty) if len(empty) == todo else set()


def _cases(suite: Any) -> Iterator[_Case]:
    return suite.iterchildren(_Case)  # type: ignore[no-any-return]


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


def read_junit(paths: Sequence[Path], tally: OutcomeTally | None = None) -> OutcomeTally:
    """Fold the test cases of JUnit XML files into one tally (a later file's case wins).

    :raises JUnitError: naming the file that is missing, empty, malformed or not JUnit.
    """
    tally = tally or OutcomeTally()
    for path in paths:
        suite_of: dict[str, int] = {}  # test id -> the suite of this file that had it first
        for number, suite in enumerate(_suites(_load(path))):
            cases = list(_cases(suite))
            ids = [case_nodeid(case.name or "", case.classname, case.file) for case in cases]
            todo = _todo_cases(suite, cases, ids)
            for index, (case, nodeid) in enumerate(zip(cases, ids, strict=True)):
                nodeid = _distinct(nodeid, suite.name, number, suite_of)
                outcome = "skipped" if index in todo else _outcome(case)
                message = _message(case)
                earlier = tally.outcome_of(nodeid) if nodeid in suite_of else None
                if earlier is not None and merged(earlier, outcome) != outcome:
                    outcome, message = earlier, tally.tests[nodeid].message()
                suite_of.setdefault(nodeid, number)
                tally.record_outcome(nodeid, outcome, float(case.time or 0.0), message)
                tally.collected.add(nodeid)
    return tally


def _distinct(nodeid: str, suite_name: str | None, suite: int, suite_of: dict[str, int]) -> str:
    """``nodeid``, or that id qualified by its suite's name when another suite of the same
    file had it.

    jest-junit names a case only by its describe path, so two test files (two suites) with
    the same test title would share an id and the later would hide the earlier's failure.
    Within one suite, cases with one id are one test and merge. (Across files a later case
    wins: that is a rerun.)
    """
    if suite_of.get(nodeid, suite) != suite and suite_name:
        return f"{suite_name}::{nodeid}"
    return nodeid


def add_score_properties(path: Path, scores: Mapping[str, Score]) -> None:
    """Add ``score:<name>`` = value to every test suite of the JUnit file at ``path``.

    Properties from an earlier scoring of the same file are replaced, not repeated.

    :raises JUnitError: when the file cannot be read or written.
    """
    xml = _load(path)
    for suite in _suites(xml):
        for prop in list(suite.properties()):
            if (prop.name or "").startswith(PROPERTY_PREFIX):
                suite.remove_property(prop)
        for name, score in scores.items():
            suite.add_property(f"{PROPERTY_PREFIX}{name}", value_text(score.get("value")))
        _properties_first(suite)
    building = path.with_name(f".{path.name}.scoring.tmp")
    try:
        xml.write(str(building))
        building.replace(path)
    except OSError as error:
        building.unlink(missing_ok=True)
        raise JUnitError(f"{path}: cannot add the scores ({error.strerror})") from None


def merge_junit(parts: Sequence[tuple[str, Path]], target: Path) -> None:
    """Write the JUnit XML of a batch: the test suites of every repository's ``junit.xml``
    (with its own ``score:<name>`` properties), each with a ``repository`` property naming it.

    :param parts: each repository's name and its JUnit XML file (a repository without one
        is left out).
    :raises JUnitError: when a file cannot be read or the result cannot be written.
    """
    merged = JUnitXml()
    for repository, path in parts:
        if not path.is_file():
            continue
        xml = _load(path)
        for suite in xml if isinstance(xml, JUnitXml) else [xml]:
            suite.add_property("repository", repository)
            _properties_first(suite)
            merged.add_testsuite(suite)
    building = target.with_name(f".{target.name}.scoring.tmp")
    try:
        target.parent.mkdir(parents=True, exist_ok=True)
        merged.write(str(building))
        building.replace(target)
    except OSError as error:
        building.unlink(missing_ok=True)
        raise JUnitError(f"{target}: cannot write ({error.strerror})") from None


def _properties_first(suite: Any) -> None:
    """Move ``<properties>`` to the suite's first child, where the JUnit XSD requires it.

    junitparser appends a new ``<properties>`` after the test cases, which strict readers
    (the Jenkins/Ant schema, pytest's own ``record_testsuite_property`` layout) reject.
    """
    properties = suite.child(Properties)
    if properties is not None:
        suite._elem.remove(properties._elem)
        suite._elem.insert(0, properties._elem)


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


def score_tally(
    tally: OutcomeTally,
    repository: Path,
    strict: StrictKinds = NO_STRICT,
    inputs: Mapping[str, Path] | None = None,
) -> SessionResult:
    """Score an outcome tally read from JUnit files with the three test scorers.

    :param strict: the signal kinds that make the test scores ``"N"``.
    :param inputs: the files the tally was read from (JUnit XML, expected tests), by name;
        the report's provenance holds their hashes.
    """
    scorers = default_test_scorers()
    integrity = repository_signals(repository, selection=tally.expected is None)
    context = ScoringContext(root=repository, tally=tally, integrity=integrity, strict=strict.kinds)
    scores = run_scorers(scorers, context)
    return SessionResult(
        repository=str(repository),
        scorers=scorers,
        scores=scores,
        tests=tally.to_json(),
        complete=not any(error["traceback"] for error in context.errors),
        errors=context.errors,
        integrity=integrity,
        provenance=provenance(
            "junit",
            {"strict": sorted(strict.kinds), "expected_tests": tally.expected_source},
            {name: path_digest(path) for name, path in (inputs or {}).items()},
        ),
    )
