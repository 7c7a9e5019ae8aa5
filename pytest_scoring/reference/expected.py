"""The expected test set: which tests count and what each must do (docs/scoring.md#expected-tests).

SOURCE is a file of test ids (one per line, or a JSON list: each must pass), a JSON object
``{id: "passed" | "skipped" | "xfailed"}``, or a folder. A folder is run once, in a private
copy, with its own configuration and this interpreter; its collected tests are the set and
their outcomes the expected ones. The run is kept in the evaluator's private cache
(:mod:`~pytest_scoring.reference.private_cache`) as ``expected-tests/<route>/<key>.json``,
keyed by the folder's content and the command.
"""

from __future__ import annotations

import hashlib
import json
import os
import sys
from collections.abc import Mapping
from collections.abc import Sequence
from dataclasses import dataclass
from dataclasses import field
from pathlib import Path
from typing import Any
from typing import Final

import pytest

from pytest_scoring.core.rule import EXPECTED_OUTCOMES
from pytest_scoring.core.rule import ExpectedOutcome
from pytest_scoring.core.settings import CacheRoute
from pytest_scoring.errors import OptionError
from pytest_scoring.fs.copy import copy_tree
from pytest_scoring.fs.walk import TreeWalk
from pytest_scoring.process.children import ChildRunner
from pytest_scoring.reference.child import reference_timeout
from pytest_scoring.reference.child import run_child
from pytest_scoring.reference.private_cache import PrivateCache

OPTION: Final = "--score-expected-tests"
#: The arguments of a source folder's run (beyond our plugin's): no cache files in the copy.
FOLDER_ARGS: Final = ("-p", "no:cacheprovider")
#: Bumped when the cached content changes shape or meaning.
CACHE_VERSION: Final = 1
#: The folder of its entries in the evaluator's private cache.
CACHE_KIND: Final = "expected-tests"
#: How the final outcome of a source folder's test becomes what the set expects of it.
_EXPECTED_FROM: Final[dict[str, ExpectedOutcome]] = {
    "passed": "passed",
    "xpassed": "passed",
    "skipped": "skipped",
    "xfailed": "xfailed",
}


@dataclass
class ExpectedTests:
    """The set, and where it came from."""

    #: ``{test id relative to the repository root: expected outcome}``.
    outcomes: dict[str, ExpectedOutcome]
    #: The SOURCE as given (for the report).
    source: str
    #: A source folder's tests that failed, errored or did not run there: left out of the
    #: set, since no solution could be asked to do better than the source.
    dropped: list[str] = field(default_factory=list)

    def describe(self) -> dict[str, Any]:
        """What a test score's metadata says about the set."""
        return {"source": self.source, "tests": len(self.outcomes), "dropped": self.dropped}


def normalise_id(nodeid: str) -> str:
    """A test id as a path relative to the repository root: ``/`` separators, no ``./``."""
    path, sep, rest = nodeid.strip().partition("::")
    path = path.replace("\\", "/")
    while path.startswith("./"):
        path = path[2:]
    return f"{path}{sep}{rest}"


def load_expected_tests(
    path: Path,
    option: str = OPTION,
    like: ChildRunner | None = None,
    *,
    route: CacheRoute = "in-process",
    never_inside: Sequence[Path] = (),
) -> ExpectedTests:
    """Read (or run) SOURCE.

    :param option: the option that named it, for messages.
    :param like: the evaluation's runner, whose :meth:`~ChildRunner.for_another_run` runs a
        folder (as a user of its own under ``run`` as root).
    :param route: the part of the evaluator's cache a folder's run is kept in.
    :param never_inside: folders a scored repository can write: no cache is kept there.
    :raises OptionError: naming the option and what is wrong with SOURCE.
    """
    if path.is_dir():
        cache = PrivateCache.open(CACHE_KIND, route, never_inside)
        outcomes, dropped = run_source_folder(path, cache, option, like)
        return ExpectedTests(outcomes, str(path), dropped)
    try:
        text = path.read_text(encoding="utf-8")
    except OSError as error:
        raise OptionError(f"{option}: cannot read {path}: {error.strerror}") from None
    except UnicodeDecodeError:
        raise OptionError(f"{option}: {path} is not UTF-8 text") from None
    return ExpectedTests(parse_expected(text, str(path), option), str(path))


def parse_expected(text: str, where: str, option: str = OPTION) -> dict[str, ExpectedOutcome]:
    """Test ids from a JSON list, a JSON object of outcomes, or lines (``#`` comments)."""
    if text.lstrip()[:1] in ("[", "{", '"'):
        try:
            content = json.loads(text)
        except json.JSONDecodeError as error:
            raise OptionError(
                f"{option}: {where} is not valid JSON ({error.msg} at line {error.lineno})"
            ) from None
        outcomes = _from_json(content, where, option)
    else:
        lines = (line.strip() for line in text.splitlines())
        outcomes = {normalise_id(line): "passed" for line in lines if line and line[0] != "#"}
    if not outcomes:
        raise OptionError(f"{option}: {where} lists no tests")
    return outcomes


def _from_json(content: object, where: str, option: str) -> dict[str, ExpectedOutcome]:
    if isinstance(content, list):
        for index, item in enumerate(content):
            if not isinstance(item, str) or not item.strip():
                raise OptionError(f"{option}: {where}: [{index}] is {item!r}, not a test id")
        return {normalise_id(item): "passed" for item in content}
    if isinstance(content, Mapping):
        outcomes: dict[str, ExpectedOutcome] = {}
        for nodeid, outcome in content.items():
            if outcome not in EXPECTED_OUTCOMES:
                choices = ", ".join(repr(name) for name in EXPECTED_OUTCOMES)
                raise OptionError(
                    f"{option}: {where}: [{nodeid!r}] is {outcome!r}, expected one of {choices}"
                )
            outcomes[normalise_id(nodeid)] = outcome
        return outcomes
    raise OptionError(
        f"{option}: {where}: expected a JSON list of ids or an object of outcomes, "
        f"got {type(content).__name__}"
    )


# --- a source folder --------------------------------------------------------------------


def cache_key(folder: Path) -> str:
    """A hash of the folder's content (names, file bytes, link targets) and the command."""
    digest = hashlib.sha256()
    command = [str(CACHE_VERSION), sys.executable, pytest.__version__, *FOLDER_ARGS]
    digest.update(json.dumps(command).encode())
    for entry in TreeWalk(folder):
        digest.update(entry.relpath.encode("utf-8", "surrogateescape") + b"\0")
        if entry.is_symlink:
            digest.update(b"link:" + os.fsencode(os.readlink(entry.path)))
        elif entry.is_file:
            with entry.path.open("rb") as handle:
                digest.update(hashlib.file_digest(handle, "sha256").digest())
    return digest.hexdigest()


def run_source_folder(
    folder: Path, cache: PrivateCache, option: str = OPTION, like: ChildRunner | None = None
) -> tuple[dict[str, ExpectedOutcome], list[str]]:
    """The expected outcomes of a source folder's tests and the ids left out, from ``cache``
    when it holds them, else run and kept there.

    :param like: the evaluation's runner (None: the folder runs as the evaluator's user).

    :raises OptionError: when the run fails, times out or collects no test.
    """
    folder = folder.resolve()
    key = cache_key(folder)
    found = _read_cache(cache, key)
    if found is not None:
        return found
    children = ChildRunner() if like is None else like.for_another_run("expected")
    try:
        copy = children.workspace("expected") / "copy"
        copy_tree(folder, copy)
        children.give(copy)
        timeout = reference_timeout()
        run = run_child(children, copy, FOLDER_ARGS, timeout)
    finally:
        children.close()
    failure = run.failure(timeout)
    if failure is not None or run.tally is None:
        reason = (failure or "no results").replace("the reference run", "the run")
        raise OptionError(
            f"{option}: running {folder}: {reason}; its output ended with:\n{run.output}"
        )
    outcomes, dropped = _expected_from_tally(run.tally)
    if not outcomes:
        raise OptionError(f"{option}: {folder}: no test passed, skipped or xfailed there")
    content = {"expected": outcomes, "dropped": dropped}
    cache.write(f"{key}.json", cache.document(key, content))
    return outcomes, dropped


def _expected_from_tally(tally: dict[str, Any]) -> tuple[dict[str, ExpectedOutcome], list[str]]:
    outcomes: dict[str, ExpectedOutcome] = {}
    for record in tally.get("tests", []):
        expected = _EXPECTED_FROM.get(str(record.get("outcome")))
        if expected is not None:
            outcomes[str(record["nodeid"])] = expected
    dropped = sorted(set(tally.get("collected", [])) - set(outcomes))
    return outcomes, dropped


def _read_cache(
    cache: PrivateCache, key: str
) -> tuple[dict[str, ExpectedOutcome], list[str]] | None:
    """The run kept under ``key``, or None when there is none or it does not check out."""
    if cache.folder is None:
        return None
    path = cache.folder / f"{key}.json"
    content = cache.read(path, key)
    if content is None:
        return None
    outcomes, dropped = content.get("expected"), content.get("dropped")
    if (
        isinstance(outcomes, dict)
        and outcomes
        and all(value in EXPECTED_OUTCOMES for value in outcomes.values())
        and isinstance(dropped, list)
    ):
        return outcomes, [str(item) for item in dropped]
    cache.discard(path, "it is not a folder's run")
    return None


#: ``run``'s flag that lets a folder-derived set drop tests alongside ``--tests-from``.
DROP_FAILING: Final = "--expected-tests-drop-failing"
#: Test ids named in the message refusing dropped tests.
DROPPED_NAMED: Final = 3


def refuse_dropped(expected: ExpectedTests, option: str) -> None:
    """Refuse a source folder's set that drops tests, for use with ``--tests-from``.

    There the evaluator's tests are the point: a test that fails in the source folder (a
    SWE-bench ``FAIL_TO_PASS`` test fails in the reference checkout before its fix) would
    silently leave the set, and the fix it checks would never count.

    :raises OptionError: naming the dropped tests and what to give instead.
    """
    if not expected.dropped:
        return
    named = ", ".join(expected.dropped[:DROPPED_NAMED])
    more = ", …" if len(expected.dropped) > DROPPED_NAMED else ""
    raise OptionError(
        f"{option}: {len(expected.dropped)} test(s) fail in {expected.source} ({named}{more}); "
        f"with --tests-from they would silently leave the expected set: give a file of the ids "
        f"to expect (such as SWE-bench's FAIL_TO_PASS and PASS_TO_PASS), or {DROP_FAILING}"
    )
