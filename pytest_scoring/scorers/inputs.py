"""What scorers read beyond the tally and the scores: one typed object, the same from every
front end.

``pytest --score``, ``run``, ``junit`` and the Inspect scorers fill :class:`ScorerInputs` from a
live session (snapshots taken, a reference rerun started); ``rescore`` fills it from a report's
evidence. The scorers read the same fields either way, which is what makes re-scoring exact.

Light to import: every type a field names is loaded only by the module that makes it.
"""

from __future__ import annotations

from collections.abc import Collection
from collections.abc import Iterator
from collections.abc import Mapping
from collections.abc import Sequence
from dataclasses import dataclass
from dataclasses import field
from typing import TYPE_CHECKING
from typing import Any
from typing import Protocol
from typing import runtime_checkable

from pytest_scoring.core.budget import TimeBudget
from pytest_scoring.core.outcomes import OutcomeTally
from pytest_scoring.core.settings import ScoringSettings

if TYPE_CHECKING:
    from pytest_scoring.db.diff_types import DiffJSON
    from pytest_scoring.db.snapshot import Snapshot
    from pytest_scoring.reference.baseline import BaselineRun
    from pytest_scoring.reference.rerun import Diffs
    from pytest_scoring.reference.test_changes import FileChange
    from pytest_scoring.reference.tests_from import TestsFrom


class DatabaseInputs(Protocol):
    """What ``db_change`` reads: the session's diff, taken live (``SessionDatabases``) or read
    from a report's evidence (``StoredDatabases``), so that both score alike."""

    settings: ScoringSettings

    def problem(self) -> str | None:
        """Why no diff can be had, or None."""
        ...

    def diff(self, shared: bool = True) -> DiffJSON:
        """The diff, with examples (for the report)."""
        ...

    def complete(self, diff: DiffJSON, budget: TimeBudget) -> DiffJSON:
        """``diff`` with every changed row (for selectors)."""
        ...

    def unsearched(self) -> list[str]:
        """Folders left out of discovery that hold a database."""
        ...

    def read_row(
        self, database: str, table: str, key: Mapping[str, Any], leave_out: Collection[str]
    ) -> dict[str, Any] | None:
        """A row of a database's finish state by key, when at hand."""
        ...

    def ended(self) -> dict[str, dict[str, list[Any]]]:
        """What was ended on each server database to take its states."""
        ...

    def created(self) -> dict[str, Any] | None:
        """The databases the session created on the servers (None: none was watched)."""
        ...


@runtime_checkable
class ReferenceResults(Protocol):
    """What ``db_diff_change`` scores: the reference side of a session, run here
    (``ReferenceRerun``), in an Inspect sandbox, or kept in a report's evidence
    (``StoredReference``)."""

    settings: ScoringSettings

    def diffs(self, session: OutcomeTally) -> Diffs:
        """The diffs of both runs from the initial reference state.

        :raises ReferenceRunError: when the reference run gave no usable result.
        """
        ...


def patterns_key(test_patterns: Sequence[str]) -> tuple[str, ...]:
    """The key of a reference side in :attr:`ScorerInputs.references`: scorers with the same
    test patterns share one rerun."""
    return tuple(test_patterns)


@dataclass
class ScorerInputs:
    """The inputs several scorers share, each typed, filled by the front end or by the first
    scorer that needs one (and closed by the front end when the session is scored)."""

    #: The session's databases: start snapshot, finish state and diff (``db_change``).
    databases: DatabaseInputs | None = None
    #: ``db_diff_change``'s reference side, by its test patterns (:func:`patterns_key`).
    references: dict[tuple[str, ...], ReferenceResults] = field(default_factory=dict)
    #: The baseline run (the reference's own tests), shared by every ``db_diff_change``
    #: that counts test changes.
    baseline: BaselineRun | None = None
    #: The reference's databases snapshotted before this evaluation (a batch takes it once for
    #: all its repositories); None: each rerun takes its own.
    initial_reference: Snapshot | None = None
    #: What ``--tests-from`` put in the repository's copy (``run``, Inspect's ``tests_from``).
    tests_from: TestsFrom | None = None
    #: What the repository changed in its tests relative to the evaluator's (``tests_modified``);
    #: None when nothing was compared.
    test_changes: list[FileChange] | None = None

    def held(self) -> Iterator[object]:
        """Every input present (for closing them, and for the evidence they leave)."""
        present = [self.databases, *self.references.values(), self.baseline]
        yield from (item for item in present if item is not None)

    def close(self) -> None:
        """Remove snapshot copies and diff stores, end runs still going."""
        for item in self.held():
            close = getattr(item, "close", None)
            if callable(close):
                close()
