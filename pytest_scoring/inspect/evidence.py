"""The scorers' evidence in the sample's store, and their scores from it without a sandbox.

Once a scorer has scored from the sandbox, it keeps what it decided from in the sample's store
(:mod:`pytest_scoring.evaluation.inspect_store` says the shape): Inspect writes the store into
the eval log. ``inspect score LOG`` (``inspect_ai.score``) gives the scorers no sandbox
("No sandbox environment has been provided"): they then decide from that store, by the same
rules as ``pytest-scoring rescore`` decides from a report (docs/inspect.md#inspect-rescoring).
"""

from __future__ import annotations

import base64
import functools
import weakref
from collections.abc import Callable
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import anyio
from inspect_ai.solver import TaskState
from inspect_ai.util import sandbox

from pytest_scoring.core.determinism import FlakyRule
from pytest_scoring.core.outcomes import OutcomeTally
from pytest_scoring.core.score import REPORT_FILE_CAP
from pytest_scoring.core.score import Score
from pytest_scoring.core.signals import StrictKinds
from pytest_scoring.db.session import SessionDatabases
from pytest_scoring.evaluation.evidence import NotKept
from pytest_scoring.evaluation.evidence import complete_diff
from pytest_scoring.evaluation.evidence import kept_rerun
from pytest_scoring.evaluation.evidence import outcomes_json
from pytest_scoring.evaluation.evidence import over_cap
from pytest_scoring.evaluation.inspect_store import DATABASES_KIND
from pytest_scoring.evaluation.inspect_store import OUTCOMES_KIND
from pytest_scoring.evaluation.inspect_store import REFERENCE_KIND
from pytest_scoring.evaluation.inspect_store import SESSION_DIFF_KIND
from pytest_scoring.evaluation.inspect_store import STORE_KEY
from pytest_scoring.evaluation.inspect_store import database_files
from pytest_scoring.evaluation.inspect_store import kept_entry
from pytest_scoring.evaluation.inspect_store import why_not
from pytest_scoring.evaluation.inspect_store import with_kept
from pytest_scoring.evaluation.rescore import NEEDS_REPOSITORY
from pytest_scoring.evaluation.rescore import StoredReference
from pytest_scoring.evaluation.rescore import needs_repository
from pytest_scoring.evaluation.rescore import outcomes_context
from pytest_scoring.evaluation.rescore import untrusted_outcomes
from pytest_scoring.inspect.databases import settings_for
from pytest_scoring.inspect.reference import SandboxReference
from pytest_scoring.inspect.sample import DEFAULT_REPO_PATH
from pytest_scoring.inspect.sample import ENV_KEY
from pytest_scoring.inspect.sample import REPO_PATH_KEY
from pytest_scoring.inspect.sample import TESTS_FROM_KEY
from pytest_scoring.inspect.sample import TestRun
from pytest_scoring.reference.expected import ExpectedTests
from pytest_scoring.reference.rerun import Diffs
from pytest_scoring.scorers.base import ScoringContext
from pytest_scoring.scorers.base import run_scorer
from pytest_scoring.scorers.db_change import DbChangeScorer
from pytest_scoring.scorers.db_change import StoredDatabases
from pytest_scoring.scorers.db_diff_change import DiffChangeScorer
from pytest_scoring.scorers.tests import TestScorer


def has_sandbox() -> bool:
    """Whether the sample has a sandbox (``inspect score`` gives none)."""
    try:
        sandbox()
    except ProcessLookupError:
        return False
    return True


#: The samples (their state) whose store's evidence this process began to write.
_BEGUN: weakref.WeakSet[TaskState] = weakref.WeakSet()


def begin(state: TaskState) -> None:
    """Drop whatever the store held under the evidence's key before the first of this
    package's scorers scored the sample from its sandbox: only they write it (a solver or a
    tool of the task that wrote it first cannot choose what a re-score reads)."""
    if state not in _BEGUN:
        _BEGUN.add(state)
        if STORE_KEY in state.store:
            state.store.delete(STORE_KEY)


def stored(state: TaskState) -> dict[str, Any]:
    """The evidence the sample's store keeps (empty kinds when none)."""
    return kept_entry(state.store.get(STORE_KEY))


def given_repo(state: TaskState, repo_path: str | None) -> str:
    """The repository as the scorer or the sample names it (before the sandbox resolves it)."""
    return str(repo_path or state.metadata.get(REPO_PATH_KEY) or DEFAULT_REPO_PATH)


def run_identity(
    state: TaskState,
    tests_from: object = None,
    env: Mapping[str, str] | None = None,
) -> tuple[object, object]:
    """``tests_from`` and ``env`` of a run as :meth:`SampleScoring.test_run` takes them: the
    parameter, else the sample's metadata."""
    return (
        tests_from or state.metadata.get(TESTS_FROM_KEY),
        env if env is not None else state.metadata.get(ENV_KEY),
    )


async def _keep(state: TaskState, kind: str, key: str, content: Callable[[], Any]) -> None:
    """Keep ``content`` (made in a worker thread: it may read a large diff) under
    ``kind[key]`` of the store's evidence."""

    def updated() -> dict[str, Any]:
        return with_kept(state.store.get(STORE_KEY), kind, key, content())

    state.store.set(STORE_KEY, await anyio.to_thread.run_sync(updated))


def _has(state: TaskState, kind: str, key: str) -> bool:
    entry = stored(state)
    return key in entry[kind] or f"{kind}/{key}" in entry["omitted"]


async def keep_run(
    state: TaskState,
    key: str,
    test_run: TestRun,
    repo: str,
    strict: StrictKinds,
    flaky: FlakyRule,
    retries: int,
) -> None:
    """A test run's outcomes, before any expected set judged them (the first scorer of the
    run keeps them; the others read the same)."""
    if _has(state, OUTCOMES_KIND, key):
        return

    def content() -> dict[str, Any]:
        context = test_run.context(settings_for(repo), None, strict, flaky, retries)
        return {**outcomes_json(context), "root": repo, "strict": sorted(context.strict)}

    await _keep(state, OUTCOMES_KIND, key, content)


async def keep_databases(
    state: TaskState, source: str, databases: SessionDatabases, level: str
) -> None:
    """``db_change``'s diff with every changed row (once per source: the scorers of one
    source share their diff); with ``all`` the final databases too."""
    if _has(state, SESSION_DIFF_KIND, source):
        return
    settings = databases.settings

    def content() -> dict[str, Any] | NotKept:
        try:
            diff = complete_diff(databases)
        except NotKept as reason:
            return reason
        return {"root": str(settings.root), "db_patterns": list(settings.db_patterns), "diff": diff}

    await _keep(state, SESSION_DIFF_KIND, source, content)
    if level == "all":
        for relpath, path in sorted(databases.final_files().items()):
            await _keep(state, DATABASES_KIND, relpath, functools.partial(_encoded, path))


def _encoded(path: Path) -> str | NotKept:
    """A final database as base64, or why it is not kept."""
    size = path.stat().st_size
    if (size + 2) // 3 * 4 > REPORT_FILE_CAP:
        return NotKept(over_cap(size))
    return base64.b64encode(path.read_bytes()).decode("ascii")


async def keep_reference(state: TaskState, key: str, side: SandboxReference) -> None:
    """``db_diff_change``'s reference side: the three diffs, the rerun's metadata."""

    def content() -> dict[str, Any] | NotKept:
        result = side.result
        if not isinstance(result, Diffs):
            return NotKept(str(result or "the reference rerun did not run"))
        settings = side.settings
        return {"root": str(settings.root), **kept_rerun(list(settings.test_patterns), result)}

    await _keep(state, REFERENCE_KIND, key, content)


# --- scores from the store ----------------------------------------------------------------


def tests_from_store(
    core: TestScorer,
    entry: Mapping[str, Any],
    key: str,
    expected: ExpectedTests | None,
    strict: StrictKinds,
    flaky: FlakyRule,
) -> Score:
    """A test scorer on the kept outcomes of its run, under its expected set and kinds."""
    outcomes = entry[OUTCOMES_KIND].get(key)
    problem = None if outcomes is not None else why_not(entry, OUTCOMES_KIND, key)
    refused = untrusted_outcomes(core.type, problem, str(entry["route"]), partial=False)
    if refused is not None:
        return refused
    assert outcomes is not None, "untrusted_outcomes refuses outcomes that were not kept"
    root = str(outcomes.get("root") or ".")
    context = outcomes_context(
        outcomes,
        Path(root),
        settings_for(root),
        None if expected is None else expected.outcomes,
        None if expected is None else expected.describe(),
        strict.for_run(as_root=False).kinds,
        flaky,
    )
    return run_scorer(core, context)


def db_change_from_store(
    core: DbChangeScorer, entry: Mapping[str, Any], sources: list[str], folder: Path
) -> Score:
    """``db_change`` on the kept diff of the first of ``sources`` kept (``folder``: where the
    final databases kept with ``all`` are written)."""
    source = next((name for name in sources if name in entry[SESSION_DIFF_KIND]), sources[-1])
    kept = entry[SESSION_DIFF_KIND].get(source)
    root = str(kept["root"]) if kept else "."
    settings = settings_for(root, kept["db_patterns"] if kept else None)
    problem = f"{NEEDS_REPOSITORY} (session diff: {why_not(entry, SESSION_DIFF_KIND, source)})"
    finals = database_files(entry, folder)
    databases = StoredDatabases(settings, kept["diff"] if kept else None, problem, finals)
    context = ScoringContext(root=settings.root, tally=OutcomeTally(), settings=settings)
    context.inputs.databases = databases
    return run_scorer(core, context)


def db_diff_change_from_store(
    core: DiffChangeScorer, entry: Mapping[str, Any], key: str, own: str
) -> Score:
    """``db_diff_change`` on the kept reference side ``key``, the repository's own run's
    outcomes (``own``) for the tests it deleted."""
    kept = entry[REFERENCE_KIND].get(key)
    if kept is None:
        return needs_repository(
            core.type, f"reference rerun: {why_not(entry, REFERENCE_KIND, key)}"
        )
    root = str(kept.get("root") or ".")
    settings = settings_for(root)
    context = outcomes_context(
        entry[OUTCOMES_KIND].get(own) or {}, Path(root), settings, None, None, frozenset()
    )
    side = StoredReference(settings, kept, {})
    context.inputs.references[core.inputs_key()] = side
    try:
        return run_scorer(core, context)
    finally:
        side.close()
