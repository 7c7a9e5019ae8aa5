"""``db_diff_change`` in a sandbox: the reference rerun runs there, as inspect_toolkit runs it.

The reference checkout (the sample's ``reference_repo_dir``, on the evaluator's machine) is
copied, its databases snapshotted (the *initial reference*), the repository's test files
(read from the sandbox) copied over the copy — all with the plugin's own copying rules
(:mod:`pytest_scoring.reference.copy`) — and the copy is sent into the sandbox, where its tests
run through the launcher and the probe. The databases they leave are the *final reference*;
those the repository's own run left are the *final solution*. Both diffs and their
diff-of-diffs are computed on the evaluator's machine
(:func:`~pytest_scoring.reference.rerun.split_runs`), and ``db_diff_change``'s own scorer
scores them.

The agent's sandbox is a weaker boundary than ``pytest-scoring run``'s supervisor: what the
agent left running there can see and touch the copy while its tests run (docs/inspect.md).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any
from typing import Final

import anyio
from inspect_ai.solver import TaskState

from pytest_scoring.db.diff_store import DiffStore
from pytest_scoring.db.discovery import find_databases
from pytest_scoring.db.snapshot import take_snapshot
from pytest_scoring.errors import ScoringError
from pytest_scoring.inspect.databases import settings_for
from pytest_scoring.inspect.sample import DETERMINISTIC_KEY
from pytest_scoring.inspect.sample import SampleScoring
from pytest_scoring.inspect.sample import TestRun
from pytest_scoring.plugin.options import ScoringSettings
from pytest_scoring.reference.child import reference_timeout
from pytest_scoring.reference.copy import CopiedTests
from pytest_scoring.reference.copy import copy_test_files
from pytest_scoring.reference.copy import copy_tree
from pytest_scoring.reference.copy import pattern_folder
from pytest_scoring.reference.rerun import FILE_MAX_ROWS
from pytest_scoring.reference.rerun import Diffs
from pytest_scoring.reference.rerun import ReferenceRunError
from pytest_scoring.reference.rerun import split_runs
from pytest_scoring.scorers.base import ScoringContext
from pytest_scoring.scorers.score import cap_list

#: The sample metadata key naming the reference checkout.
REFERENCE_KEY: Final = "reference_repo_dir"


class SandboxReference:
    """The reference side of one sample, run in its sandbox (or why it gave no result)."""

    def __init__(self, settings: ScoringSettings):
        self.settings = settings
        self.result: Diffs | ReferenceRunError | None = None
        self.store: DiffStore | None = None

    def diffs(self, context: ScoringContext) -> Diffs:
        if isinstance(self.result, ReferenceRunError):
            raise self.result
        if self.result is None:
            raise ReferenceRunError("the reference rerun did not run", {})
        return self.result

    def close(self) -> None:
        if self.store is not None:
            self.store.close()
            self.store = None


def reference_folder(state: TaskState) -> Path:
    """The sample's reference checkout.

    :raises ScoringError: naming the metadata key when it is missing or no folder.
    """
    value = state.metadata.get(REFERENCE_KEY)
    if not isinstance(value, str) or not value:
        raise ScoringError(
            f"db_diff_change needs the sample metadata {REFERENCE_KEY!r} (the reference checkout)"
        )
    if not Path(value).is_dir():
        raise ScoringError(f"the sample's metadata {REFERENCE_KEY!r} is {value!r}, not a folder")
    return Path(value).resolve()


async def run_reference(
    sample: SampleScoring, state: TaskState, repo: str, patterns: list[str]
) -> SandboxReference:
    """The reference rerun of one sample, in its sandbox, diffed against its own run."""
    reference = reference_folder(state)
    settings = settings_for(repo)
    settings.reference, settings.test_patterns = reference, patterns
    side = SandboxReference(settings)
    workdir = sample.local("reference")
    copy = workdir / "copy"
    db_patterns = settings.db_patterns

    def copy_reference() -> Any:
        copy_tree(reference, copy)
        relpaths = find_databases(copy, db_patterns)
        return take_snapshot(copy, relpaths, workdir / "initial", source=str(reference))

    initial = await anyio.to_thread.run_sync(copy_reference)
    tests = await _copy_tests(sample, repo, patterns, copy, workdir / "tests")
    kit = await sample.kit()
    inside = kit.path("reference")
    await kit.push(copy, inside)
    deterministic = bool(state.metadata.get(DETERMINISTIC_KEY))
    try:
        rerun = await sample.run_tests(inside, deterministic)
        final = await sample.snapshot(rerun, db_patterns, f"{reference} (reference rerun)")
    finally:
        kit.discard(inside)
    own = await sample.test_run(state, repo)
    solution = await sample.snapshot(own, db_patterns, f"sandbox:{repo} after its tests")
    metadata = _metadata(reference, patterns, tests, rerun, own)
    missing = _missing_tests(rerun, own)
    problem = rerun.run.failure(reference_timeout())
    if problem is not None:
        missing_metadata = {"missing_tests": cap_list(missing), "missing_tests_count": len(missing)}
        side.result = ReferenceRunError(problem, {**metadata, **missing_metadata})
        return side
    side.store = DiffStore(workdir / "rows.db")

    def diff_of_diffs() -> Diffs:
        assert side.store is not None
        split = split_runs(initial, final, solution, db_patterns, side.store)
        return Diffs(split, split.parts(FILE_MAX_ROWS), metadata, missing)

    side.result = await anyio.to_thread.run_sync(diff_of_diffs)
    return side


async def _copy_tests(
    sample: SampleScoring, repo: str, patterns: list[str], copy: Path, mirror: Path
) -> CopiedTests:
    """The repository's test files (read from the sandbox) copied over the reference copy."""
    folders = sorted({pattern_folder(pattern) for pattern in patterns})
    await (await sample.kit()).pull(repo, mirror, paths=folders)
    return await anyio.to_thread.run_sync(copy_test_files, mirror, patterns, copy)


def _metadata(
    reference: Path, patterns: list[str], tests: CopiedTests, rerun: TestRun, own: TestRun
) -> dict[str, Any]:
    """What the score says about both runs (the keys of ``pytest-scoring``'s own rerun)."""
    reference_tally = rerun.run.tally or {}
    return {
        "reference": str(reference),
        "test_patterns": patterns,
        "test_files_copied": len(tests.copied),
        "test_files_skipped": cap_list(tests.skipped),
        "reference_counts": reference_tally.get("counts"),
        "solution_counts": own.probe().tally.counts(),
        "reference_duration": rerun.run.duration,
        "reference_exit_code": rerun.run.exit_code,
        "reference_timed_out": rerun.run.timed_out,
        "reference_output": rerun.run.output if rerun.run.failure(reference_timeout()) else "",
        "solution_duration": own.run.duration,
    }


def _missing_tests(rerun: TestRun, own: TestRun) -> list[str]:
    """Test ids the rerun collected that the repository's own run did not (deleted tests)."""
    solution = own.probe().tally
    here = solution.collected | set(solution.tests)
    return sorted(set((rerun.run.tally or {}).get("collected", [])) - here)
