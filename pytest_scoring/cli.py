"""The ``pytest-scoring`` command line (SPEC 3.2).

Each command is a thin wrapper over a library function. User errors (any
:class:`~pytest_scoring.errors.ScoringError`) become a one-line message and exit status 2,
never a traceback.
"""

from __future__ import annotations

import functools
import sys
from collections.abc import Callable
from typing import Any
from typing import TypeVar

import click

from pytest_scoring.errors import ScoringError

CONTEXT_SETTINGS = {"help_option_names": ["-h", "--help"]}
#: Exit status for bad input, for every command.
EXIT_BAD_INPUT = 2

F = TypeVar("F", bound=Callable[..., Any])


def reports_user_errors(command: F) -> F:
    """Turn a :class:`ScoringError` raised by ``command`` into a message and exit status 2."""

    @functools.wraps(command)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        try:
            return command(*args, **kwargs)
        except ScoringError as error:
            click.echo(f"pytest-scoring: error: {error}", err=True)
            sys.exit(EXIT_BAD_INPUT)

    return wrapper  # type: ignore[return-value]


@click.group(context_settings=CONTEXT_SETTINGS)
@click.version_option(package_name="pytest-scoring")
def main() -> None:
    """Score a repository: tests, database changes, reports Inspect tools read."""
