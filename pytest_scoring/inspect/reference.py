"""``db_diff_change`` in a sandbox: the reference's runs happen there, as inspect_toolkit runs
its rerun (docs/inspect.md#db-diff-change).

The reference checkout (the sample's ``reference_repo_dir``, on the evaluator's machine) is
copied, its databases snapshotted (the *initial reference*), the repository's test files
(read from the sandbox) copied over the copy — all with the plugin's own copying rules
(:mod:`pytest_scoring.reference.copy`) — and the copy is sent into the sandbox, where its tests
run through the launcher and the probe: the *rerun*. Unless no scorer counts test changes, a
second, untouched copy runs the reference's own tests there too: the *baseline*
(:mod:`pytest_scoring.reference.baseline`). The databases each leaves, and those the
repository's own run left, are diffed from the initial reference on the evaluator's machine
(:func:`~pytest_scoring.reference.rerun.split_runs`), and ``db_diff_change``'s own scorer
scores them: the code part and ``from_tests`` are the plugin's (docs/reference.md).

The baseline is never cached: it ran in a sandbox the agent had, so its result is not trusted
for any other sample. The agent's sandbox is a weaker boundary than ``pytest-scoring run``'s
supervisor: what the agent left running there can see and touch the copies while their tests
run (docs/inspect.md#trust).
"""

from __future__ import annotations

import shutil
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from typing import Final

import anyio
from inspect_ai.solver import TaskState

from pytest_scoring.core.outcomes import OutcomeTally
from pytest_scoring.core.score import cap_list
from pytest_scoring.core.settings import ScoringSettings
from pytest_scoring.db.diff_store import DiffStore
from pytest_scoring.db.session import snapshot_now
from pytest_scoring.db.snapshot import Snapshot
from pytest_scoring.db.sqlite_engine import SqliteEngine
from pytest_scoring.errors import ScoringError
from pytest_scoring.fs.copy import copy_tree
from pytest_scoring.inspect.databases import settings_for
from pytest_scoring.inspect.sample import DETERMINISTIC_KEY
from pytest_scoring.inspect.sample import SampleScoring
from pytest_scoring.inspect.sample import TestRun
from pytest_scoring.reference.baseline import WHAT as BASELINE_RUN
from pytest_scoring.reference.baseline import Baseline
from pytest_scoring.reference.baseline import from_run
from pytest_scoring.reference.child import reference_timeout
from pytest_scoring.reference.copy import CopiedTests
from pytest_scoring.reference.copy import copy_test_files
from pytest_scoring.reference.copy import pattern_folder
from pytest_scoring.reference.rerun import FILE_MAX_ROWS
from pytest_scoring.reference.rerun import Diffs
from pytest_scoring.reference.rerun import ReferenceRunError
from pytest_scoring.reference.rerun import split_runs

#: The sample metadata key naming the reference checkout.
REFERENCE_KEY: Final = "reference_repo_dir"
#: Where a sample keeps its baseline run (one per sample, shared by its scorers).
BASELINE_KEY: Final = "baseline"
#: ``metadata.baseline.cache`` of a baseline run in a sandbox.
NOT_CACHED: Final = "not cached: it ran in the sample's sandbox, which the agent had"


class SandboxReference:
    """The reference side of one sample, run in its sandbox (or why it gave no result)."""

    def __init__(self, settings: ScoringSettings):
        self.settings = settings
        self.result: Diffs | ReferenceRunError | None = None
        self.store: DiffStore | None = None

    def diffs(self, session: OutcomeTally) -> Diffs:
        if isinstance(self.result, ReferenceRunError):
            raise self.result
        if self.result is None:
            raise ReferenceRunError("the reference rerun did not run", {})
        return self.result

    def close(self) -> None:
        if self.store is not None:
            self.store.close()
            self.store = None


@dataclass
class Rerun:
    """The reference rerun of one sample: the copy's snapshots, the test files, the run."""

    reference: Path
    patterns: list[str]
    initial: Snapshot
    final: Snapshot
    tests: CopiedTests
    run: TestRun


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
    sample: SampleScoring, state: TaskState, repo: str, patterns: list[str], with_baseline: bool
) -> SandboxReference:
    """The reference side of one sample, diffed against its own run: the rerun (shared by
    scorers with the same test patterns) and, ``with_baseline``, the baseline (one per sample)."""
    settings = settings_for(repo)
    rerun_key = f"rerun:{'|'.join(patterns)}"
    if rerun_key not in sample.resources:
        sample.resources[rerun_key] = await _rerun(sample, state, repo, patterns, settings)
    rerun: Rerun = sample.resources[rerun_key]
    settings.reference, settings.test_patterns = rerun.reference, patterns
    side = SandboxReference(settings)
    own = await sample.test_run(state, repo)
    db_patterns = settings.db_patterns
    solution = await sample.snapshot(own, db_patterns, f"sandbox:{repo} after its tests")
    metadata = _metadata(rerun, own)
    missing = _missing_tests(rerun.run, own)
    problem = rerun.run.run.failure(reference_timeout())
    if problem is not None:
        found = {"missing_tests": cap_list(missing), "missing_tests_count": len(missing)}
        side.result = ReferenceRunError(problem, {**metadata, **found})
        return side
    baseline: Baseline | str | None = None
    if with_baseline:
        if BASELINE_KEY not in sample.resources:
            baseline_run = await _baseline(sample, state, rerun.reference, db_patterns)
            sample.resources[BASELINE_KEY] = baseline_run
        baseline = sample.resources[BASELINE_KEY]
    usable = baseline.final if isinstance(baseline, Baseline) else None
    folder = sample.local("diffs")
    folder.mkdir()
    side.store = DiffStore(folder / "rows.db", baseline=usable is not None)

    def diff_of_diffs() -> Diffs:
        assert side.store is not None
        engine = SqliteEngine(rerun.reference, db_patterns)  # diffs the backups read back
        split = split_runs(
            engine,
            rerun.initial,
            rerun.final,
            solution,
            db_patterns,
            side.store,
            baseline_final=usable,
        )
        return Diffs(split, split.parts(FILE_MAX_ROWS), metadata, missing, baseline)

    side.result = await anyio.to_thread.run_sync(diff_of_diffs)
    return side


async def _rerun(
    sample: SampleScoring,
    state: TaskState,
    repo: str,
    patterns: list[str],
    settings: ScoringSettings,
) -> Rerun:
    """Copy the reference, snapshot it, copy the repository's test files over it, and run its
    tests in the sandbox."""
    reference = reference_folder(state)
    workdir = sample.local("reference")
    copy = workdir / "copy"
    db_patterns = settings.db_patterns

    def copy_reference() -> Snapshot:
        copy_tree(reference, copy)
        return snapshot_now(SqliteEngine(copy, db_patterns), workdir / "initial", str(reference))

    initial = await anyio.to_thread.run_sync(copy_reference)
    tests = await _copy_tests(sample, repo, patterns, copy, workdir / "tests")
    run = await _run_copy(sample, state, copy, "reference")
    final = await sample.snapshot(run, db_patterns, f"{reference} (reference rerun)")
    return Rerun(reference, patterns, initial, final, tests, run)


async def _baseline(
    sample: SampleScoring, state: TaskState, reference: Path, db_patterns: list[str]
) -> Baseline | str:
    """The reference's own tests on its code, in the sandbox; or why they could not run."""
    copy = sample.local("baseline")
    try:
        await anyio.to_thread.run_sync(copy_tree, reference, copy)
        run = await _run_copy(sample, state, copy, "baseline")
        final = await sample.snapshot(run, db_patterns, BASELINE_RUN)
    except (OSError, ScoringError) as error:
        return f"{BASELINE_RUN} failed: {error}"
    return from_run("", run.run, final, reference_timeout(), NOT_CACHED)


async def _run_copy(sample: SampleScoring, state: TaskState, copy: Path, name: str) -> TestRun:
    """Send the local ``copy`` into the sandbox, run its tests there (the databases they leave
    are backed up), and remove both copies."""
    kit = await sample.kit()
    inside = kit.path(name)
    try:
        await kit.push(copy, inside)
        return await sample.run_tests(inside, bool(state.metadata.get(DETERMINISTIC_KEY)))
    finally:
        kit.discard(inside)
        await anyio.to_thread.run_sync(shutil.rmtree, copy, True)


async def _copy_tests(
    sample: SampleScoring, repo: str, patterns: list[str], copy: Path, mirror: Path
) -> CopiedTests:
    """The repository's test files (read from the sandbox) copied over the reference copy."""
    folders = sorted({pattern_folder(pattern) for pattern in patterns})
    await (await sample.kit()).pull(repo, mirror, paths=folders)
    return await anyio.to_thread.run_sync(copy_test_files, mirror, patterns, copy)


def _metadata(rerun: Rerun, own: TestRun) -> dict[str, Any]:
    """What the score says about both runs (the keys of ``pytest-scoring``'s own rerun)."""
    run = rerun.run.run
    return {
        "reference": str(rerun.reference),
        "test_patterns": rerun.patterns,
        "test_files_copied": len(rerun.tests.copied),
        "test_files_skipped": cap_list(rerun.tests.skipped),
        "reference_counts": (run.tally or {}).get("counts"),
        "solution_counts": own.probe().tally.counts(),
        "reference_duration": run.duration,
        "reference_exit_code": run.exit_code,
        "reference_timed_out": run.timed_out,
        "reference_output": run.output if run.failure(reference_timeout()) else "",
        "solution_duration": own.run.duration,
    }


def _missing_tests(rerun: TestRun, own: TestRun) -> list[str]:
    """Test ids the rerun collected that the repository's own run did not (deleted tests)."""
    solution = own.probe().tally
    here = solution.collected | set(solution.tests)
    return sorted(set((rerun.run.tally or {}).get("collected", [])) - here)
