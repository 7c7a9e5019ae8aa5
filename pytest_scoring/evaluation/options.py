"""``pytest-scoring run``'s options: its own flags and the ``--score-*`` options after ``--``.

The ``--score-*`` options are defined once, for pytest (:func:`~pytest_scoring.evaluation.flags.
add_options`); here the same definitions are read by :mod:`argparse` through a small adapter,
so that ``run REPO -- --score-db-reset -x`` takes ``--score-db-reset`` for the evaluator and
passes ``-x`` to the child's pytest. Settings are then resolved by the same function as in
process, from the evaluator's command line alone: no ini file of the scored repository is read.
"""

from __future__ import annotations

import argparse
from collections.abc import Sequence
from dataclasses import dataclass
from dataclasses import field
from dataclasses import replace
from pathlib import Path
from typing import Any
from typing import Final
from typing import NoReturn

from pytest_scoring.errors import OptionError
from pytest_scoring.evaluation.flags import OptionGroup
from pytest_scoring.evaluation.flags import add_options
from pytest_scoring.process.supervisor import Limits


class _Parser(argparse.ArgumentParser):
    """An argparse parser whose errors are :class:`OptionError`, never ``sys.exit``."""

    def error(self, message: str) -> NoReturn:
        raise OptionError(message)


def _parser() -> _Parser:
    return _Parser(prog="pytest-scoring run", add_help=False, allow_abbrev=False)


@dataclass
class _Group:
    parser: argparse.ArgumentParser
    flags: list[str]

    def addoption(self, *opts: str, **attrs: Any) -> None:
        action = self.parser.add_argument(*opts, **attrs)
        takes_value = action.nargs != 0
        self.flags += [f"{flag}=" if takes_value else flag for flag in action.option_strings]


@dataclass
class ScoreOptionParser:
    """:func:`add_options` written for pytest, registered into :mod:`argparse`."""

    parser: argparse.ArgumentParser = field(default_factory=_parser)
    #: Every flag, ``--flag=`` when it takes a value (the child ignores them).
    flags: list[str] = field(default_factory=list)
    #: The ini names and their defaults (``run`` reads no ini file: defaults only).
    ini_defaults: dict[str, Any] = field(default_factory=dict)

    def __post_init__(self) -> None:
        add_options(self)

    def getgroup(self, name: str, description: str = "") -> OptionGroup:
        return _Group(self.parser, self.flags)

    def addini(self, name: str, help: str, type: Any = None, default: Any = None) -> None:
        self.ini_defaults[name] = default

    def ignored_in_child(self) -> list[str]:
        """What the child's launcher registers as no-ops (docs/cli.md)."""
        return [*self.flags, *(f"ini:{name}" for name in self.ini_defaults)]


def _selection_parser() -> _Parser:
    """pytest's ``-k``/``-m`` (the reference rerun repeats them) and ``--junitxml``."""
    parser = _parser()
    parser.add_argument("-k", dest="keyword", default="")
    parser.add_argument("-m", dest="markexpr", default="")
    return parser


def _junit_parser() -> _Parser:
    parser = _parser()
    parser.add_argument("--junitxml", "--junit-xml", dest="xmlpath")
    return parser


@dataclass
class EvaluatorOptions:
    """``run``'s options as an :class:`~pytest_scoring.evaluation.settings.OptionSource`.

    It is also the ``config`` argument our hooks receive under ``run``: ``getoption(name)``
    gives the value of a ``--score-*`` option by its ``dest``, as ``pytest.Config`` does.
    """

    namespace: argparse.Namespace
    #: The scored repository as the evaluator named it.
    rootpath: Path
    #: Where ``run`` was started: relative paths in options start there.
    invocation_dir: Path
    ini_defaults: dict[str, Any] = field(default_factory=dict)
    #: No ini file is ever read for the evaluator.
    inipath: Path | None = None

    def getoption(self, name: str, default: Any = None) -> Any:
        return getattr(self.namespace, name, default)

    def getini(self, name: str) -> Any:
        return self.ini_defaults.get(name)


@dataclass
class ParsedArguments:
    """What ``run``'s arguments after ``--`` mean."""

    options: EvaluatorOptions
    #: What goes to the child's pytest (the ``--score-*`` options and ``--junitxml`` taken out).
    pytest_args: list[str]
    #: ``--junitxml`` as given (relative to where ``run`` was started), or None.
    junit_xml: Path | None
    #: The flags and ini names the child accepts and ignores.
    ignored: list[str]
    #: The evaluator's own pytest arguments may end the session early (``-x``, ``--maxfail``):
    #: pytest's stop is then the evaluator's, not the repository's.
    stops_early: bool = False


def parse_run_arguments(
    repo: Path, invocation_dir: Path, pytest_args: Sequence[str], own: Sequence[str]
) -> ParsedArguments:
    """Split ``run``'s arguments after ``--`` between the evaluator and the child.

    :param own: ``run``'s own flags as ``--score-*`` options; they win over the same options
        given after ``--``.
    :raises OptionError: for a bad ``--score-*`` value, naming the option.
    """
    scores = ScoreOptionParser()
    namespace, rest = scores.parser.parse_known_args(list(pytest_args))
    scores.parser.parse_args(list(own), namespace=namespace)
    namespace.score = True
    try:
        selection, _ = _selection_parser().parse_known_args(rest)
    except OptionError:  # a -k without its value: pytest itself will say so
        selection = argparse.Namespace(keyword="", markexpr="")
    vars(namespace).update(vars(selection))
    junit, child_args = _junit_parser().parse_known_args(rest)
    options = EvaluatorOptions(namespace, repo, invocation_dir, scores.ini_defaults)
    xmlpath = None if junit.xmlpath is None else invocation_dir / junit.xmlpath
    return ParsedArguments(
        options, child_args, xmlpath, scores.ignored_in_child(), stops_early(child_args)
    )


#: pytest's options that end a session before every collected test ran.
STOP_OPTIONS: Final = ("-x", "--exitfirst", "--maxfail", "--sw", "--stepwise", "--stepwise-skip")
#: pytest's short options that take a value: in ``-rx`` or ``-kx`` the ``x`` is that value.
_SHORT_WITH_VALUE: Final = frozenset("kmpcoWrn")


def stops_early(args: Sequence[str]) -> bool:
    """Whether pytest arguments ask pytest to stop early: one of :data:`STOP_OPTIONS`
    (``--maxfail=2`` too), or ``x`` among combined short flags (``-vx``)."""
    for arg in args:
        if arg == "--":
            return False  # what follows is a file or test id, never an option
        name = arg.split("=", 1)[0]
        if name in STOP_OPTIONS:
            return True
        if arg.startswith("-") and not arg.startswith("--") and _short_flags_stop(arg[1:]):
            return True
    return False


def _short_flags_stop(letters: str) -> bool:
    for letter in letters:
        if letter == "x":
            return True
        if letter in _SHORT_WITH_VALUE or not letter.isalpha():
            return False
    return False


#: ``--limit`` kinds and the :class:`Limits` field each sets.
LIMIT_KINDS: Final = {
    "fsize": "file_size",
    "as": "address_space",
    "data": "data",
    "nofile": "open_files",
    "nproc": "processes",
    "disk": "disk",
    "tests": "tests",
}
#: The children's limits unless ``--limit`` says otherwise (docs/cli.md#limits).
DEFAULT_LIMITS: Final = Limits(
    file_size=4 * 1024**3,
    address_space=None,
    data=16 * 1024**3,
    open_files=4096,
    processes=4096,
    disk=16 * 1024**3,
    tests=100_000,
)
_UNITS: Final = {"": 1, "K": 1024, "M": 1024**2, "G": 1024**3, "T": 1024**4}


def parse_limits(values: Sequence[str]) -> Limits:
    """``--limit KIND=SIZE`` values over the defaults (``none`` lifts a limit).

    :raises OptionError: naming the value whose kind is not one of :data:`LIMIT_KINDS`, or
        whose size is not one such as ``512M``.
    """
    limits = DEFAULT_LIMITS
    for value in values:
        kind, _, size = value.partition("=")
        if kind not in LIMIT_KINDS:
            kinds = ", ".join(LIMIT_KINDS)
            raise OptionError(f"--limit {value!r}: the kind must be one of {kinds}")
        limits = replace(limits, **{LIMIT_KINDS[kind]: _size(value, size)})
    return limits


def _size(value: str, size: str) -> int | None:
    if size.lower() == "none":
        return None
    number, unit = size[:-1] if size[-1:].isalpha() else size, size[-1:].upper()
    unit = unit if unit.isalpha() else ""
    if not number.isdigit() or unit not in _UNITS or int(number) <= 0:
        raise OptionError(f"--limit {value!r}: expected a positive size such as 512M, or none")
    return int(number) * _UNITS[unit]
