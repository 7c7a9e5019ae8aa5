"""What a report keeps so that ``pytest-scoring rescore`` can decide again (issue 28).

The report folder's ``evidence/`` holds, per ``--evidence`` level:

* ``outcomes.json`` (``diffs`` and ``all``): every test's final outcome with its phases, the
  collected ids, the integrity signals, and whether the session completed;
* ``session_diff.json`` (``diffs`` and ``all``): the session's database diff with every
  changed row (the report's ``diff.json`` keeps examples only);
* ``reference/<n>.json`` (``diffs`` and ``all``): per reference rerun of ``db_diff_change``,
  the reference's, the session's and the baseline's diffs with every row (from the diff store
  the scorer built) and the rerun's metadata;
* ``databases/<path>`` (``all``): the session's final databases, from which a verdict names
  the row it found;
* ``manifest.json``: each kept file's SHA-256 and size, what was left out and why, and the
  route that wrote the report. The manifest's own SHA-256 goes into ``scores.json``'s
  provenance (``evidence.manifest``), which under ``pytest-scoring run`` the repository's
  processes never had access to.

Each file is bounded by the report's per-file cap (:data:`REPORT_FILE_CAP`): a file over it
is left out and the manifest says so; a scorer that needs it then scores ``"N"``.
"""

from __future__ import annotations

import hashlib
import json
import sqlite3
from collections.abc import Iterable
from collections.abc import Iterator
from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING
from typing import Any
from typing import Final

from pytest_scoring.core.budget import TimeBudget
from pytest_scoring.core.encoding import encode_json
from pytest_scoring.core.score import REPORT_FILE_CAP
from pytest_scoring.db.diff_types import DiffJSON
from pytest_scoring.db.session import SessionDatabases
from pytest_scoring.errors import DatabaseError
from pytest_scoring.report.result import EVIDENCE_DIR
from pytest_scoring.scorers.base import ScoringContext

if TYPE_CHECKING:
    from pytest_scoring.reference.rerun import Diffs

MANIFEST: Final = "manifest.json"
OUTCOMES: Final = "outcomes.json"
SESSION_DIFF: Final = "session_diff.json"
#: Under ``--evidence all``: the session's final databases, by their path in the diff.
DATABASES_DIR: Final = "databases"
#: Under ``diffs`` and ``all``: one file per reference rerun (``db_diff_change``).
REFERENCE_DIR: Final = "reference"
#: What a baseline run's evidence keeps of it (all but its final databases).
BASELINE_FIELDS: Final = (
    "key",
    "counts",
    "collected",
    "duration",
    "exit_code",
    "timed_out",
    "from_cache",
    "cache",
    "failure",
    "output",
)
#: The key of the manifest's digest in ``scores.json``'s ``provenance``.
PROVENANCE_KEY: Final = "evidence"


def collect_evidence(context: ScoringContext, level: str, route: str) -> dict[str, bytes]:
    """The evidence files of a scored session, by path under ``evidence/`` (empty for
    ``none``); call before the session's resources (snapshots) are closed.

    :param route: the provenance route (``plugin``, ``run``): re-scoring trusts test outcomes
        only from a route that kept the repository's processes away from the report.
    """
    if level == "none":
        return {}
    kept: dict[str, bytes] = {}
    omitted: dict[str, str] = {}
    _keep(kept, omitted, OUTCOMES, encode_json(outcomes_json(context)).encode())
    databases = context.inputs.databases
    if isinstance(databases, SessionDatabases) and databases.started:
        try:
            diff = complete_diff(databases)
        except NotKept as reason:
            omitted[SESSION_DIFF] = str(reason)
        else:
            _keep_json(kept, omitted, SESSION_DIFF, diff)
    for index, rerun in enumerate(_reruns(context)):
        _keep_json(kept, omitted, f"{REFERENCE_DIR}/{index}.json", rerun)
    if level == "all":
        for relpath, path in sorted(_final_databases(context).items()):
            _keep(kept, omitted, f"{DATABASES_DIR}/{relpath}", _read(path))
    manifest = {
        "format": 1,
        "level": level,
        "route": route,
        "files": {
            name: {"sha256": hashlib.sha256(data).hexdigest(), "bytes": len(data)}
            for name, data in kept.items()
        },
        "omitted": omitted,
    }
    kept[MANIFEST] = encode_json(manifest).encode()
    return kept


def _final_databases(context: ScoringContext) -> dict[str, Path]:
    """The session's final database files, by path in the diff: from ``db_change``'s finish
    state, or ``db_diff_change``'s reading of it."""
    from pytest_scoring.reference.rerun import ReferenceRerun

    finals: dict[str, Path] = {}
    for resource in context.inputs.held():
        if isinstance(resource, SessionDatabases):
            finals.update(resource.final_files())
        elif isinstance(resource, ReferenceRerun) and resource.computed is not None:
            finals.update(resource.computed.solution_files)
    return finals


def _reruns(context: ScoringContext) -> Iterator[dict[str, Any]]:
    """What ``db_diff_change`` decided from, per reference rerun that gave its diffs."""
    if not context.inputs.references:
        return  # no db_diff_change: a plain session never loads the rerun's modules
    # Loaded only here: the rerun's module is loaded already when a session has one.
    from pytest_scoring.reference.rerun import ReferenceRerun

    for resource in context.inputs.references.values():
        if isinstance(resource, ReferenceRerun) and resource.computed is not None:
            yield kept_rerun(resource.patterns, resource.computed)


def kept_rerun(patterns: list[str], diffs: Diffs) -> dict[str, Any]:
    """What ``db_diff_change`` decided from in one reference rerun: the reference's, the
    session's and the baseline's diffs, each with every row from the diff store (streams:
    read them within the cap with :func:`within_cap`), and the rerun's metadata."""
    from pytest_scoring.db.diff_store import BASELINE
    from pytest_scoring.db.diff_store import REFERENCE
    from pytest_scoring.db.diff_store import SOLUTION

    split, baseline = diffs.split, diffs.baseline
    return {
        "test_patterns": patterns,
        "metadata": diffs.metadata,
        "missing_from_rerun": diffs.missing_from_rerun,
        "baseline": baseline
        if baseline is None or isinstance(baseline, str)
        else {name: getattr(baseline, name) for name in BASELINE_FIELDS},
        "reference": split.store.whole(REFERENCE, split.reference),
        "solution": split.store.whole(SOLUTION, split.solution),
        "baseline_diff": None
        if split.baseline is None
        else split.store.whole(BASELINE, split.baseline),
    }


def complete_diff(databases: SessionDatabases) -> DiffJSON:
    """The session's diff with every changed row (streamed: read it with :func:`within_cap`).

    :raises NotKept: when the diff cannot be read.
    """
    try:
        return databases.complete(databases.diff(), TimeBudget(None))
    except (DatabaseError, sqlite3.Error, OSError) as error:
        raise NotKept(f"the diff could not be read: {error}") from None


def manifest_digest(evidence: Mapping[str, bytes]) -> str | None:
    """SHA-256 of the manifest (for the provenance), None when nothing was kept."""
    data = evidence.get(MANIFEST)
    return None if data is None else hashlib.sha256(data).hexdigest()


def outcomes_json(context: ScoringContext) -> dict[str, Any]:
    """The session's outcomes as re-scoring reads them: final outcomes before any expected set
    judged them, each test's phases, the collected ids and the signals."""
    tally = context.tally
    tests = []
    for record in tally.records():
        state = tally.tests[record["nodeid"]]
        entry: dict[str, Any] = {
            key: value for key, value in record.items() if key not in ("expected",)
        }
        entry["phases"] = {
            "setup": state.setup,
            "call": state.call,
            "teardown_failed": state.teardown_failed,
            "direct": state.direct,
        }
        tests.append(entry)
    not_started = context.not_started
    return {
        "tests": tests,
        "collected": sorted(tally.collected),
        "collided": dict(tally.collided),
        # Every attempt of each rerun test and the rule that judged them (issue 30's --retries).
        "attempts": {nodeid: list(tries) for nodeid, tries in tally.attempts.items()},
        "flaky_rule": tally.flaky_rule,
        "integrity": list(context.integrity),
        "evaluator_side": {
            "paths": sorted(context.evaluator_side.paths),
            "caused": list(context.evaluator_side.caused),
        },
        "complete": context.complete,
        "not_started": None
        if not_started is None
        else {"reason": not_started.reason, "unscored": not_started.unscored},
    }


def _keep(kept: dict[str, bytes], omitted: dict[str, str], name: str, data: bytes) -> None:
    if len(data) > REPORT_FILE_CAP:
        omitted[name] = over_cap(len(data))
    else:
        kept[name] = data


def over_cap(size: int) -> str:
    """Why evidence of ``size`` bytes was left out."""
    return f"{size} bytes, over the per-file cap of {REPORT_FILE_CAP}"


def _read(path: Path) -> bytes:
    try:
        return path.read_bytes()
    except OSError:
        return b""


class NotKept(Exception):
    """Evidence that was left out; the message says why (over the cap, unreadable)."""


def _keep_json(kept: dict[str, bytes], omitted: dict[str, str], name: str, content: Any) -> None:
    try:
        kept[name] = within_cap(content)[1]
    except NotKept as reason:
        omitted[name] = str(reason)


def within_cap(content: Any) -> tuple[Any, bytes]:
    """``content`` (a diff whose row lists may be streams) read whole, and as JSON, within
    the per-file cap: a diff of millions of rows is never held whole (issue 12).

    :raises NotKept: when it passes the cap.
    """
    left = [REPORT_FILE_CAP]
    try:
        whole = _materialized(content, left)
    except _OverCap:
        raise NotKept(f"over the per-file cap of {REPORT_FILE_CAP} bytes") from None
    data = encode_json(whole).encode()
    if len(data) > REPORT_FILE_CAP:
        raise NotKept(over_cap(len(data)))
    return whole, data


class _OverCap(Exception):
    """A file's content passed the per-file cap while it was read."""


def _materialized(value: Any, left: list[int]) -> Any:
    """``value`` with its streamed row lists (:class:`~pytest_scoring.db.diff.RowStream`,
    :class:`~pytest_scoring.db.diff_store.SideRows`) read into lists, ``left[0]`` bytes at most.

    :raises _OverCap: when the rows read pass the budget (counted compactly: the file written,
        indented, is larger still).
    """
    if isinstance(value, Mapping):
        return {key: _materialized(item, left) for key, item in value.items()}
    if isinstance(value, str | bytes | int | float | bool) or value is None:
        return value
    if isinstance(value, Iterable):
        items = []
        for item in value:
            left[0] -= len(json.dumps(item, default=str))
            if left[0] < 0:
                raise _OverCap
            items.append(item)
        return items
    return value


def read_manifest(folder: Path) -> tuple[dict[str, Any], str] | None:
    """A report folder's manifest and its SHA-256, or None when it kept no evidence."""
    try:
        data = (folder / EVIDENCE_DIR / MANIFEST).read_bytes()
        manifest = json.loads(data)
    except (OSError, ValueError):
        return None
    return (manifest, hashlib.sha256(data).hexdigest()) if isinstance(manifest, dict) else None
