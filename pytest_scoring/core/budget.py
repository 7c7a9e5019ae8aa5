"""What one evaluation of a selector carries: its time budget and the warnings it collects.

The values a selector looks at are the scored repository's, so a selector may be made slow on
purpose (millions of rows, huge values). Each scorer gives its evaluation a
:class:`TimeBudget` (``selector_timeout``, default 60 s; docs/selectors.md); the budget is
checked between rows and, while rows stream from SQLite, inside SQLite through its progress
handler. Past it, :class:`SelectorTimeout` ends the evaluation and that scorer scores ``"N"``.
"""

from __future__ import annotations

import math
import time
from dataclasses import dataclass
from dataclasses import field
from typing import Final
from typing import final

from pytest_scoring.errors import ScoringError
from pytest_scoring.text import number_text

#: Seconds a scorer's selector evaluation may take unless configured otherwise.
DEFAULT_SELECTOR_TIMEOUT: Final = 60.0
#: Rows (or SQLite virtual-machine steps, in thousands) between two looks at the clock.
CLOCK_EVERY: Final = 256


class SelectorTimeout(ScoringError):
    """A selector evaluation went past its time budget."""


@final
class TimeBudget:
    """A deadline that is cheap to check often (the clock is read every few hundred ticks)."""

    __slots__ = ("_deadline", "_ticks", "expired", "seconds")

    def __init__(self, seconds: float | None):
        #: The budget in seconds; ``None`` is no limit.
        self.seconds = seconds
        self._deadline = None if seconds is None else time.monotonic() + seconds
        self._ticks = 0
        #: Set once the deadline has passed.
        self.expired = False

    def tick(self) -> None:
        """Count one step of work; raise :class:`SelectorTimeout` once the deadline passed."""
        self._ticks += 1
        if self._ticks % CLOCK_EVERY == 0:
            self.check()

    def check(self) -> None:
        """Raise :class:`SelectorTimeout` when the deadline has passed."""
        if self._deadline is not None and time.monotonic() > self._deadline:
            self.expired = True
        if self.expired:
            raise SelectorTimeout(
                f"the selector evaluation went past its time budget of "
                f"{number_text(self.seconds or 0)} s "
                "(selector_timeout / --score-selector-timeout)"
            )

    def sqlite_progress(self) -> int:
        """A progress handler for ``sqlite3.Connection.set_progress_handler``: non-zero (which
        interrupts the running statement) once the deadline has passed."""
        if self._deadline is not None and time.monotonic() > self._deadline:
            self.expired = True
        return int(self.expired)


@dataclass
class Evaluation:
    """The state of one evaluation: its budget and the warnings found on the way."""

    budget: TimeBudget = field(default_factory=lambda: TimeBudget(None))
    #: One-line warnings (a criterion for an excluded plane, a status the schema decided…).
    warnings: list[str] = field(default_factory=list)

    def warn(self, message: str) -> None:
        """Keep ``message`` once, in the order first seen."""
        if message not in self.warnings:
            self.warnings.append(message)


def is_positive_seconds(value: object) -> bool:
    """Whether ``value`` can be a time budget: a finite number of seconds above 0."""
    return (
        isinstance(value, int | float)
        and not isinstance(value, bool)
        and math.isfinite(value)
        and value > 0
    )


def budget_for(own: float | None, session: float | None) -> TimeBudget:
    """A scorer's budget: its own ``selector_timeout``, else the session's, else the default."""
    if own is not None:
        return TimeBudget(own)
    return TimeBudget(session if session is not None else DEFAULT_SELECTOR_TIMEOUT)
