"""The table of scorer types a configuration file may name: the one place a type is registered.

Each built-in type is declared in its own module (``TYPE``, or ``TYPES`` for the test scorers);
:data:`BUILTIN_TYPES` lists them, and from it come the configuration loader's checks, the type
table of docs/configuration.md and the Inspect scorers (``python docs/cog_helpers.py``). Plugins
and the evaluator's ``conftest.py`` add more through the ``pytest_scoring_scorers`` hook. The
names under which the Inspect scorers are registered (``file_contents_scorer``…) are aliases of
the types.
"""

from __future__ import annotations

from collections.abc import Iterable
from collections.abc import Mapping
from typing import Any
from typing import Final

from pytest_scoring.errors import ConfigError
from pytest_scoring.scorers import composite
from pytest_scoring.scorers import db_change
from pytest_scoring.scorers import db_diff_change
from pytest_scoring.scorers import file_contents
from pytest_scoring.scorers import sandbox_state
from pytest_scoring.scorers import tests
from pytest_scoring.scorers.scorer_type import ScorerType
from pytest_scoring.scorers.scorer_type import types_by_name

#: Suffix of the Inspect registry names, accepted as aliases (``db_change_scorer``).
ALIAS_SUFFIX: Final = "_scorer"

BUILTIN_TYPES: Final[dict[str, ScorerType]] = types_by_name(
    tests.TYPES,
    db_change.TYPE,
    db_diff_change.TYPE,
    file_contents.TYPE,
    sandbox_state.TYPE,
    composite.TYPE,
)


def scorer_types(registered: Iterable[Mapping[str, Any] | None] = ()) -> dict[str, ScorerType]:
    """The built-in types plus those registered through the hook.

    :param registered: the hook's results, one mapping of name to factory (or None) per
        implementation.
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
            try:
                types[type_name] = ScorerType.registered(type_name, factory)
            except (TypeError, ValueError) as error:  # no signature to read
                raise ConfigError(f"{where}: {error}") from None
    return types


def resolve_type(type_name: str, types: Mapping[str, ScorerType]) -> str | None:
    """The type a configuration names, accepting ``<type>_scorer`` aliases; None if unknown."""
    if type_name in types:
        return type_name
    if type_name.endswith(ALIAS_SUFFIX) and type_name[: -len(ALIAS_SUFFIX)] in types:
        return type_name[: -len(ALIAS_SUFFIX)]
    return None
