"""Work a batch does once for all its repositories, and one children's user per job.

The pristine copy of the reference checkout, the snapshot of its databases before any test
ran and the baseline run of its own tests depend only on the reference and the evaluator's
options, and so do the expected set and the check that a children's user can run the
interpreter: a batch (docs/cli.md#many-repositories) makes them once, in a shared area only the
evaluator can read, fingerprints them, and hands them to every repository's run, which checks
the fingerprints before it scores, as a single run checks its own copies.

Repositories scored at the same time never share a user: a repository's processes could
otherwise signal, trace or write into those of the repository beside it. Each job's user id is
held for the whole batch (:mod:`pytest_scoring.process.users`); the other runs of each
repository (its reference rerun) get user ids of their own in its worker.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from dataclasses import dataclass
from dataclasses import field
from pathlib import Path

from pytest_scoring.db.session import snapshot_now
from pytest_scoring.db.snapshot import Snapshot
from pytest_scoring.db.sqlite_engine import SqliteEngine
from pytest_scoring.errors import OptionError
from pytest_scoring.evaluation.area import copy_reference
from pytest_scoring.evaluation.area import requested_user
from pytest_scoring.fs.guard import Fingerprints
from pytest_scoring.process.children import ChildRunner
from pytest_scoring.process.environment import captured_environment
from pytest_scoring.process.supervisor import ChildUser
from pytest_scoring.process.users import UserPool
from pytest_scoring.reference.baseline import Baseline
from pytest_scoring.reference.expected import ExpectedTests


@dataclass(frozen=True)
class SharedReference:
    """The pristine copy of the reference checkout, made once for a batch."""

    #: The reference checkout as the evaluator named it (resolved).
    checkout: Path
    pristine: Path
    #: The SHA-256 of its manifest (:func:`~pytest_scoring.fs.guard.tree_digest`).
    digest: str
    #: Its databases before any test ran; None when each run must take its own (the
    #: evaluator's ``--score-db-exclude`` folders make the list depend on the repository).
    initial: Snapshot | None


@dataclass(frozen=True)
class JobUser:
    """Who one job's children run as, and why containment is partial, if it is."""

    user: ChildUser | None
    problem: str | None = None


@dataclass(frozen=True)
class SharedWork:
    """What every repository's run in a batch is given instead of making it itself."""

    #: The environment the evaluator started with (the children's, in every worker).
    environment: dict[str, str] = field(default_factory=captured_environment)
    reference: SharedReference | None = None
    #: ``--expected-tests``, read (or run) once.
    expected: ExpectedTests | None = None
    #: The reference's own tests run once (when a ``db_diff_change`` counts test changes).
    baseline: Baseline | None = None
    #: The interpreter the children run, when it is a copy of ``--python`` that the jobs'
    #: users can run (``environment`` has what it needs).
    python: str | None = None
    #: Of the shared files, checked by every run before it scores.
    fingerprints: Fingerprints = field(default_factory=Fingerprints)


def share_reference(
    runner: ChildRunner, reference: Path, db_patterns: Sequence[str], snapshot: bool
) -> SharedReference:
    """Copy the reference checkout into ``runner``'s area and snapshot its databases once.

    :param snapshot: take the initial snapshot (not when it depends on the repository).
    :raises OptionError: when the reference cannot be copied.
    """
    assert runner.guard is not None
    pristine = copy_reference(runner, reference)
    initial = None
    if snapshot:
        engine = SqliteEngine(pristine, db_patterns)
        initial = snapshot_now(engine, runner.folder("initial"), str(pristine))
        runner.guard.add_files(initial.files.values())
    digest = runner.guard.fingerprints().trees[pristine]
    return SharedReference(reference, pristine, digest, initial)


def job_users(jobs: int, names: Sequence[str], users: UserPool | None) -> list[JobUser]:
    """One children's user per job, held from ``users`` for the whole batch.

    As root, ``--user`` names every job's user or none; without it, each job gets a user id
    of its own from the pool. Not as root, every job runs as the evaluator's user (partial
    containment).

    :raises OptionError: for an unknown user, too few users for the jobs, one named twice, or
        one that another run holds now.
    """
    if os.geteuid() != 0 or users is None:
        return [JobUser(*requested_user(names[0] if names else None))] * jobs
    if names:
        if len(set(names)) < len(names):
            raise OptionError("--user: each job needs a user of its own; a name is given twice")
        if len(names) < jobs:
            raise OptionError(
                f"--jobs {jobs}: repositories scored at the same time each need a user of "
                f"their own: give --user {jobs} times, or not at all"
            )
        return [JobUser(*requested_user(name, users)) for name in names[:jobs]]
    return [JobUser(users.take()) for _ in range(jobs)]
