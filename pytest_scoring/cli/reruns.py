"""``run --retries N``: the tests that did not pass, run again (docs/scoring.md#reruns).

Each rerun is a fresh pytest process of the same kind as the session's: a fresh copy of REPO
(with ``--tests-from`` PATH's tests put in again), the same user, ``HOME``, pinned environment,
limits, launcher, probe and witnesses, and only the tests to rerun selected. Its outcomes are
attempts of those tests (:meth:`~pytest_scoring.core.outcomes.OutcomeTally.record_attempt`);
its integrity signals count as the session's own, so that a repository which behaves
differently when rerun is never rewarded.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from collections.abc import Sequence
from dataclasses import dataclass
from dataclasses import field
from pathlib import Path

from pytest_scoring.core.signals import Signal
from pytest_scoring.evaluation.area import copy_repository
from pytest_scoring.evaluation.scoring import Evaluation
from pytest_scoring.fs.witness import FilesWitness
from pytest_scoring.process.children import BlackBox
from pytest_scoring.process.children import PytestChild
from pytest_scoring.process.stream import ProbeState
from pytest_scoring.process.supervisor import ChildExit
from pytest_scoring.process.witness import ChildEnding


@dataclass
class RerunPlan:
    """What every rerun of one run shares."""

    repo: Path
    #: pytest's arguments as the evaluator gave them (without the run's ``--junitxml``).
    pytest_args: Sequence[str]
    #: ``--tests-from`` PATH's private copy and how the report names it.
    tests_from: tuple[Path, str] | None
    black_box: bool
    #: The run's deadline (``time.monotonic()``): no rerun starts after it.
    deadline: float
    ignored_options: Sequence[str] = ()


@dataclass
class Rerun:
    """One rerun, as it ended: what its probe said, how its child ended, what its witness saw."""

    state: ProbeState
    ended: ChildExit
    ending: ChildEnding
    witnessed: list[Signal] = field(default_factory=list)
    #: Files of its copy that are the evaluator's (``--tests-from``), relative.
    trusted: frozenset[str] = frozenset()


def rerun_failures(
    evaluation: Evaluation,
    plan: RerunPlan,
    retries: int,
    on_rerun: Callable[[Rerun], object],
) -> int:
    """Run the tests that did not pass again, up to ``retries`` times, each time those that
    still did not; each test's outcome in each rerun is an attempt of it.

    :param on_rerun: given each rerun once it ended (its integrity signals).
    :returns: how many reruns ran.
    """
    tally, runner = evaluation.tally, evaluation.context.children
    settings = evaluation.settings
    done = 0
    for attempt in range(1, retries + 1):
        ids = tally.rerun_ids()
        left = plan.deadline - time.monotonic()
        if not ids or left <= 0:
            break
        copy, placed = copy_repository(runner, plan.repo, plan.tests_from, f"rerun-{attempt}")
        args, witness, black_box = list(plan.pytest_args), None, None
        trusted: frozenset[str] = frozenset()
        if placed is not None:
            installed = placed.installed
            args = [*installed.args, *args]
            witness = FilesWitness.start(copy, installed.evaluators)
            trusted = frozenset(installed.evaluators)
            if plan.black_box:
                evaluator = [copy / relpath for relpath in installed.evaluators]
                black_box = BlackBox(evaluator, [plan.repo])
        prefix = tally.id_prefix
        child: PytestChild = runner.start_pytest(
            copy,
            args,
            left,
            deterministic=settings.deterministic,
            ignored_options=plan.ignored_options,
            black_box=black_box,
            only=[nodeid.removeprefix(prefix) for nodeid in ids],
        )
        ended = child.wait()
        rerun = Rerun(child.state, ended, child.ending(ended), trusted=trusted)
        rerun.witnessed = witness.signals() if witness is not None else []
        for nodeid in ids:
            tally.record_attempt(nodeid, child.state.tally.outcome_of(nodeid))
        on_rerun(rerun)
        done += 1
    return done
