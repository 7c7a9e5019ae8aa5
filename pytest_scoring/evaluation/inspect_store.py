"""The evidence an Inspect sample keeps in its store, so that it can be scored again (issue 28).

The Inspect scorers keep what they decided from under the store key :data:`STORE_KEY`, one
entry per input, each bounded by the report's per-file cap as a report's ``evidence/`` files
are (:mod:`pytest_scoring.evaluation.evidence`):

* ``outcomes[<run>]``: the outcomes of one test run (``outcomes.json``'s content, before any
  expected set judged them), by the run's key (:func:`run_key`);
* ``session_diff[<source>]``: ``db_change``'s diff with every changed row, by where "before"
  came from (``diff_databases``, ``db_change``, ``db_change:interim``);
* ``reference[<side>]``: ``db_diff_change``'s three diffs and the rerun's metadata, by its
  test patterns and ``count_test_changes``;
* ``databases[<relpath>]``: with ``evidence="all"``, the session's final databases (base64);
* ``omitted``: what was left out and why; ``bytes``: each kept entry's size as JSON.

``route`` is ``inspect``: the store is written on the evaluator's machine, from the probe's
authenticated stream, never by the sandbox. :func:`log_evidence` turns each sample of an eval
log into a report's evidence, for ``pytest-scoring rescore LOG.eval``.
"""

from __future__ import annotations

import base64
import json
import re
from collections.abc import Callable
from collections.abc import Mapping
from pathlib import Path
from pathlib import PurePosixPath
from typing import Any
from typing import Final

from pytest_scoring.core.encoding import encode_json
from pytest_scoring.errors import OptionError
from pytest_scoring.evaluation.evidence import DATABASES_DIR
from pytest_scoring.evaluation.evidence import OUTCOMES
from pytest_scoring.evaluation.evidence import REFERENCE_DIR
from pytest_scoring.evaluation.evidence import SESSION_DIFF
from pytest_scoring.evaluation.evidence import NotKept
from pytest_scoring.evaluation.evidence import within_cap
from pytest_scoring.evaluation.rescore import Evidence
from pytest_scoring.report.inputs import transcript_id

#: The sample's store key of the evidence.
STORE_KEY: Final = "pytest_scoring_evidence"
#: The route that wrote it (the report evidence's ``run`` or ``plugin``).
ROUTE: Final = "inspect"
OUTCOMES_KIND: Final = "outcomes"
SESSION_DIFF_KIND: Final = "session_diff"
REFERENCE_KIND: Final = "reference"
DATABASES_KIND: Final = "databases"
_KINDS: Final = (OUTCOMES_KIND, SESSION_DIFF_KIND, REFERENCE_KIND, DATABASES_KIND)
#: ``evidence=``'s levels, as ``--evidence``'s.
LEVELS: Final = ("none", "diffs", "all")
#: Where "before" came from, in the order ``db_change_scorer`` takes them.
SOLVER_SOURCE: Final = "diff_databases"
SCORER_SOURCE: Final = "db_change"
INTERIM_SOURCE: Final = "db_change:interim"
#: What a sample of a log holds that re-scoring never reads.
_TRANSCRIPT: Final = frozenset({"events", "messages", "attachments"})
#: A sample id that can name its folder in the report as it is.
_SAFE_ID: Final = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]{0,99}")


def check_level(level: object) -> str:
    """``evidence=``: ``none``, ``diffs`` or ``all``.

    :raises OptionError: naming what it is instead.
    """
    if level not in LEVELS:
        raise OptionError(f"evidence: {level!r} is not one of none, diffs, all")
    return str(level)


def run_key(
    repo: str,
    tests_from: object,
    black_box: bool,
    verifier: str | None,
    env: object,
    retries: int,
) -> str:
    """The key of a test run's outcomes: what makes one run of a sample differ from another
    (the scorers' parameters, else the sample's metadata), but not how it is judged."""
    variables = sorted((str(k), str(v)) for k, v in env.items()) if isinstance(env, Mapping) else []
    parts = [repo, str(tests_from or ""), black_box, verifier or "", variables, retries]
    return json.dumps(parts, separators=(",", ":"))


def kept_entry(stored: object) -> dict[str, Any]:
    """The store's evidence (empty when none was kept), each kind a mapping; an entry of the
    wrong shape (a log edited by hand) is moved to ``omitted``, so that nothing reads it."""
    entry = dict(stored) if isinstance(stored, Mapping) else {}
    for kind in (*_KINDS, "omitted", "bytes"):
        found = entry.get(kind)
        entry[kind] = {str(k): v for k, v in found.items()} if isinstance(found, Mapping) else {}
    for kind in _KINDS:
        for key, value in list(entry[kind].items()):
            if not _WELL_FORMED[kind](key, value):
                del entry[kind][key]
                entry["omitted"][f"{kind}/{key}"] = "not of the shape this package keeps"
    entry.setdefault("format", 1)
    entry.setdefault("route", ROUTE)
    return entry


def _outcomes_shape(key: str, value: Any) -> bool:
    if not isinstance(value, Mapping) or not isinstance(value.get("tests"), list):
        return False
    tests_ok = all(
        isinstance(test, Mapping)
        and isinstance(test.get("nodeid"), str)
        and isinstance(test.get("outcome"), str)
        for test in value["tests"]
    )
    lists = all(isinstance(value.get(name, []), list) for name in ("collected", "integrity"))
    signals = lists and all(
        isinstance(signal, Mapping) and isinstance(signal.get("kind"), str)
        for signal in value.get("integrity", [])
    )
    maps = all(isinstance(value.get(name) or {}, Mapping) for name in ("collided", "attempts"))
    not_started = value.get("not_started")
    started_ok = not not_started or (
        isinstance(not_started, Mapping) and set(not_started) == {"reason", "unscored"}
    )
    return tests_ok and signals and maps and started_ok


def _diff_shape(key: str, value: Any) -> bool:
    return (
        isinstance(value, Mapping)
        and isinstance(value.get("root"), str)
        and isinstance(value.get("db_patterns"), list)
        and isinstance(value.get("diff"), Mapping)
        and isinstance(value["diff"].get("comparisons"), Mapping)
    )


def _reference_shape(key: str, value: Any) -> bool:
    return (
        isinstance(value, Mapping)
        and isinstance(value.get("test_patterns"), list)
        and all(isinstance(pattern, str) for pattern in value["test_patterns"])
        and all(isinstance(value.get(name), Mapping) for name in ("reference", "solution"))
        and isinstance(value.get("metadata"), Mapping)
        and isinstance(value.get("missing_from_rerun"), list)
    )


def _database_shape(key: str, value: Any) -> bool:
    """Base64 text, under a path that stays inside the folder it is written to."""
    path = PurePosixPath(key)
    safe = bool(key) and not path.is_absolute() and ".." not in path.parts and "\\" not in key
    return safe and isinstance(value, str)


_WELL_FORMED: Final[dict[str, Callable[[str, Any], bool]]] = {
    OUTCOMES_KIND: _outcomes_shape,
    SESSION_DIFF_KIND: _diff_shape,
    REFERENCE_KIND: _reference_shape,
    DATABASES_KIND: _database_shape,
}


def with_kept(stored: object, kind: str, key: str, content: Any) -> dict[str, Any]:
    """The store's evidence with ``content`` kept under ``kind[key]`` (read within the cap),
    or its omission recorded; ``content`` may be a :class:`NotKept` saying why there is none."""
    entry = kept_entry(stored)
    name = f"{kind}/{key}"
    try:
        if isinstance(content, NotKept):
            raise content
        whole, data = within_cap(content)
    except NotKept as reason:
        entry[kind].pop(key, None)
        entry["bytes"].pop(name, None)
        entry["omitted"][name] = str(reason)
    else:
        entry[kind][key] = whole
        entry["bytes"][name] = len(data)
        entry["omitted"].pop(name, None)
    return entry


def why_not(entry: Mapping[str, Any], kind: str, key: str) -> str:
    """Why ``kind[key]`` is not in the store's evidence."""
    if not entry.get("bytes") and not entry.get("omitted"):
        return "the sample's store keeps no pytest-scoring evidence"
    return str(entry["omitted"].get(f"{kind}/{key}", "not kept"))


def database_files(entry: Mapping[str, Any], folder: Path) -> dict[str, Path]:
    """The final databases kept (``evidence="all"``), written under ``folder``, by path."""
    finals: dict[str, Path] = {}
    for relpath, encoded in entry.get(DATABASES_KIND, {}).items():
        try:
            data = base64.b64decode(encoded, validate=True)
        except ValueError:  # binascii.Error: not base64 (a log edited by hand)
            continue
        path = folder / relpath
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(data)
        finals[relpath] = path
    return finals


def log_evidence(log_path: Path, folder: Path) -> list[Evidence]:
    """Each sample of the eval log ``log_path`` as a report's evidence, its files written under
    ``folder``: the default test run's outcomes (else the first kept), the diff of
    ``diff_databases`` (else of ``db_change``), every reference side.

    :raises OptionError: when the file is no eval log.
    """
    # Loaded only here: re-scoring a report never needs Inspect AI.
    from inspect_ai.log import read_eval_log
    from inspect_ai.log import read_eval_log_samples

    try:
        log = read_eval_log(str(log_path), header_only=True)
        # One sample at a time, without its transcript: a log can be gigabytes.
        samples = read_eval_log_samples(
            str(log_path), all_samples_required=False, exclude_fields=set(_TRANSCRIPT)
        )
    except Exception as error:  # Inspect raises many kinds for a file that is no log
        raise OptionError(f"{log_path}: not an Inspect eval log ({error})") from None
    found = []
    for index, sample in enumerate(samples):
        epochs = f"-epoch{sample.epoch}" if log.eval.config.epochs not in (None, 1) else ""
        transcript = f"{sample.id}{epochs}"
        if not _SAFE_ID.fullmatch(transcript):  # a sample folder's name
            transcript = transcript_id(log_path, transcript)
        entry = kept_entry(sample.store.get(STORE_KEY))
        where = folder / f"{index:05d}"
        files, problems = _files(entry, where)
        scores = {
            "scan_id": log.eval.eval_id,
            "id": transcript,
            "created": log.eval.created,
            "repository": str(sample.metadata.get("repo_path", "")),
            "complete": sample.error is None,
            "provenance": {
                "route": ROUTE,
                "log": str(log_path),
                "task": log.eval.task,
                "sample": {"id": sample.id, "epoch": sample.epoch},
                "options": {"strict": _strict(entry)},
            },
        }
        found.append(Evidence(where, scores, files, problems, ROUTE, origin=log_path))
    return found


def _files(entry: dict[str, Any], folder: Path) -> tuple[dict[str, Path], dict[str, str]]:
    """The store's evidence as a report's ``evidence/`` files under ``folder``, and why those
    that are not there are not."""
    files: dict[str, Path] = {}
    problems: dict[str, str] = {}
    folder.mkdir(parents=True)

    def write(name: str, content: Any) -> None:
        path = folder / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(encode_json(content), encoding="utf-8")
        files[name] = path

    runs = entry[OUTCOMES_KIND]
    default = next((key for key in runs if _is_default(key)), next(iter(runs), None))
    if default is None:
        problems[OUTCOMES] = _why_none(entry, OUTCOMES_KIND)
    else:
        write(OUTCOMES, runs[default])
    diffs = entry[SESSION_DIFF_KIND]
    source = next((s for s in (SOLVER_SOURCE, SCORER_SOURCE) if s in diffs), None)
    if source is None:
        problems[SESSION_DIFF] = _why_none(entry, SESSION_DIFF_KIND)
    else:
        write(SESSION_DIFF, diffs[source]["diff"])
    sides = sorted(entry[REFERENCE_KIND].items(), key=lambda item: not item[0].endswith("=True"))
    patterns_seen: set[str] = set()
    for _, side in sides:  # one per test patterns: the one that counted test changes
        patterns = "|".join(side["test_patterns"])
        if patterns not in patterns_seen:
            patterns_seen.add(patterns)
            write(f"{REFERENCE_DIR}/{len(patterns_seen) - 1}.json", side)
    for name, why in entry["omitted"].items():
        if name.startswith(f"{REFERENCE_KIND}/"):
            problems[name] = why
    for relpath, path in database_files(entry, folder / "final").items():
        files[f"{DATABASES_DIR}/{relpath}"] = path
    return files, problems


def _why_none(entry: Mapping[str, Any], kind: str) -> str:
    """Why the store keeps no entry of ``kind``: the first that was left out, or none kept."""
    lost = [why for name, why in entry["omitted"].items() if name.startswith(f"{kind}/")]
    return str(lost[0]) if lost else why_not(entry, kind, "")


def _is_default(key: str) -> bool:
    """A run with no ``tests_from``, ``black_box``, verifier, variables nor reruns."""
    try:
        parts = json.loads(key)
    except ValueError:
        return False
    return isinstance(parts, list) and parts[1:] == ["", False, "", [], 0]


def _strict(entry: Mapping[str, Any]) -> list[str]:
    """The strict kinds of the scorer that kept the outcomes (the first one)."""
    for outcomes in entry[OUTCOMES_KIND].values():
        kinds = outcomes.get("strict")
        return [str(kind) for kind in kinds] if isinstance(kinds, list) else []
    return []
