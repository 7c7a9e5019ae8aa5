"""What ``pytest-scoring run`` was asked to do, checked before anything is copied or started
(docs/cli.md): the request, its options and settings, and the modules loaded before any child.
"""

from __future__ import annotations

import importlib
import os
import pkgutil
import re
import shutil
from collections.abc import Mapping
from collections.abc import Sequence
from dataclasses import dataclass
from dataclasses import field
from pathlib import Path
from typing import Final

import pytest_scoring
from pytest_scoring.core.determinism import DEFAULT_FLAKY
from pytest_scoring.core.determinism import FlakyRule
from pytest_scoring.core.determinism import check_retries
from pytest_scoring.core.settings import DEFAULT_REPORT_ROOT
from pytest_scoring.core.settings import ScoringSettings
from pytest_scoring.core.signals import DEFAULT_STRICT
from pytest_scoring.errors import OptionError
from pytest_scoring.evaluation.area import check_report_root_outside
from pytest_scoring.evaluation.options import ParsedArguments
from pytest_scoring.evaluation.options import parse_run_arguments
from pytest_scoring.evaluation.settings import resolve_settings
from pytest_scoring.evaluation.settings import split_config_argument
from pytest_scoring.fs.paths import overlap
from pytest_scoring.process.supervisor import Limits
from pytest_scoring.text import number_text

#: The package of the Inspect scorers (the ``inspect`` extra).
INSPECT: Final = "pytest_scoring.inspect"


@dataclass
class RunRequest:
    """What ``pytest-scoring run`` was asked to do; checked on creation."""

    repo: Path
    report_root: Path | None = None
    timeout: float = 3600.0
    reference: Path | None = None
    #: ``FILE`` or ``FILE#NAME`` (one fixture of a fixtures file).
    config: str | None = None
    selector: str | None = None
    fail_under: float | None = None
    pytest_args: Sequence[str] = ()
    #: ``SANDBOX=LOCAL`` pairs (``--path-map``), LOCAL relative to the repository.
    path_maps: Sequence[str] = ()
    #: ``--strict[=KINDS]`` (None: not given, ``run``'s default unless a ``--score-strict``
    #: follows ``--``; ``""``: given alone, ``default,containment``): the signal kinds that
    #: make the test scores N; kind ``containment`` is partial containment (docs/security.md).
    strict: str | None = None
    #: ``--expected-tests SOURCE``, relative to where ``run`` was started.
    expected_tests: str | None = None
    #: ``--user`` (None: ``nobody`` when root, else the evaluator's own user).
    user: str | None = None
    #: ``--plugin`` modules (names or ``.py`` files) that may register scorers and hooks.
    plugins: Sequence[str] = ()
    #: ``--python``: the interpreter of the repository's tests (default: this one).
    python: str | None = None
    #: ``--keep``: leave the private area (with the copy of REPO) in place.
    keep: bool = False
    limits: Limits = field(default_factory=Limits)
    #: ``--tests-from PATH``: the evaluator's tests, put into the copy of REPO.
    tests_from: Path | None = None
    #: ``--black-box``: the test process loads no file of the repository (``--tests-from``
    #: only: then the tests are the evaluator's).
    black_box: bool = False
    #: ``--allow-empty``: exit status 0, not 5, when no test was collected.
    allow_empty: bool = False
    #: ``--expected-tests-drop-failing``: with ``--tests-from``, a source folder's set may
    #: leave out the tests that fail there.
    expected_tests_drop_failing: bool = False
    #: ``--evidence``: what the report keeps for ``rescore`` (None: the default, ``diffs``).
    evidence: str | None = None
    #: ``--env NAME=VALUE``: variables the children get over the pinned environment.
    env: Mapping[str, str] = field(default_factory=dict)
    #: ``--retries N``: how many times a test that did not pass runs again.
    retries: int = 0
    #: ``--flaky``: how a test whose attempts differ counts.
    flaky: FlakyRule = DEFAULT_FLAKY
    #: ``--db-url``: PostgreSQL databases scored beside the SQLite files.
    db_urls: Sequence[str] = ()
    #: ``--db-admin-url``: the evaluator's own URL on their server.
    db_admin_url: str | None = None
    invocation_dir: Path = field(default_factory=Path.cwd)

    def __post_init__(self) -> None:
        self.repo = _folder(self.repo, "REPO")
        if self.reference is not None:
            self.reference = _folder(self.reference, "--reference")
            if (where := overlap(self.reference, self.repo)) is not None:
                raise OptionError(
                    f"--reference: {self.reference} {where} ({self.repo}); give a checkout "
                    "apart from it (db_diff_change compares the two)"
                )
        if self.config is not None:
            self.config = _config_argument(self.config, self.invocation_dir)
        if self.timeout <= 0:
            raise OptionError(f"--timeout: {self.timeout:g} is not a positive number of seconds")
        if self.python is not None:
            self.python = _interpreter(self.python)
        check_retries(self.retries, "--retries")
        if self.tests_from is not None:
            self.tests_from = _tests_folder(self.tests_from, self.repo)
        if self.expected_tests_drop_failing and self.tests_from is None:
            raise OptionError(
                "--expected-tests-drop-failing: only with --tests-from (without it, a source "
                "folder's set always leaves out the tests that fail there)"
            )
        if self.black_box and self.tests_from is None:
            raise OptionError(
                "--black-box: give --tests-from PATH too (only the evaluator's tests may run "
                "in a test process that loads no file of the repository)"
            )

    def own_options(self) -> list[str]:
        """``run``'s own flags as the ``--score-*`` options they stand for."""
        args = ["--score"]
        if self.report_root is not None:
            args.append(f"--score-report={self.report_root.absolute()}")
        elif not any(arg.startswith("--score-report") for arg in self.pytest_args):
            args.append(f"--score-report={Path(DEFAULT_REPORT_ROOT).absolute()}")
        if self.reference is not None:
            args.append(f"--score-reference={self.reference}")
        if self.config is not None:
            args.append(f"--score-config={self.config}")
        args += [f"--score-path-map={pair}" for pair in self.path_maps]
        if self.selector is not None:
            args.append(f"--score-selector={self.selector}")
        if self.fail_under is not None:
            args.append(f"--score-fail-under={number_text(self.fail_under)}")
        if self.expected_tests is not None:
            args.append(f"--score-expected-tests={self.invocation_dir / self.expected_tests}")
        if self.strict is not None:
            args.append(f"--score-strict={self.strict}" if self.strict else "--score-strict")
        if self.evidence is not None:
            args.append(f"--score-evidence={self.evidence}")
        args += [f"--score-db-url={url}" for url in self.db_urls]
        if self.db_admin_url is not None:
            args.append(f"--score-db-admin-url={self.db_admin_url}")
        return args

    def as_typed(self, message: str) -> str:
        """``message`` naming ``run``'s own flags as the user typed them (``--selector``), not
        as the ``--score-*`` options they stand for (those given after ``--`` keep theirs)."""
        given = {
            "--reference": self.reference,
            "--config": self.config,
            "--selector": self.selector,
            "--fail-under": self.fail_under,
            "--expected-tests": self.expected_tests,
            "--strict": self.strict,
            "--report": self.report_root,
            "--db-url": self.db_urls or None,
            "--db-admin-url": self.db_admin_url,
        }
        for flag, value in given.items():
            option = f"--score-{flag[2:]}"
            after_separator = any(arg.startswith(option) for arg in self.pytest_args)
            if value is not None and not after_separator:
                message = re.sub(rf"{re.escape(option)}(?![-\w])", flag, message)
        return message


def _folder(path: Path, what: str) -> Path:
    if not path.is_dir():
        raise OptionError(f"{what}: {path} is not a folder")
    return path.resolve()


def _tests_folder(path: Path, repo: Path) -> Path:
    """``--tests-from PATH``: a folder apart from REPO (the repository cannot write its own
    tests, nor be taken for them)."""
    folder = _folder(path, "--tests-from")
    where = overlap(folder, repo)
    if where is not None:
        raise OptionError(
            f"--tests-from: {path} {where} ({repo}); give the evaluator's tests, apart from it"
        )
    return folder


def _config_argument(text: str, base: Path) -> str:
    """``--config FILE[#NAME]`` with FILE made absolute."""
    path, entry = split_config_argument(text, base)
    if not path.is_file():
        raise OptionError(f"--config: {path} is not a file")
    return str(path.absolute()) + ("" if entry is None else f"#{entry}")


def _interpreter(python: str) -> str:
    """``--python`` as an absolute path (not resolved: a virtual environment's link matters)."""
    found = shutil.which(python) if os.sep not in python else python
    if found is None or not os.access(found, os.X_OK) or not Path(found).is_file():
        raise OptionError(f"--python: {python} is not an interpreter that can be run")
    return str(Path(found).absolute())


def preloaded_modules() -> list[str]:
    """Every module of pytest-scoring, and the libraries it writes and shows reports with."""
    # pytest_scoring.inspect needs the optional Inspect AI, and run never uses it.
    own = [
        module.name
        for module in pkgutil.walk_packages(pytest_scoring.__path__, "pytest_scoring.")
        if not module.name.endswith("__main__") and not module.name.startswith(INSPECT)
    ]
    return [*own, "pyarrow", "pyarrow.parquet", "pyarrow.json", "rich.console", "rich.table"]


def preload() -> None:
    """Import every module of pytest-scoring now, before a child runs.

    Where containment is partial, the repository's code could edit the installed package;
    what the evaluator already imported is not read again.
    """
    for name in preloaded_modules():
        importlib.import_module(name)


def prepare(request: RunRequest) -> tuple[ParsedArguments, ScoringSettings]:
    """The options and settings of a run, checked before anything is copied or started.

    :raises OptionError: for bad input, naming the option.
    """
    parsed = parse_run_arguments(
        request.repo, request.invocation_dir, request.pytest_args, request.own_options()
    )
    report_root = request.invocation_dir / parsed.options.getoption("score_report")
    check_report_root_outside(report_root, request.repo)  # before it is created
    # Unless the evaluator names kinds, proven tampering makes the test scores "N".
    settings = resolve_settings(parsed.options, DEFAULT_STRICT)
    if settings.verify_tests is not None:
        raise OptionError(
            "--score-verify-tests checks the tree pytest runs in; under run, --tests-from PATH "
            "puts PATH's tests into the copy itself"
        )
    settings.tests_from = request.tests_from
    # run's own --retries and --flaky win over --score-retries/--score-flaky after "--".
    settings.retries = request.retries or settings.retries
    settings.flaky = request.flaky if request.flaky != DEFAULT_FLAKY else settings.flaky
    # Nothing of the repository runs in this process: its caches are never an in-process
    # session's (docs/security.md#keeping-the-caches-clean).
    settings.cache_route = "evaluator"
    # The children are gone when the finish state is read: what is left connected is ended.
    settings.end_backends_at_finish = True
    return parsed, settings


def database_roles(settings: ScoringSettings) -> list[str]:
    """Check each server database's application role before the first snapshot: one that
    reaches beyond its own data (a superuser, a member of the admin role…) is refused, unless
    the evaluator's ``--strict`` leaves out ``containment``; then each reason is a
    containment problem of the run (docs/databases.md#postgresql).

    :returns: the containment problems.
    :raises OptionError: naming the database and the reason, when refused.
    """
    if not settings.databases:
        return []
    from pytest_scoring.db.servers import role_refusals
    from pytest_scoring.errors import DatabaseError

    try:
        refused = role_refusals(settings.databases)
    except DatabaseError as error:
        raise OptionError(f"--db-url: cannot check the application's role: {error}") from None
    problems = [f"database {name}: {why}" for name, reasons in refused.items() for why in reasons]
    strict = "score_strict" not in settings.explicit or "containment" in settings.strict.kinds
    if problems and strict:
        raise OptionError(
            f"--db-url: {problems[0]} (refused; --strict without containment records it instead)"
        )
    return problems
