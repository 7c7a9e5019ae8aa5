"""The plugin's ``--score-*`` options and their ini twins, as ``pytest --help`` lists them.

They are declared once, here, for pytest and for ``pytest-scoring run`` (which reads the same
declarations through an argparse adapter, see :mod:`pytest_scoring.evaluation.options`);
:mod:`pytest_scoring.evaluation.settings` turns their values into settings.
"""

from __future__ import annotations

import argparse
import math
from collections.abc import Callable
from typing import Any
from typing import Protocol
from typing import TypeVar

from pytest_scoring.core.determinism import DEFAULT_FLAKY
from pytest_scoring.core.determinism import FLAKY_RULES
from pytest_scoring.core.score import DEFAULT_VALUE_CAP
from pytest_scoring.core.settings import EVIDENCE_LEVELS

_Number = TypeVar("_Number", int, float)


class OptionGroup(Protocol):
    """What :func:`add_options` calls on an option group (pytest's, or an argparse adapter)."""

    def addoption(self, *opts: str, **attrs: Any) -> None: ...


class OptionParser(Protocol):
    """What :func:`add_options` calls on a parser (``pytest.Parser``, or ``run``'s adapter)."""

    def getgroup(self, name: str, description: str = "") -> OptionGroup: ...

    def addini(self, name: str, help: str, type: Any = None, default: Any = None) -> None: ...


def _number_type(
    convert: Callable[[str], _Number],
    accepts: Callable[[_Number], bool],
    not_a_number: str,
    out_of_range: str,
) -> Callable[[str], _Number]:
    """An argparse ``type``: a finite number that ``accepts``; the messages say what was
    expected, after the text given (``'lots' is not a number (expected 0 to 100)``)."""

    def parse(text: str) -> _Number:
        try:
            value = convert(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"{text!r} is not {not_a_number}") from None
        if not math.isfinite(value) or not accepts(value):
            raise argparse.ArgumentTypeError(f"{text!r} is not {out_of_range}")
        return value

    return parse


#: ``--score-fail-under``: a percentage from 0 to 100.
fail_under_type: Callable[[str], float] = _number_type(
    float,
    lambda value: 0 <= value <= 100,
    "a number (expected 0 to 100)",
    "a percentage from 0 to 100",
)
#: ``--score-selector-timeout``: a positive number of seconds.
seconds_type: Callable[[str], float] = _number_type(
    float, lambda value: value > 0, "a number of seconds", "a positive number of seconds"
)
#: ``--score-retries``: a whole number of reruns, from 0.
retries_type: Callable[[str], int] = _number_type(
    int, lambda value: value >= 0, "a whole number of reruns", "a number of reruns of 0 or more"
)
#: ``--score-value-cap``: a whole number of bytes, at least 1.
value_cap_type: Callable[[str], int] = _number_type(
    int, lambda value: value >= 1, "a whole number of bytes", "a number of bytes of at least 1"
)


def path_map_type(text: str) -> tuple[str, str]:
    """``--score-path-map SANDBOX=LOCAL``: an absolute sandbox path and a local folder."""
    sandbox, equals, local = text.partition("=")
    if not equals or not sandbox or not local:
        raise argparse.ArgumentTypeError(f"{text!r} is not SANDBOX=LOCAL (e.g. /repo=.)")
    if not sandbox.startswith("/"):
        raise argparse.ArgumentTypeError(f"{sandbox!r} is not an absolute sandbox path")
    return sandbox, local


def add_options(parser: OptionParser) -> None:
    """Register the ``--score-*`` options and their ini twins."""
    group = parser.getgroup("scoring", "score the session (pytest-scoring)")
    group.addoption(
        "--score",
        action="store_true",
        dest="score",
        help="Score the session with the test scorers and write a report",
    )
    group.addoption(
        "--score-db-diff",
        action="store_true",
        dest="score_db_diff",
        help="Also snapshot databases at session start and finish; adds db_change",
    )
    group.addoption(
        "--score-selector",
        dest="score_selector",
        metavar="JSON|@FILE",
        help="Selector for db_change / db_diff_change",
    )
    group.addoption(
        "--score-reference",
        dest="score_reference",
        metavar="DIR",
        help="Reference checkout; adds db_diff_change",
    )
    group.addoption(
        "--score-test-pattern",
        action="append",
        dest="score_test_patterns",
        metavar="GLOB",
        help="Test files copied into the reference copy (repeatable)",
    )
    group.addoption(
        "--score-db-pattern",
        action="append",
        dest="score_db_patterns",
        metavar="GLOB",
        help="Database files at any depth (repeatable); default *.db *.sqlite *.sqlite3",
    )
    group.addoption(
        "--score-db-exclude",
        action="append",
        dest="score_db_exclude",
        metavar="DIR",
        help="Folder left out of database discovery and the reference copy (repeatable)",
    )
    group.addoption(
        "--score-config",
        dest="score_config",
        metavar="FILE[#NAME]",
        help="Scorer configuration file (TOML, JSON or YAML); FILE#NAME: the scorer: block "
        "of fixture NAME of a fixtures file",
    )
    group.addoption(
        "--score-path-map",
        action="append",
        dest="score_path_maps",
        metavar="SANDBOX=LOCAL",
        type=path_map_type,
        help="Read the sandbox path SANDBOX (e.g. /repo) as the local folder LOCAL, relative "
        "to the repository (repeatable)",
    )
    group.addoption(
        "--score-selector-timeout",
        dest="score_selector_timeout",
        metavar="S",
        type=seconds_type,
        help="Seconds each scorer's selector may take before that score is N (default 60)",
    )
    group.addoption(
        "--score-report",
        dest="score_report",
        metavar="DIR",
        help="Report root, default scores/ in the rootdir; given alone it also turns scoring on",
    )
    group.addoption(
        "--score-markdown",
        dest="score_markdown",
        metavar="FILE",
        help="Also write the score table as Markdown to FILE (for CI summaries)",
    )
    group.addoption(
        "--score-fail-under",
        dest="score_fail_under",
        metavar="PCT",
        type=fail_under_type,
        help="Exit status 1 if percent_passing_tests is below PCT",
    )
    group.addoption(
        "--score-allow-empty",
        action="store_true",
        dest="score_allow_empty",
        help="Exit status 0, not 5, when no test was collected (no ini setting)",
    )
    group.addoption(
        "--score-deterministic",
        action="store_true",
        dest="score_deterministic",
        help="Patch salt and token generators to fixed values during the session",
    )
    group.addoption(
        "--score-evidence",
        dest="score_evidence",
        choices=EVIDENCE_LEVELS,
        default=None,
        help="What the report keeps for pytest-scoring rescore: none, diffs (the default: "
        "outcomes and database diffs) or all (also the final databases); no ini setting",
    )
    group.addoption(
        "--score-retries",
        dest="score_retries",
        metavar="N",
        type=retries_type,
        default=0,
        help="Run each test that did not pass again, up to N times, in a fresh contained "
        "pytest process (no ini setting)",
    )
    group.addoption(
        "--score-flaky",
        dest="score_flaky",
        choices=FLAKY_RULES,
        default=DEFAULT_FLAKY,
        help="How a test whose attempts differ counts: fail, pass or exclude (no ini setting)",
    )
    group.addoption(
        "--score-db-reset",
        action="store_true",
        dest="score_db_reset",
        help="Restore every database to its first-seen state at session start",
    )
    group.addoption(
        "--score-db-url",
        action="append",
        dest="score_db_urls",
        metavar="URL",
        default=[],
        help="Also score the PostgreSQL database of URL, the application's (repeatable; "
        "${VAR} reads the evaluator's environment)",
    )
    group.addoption(
        "--score-db-admin-url",
        dest="score_db_admin_url",
        metavar="URL",
        help="The evaluator's own, more privileged URL on the server of --score-db-url "
        "(no ini setting)",
    )
    group.addoption(
        "--score-expected-tests",
        dest="score_expected_tests",
        metavar="SOURCE",
        help="The tests that count: a file of ids, a JSON object of outcomes, or a folder run once",
    )
    group.addoption(
        "--score-verify-tests",
        dest="score_verify_tests",
        metavar="PATH",
        help="Refuse to run unless the tests, conftest.py files and pytest configuration here "
        "are those of PATH (no ini setting)",
    )
    group.addoption(
        "--score-strict",
        dest="score_strict",
        nargs="?",
        const="",
        metavar="none|default|all|KIND,…",
        help="Integrity signal kinds that make the test scores N; alone default,containment; "
        "without it none",
    )
    group.addoption(
        "--score-value-cap",
        dest="score_value_cap",
        metavar="BYTES",
        type=value_cap_type,
        help=f"Longest text or BLOB a report data file keeps whole, default {DEFAULT_VALUE_CAP}",
    )

    parser.addini("score", "Score the session (as --score)", type="bool", default=False)
    parser.addini("score_db_diff", "As --score-db-diff", type="bool", default=False)
    parser.addini("score_selector", "As --score-selector", default=None)
    parser.addini("score_reference", "As --score-reference", default=None)
    parser.addini("score_test_patterns", "As --score-test-pattern", type="linelist", default=[])
    parser.addini("score_db_patterns", "As --score-db-pattern", type="linelist", default=[])
    parser.addini("score_db_exclude", "As --score-db-exclude", type="linelist", default=[])
    parser.addini("score_config", "As --score-config", default=None)
    parser.addini("score_path_maps", "As --score-path-map", type="linelist", default=[])
    parser.addini("score_selector_timeout", "As --score-selector-timeout", default=None)
    parser.addini("score_report", "As --score-report", default=None)
    parser.addini("score_markdown", "As --score-markdown", default=None)
    parser.addini("score_fail_under", "As --score-fail-under", default=None)
    parser.addini("score_deterministic", "As --score-deterministic", type="bool", default=False)
    parser.addini("score_db_reset", "As --score-db-reset", type="bool", default=False)
    parser.addini("score_db_urls", "As --score-db-url", type="linelist", default=[])
    # Read only to say they are ignored: the expected set and the strict kinds are the
    # evaluator's (docs/scoring.md).
    parser.addini(
        "score_expected_tests",
        "Ignored: the expected tests come from the command line only",
        default=None,
    )
    parser.addini(
        "score_strict", "Ignored: the strict kinds come from the command line only", default=None
    )
    parser.addini(
        "score_db_admin_url",
        "Ignored: the evaluator's database URL comes from the command line only",
        default=None,
    )
    parser.addini("score_value_cap", "As --score-value-cap", default=None)
