"""What makes two runs of one repository score alike (docs/scoring.md#determinism): the
environment every child of the evaluator gets, and how a test that changed its outcome between
attempts counts.

The front ends that start children (``run``, the Inspect scorers) take the environment from
:func:`pinned_environment`; every route that reruns tests tallies the attempts through
:func:`flaky_outcome`.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from collections.abc import Mapping
from collections.abc import Sequence
from typing import Final
from typing import Literal
from typing import get_args

from pytest_scoring.core.rule import Outcome
from pytest_scoring.core.rule import worse
from pytest_scoring.errors import OptionError

#: The variables every child of ``run`` (and of the Inspect scorers) gets, whatever the
#: evaluator's own environment holds: a time zone, a locale, a hash seed, no bytecode written
#: into the copy.
PINNED_ENVIRONMENT: Final[Mapping[str, str]] = {
    "TZ": "UTC",
    "LC_ALL": "C.UTF-8",
    "LANG": "C.UTF-8",
    "PYTHONHASHSEED": "0",
    "PYTHONDONTWRITEBYTECODE": "1",
}
#: The file mode creation mask of every child: files 0644, folders 0755.
PINNED_UMASK: Final = 0o022
#: A variable's name, as POSIX shells accept it.
_NAME: Final = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")

#: How a flaky test counts (``--flaky``): ``fail`` (it must pass every attempt it was given),
#: ``pass`` (one passing attempt is enough), ``exclude`` (left out of ``total``, listed).
FlakyRule = Literal["fail", "pass", "exclude"]
FLAKY_RULES: Final[tuple[FlakyRule, ...]] = get_args(FlakyRule)
DEFAULT_FLAKY: Final[FlakyRule] = "fail"
#: Outcomes of an attempt that passed.
PASSED: Final = frozenset({"passed", "xpassed"})


def pinned_environment(
    base: Mapping[str, str], given: Mapping[str, str] | None = None
) -> dict[str, str]:
    """``base`` (the evaluator's captured environment) with :data:`PINNED_ENVIRONMENT` over
    it, and what the evaluator gave (``--env``, the configuration's ``env``) over both."""
    return {**base, **PINNED_ENVIRONMENT, **(given or {})}


def env_assignments(values: Iterable[str], what: str) -> dict[str, str]:
    """``NAME=VALUE`` texts as a mapping, the last of one name winning.

    :param what: the option or key that gave them, for the message.
    :raises OptionError: for a text without ``=`` or with a name no shell would take.
    """
    found: dict[str, str] = {}
    for text in values:
        name, equals, value = text.partition("=")
        if not equals or not _NAME.fullmatch(name):
            raise OptionError(f"{what}: {text!r} is not NAME=VALUE (e.g. TZ=Europe/Paris)")
        found[name] = value
    return found


def check_flaky_rule(value: str, what: str) -> FlakyRule:
    """``--flaky``'s value.

    :raises OptionError: naming ``what`` and the choices.
    """
    for rule in FLAKY_RULES:
        if value == rule:
            return rule
    raise OptionError(f"{what}: {value!r} is not one of {', '.join(FLAKY_RULES)}")


def check_retries(value: int, what: str) -> int:
    """``--retries``'s value: a whole number from 0.

    :raises OptionError: naming ``what``.
    """
    if value < 0:
        raise OptionError(f"{what}: {value} is not a number of reruns (0 or more)")
    return value


def is_flaky(attempts: Sequence[Outcome]) -> bool:
    """One attempt of the test passed and another did not."""
    passed = [outcome in PASSED for outcome in attempts]
    return any(passed) and not all(passed)


def flaky_outcome(attempts: Sequence[Outcome], rule: FlakyRule) -> Outcome | None:
    """How a test with these attempts (the session's first) counts under ``rule``; None when
    it is left out of ``total`` (``exclude``, flaky).

    A test that is not flaky counts as its worst attempt, whatever the rule: reruns find
    flaky tests, they never make a failing test pass (nor skip its way out of ``total``).
    """
    worst: Outcome | None = None
    for outcome in attempts:
        worst = worse(worst, outcome)
    assert worst is not None
    if not is_flaky(attempts) or rule == "fail":
        return worst
    if rule == "exclude":
        return None
    return next(outcome for outcome in attempts if outcome in PASSED)
