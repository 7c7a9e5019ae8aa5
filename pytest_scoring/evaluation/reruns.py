"""``--retries N``: the tests that did not pass, run again (docs/scoring.md#reruns).

Each rerun is a fresh pytest process of the same kind as the session's, in a fresh copy of
the repository (``run``: with ``--tests-from`` PATH's tests put in again): the same runner
(user, ``HOME``, pinned environment, limits), launcher, probe and witnesses, with only the
tests to rerun selected. Its outcomes are attempts of those tests
(:meth:`~pytest_scoring.core.outcomes.OutcomeTally.record_attempt`); the front end takes its
integrity signals as the session's own, so that a repository which behaves differently when
rerun is never rewarded.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from collections.abc import Sequence
from dataclasses import dataclass
from dataclasses import field
from pathlib import Path

from pytest_scoring.core.signals import Signal
from pytest_scoring.evaluation.scoring import Evaluation
from pytest_scoring.fs.copy import copy_tree
from pytest_scoring.fs.witness import FilesWitness
from pytest_scoring.process.children import BlackBox
from pytest_scoring.process.stream import ProbeState
from pytest_scoring.process.supervisor import ChildExit
from pytest_scoring.process.witness import ChildEnding


@dataclass
class RerunCopy:
    """Where one rerun runs: a fresh copy, pytest's arguments there, what of it is the
    evaluator's."""

    path: Path
    args: Sequence[str]
    #: Files of the copy that are the evaluator's (``--tests-from``), relative.
    trusted: frozenset[str] = frozenset()
    witness: FilesWitness | None = None
    black_box: BlackBox | None = None


@dataclass
class Rerun:
    """One rerun, as it ended: what its probe said, how its child ended, what its witness saw."""

    state: ProbeState
    ended: ChildExit
    ending: ChildEnding
    trusted: frozenset[str] = frozenset()
    witnessed: list[Signal] = field(default_factory=list)


def rerun_failures(
    evaluation: Evaluation,
    retries: int,
    fresh_copy: Callable[[int], RerunCopy],
    on_rerun: Callable[[Rerun], object],
    deadline: float | None = None,
    ignored_options: Sequence[str] = (),
) -> int:
    """Run the tests that did not pass again, up to ``retries`` times, each time those that
    still did not; each test's outcome in each rerun is an attempt of it.

    :param fresh_copy: the copy of rerun number ``n`` (from 1), made when it is needed.
    :param on_rerun: given each rerun once it ended (its integrity signals).
    :param deadline: ``time.monotonic()`` after which no rerun starts (None: none).
    :returns: how many reruns ran.
    """
    tally, runner = evaluation.tally, evaluation.context.children
    done = 0
    for attempt in range(1, retries + 1):
        ids = tally.rerun_ids()
        left = None if deadline is None else deadline - time.monotonic()
        if not ids or (left is not None and left <= 0):
            break
        copy = fresh_copy(attempt)
        child = runner.start_pytest(
            copy.path,
            copy.args,
            left,
            deterministic=evaluation.settings.deterministic,
            ignored_options=ignored_options,
            black_box=copy.black_box,
            only=[nodeid.removeprefix(tally.id_prefix) for nodeid in ids],
        )
        ended = child.wait()
        rerun = Rerun(child.state, ended, child.ending(ended), copy.trusted)
        rerun.witnessed = copy.witness.signals() if copy.witness is not None else []
        rerun_tally = child.state.tally  # its ids relative to the copy it ran in
        for nodeid in ids:
            its_id = rerun_tally.id_prefix + nodeid.removeprefix(tally.id_prefix)
            tally.record_attempt(nodeid, rerun_tally.outcome_of(its_id))
        on_rerun(rerun)
        done += 1
    return done


def copies_of(
    evaluation: Evaluation, repository: Path, rootdir: Path
) -> Callable[[int], RerunCopy]:
    """In process: each rerun's copy of ``repository`` (the tree pytest ran in, without the
    report root and the folders the evaluator excludes), run from the place of ``rootdir``
    in it, with the session's ``-k``/``-m`` selection, as the reference rerun is."""
    runner, settings = evaluation.context.children, evaluation.settings

    def fresh_copy(attempt: int) -> RerunCopy:
        copy = runner.workspace(f"rerun-{attempt}") / (repository.name or "repository")
        copy_tree(repository, copy, exclude=settings.excluded_folders())
        runner.give(copy)
        return RerunCopy(copy / rootdir.relative_to(repository), settings.selection)

    return fresh_copy
