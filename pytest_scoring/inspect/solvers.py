"""inspect_toolkit's solvers: a snapshot before the agent, the tests, the databases' diff.

They keep inspect_toolkit's names, parameters and store keys (``repo_snapshots``,
``run_tests``, ``db_diff``), and share the sample's state with the scorers
(:mod:`pytest_scoring.inspect.sample`): the tests ``run_tests`` runs are the run every test
scorer scores, and the diff ``diff_databases`` makes is the one ``db_change_scorer`` scores.
A solver that cannot do its work (no Python in the sandbox…) records why in its store key and
leaves the sample to go on; the scorers that needed it then score ``"N"`` saying why.
"""

from __future__ import annotations

import logging
import posixpath
from collections.abc import Mapping
from collections.abc import Sequence
from datetime import UTC
from datetime import datetime
from pathlib import Path
from typing import Final

import anyio
from inspect_ai.solver import Generate
from inspect_ai.solver import Solver
from inspect_ai.solver import TaskState
from inspect_ai.solver import solver
from inspect_ai.util import SandboxUserUnsupportedError

from pytest_scoring.core.score import cap_list
from pytest_scoring.core.settings import DEFAULT_DB_PATTERNS
from pytest_scoring.db.diff import DEFAULT_MAX_ROWS
from pytest_scoring.db.diff_shape import cap_diff
from pytest_scoring.db.session import SessionDatabases
from pytest_scoring.errors import ScoringError
from pytest_scoring.inspect.databases import DB_DIFF_KEY
from pytest_scoring.inspect.databases import DEFAULT_BEFORE
from pytest_scoring.inspect.databases import SNAPSHOTS_KEY
from pytest_scoring.inspect.databases import SOLVER_DIFF
from pytest_scoring.inspect.databases import check_locations
from pytest_scoring.inspect.databases import first_location
from pytest_scoring.inspect.databases import location_snapshot
from pytest_scoring.inspect.databases import settings_for
from pytest_scoring.inspect.databases import stored_diff
from pytest_scoring.inspect.sample import check_env
from pytest_scoring.inspect.sample import check_reruns
from pytest_scoring.inspect.sample import check_tests_from
from pytest_scoring.inspect.sample import sample_scoring

logger = logging.getLogger(__name__)

#: Folders ``snapshot_repo`` leaves out by default.
DEFAULT_EXCLUDE: Final = (".venv", "venv", ".pytest_cache", "__pycache__")
RUN_TESTS_KEY: Final = "run_tests"


def _failed(state: TaskState, key: str, what: str, error: ScoringError) -> TaskState:
    """Record why a solver could not do its work, for the log and the scorers' messages."""
    logger.warning("pytest-scoring: %s: %s", what, error)
    state.store.set(key, {"status": "error", "error": str(error)})
    return state


@solver
def snapshot_repo(
    workspace_path: str | None = None,
    snapshots_path: str = "/var/tmp/snapshots/",
    store_key: str = SNAPSHOTS_KEY,
    exclude: Sequence[str] | None = None,
    owner: str | None = "root",
) -> Solver:
    """Copy the repository inside the sandbox before the agent runs (``snapshot:[first]``).

    :param workspace_path: the repository (default: the sample's ``repo_path`` metadata, else
        ``/workspace``).
    :param snapshots_path: the folder of the copies, one sub-folder per snapshot.
    :param store_key: the store's list of snapshots (``{"timestamp", "workspace_path",
        "snapshot_path", "owner"}`` each).
    :param exclude: names of folders and files left out (default: virtual environments and
        caches).
    :param owner: the sandbox user who makes (and owns) the copy, so that the agent cannot
        change it; where the sandbox cannot run commands as that user, its default user does.
    """
    excluded = list(DEFAULT_EXCLUDE if exclude is None else exclude)

    async def solve(state: TaskState, generate: Generate) -> TaskState:
        sample = sample_scoring(state)
        try:
            repo = await sample.repository(state, workspace_path)
            kit = await sample.kit()
            stamp = datetime.now(UTC).strftime("%Y-%m-%dT%H-%M-%S.%fZ")
            dest = posixpath.join(snapshots_path, stamp)
            args = ["copy", f"--source={repo}", f"--dest={dest}"]
            args += [f"--exclude={name}" for name in excluded]
            try:
                await kit.helper(*args, user=owner)
                made_by = owner
            except SandboxUserUnsupportedError:
                await kit.helper(*args)
                made_by = None
        except ScoringError as error:
            return _failed(state, store_key, "snapshot_repo", error)
        snapshots = list(state.store.get(store_key) or [])
        snapshots.append(
            {"timestamp": stamp, "workspace_path": repo, "snapshot_path": dest, "owner": made_by}
        )
        state.store.set(store_key, snapshots)
        return state

    return solve


@solver
def run_tests(
    workspace_path: str | None = None,
    store_key: str = RUN_TESTS_KEY,
    tests_from: str | Path | None = None,
    black_box: bool = False,
    verifier_sandbox: str | None = None,
    env: Mapping[str, str] | None = None,
    retries: int = 0,
) -> Solver:
    """Run the repository's tests in the sandbox now; the test scorers score this run.

    :param workspace_path: the repository (default: the sample's ``repo_path`` metadata, else
        ``/workspace``).
    :param store_key: where the counts, the failing tests and how the run ended are stored.
    :param tests_from: the evaluator's tests put in first, as the test scorers' ``tests_from``
        (default: the sample's ``tests_from`` metadata).
    :param black_box: the test process may load no file of the repository but those tests,
        as the test scorers' ``black_box``.
    :param verifier_sandbox: run them in this sandbox of the sample on a copy of the
        repository, as the test scorers' ``verifier_sandbox``.
    :param env: variables the tests get over the pinned ones, as the test scorers' ``env``
        (default: the sample's ``env`` metadata).
    :param retries: rerun the tests that did not pass now, up to this many times, as the
        test scorers' ``retries`` (the stored counts are the first run's).
    """
    check_tests_from(tests_from)
    variables = None if env is None else check_env(env, "env")
    retries = check_reruns(retries)

    async def solve(state: TaskState, generate: Generate) -> TaskState:
        sample = sample_scoring(state)
        try:
            repo = await sample.repository(state, workspace_path)
            chosen = None if tests_from is None else str(tests_from)
            test_run = await sample.test_run(
                state, repo, chosen, black_box, verifier_sandbox, variables, retries
            )
        except ScoringError as error:
            return _failed(state, store_key, "run_tests", error)
        probe = test_run.probe()
        kit = await sample.kit(test_run.sandbox)
        failing = [*probe.tally.ids_with("failed"), *probe.tally.ids_with("error")]
        state.store.set(
            store_key,
            {
                "status": "success" if test_run.complete(probe) else "incomplete",
                "workspace_path": repo,
                "counts": probe.tally.counts(),
                "failed_tests": cap_list(failing),
                "exit_code": test_run.run.exit_code,
                "timed_out": test_run.run.timed_out,
                "duration": test_run.run.duration,
                "python": kit.python_version,
                "pytest": kit.pytest_version,
                "stopped": test_run.stopped,
                **({"tests_from": test_run.tests.installed.to_json()} if test_run.tests else {}),
            },
        )
        return state

    return solve


@solver
def diff_databases(
    before_source: str | Sequence[str] = DEFAULT_BEFORE,
    after_source: str | Sequence[str] | None = None,
    db_patterns: Sequence[str] | None = None,
    include_schema: bool = True,
    include_data: bool = True,
    max_rows: int = DEFAULT_MAX_ROWS,
    store_key: str = DB_DIFF_KEY,
) -> Solver:
    """Diff the databases of two locations now; ``db_change_scorer`` scores this diff.

    :param before_source: where "before" is: the first location that exists of
        ``snapshot:[first]``, ``metadata:reference_repo_dir``, ``metadata:repo_dir``
        (docs/inspect.md lists the kinds).
    :param after_source: where "after" is (default: ``sandbox:`` and the repository).
    :param db_patterns: database globs (default ``*.db``, ``*.sqlite``, ``*.sqlite3``).
    :param include_schema: keep the schema plane in the stored diff.
    :param include_data: keep the data plane in the stored diff.
    :param max_rows: example rows per list in the stored diff (selectors see every row).
    :param store_key: where the diff is stored.
    :raises ConfigError: for a location of an unknown kind.
    """
    befores = check_locations(before_source, "before_source")
    afters = None if after_source is None else check_locations(after_source, "after_source")
    patterns = list(db_patterns or DEFAULT_DB_PATTERNS)

    async def solve(state: TaskState, generate: Generate) -> TaskState:
        sample = sample_scoring(state)
        try:
            repo = await sample.repository(state, None)
            before = first_location(befores, state)
            after = first_location(afters or [f"sandbox:{repo}"], state)
            old = await location_snapshot(sample, before, patterns)
            new = await location_snapshot(sample, after, patterns)
        except ScoringError as error:
            return _failed(state, store_key, "diff_databases", error)
        databases = SessionDatabases.from_snapshots(settings_for(repo, patterns), old, new)
        diff = await anyio.to_thread.run_sync(databases.diff)
        sample.resources[SOLVER_DIFF] = databases
        kept = cap_diff(diff, max_rows, databases.settings.value_cap)
        state.store.set(store_key, stored_diff(kept, include_schema, include_data))
        return state

    return solve
