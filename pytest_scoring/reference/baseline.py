"""The baseline run: the reference's own tests on the reference's code (docs/reference.md).

``db_diff_change`` diffs three runs from the same initial reference state: this repository's
session, the reference rerun (the reference's code with this repository's test files), and
this baseline (the reference's code with the reference's own tests). What the session changes
that the baseline does not, while the rerun does too, is a change the repository's test files
make: its work as much as its code's (issue 11).

The baseline depends only on the reference and the evaluator's options, so it runs once per
reference and is kept in the evaluator's cache (:mod:`~pytest_scoring.reference.baseline_cache`).
:func:`baseline_for` is the one way to get it; a batch of repositories with one reference calls
it once (calls for the same key in one process wait for each other rather than run twice).

The reference is the evaluator's, so the baseline runs as the evaluator's user in a folder
only the evaluator can read: neither the scored repository's session nor its rerun, which run
as the children's user under ``pytest-scoring run``, can reach its copy or its databases.
"""

from __future__ import annotations

import hashlib
import json
import shutil
import sys
import threading
import time
from collections.abc import Callable
from collections.abc import Mapping
from dataclasses import asdict
from dataclasses import dataclass
from dataclasses import field
from pathlib import Path
from typing import TYPE_CHECKING
from typing import Any
from typing import Final

from pytest_scoring.db.session import snapshot_now
from pytest_scoring.db.snapshot import Snapshot
from pytest_scoring.db.sqlite_engine import SqliteEngine
from pytest_scoring.fs.copy import copy_tree
from pytest_scoring.fs.guard import file_digest
from pytest_scoring.fs.paths import resolve_inside
from pytest_scoring.fs.walk import TreeWalk
from pytest_scoring.process.children import ChildRunner
from pytest_scoring.reference.baseline_cache import BaselineCache
from pytest_scoring.reference.child import ChildRun
from pytest_scoring.reference.child import run_child
from pytest_scoring.reference.tests_from import own_tests_arguments

if TYPE_CHECKING:
    from pytest_scoring.db.clones import RunClones

#: Bumped when what a baseline run records changes meaning (older entries are not reused).
CACHE_VERSION: Final = 1
#: How messages name the run.
WHAT: Final = "the baseline run"

_key_locks: dict[str, threading.Lock] = {}
_key_locks_guard = threading.Lock()


@dataclass(frozen=True)
class BaselineOptions:
    """The evaluator's options a baseline run depends on: with the reference, its cache key."""

    db_patterns: tuple[str, ...]
    #: Folders left out of the copy and of discovery, relative to the reference.
    excluded: tuple[str, ...] = ()
    #: ``-k``/``-m`` arguments: the baseline runs the tests the session selects.
    selection: tuple[str, ...] = ()
    deterministic: bool = False
    #: The interpreter of the pytest child (``run --python``).
    python: str = field(default_factory=lambda: sys.executable)
    #: ``--tests-from`` is the reference: its tests run as ``--tests-from`` runs PATH's (its
    #: pytest section through ``-c``, its test files listed), for the baseline is the rerun.
    tests_from: bool = False


@dataclass
class Baseline:
    """What the baseline run gave, fresh or from the cache."""

    key: str
    #: Its final databases (in the caller's folder); None when it gave no usable result.
    final: Snapshot | None
    #: Its test counts and collected test ids.
    counts: dict[str, int] | None
    collected: list[str]
    duration: float
    exit_code: int | None
    timed_out: bool
    from_cache: bool
    #: Where the run is cached, or why it is not.
    cache: str
    #: Why the run gave no usable result, or None when it did.
    failure: str | None = None
    #: The end of its output, when it failed.
    output: str = ""
    #: Each server engine and the state its clones were left in (read in place).
    servers: list[tuple[Any, Any]] = field(default_factory=list)
    #: The clones of the server databases it ran on, dropped with its run.
    clones: RunClones | None = None

    def describe(self) -> dict[str, Any]:
        """The ``baseline`` entry of a score's metadata."""
        return {
            "from_cache": self.from_cache,
            "cache": self.cache,
            "counts": self.counts,
            "duration": self.duration,
            "exit_code": self.exit_code,
            "timed_out": self.timed_out,
            "error": self.failure,
            "output": self.output,
        }


def baseline_key(reference: Path, options: BaselineOptions) -> str:
    """A hash of the reference's content as the copy takes it, the options and this tool.

    The content is every name the copy walks (the excluded folders left out), each file's
    SHA-256, and where each symlink leads inside the reference (one leading out is not copied).
    """
    from pytest_scoring.core.version import __version__

    reference = reference.resolve()
    digest = hashlib.sha256()
    versions = {"cache": CACHE_VERSION, "tool": __version__, "options": asdict(options)}
    digest.update(json.dumps(versions, sort_keys=True).encode())
    excluded = [reference / folder for folder in options.excluded]
    for entry in TreeWalk(reference, exclude=excluded):
        if entry.is_symlink:
            target = resolve_inside(entry.path, reference)
            content = "link:" + ("" if target is None else target.relative_to(reference).as_posix())
        else:
            content = "dir" if entry.is_dir else file_digest(entry.path) if entry.is_file else ""
        digest.update(f"{entry.relpath}\0{content}\n".encode("utf-8", "surrogateescape"))
    return digest.hexdigest()


def baseline_for(
    reference: Path,
    options: BaselineOptions,
    folder: Path,
    cache: BaselineCache,
    *,
    timeout: float,
    like: ChildRunner | None = None,
    cancel: threading.Event | None = None,
    clone: Callable[[], RunClones] | None = None,
) -> Baseline:
    """The baseline run of ``reference``: from the cache when it holds one, else run now and
    cached (only a run that gave a usable result is kept).

    :param folder: a private folder of the caller (the evaluator's alone) that receives the
        final databases; it must outlive every diff against them.
    :param timeout: seconds from this call until the run is killed.
    :param like: the evaluation's runner: the run gets a runner of its own from it
        (:meth:`~ChildRunner.for_another_run`: its environment and limits, a user of its own).
    :param cancel: set it to kill the run at once.
    :param clone: clones the session's server databases for the run, which then is never
        cached (its starting state is the session's, not the reference's).
    :returns: the baseline; when it gave no usable result, ``failure`` says why.
    """
    started = time.monotonic()
    key = baseline_key(reference, options)
    with _lock_for(key):
        if clone is not None:
            return _run_on_clones(reference, options, folder, timeout, like, cancel, clone)
        cached = cache.load(key, folder / "cached")
        if cached is not None:
            return _from_record(key, cached.final, cached.record, str(cached.entry))
        shutil.rmtree(folder / "cached", ignore_errors=True)
        cancel = cancel or threading.Event()
        if cancel.is_set():
            return _failed(key, f"{WHAT} was cancelled before it started", cache)
        remaining = max(timeout - (time.monotonic() - started), 0.001)
        try:
            run, final = _run(reference, options, folder, remaining, like, cancel)
        except OSError as error:
            return _failed(key, f"{WHAT} could not copy the reference: {error}", cache)
        baseline = from_run(key, run, final, timeout, cache.describe(key))
        if baseline.final is not None:
            baseline.cache = cache.store(key, baseline.final, _record(baseline))
        return baseline


def _run_on_clones(
    reference: Path,
    options: BaselineOptions,
    folder: Path,
    timeout: float,
    like: ChildRunner | None,
    cancel: threading.Event | None,
    clone: Callable[[], RunClones],
) -> Baseline:
    """The baseline on clones of the session's server databases, never cached."""
    key = baseline_key(reference, options)
    clones = clone()
    try:
        run, final = _run(reference, options, folder, timeout, like, cancel, clones.urls())
    except OSError as error:
        clones.drop()
        return _failed(key, f"{WHAT} could not copy the reference: {error}", None)
    baseline = from_run(key, run, final, timeout, NOT_CACHED)
    baseline.servers, baseline.clones = clones.finals(), clones
    return baseline


#: Why a baseline on server databases is not cached.
NOT_CACHED: Final = "not cached: it ran on clones of the session's server databases"


def give_urls(runner: ChildRunner, urls: Mapping[str, str]) -> None:
    """The run of ``runner`` receives its databases' URLs in these variables, over both the
    evaluator's environment and the pinned one (which holds the session's)."""
    runner.environment = {**runner.environment, **urls}
    if runner.pinned is not None:
        runner.pinned = {**runner.pinned, **urls}


def _lock_for(key: str) -> threading.Lock:
    with _key_locks_guard:
        return _key_locks.setdefault(key, threading.Lock())


def _run(
    reference: Path,
    options: BaselineOptions,
    folder: Path,
    timeout: float,
    like: ChildRunner | None,
    cancel: threading.Event | None,
    urls: Mapping[str, str] | None = None,
) -> tuple[ChildRun, Snapshot | None]:
    """Copy the reference, run its tests there, snapshot its databases into ``folder``.

    :param urls: the variables through which the run receives its server databases' URLs.
    """
    owned = like is None
    like = like or ChildRunner()
    runner = like.for_another_run("baseline-run")
    runner.python = options.python
    give_urls(runner, urls or {})
    try:
        copy = runner.workspace("checkout") / "checkout"
        excluded = [reference / path for path in options.excluded]
        copy_tree(reference, copy, exclude=excluded)
        runner.give(copy)
        listed = own_tests_arguments(copy) if options.tests_from else []
        run = run_child(
            runner,
            copy,
            [*listed, *options.selection],
            timeout,
            deterministic=options.deterministic,
            cancel=cancel,
        )
        if run.failure(timeout, WHAT) is not None:
            return run, None
        excluded = [copy / path for path in options.excluded]
        engine = SqliteEngine(copy, options.db_patterns, excluded)
        final = snapshot_now(engine, folder / "final", WHAT)
        return run, final
    finally:
        runner.close()
        if owned:
            like.close()


def from_run(
    key: str, run: ChildRun, final: Snapshot | None, timeout: float, cache: str
) -> Baseline:
    """The baseline a run gave (here, or in an Inspect sandbox): usable only when the run
    ended with results and every database it left can be read.

    :param final: the databases it left (None when it failed before they were read).
    :param cache: where it is cached, or why it is not.
    """
    tally = run.tally or {}
    failure = run.failure(timeout, WHAT)
    if failure is None and final is not None and final.errors:
        lost = "; ".join(f"{path}: {why}" for path, why in sorted(final.errors.items()))
        failure = f"{WHAT} left databases that cannot be read ({lost})"
    return Baseline(
        key=key,
        final=final if failure is None else None,
        counts=tally.get("counts"),
        collected=list(tally.get("collected", [])),
        duration=run.duration,
        exit_code=run.exit_code,
        timed_out=run.timed_out,
        from_cache=False,
        cache=cache,
        failure=failure,
        output=run.output if failure is not None else "",
    )


def _failed(key: str, failure: str, cache: BaselineCache | None) -> Baseline:
    return Baseline(
        key=key,
        final=None,
        counts=None,
        collected=[],
        duration=0.0,
        exit_code=None,
        timed_out=False,
        from_cache=False,
        cache=NOT_CACHED if cache is None else cache.describe(key),
        failure=failure,
    )


def _record(baseline: Baseline) -> dict[str, Any]:
    """What the cache keeps of a run besides its databases."""
    return {
        "counts": baseline.counts,
        "collected": baseline.collected,
        "duration": baseline.duration,
        "exit_code": baseline.exit_code,
    }


def _from_record(key: str, final: Snapshot, record: dict[str, Any], entry: str) -> Baseline:
    counts = record.get("counts")
    collected = record.get("collected")
    duration = record.get("duration")
    exit_code = record.get("exit_code")
    return Baseline(
        key=key,
        final=final,
        counts=counts if isinstance(counts, dict) else None,
        collected=[str(item) for item in collected] if isinstance(collected, list) else [],
        duration=float(duration) if isinstance(duration, int | float) else 0.0,
        exit_code=exit_code if isinstance(exit_code, int) else None,
        timed_out=False,
        from_cache=True,
        cache=entry,
    )


class BaselineRun:
    """:func:`baseline_for` in a background thread, from session start until scoring."""

    def __init__(self, work: Callable[[threading.Event], Baseline], folder: Path | None):
        """:param work: computes the baseline; its argument is set to cancel the run.
        :param folder: the folder ``work`` writes to, removed by :meth:`close` (None: the
            files are someone else's).
        """
        self._work = work
        self._folder = folder
        self._cancel = threading.Event()
        self._result: Baseline | None = None
        self._error: BaseException | None = None
        self._thread = threading.Thread(target=self._target, name="pytest-scoring-baseline")

    @classmethod
    def made(cls, baseline: Baseline) -> BaselineRun:
        """A baseline made before the evaluation (a batch's, once for all its repositories):
        its files belong to the batch and stay when the evaluation ends."""
        run = cls(lambda cancel: baseline, None)
        run.start()
        return run

    def start(self) -> None:
        self._thread.start()

    def _target(self) -> None:
        try:
            self._result = self._work(self._cancel)
        except Exception as error:  # surfaced when the scorer asks for the result
            self._error = error

    def result(self) -> Baseline | str:
        """Wait for the run; the baseline, or why there is none (a second Ctrl-C kills it)."""
        try:
            self._thread.join()
        except KeyboardInterrupt:
            self._cancel.set()
            raise
        if self._result is None:
            return f"{WHAT} failed: {self._error}"
        return self._result

    def reference_copies(self) -> list[Path]:
        """Where the baseline's final databases are (a copy of the reference's, after its own
        tests ran): the report names it as the reference."""
        result = self._result
        if result is None or result.final is None or result.final.root is None:
            return []
        return [result.final.root]

    def close(self) -> None:
        """End the run if it still runs (scoring stopped early); remove its files and drop
        its clones."""
        self._cancel.set()
        if self._thread.is_alive():
            self._thread.join()
        if self._result is not None and self._result.clones is not None:
            self._result.clones.drop()
        if self._folder is not None:
            shutil.rmtree(self._folder, ignore_errors=True)
