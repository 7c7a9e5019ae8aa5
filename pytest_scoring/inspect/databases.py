"""Databases of an Inspect sample: where "before" comes from, snapshots, the shared diffs.

A location is written as inspect_toolkit writes it (docs/inspect.md):

* ``snapshot:[first]`` / ``snapshot:[last]`` / ``snapshot:[N]`` (``snapshot:first`` too): a
  copy of the repository that ``snapshot_repo`` made in the sandbox before the agent ran,
  listed in the store under ``repo_snapshots``;
* ``metadata:KEY``: a folder on the evaluator's machine named by the sample's metadata
  (``reference_repo_dir``, ``repo_dir``);
* ``sandbox:PATH``: a folder of the sandbox; ``local:PATH``: a folder on the evaluator's machine.

Databases in the sandbox are backed up there by the helper and read back; those on the
evaluator's machine are snapshotted in place (:mod:`pytest_scoring.db.snapshot`). The diff,
the selectors and the diff-of-diffs then run on the evaluator's machine, as everywhere.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Final
from typing import Literal

import anyio
from inspect_ai.solver import TaskState

from pytest_scoring.core.settings import DEFAULT_DB_PATTERNS
from pytest_scoring.core.settings import ScoringSettings
from pytest_scoring.db.diff_types import DatabaseEntryJSON
from pytest_scoring.db.diff_types import DiffJSON
from pytest_scoring.db.diff_types import PlanesJSON
from pytest_scoring.db.diff_types import empty_planes
from pytest_scoring.db.session import SessionDatabases
from pytest_scoring.db.session import snapshot_now
from pytest_scoring.db.snapshot import Snapshot
from pytest_scoring.db.sqlite_engine import SqliteEngine
from pytest_scoring.errors import ConfigError
from pytest_scoring.errors import ScoringError
from pytest_scoring.inspect.sample import SampleScoring

#: Store keys shared with inspect_toolkit.
SNAPSHOTS_KEY: Final = "repo_snapshots"
DB_DIFF_KEY: Final = "db_diff"
#: Where "before" comes from when nothing else is said: the first snapshot, else the
#: reference checkout, else the sample's own repository on the evaluator's machine.
DEFAULT_BEFORE: Final = ("snapshot:[first]", "metadata:reference_repo_dir", "metadata:repo_dir")
#: Key of the diff ``diff_databases`` made in :attr:`SampleScoring.resources`.
SOLVER_DIFF: Final = "diff_databases"
#: Key of the diff ``db_change_scorer`` made itself (shared by every such scorer).
SCORER_DIFF: Final = "db_change"

_SNAPSHOT_INDEX: Final = re.compile(r"\[?(first|last|-?\d+)\]?")
_KINDS: Final = ("snapshot", "metadata", "sandbox", "local")


@dataclass(frozen=True)
class Location:
    """A folder whose databases are read: in the sandbox, or on the evaluator's machine."""

    where: Literal["sandbox", "local"]
    path: str
    #: As the caller wrote it (the diff's ``before_source``/``after_source``).
    source: str


def check_locations(sources: str | Sequence[str], what: str) -> list[str]:
    """Locations as a list, each of a known kind.

    :raises ConfigError: naming ``what`` and the location that is not one.
    """
    listed = [sources] if isinstance(sources, str) else list(sources)
    for text in listed:
        kind, colon, rest = str(text).partition(":")
        if not colon or kind not in _KINDS or not rest:
            raise ConfigError(
                f"{what}: {text!r} is not a location (snapshot:[first], metadata:KEY, "
                "sandbox:PATH or local:PATH)"
            )
        if kind == "snapshot" and not _SNAPSHOT_INDEX.fullmatch(rest):
            raise ConfigError(f"{what}: {text!r}: expected snapshot:[first], [last] or [N]")
    return listed


def _snapshot_path(state: TaskState, index: str) -> str | None:
    snapshots = state.store.get(SNAPSHOTS_KEY) or []
    if not isinstance(snapshots, list) or not snapshots:
        return None
    position = {"first": 0, "last": -1}.get(index)
    try:
        entry = snapshots[int(index) if position is None else position]
    except (IndexError, ValueError):
        return None
    path = entry.get("snapshot_path") if isinstance(entry, dict) else entry
    return path if isinstance(path, str) else None


def locate(text: str, state: TaskState) -> Location | str:
    """Where ``text`` leads for this sample, or why it leads nowhere."""
    kind, _, rest = text.partition(":")
    if kind == "snapshot":
        match = _SNAPSHOT_INDEX.fullmatch(rest)
        path = _snapshot_path(state, match.group(1)) if match else None
        if path is None:
            return f"no {rest} snapshot in the store's {SNAPSHOTS_KEY!r} (run snapshot_repo first)"
        return Location("sandbox", path, text)
    if kind == "metadata":
        value = state.metadata.get(rest)
        if not isinstance(value, str) or not value:
            return f"the sample has no metadata {rest!r}"
        if not Path(value).is_dir():
            return f"the sample's metadata {rest!r} is {value!r}, not a folder here"
        return Location("local", value, text)
    if kind == "local" and not Path(rest).is_dir():
        return f"{text!r} is not a folder here"
    return Location("sandbox" if kind == "sandbox" else "local", rest, text)


def first_location(sources: Sequence[str], state: TaskState) -> Location:
    """The first of ``sources`` that leads somewhere.

    :raises ScoringError: saying why none did (the missing store key or metadata).
    """
    reasons = []
    for text in sources:
        found = locate(text, state)
        if isinstance(found, Location):
            return found
        reasons.append(found)
    raise ScoringError("; ".join(reasons))


async def location_snapshot(
    sample: SampleScoring, location: Location, patterns: list[str]
) -> Snapshot:
    """The databases at ``location`` now: backed up in the sandbox and read back, or
    snapshotted on the evaluator's machine."""
    if location.where == "sandbox":
        found = await (await sample.kit()).resolve(location.path)
        if not found["is_dir"]:
            raise ScoringError(f"{location.source}: not a folder in the sandbox")
        return await sample.sandbox_snapshot(str(found["path"]), patterns, location.source)
    root, dest = Path(location.path), sample.local("snapshot")

    def snapshot() -> Snapshot:
        return snapshot_now(SqliteEngine(root, patterns), dest, location.source)

    return await anyio.to_thread.run_sync(snapshot)


def settings_for(repo: str, patterns: Sequence[str] | None = None) -> ScoringSettings:
    """The settings of a sample's scoring: the repository's sandbox path, the patterns."""
    return ScoringSettings(root=Path(repo), db_patterns=list(patterns or DEFAULT_DB_PATTERNS))


async def session_databases(
    sample: SampleScoring,
    state: TaskState,
    repo: str,
    before_sources: Sequence[str],
    patterns: list[str],
) -> SessionDatabases:
    """``db_change``'s databases: "before" from the first of ``before_sources``, "after"
    the repository once its tests ran (the sample's one run)."""
    before = first_location(before_sources, state)
    test_run = await sample.test_run(state, repo)
    after = await sample.snapshot(test_run, patterns, f"sandbox:{repo} after its tests")
    old = await location_snapshot(sample, before, patterns)
    return SessionDatabases.from_snapshots(settings_for(repo, patterns), old, after)


def stored_diff(diff: DiffJSON, include_schema: bool, include_data: bool) -> DiffJSON:
    """``diff`` without the planes left out (what ``diff_databases`` stores)."""
    if include_schema and include_data:
        return diff
    comparisons: dict[str, DatabaseEntryJSON] = {}
    for key, entry in diff["comparisons"].items():
        planes, empty = entry["comparisons"], empty_planes()
        kept: PlanesJSON = {
            "data": planes["data"] if include_data else empty["data"],
            "schema": planes["schema"] if include_schema else empty["schema"],
        }
        comparisons[key] = {**entry, "comparisons": kept}
    return {**diff, "comparisons": comparisons}
