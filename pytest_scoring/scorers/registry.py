"""The table of scorer types a configuration file may name, and their factories.

Built-in types are those of docs/configuration.md; plugins and the evaluator's ``conftest.py`` add
more through the ``pytest_scoring_scorers`` hook. The names under which the Inspect scorers
are registered (``file_contents_scorer``…) are aliases of the types.
"""

from __future__ import annotations

from collections.abc import Callable
from collections.abc import Iterable
from collections.abc import Mapping
from typing import Any
from typing import Final

from pytest_scoring.errors import ConfigError
from pytest_scoring.scorers.base import Scorer
from pytest_scoring.scorers.composite import composite_scorer
from pytest_scoring.scorers.db_change import db_change_scorer
from pytest_scoring.scorers.db_diff_change import db_diff_change_scorer
from pytest_scoring.scorers.file_contents import file_contents_scorer
from pytest_scoring.scorers.sandbox_state import sandbox_state_scorer
from pytest_scoring.scorers.tests import all_tests_pass_scorer
from pytest_scoring.scorers.tests import percent_failing_tests_scorer
from pytest_scoring.scorers.tests import percent_passing_tests_scorer
from pytest_scoring.scorers.tests import test_runner_scorer

#: A factory builds a scorer from the parameters of one configuration entry.
ScorerFactory = Callable[..., Scorer]

#: Suffix of the Inspect registry names, accepted as aliases (``db_change_scorer``).
ALIAS_SUFFIX: Final = "_scorer"

BUILTIN_TYPES: Final[dict[str, ScorerFactory]] = {
    "all_tests_pass": all_tests_pass_scorer,
    "percent_passing_tests": percent_passing_tests_scorer,
    "percent_failing_tests": percent_failing_tests_scorer,
    "test_runner": test_runner_scorer,
    "db_diff_change": db_diff_change_scorer,
    "file_contents": file_contents_scorer,
    "sandbox_state": sandbox_state_scorer,
    "composite": composite_scorer,
    "db_change": db_change_scorer,
}


def scorer_types(registered: Iterable[Mapping[str, Any] | None] = ()) -> dict[str, ScorerFactory]:
    """The built-in types plus those registered through the hook.

    :param registered: the hook's results, one mapping (or None) per implementation.
    :raises ConfigError: when a registered type is not a callable, or its name is taken.
    """
    types = dict(BUILTIN_TYPES)
    for mapping in registered:
        for type_name, factory in (mapping or {}).items():
            where = f"pytest_scoring_scorers: type {type_name!r}"
            if not isinstance(type_name, str) or not type_name.isidentifier():
                raise ConfigError(f"{where}: a type name must be an identifier")
            if type_name in types:
                raise ConfigError(f"{where} is already registered")
            if not callable(factory):
                raise ConfigError(f"{where}: the factory must be callable")
            types[type_name] = factory
    return types


def resolve_type(type_name: str, types: Mapping[str, ScorerFactory]) -> str | None:
    """The type a configuration names, accepting ``<type>_scorer`` aliases; None if unknown."""
    if type_name in types:
        return type_name
    if type_name.endswith(ALIAS_SUFFIX) and type_name[: -len(ALIAS_SUFFIX)] in types:
        return type_name[: -len(ALIAS_SUFFIX)]
    return None
