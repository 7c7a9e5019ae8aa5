"""inspect_toolkit's scorers, scored by pytest-scoring's own (docs/inspect.md).

Each factory builds the plugin's scorer of the same type with the same parameters (checked
now, before any sample runs), and returns an Inspect scorer that gathers that scorer's inputs
from the sample's sandbox (the one test run, database snapshots, files), then lets it score
on the evaluator's machine, off the event loop. The score is an ``inspect_ai.scorer.Score``
with exactly the value, explanation and metadata a ``pytest-scoring`` report would hold.

A scorer never raises: a sandbox without Python or pytest, a sample without the metadata a
scorer needs, any failure — each is a ``"N"`` score saying why.

The module-level scorers at the end are generated from the registry of scorer types
(``python docs/cog_helpers.py``); each calls :func:`build`, which hands its parameters to the
front end of its type written here (``_BUILDERS``).
"""

from __future__ import annotations

import functools
import json
import shutil
import traceback
import weakref
from collections.abc import Awaitable
from collections.abc import Callable
from collections.abc import Mapping
from collections.abc import Sequence
from pathlib import Path
from typing import Any
from typing import Final

import anyio
from inspect_ai.scorer import Score as InspectScore
from inspect_ai.scorer import Scorer
from inspect_ai.scorer import Target
from inspect_ai.scorer import scorer
from inspect_ai.solver import TaskState
from inspect_ai.util import registry_info

from pytest_scoring.core.determinism import DEFAULT_FLAKY
from pytest_scoring.core.determinism import check_flaky_rule
from pytest_scoring.core.outcomes import OutcomeTally
from pytest_scoring.core.score import NOANSWER
from pytest_scoring.core.score import Score
from pytest_scoring.core.score import error_score
from pytest_scoring.core.settings import ScoringSettings
from pytest_scoring.core.signals import DEFAULT_STRICT
from pytest_scoring.core.signals import StrictKinds
from pytest_scoring.core.signals import parse_strict
from pytest_scoring.errors import ConfigError
from pytest_scoring.errors import OptionError
from pytest_scoring.errors import ScoringError
from pytest_scoring.evaluation.inspect_store import INTERIM_SOURCE
from pytest_scoring.evaluation.inspect_store import SCORER_SOURCE
from pytest_scoring.evaluation.inspect_store import SOLVER_SOURCE
from pytest_scoring.evaluation.inspect_store import check_level
from pytest_scoring.evaluation.inspect_store import run_key
from pytest_scoring.evaluation.rescore import needs_repository
from pytest_scoring.inspect.databases import DEFAULT_BEFORE
from pytest_scoring.inspect.databases import SCORER_DIFF
from pytest_scoring.inspect.databases import SOLVER_DIFF
from pytest_scoring.inspect.databases import session_databases
from pytest_scoring.inspect.databases import settings_for
from pytest_scoring.inspect.evidence import begin
from pytest_scoring.inspect.evidence import db_change_from_store
from pytest_scoring.inspect.evidence import db_diff_change_from_store
from pytest_scoring.inspect.evidence import given_repo
from pytest_scoring.inspect.evidence import has_sandbox
from pytest_scoring.inspect.evidence import keep_databases
from pytest_scoring.inspect.evidence import keep_reference
from pytest_scoring.inspect.evidence import keep_run
from pytest_scoring.inspect.evidence import run_identity
from pytest_scoring.inspect.evidence import stored
from pytest_scoring.inspect.evidence import tests_from_store
from pytest_scoring.inspect.metrics import inspect_metrics
from pytest_scoring.inspect.metrics import scalar_value
from pytest_scoring.inspect.reference import run_reference
from pytest_scoring.inspect.sample import SampleScoring
from pytest_scoring.inspect.sample import check_env
from pytest_scoring.inspect.sample import check_reruns
from pytest_scoring.inspect.sample import check_tests_from
from pytest_scoring.inspect.sample import sample_scoring
from pytest_scoring.inspect.sample import sandbox_join
from pytest_scoring.reference.expected import ExpectedTests
from pytest_scoring.reference.expected import load_expected_tests
from pytest_scoring.reference.expected import parse_expected
from pytest_scoring.scorers import composite
from pytest_scoring.scorers import db_change
from pytest_scoring.scorers import db_diff_change
from pytest_scoring.scorers import file_contents
from pytest_scoring.scorers import sandbox_state
from pytest_scoring.scorers import tests
from pytest_scoring.scorers.base import Scorer as CoreScorer
from pytest_scoring.scorers.base import ScoringContext
from pytest_scoring.scorers.base import run_scorer
from pytest_scoring.scorers.registry import BUILTIN_TYPES
from pytest_scoring.scorers.scorer_type import ScorerType

#: The sample metadata key of the expected test set (when no parameter gives one).
EXPECTED_KEY: Final = "expected_tests"
#: ``evidence=``'s default: what the store keeps, as ``run --evidence``'s.
DEFAULT_LEVEL: Final = "diffs"
#: Suffix of the registry names left out of a composite formula's variable names.
SCORER_SUFFIX: Final = "_scorer"

#: Each of this package's Inspect scorers and the plugin's scorer behind it.
_CORES: weakref.WeakKeyDictionary[Callable[..., Any], CoreScorer] = weakref.WeakKeyDictionary()

#: Gathers a scorer's inputs for one sample and scores them.
Compute = Callable[[SampleScoring, TaskState, Target], Awaitable[Score]]


def inspect_score(score: Score) -> InspectScore:
    """An Inspect ``Score`` with the score's value, answer, explanation and metadata."""
    return InspectScore(
        value=score["value"],
        answer=score.get("answer"),
        explanation=score.get("explanation"),
        metadata=score.get("metadata"),
    )


def score_dict(score: InspectScore | None) -> Score:
    """An Inspect ``Score`` as the plugin's score dict (formulas read these)."""
    if score is None:
        return {"value": NOANSWER, "answer": None, "explanation": "no score", "metadata": {}}
    return {
        "value": scalar_value(score.value),
        "answer": score.answer,
        "explanation": score.explanation,
        "metadata": dict(score.metadata or {}),
    }


def _inspect_scorer(core: CoreScorer, compute: Compute, offline: Compute | None = None) -> Scorer:
    """The Inspect scorer running ``compute`` for ``core``, or ``offline`` (from the evidence
    in the sample's store) when the sample has no sandbox: a failure is ``"N"``, never an
    exception; the score is kept for ``composite_scorer``."""

    async def score(state: TaskState, target: Target) -> InspectScore:
        sample = sample_scoring(state)
        try:
            live = has_sandbox()
            if live:
                begin(state)
            result = await (compute if live or offline is None else offline)(sample, state, target)
        except ScoringError as error:  # bad input: no Python, no metadata, no folder…
            result = error_score(core.type, str(error))
        except Exception as error:  # a scorer never takes the sample down
            result = error_score(core.type, error, traceback=traceback.format_exc())
        sample.scores[id(core)] = result
        return inspect_score(result)

    _CORES[score] = core
    return score


async def _in_thread(core: CoreScorer, context: ScoringContext) -> Score:
    """``core`` scoring ``context`` in a worker thread (a large diff never stalls the loop)."""
    return await anyio.to_thread.run_sync(run_scorer, core, context)


# --- tests ------------------------------------------------------------------------------


def _what(value: Any) -> str:
    """How a message names an expected set given as a value (not as a path)."""
    if isinstance(value, list):
        return "the list given"
    return "the object given" if isinstance(value, dict) else "its JSON text"


def check_expected(value: Any, where: str) -> Any:
    """An expected set given as a parameter, checked now when it is a list or object.

    :raises OptionError: naming ``where`` and what is wrong with it.
    """
    if isinstance(value, list | dict):
        parse_expected(json.dumps(value), _what(value), where)
    elif value is not None and not isinstance(value, str):
        raise OptionError(f"{where}: expected a list of test ids, an object or a path")
    return value


async def expected_set(value: Any, where: str) -> ExpectedTests | None:
    """The expected set (docs/scoring.md#expected-tests): a list of ids (SWE-bench's
    ``PASS_TO_PASS``), an object of outcomes, the same as JSON text, or a file or folder on
    the evaluator's machine.

    :raises OptionError: naming ``where`` when it cannot be read.
    """
    if value is None:
        return None
    check_expected(value, where)
    if isinstance(value, list | dict):
        return ExpectedTests(parse_expected(json.dumps(value), _what(value), where), where)
    if value.lstrip()[:1] in ("[", "{"):
        return ExpectedTests(parse_expected(value, _what(value), where), where)
    # The scored repository runs in the sandbox, never in this process.
    load = functools.partial(load_expected_tests, route="evaluator")
    return await anyio.to_thread.run_sync(load, Path(value), where)


def strict_choice(strict: str | Sequence[str]) -> StrictKinds:
    """The ``strict=`` parameter: ``"none"``, ``"default"``, ``"all"``, kinds separated by
    commas, or a list of those (an empty list: none).

    :raises OptionError: naming what is not a signal kind.
    """
    names = [strict] if isinstance(strict, str) else list(strict)
    if not all(isinstance(name, str) and name.strip() for name in names):
        raise OptionError("strict: expected none, default, all or signal kinds")
    try:
        return parse_strict(",".join(names or ["none"]))
    except ValueError as error:
        raise OptionError(f"strict: {error}") from None


async def _expected_of(state: TaskState, expected_tests: Any) -> ExpectedTests | None:
    """The expected set: the parameter, else the sample's metadata."""
    if expected_tests is not None:
        return await expected_set(expected_tests, "expected_tests")
    where = f"the sample's metadata {EXPECTED_KEY!r}"
    return await expected_set(state.metadata.get(EXPECTED_KEY), where)


def _tests(
    kind: str,
    *,
    repo_path: str | None,
    expected_tests: Any,
    strict: str | Sequence[str],
    tests_from: str | Path | None,
    black_box: bool,
    verifier_sandbox: str | None,
    env: Mapping[str, str] | None,
    retries: int,
    flaky: str,
    evidence: str,
) -> Scorer:
    """The Inspect scorer of the test scorer ``kind``: the sample's one test run, under the
    expected set (a parameter, else the sample's metadata); without a sandbox, the run kept
    in the sample's store."""
    core = tests.TestScorer(kind)
    check_expected(expected_tests, "expected_tests")
    check_tests_from(tests_from)
    kinds = strict_choice(strict)
    variables = None if env is None else check_env(env, "env")
    retries = check_reruns(retries)
    rule = check_flaky_rule(flaky, "flaky")
    level = check_level(evidence)

    def key(state: TaskState) -> str:
        found_tests_from, found_env = run_identity(state, tests_from, variables)
        repo = given_repo(state, repo_path)
        return run_key(repo, found_tests_from, black_box, verifier_sandbox, found_env, retries)

    async def compute(sample: SampleScoring, state: TaskState, target: Target) -> Score:
        repo = await sample.repository(state, repo_path)
        test_run = await sample.test_run(
            state,
            repo,
            None if tests_from is None else str(tests_from),
            black_box,
            verifier_sandbox,
            variables,
            retries,
        )
        expected = await _expected_of(state, expected_tests)
        settings = settings_for(repo)
        context = await anyio.to_thread.run_sync(
            test_run.context, settings, expected, kinds, rule, retries
        )
        if level != "none":
            await keep_run(state, key(state), test_run, repo, kinds, rule, retries)
        return await _in_thread(core, context)

    async def offline(sample: SampleScoring, state: TaskState, target: Target) -> Score:
        expected = await _expected_of(state, expected_tests)
        return await anyio.to_thread.run_sync(
            tests_from_store, core, stored(state), key(state), expected, kinds, rule
        )

    return _inspect_scorer(core, compute, offline)


def _test_runner(scoring_method: str = "percent-pass", **front: Any) -> Scorer:
    """The Inspect scorer of the test scorer ``scoring_method`` chooses (registered under that
    scorer's name, as inspect_toolkit's ``test_runner_scorer`` is).

    :raises ConfigError: for any other method.
    """
    chosen = {
        "all_tests_pass": all_tests_pass_scorer,
        "percent_passing_tests": percent_passing_tests_scorer,
        "percent_failing_tests": percent_failing_tests_scorer,
    }[tests.test_runner_scorer(scoring_method).type]
    return chosen(**front)


def _db_change(
    selector: Any = None,
    interim_score: bool = False,
    *,
    repo_path: str | None = None,
    evidence: str = DEFAULT_LEVEL,
) -> Scorer:
    """``db_change``'s inputs: the diff ``diff_databases`` stored, else one taken now (shared
    by the sample's scorers unless ``interim_score``); without a sandbox, the diff kept in the
    sample's store.

    :raises SelectorError: for an invalid selector, naming its path.
    """
    core = db_change.db_change_scorer(selector, interim_score)
    level = check_level(evidence)
    sources = [INTERIM_SOURCE] if interim_score else [SOLVER_SOURCE, SCORER_SOURCE]

    async def compute(sample: SampleScoring, state: TaskState, target: Target) -> Score:
        source = sources[0]
        databases = None if interim_score else sample.resources.get(SOLVER_DIFF)
        if databases is None and not interim_score:
            source, databases = SCORER_SOURCE, sample.resources.get(SCORER_DIFF)
        if databases is None:
            repo = await sample.repository(state, repo_path)
            patterns = list(settings_for(repo).db_patterns)
            databases = await session_databases(sample, state, repo, DEFAULT_BEFORE, patterns)
            if not interim_score:
                sample.resources[SCORER_DIFF] = databases
        settings = databases.settings
        context = ScoringContext(root=settings.root, tally=OutcomeTally(), settings=settings)
        context.inputs.databases = databases
        score = await _in_thread(core, context)
        if level != "none":
            await keep_databases(state, source, databases, level)
        return score

    async def offline(sample: SampleScoring, state: TaskState, target: Target) -> Score:
        folder = sample.local("evidence")
        found = stored(state)
        return await anyio.to_thread.run_sync(db_change_from_store, core, found, sources, folder)

    return _inspect_scorer(core, compute, offline)


def _db_diff_change(
    selector: Any = None,
    test_patterns: Sequence[str] | None = None,
    *,
    repo_path: str | None = None,
    count_test_changes: bool = True,
    evidence: str = DEFAULT_LEVEL,
) -> Scorer:
    """``db_diff_change``'s inputs: the reference side run in the sandbox (shared by the
    sample's scorers with the same test patterns) and the repository's own test run; without
    a sandbox, the three diffs kept in the sample's store."""
    core = db_diff_change.db_diff_change_scorer(
        selector, test_patterns, count_test_changes=count_test_changes
    )
    level = check_level(evidence)
    key = core.inputs_key()
    # The store's key (eval logs keep it: never change its form).
    side_key = f"reference:{'|'.join(key)}|count_test_changes={count_test_changes}"

    def own_key(state: TaskState) -> str:
        """The key of the repository's own run: the sample's one, with its metadata."""
        found_tests_from, found_env = run_identity(state)
        return run_key(given_repo(state, repo_path), found_tests_from, False, None, found_env, 0)

    async def compute(sample: SampleScoring, state: TaskState, target: Target) -> Score:
        repo = await sample.repository(state, repo_path)
        if side_key not in sample.resources:
            patterns = core.test_patterns
            side = await run_reference(sample, state, repo, patterns, count_test_changes)
            sample.resources[side_key] = side
        side = sample.resources[side_key]
        own = await sample.test_run(state, repo)
        context = ScoringContext(root=side.settings.root, tally=own.probe().tally)
        context.settings = side.settings
        context.inputs.references[key] = side
        score = await _in_thread(core, context)
        if level != "none":
            await keep_reference(state, side_key, side)
            await keep_run(state, own_key(state), own, repo, DEFAULT_STRICT, DEFAULT_FLAKY, 0)
        return score

    async def offline(sample: SampleScoring, state: TaskState, target: Target) -> Score:
        found = stored(state)
        return await anyio.to_thread.run_sync(
            db_diff_change_from_store, core, found, side_key, own_key(state)
        )

    return _inspect_scorer(core, compute, offline)


def _file_contents(
    folder_path: str,
    search_string: str,
    case_sensitive: bool = True,
    recursive: bool = True,
    file_extensions: Sequence[str] | None = None,
    interim_score: bool = False,
    *,
    repo_path: str | None = None,
    exclude: list[str] | None = None,
) -> Scorer:
    """``file_contents``' input: the folder (the repository, when it is inside it) read to
    this machine."""
    extensions = None if file_extensions is None else list(file_extensions)
    core = file_contents.file_contents_scorer(
        folder_path, search_string, case_sensitive, recursive, extensions, interim_score, exclude
    )

    async def compute(sample: SampleScoring, state: TaskState, target: Target) -> Score:
        repo = await sample.repository(state, repo_path)
        folder = sandbox_join(repo, folder_path)
        inside = folder == repo or folder.startswith(repo.rstrip("/") + "/")
        return await _on_this_machine(sample, core, repo if inside else folder)

    return _inspect_scorer(core, compute, _needs_repository(core))


async def _on_this_machine(sample: SampleScoring, core: CoreScorer, top: str) -> Score:
    """``core``'s score of the sandbox's folder ``top``, read to a folder of this machine
    (removed after); a sandbox path under ``top`` maps to its copy."""
    mirror = sample.local("files")
    try:
        await (await sample.kit()).pull(top, mirror)
        settings = ScoringSettings(root=mirror, path_map={top: mirror})
        context = ScoringContext(root=mirror, tally=OutcomeTally(), settings=settings)
        return await _in_thread(core, context)
    finally:
        shutil.rmtree(mirror, ignore_errors=True)


def _from_repository(kind: ScorerType, *, repo_path: str | None = None, **params: Any) -> Scorer:
    """The Inspect scorer of a type with none of its own: its scorer scores the repository's
    files, read to the evaluator's machine (no test run, no databases)."""
    core = kind.factory(**params)

    async def compute(sample: SampleScoring, state: TaskState, target: Target) -> Score:
        return await _on_this_machine(sample, core, await sample.repository(state, repo_path))

    return _inspect_scorer(core, compute, _needs_repository(core))


def _sandbox_state(
    command: str,
    cwd: str | None = None,
    timeout: int | None = 60,
    *,
    repo_path: str | None = None,
    env: dict[str, str] | None = None,
) -> Scorer:
    """``sandbox_state``: the command runs in the sandbox, by the kit's supervisor, outside
    the repository's reach (the plugin's environment rules)."""
    core = sandbox_state.sandbox_state_scorer(command, cwd, timeout, env)

    async def compute(sample: SampleScoring, state: TaskState, target: Target) -> Score:
        repo = await sample.repository(state, repo_path)
        kit = await sample.kit()
        found = await kit.resolve(sandbox_join(repo, cwd or "."))
        if not found["is_dir"]:
            return error_score(core.type, f"cwd {cwd!r} is not a folder", **core.parameters())
        answer = await kit.run(
            [sandbox_state.SHELL, "-c", command],
            str(found["path"]),
            timeout,
            sandbox_state.HEAD_BYTES,
            env=core.env,
            outside=repo,
        )
        return core.score_outcome(_command_outcome(answer))

    return _inspect_scorer(core, compute, _needs_repository(core))


def _needs_repository(core: CoreScorer) -> Compute:
    """What a scorer that reads the sandbox itself scores without one: ``"N"``, as
    ``pytest-scoring rescore`` scores it."""

    async def offline(sample: SampleScoring, state: TaskState, target: Target) -> Score:
        return needs_repository(core.type)

    return offline


def _command_outcome(answer: dict[str, Any]) -> dict[str, Any]:
    """The helper's answer as :func:`~pytest_scoring.scorers.sandbox_state.run_command`'s."""
    problem = {"error": answer["error"]} if answer.get("error") else {}
    outputs = {}
    for stream in ("stdout", "stderr"):
        shown = answer.get(stream) or {"head": "", "bytes": 0}
        outputs[stream] = sandbox_state.shown_output(shown["head"], shown["bytes"])
        outputs[f"{stream}_bytes"] = shown["bytes"]
    return {
        **problem,
        # killed by a signal: its negative number, as the helper's subprocess reports it
        "exit_code": answer.get("exit_code"),
        "timed_out": bool(answer.get("timed_out")),
        **outputs,
    }


def _composite(scorers: Sequence[Scorer], formula: str | composite.FormulaFunction) -> Scorer:
    """``composite``'s inputs: its children's scores of the sample, reused or run now.

    :raises ConfigError: for a formula outside the language, or two children of one name.
    """
    children = list(scorers)
    names = [variable_name(child) for child in children]
    twice = sorted({name for name in names if names.count(name) > 1})
    if twice:
        raise ConfigError(f"scorers: more than one scorer named {', '.join(twice)}")
    core = composite.composite_scorer(names, formula)

    async def compute(sample: SampleScoring, state: TaskState, target: Target) -> Score:
        context = ScoringContext(root=Path("."), tally=OutcomeTally())
        for name, child in zip(names, children, strict=True):
            context.scores[name] = await _child_score(sample, state, target, child)
        return run_scorer(core, context)

    return _inspect_scorer(core, compute)


def variable_name(child: Callable[..., Any]) -> str:
    """A child scorer's name in a formula: its registry name, without a ``_scorer`` suffix
    (``db_diff_change_scorer`` -> ``db_diff_change``, as in a configuration file)."""
    try:
        name = registry_info(child).name.rsplit("/", 1)[-1]
    except (ValueError, AttributeError):
        name = getattr(child, "__name__", "scorer")
    return name.removesuffix(SCORER_SUFFIX) if name.endswith(SCORER_SUFFIX) else name


async def _child_score(
    sample: SampleScoring, state: TaskState, target: Target, child: Callable[..., Any]
) -> Score:
    """The child's score for this sample: reused when it already scored and is not interim."""
    inner = _CORES.get(child)
    if inner is not None and not getattr(inner, "interim_score", False):
        found = sample.scores.get(id(inner))
        if found is not None:
            return found
    return score_dict(await child(state, target))


#: The Inspect front end of each scorer type that has its own: how it gathers the type's inputs
#: from the sample's sandbox. A type without one scores the repository's files
#: (:func:`_from_repository`).
_BUILDERS: Final[dict[str, Callable[..., Scorer]]] = {
    "all_tests_pass": functools.partial(_tests, "all_tests_pass"),
    "percent_passing_tests": functools.partial(_tests, "percent_passing_tests"),
    "percent_failing_tests": functools.partial(_tests, "percent_failing_tests"),
    "test_runner": _test_runner,
    "db_change": _db_change,
    "db_diff_change": _db_diff_change,
    "file_contents": _file_contents,
    "sandbox_state": _sandbox_state,
    "composite": _composite,
}


def build(type_name: str, **params: Any) -> Scorer:
    """The Inspect scorer of the registered type ``type_name`` with these parameters: what
    each generated scorer below returns."""
    builder = _BUILDERS.get(type_name)
    if builder is None:
        return _from_repository(BUILTIN_TYPES[type_name], **params)
    return builder(**params)


def type_metrics(type_name: str) -> list[Any]:
    """The Inspect metrics of a registered type (those of docs/configuration.md)."""
    return inspect_metrics(BUILTIN_TYPES[type_name].metrics or ())


# --- the Inspect scorers: one per type of the registry (scorers/registry.py) ----------------
# Generated from the registry by ``python docs/cog_helpers.py``; ``--check`` (and
# tests/test_docs.py) fails when this block is stale. Their registry names are Inspect's
# keys in eval logs (``inspect score LOG``): they never change.
# [[[cog
# import cog_helpers
# cog.out(cog_helpers.inspect_scorers_code())
# ]]]
@scorer(name="all_tests_pass", metrics=type_metrics("all_tests_pass"))
def all_tests_pass_scorer(
    *,
    repo_path: str | None = None,
    expected_tests: Any = None,
    strict: str | Sequence[str] = "default",
    tests_from: str | Path | None = None,
    black_box: bool = False,
    verifier_sandbox: str | None = None,
    env: Mapping[str, str] | None = None,
    retries: int = 0,
    flaky: str = DEFAULT_FLAKY,
    evidence: str = DEFAULT_LEVEL,
) -> Scorer:
    """``"C"`` when at least one test ran and none failed or errored.

    :param repo_path: the repository in the sandbox (default: the sample's ``repo_path``
        metadata, else ``/workspace``; a relative path is taken from the sandbox's working
        folder).
    :param expected_tests: the tests that count and what each must do (default: the sample's
        ``expected_tests`` metadata): a list of ids, ``{id: outcome}``, JSON text of either, or
        a file or folder on the evaluator's machine (docs/scoring.md#expected-tests).
    :param strict: the integrity signal kinds that make the score ``"N"``, counted as failed
        (docs/scoring.md#integrity): ``"none"``, ``"default"``, ``"all"``, or kinds.
    :param tests_from: a folder of the evaluator's machine laid out like the repository (usually
        the reference): its tests, conftests and pytest configuration replace the repository's
        in the sandbox before the tests run, by ``run --tests-from``'s rule (default: the
        sample's ``tests_from`` metadata; docs/inspect.md#inspect-tests-from).
    :param black_box: with ``tests_from`` only: the test process may load no file of the
        repository but the evaluator's tests (``run --black-box``): one that does ends the
        session, and the score is ``"N"`` naming it (docs/inspect.md#inspect-black-box).
    :param verifier_sandbox: a second sandbox of the sample (a service of the pristine image):
        only the files under the repository are copied there and the tests run there, away from
        the agent's processes and site-packages (docs/inspect.md#inspect-verifier).
    :param env: variables the tests get, ``{NAME: VALUE}``, set over the pinned ones (default:
        the sample's ``env`` metadata; docs/scoring.md#determinism).
    :param retries: the tests that did not pass run again, each time in a fresh pytest process
        and a fresh copy of the repository, up to this many times (docs/scoring.md#reruns).
    :param flaky: how a test whose attempts differ counts: ``"fail"`` (it must pass every
        attempt), ``"pass"`` (one passing attempt is enough), ``"exclude"`` (left out of
        ``total``); the flaky tests are in the score's ``flaky`` metadata.
    :param evidence: what the sample's store keeps for scoring again without the sandbox
        (``inspect score``): ``"none"``, ``"diffs"`` (the run's outcomes) or ``"all"``
        (docs/inspect.md#inspect-rescoring).
    """
    return build(
        "all_tests_pass",
        repo_path=repo_path,
        expected_tests=expected_tests,
        strict=strict,
        tests_from=tests_from,
        black_box=black_box,
        verifier_sandbox=verifier_sandbox,
        env=env,
        retries=retries,
        flaky=flaky,
        evidence=evidence,
    )


@scorer(name="percent_passing_tests", metrics=type_metrics("percent_passing_tests"))
def percent_passing_tests_scorer(
    *,
    repo_path: str | None = None,
    expected_tests: Any = None,
    strict: str | Sequence[str] = "default",
    tests_from: str | Path | None = None,
    black_box: bool = False,
    verifier_sandbox: str | None = None,
    env: Mapping[str, str] | None = None,
    retries: int = 0,
    flaky: str = DEFAULT_FLAKY,
    evidence: str = DEFAULT_LEVEL,
) -> Scorer:
    """The share of passing tests among passed, failed and erroring ones, in percent.

    :param repo_path: the repository in the sandbox (default: the sample's ``repo_path``
        metadata, else ``/workspace``; a relative path is taken from the sandbox's working
        folder).
    :param expected_tests: the tests that count and what each must do (default: the sample's
        ``expected_tests`` metadata): a list of ids, ``{id: outcome}``, JSON text of either, or
        a file or folder on the evaluator's machine (docs/scoring.md#expected-tests).
    :param strict: the integrity signal kinds that make the score ``"N"``, counted as failed
        (docs/scoring.md#integrity): ``"none"``, ``"default"``, ``"all"``, or kinds.
    :param tests_from: a folder of the evaluator's machine laid out like the repository (usually
        the reference): its tests, conftests and pytest configuration replace the repository's
        in the sandbox before the tests run, by ``run --tests-from``'s rule (default: the
        sample's ``tests_from`` metadata; docs/inspect.md#inspect-tests-from).
    :param black_box: with ``tests_from`` only: the test process may load no file of the
        repository but the evaluator's tests (``run --black-box``): one that does ends the
        session, and the score is ``"N"`` naming it (docs/inspect.md#inspect-black-box).
    :param verifier_sandbox: a second sandbox of the sample (a service of the pristine image):
        only the files under the repository are copied there and the tests run there, away from
        the agent's processes and site-packages (docs/inspect.md#inspect-verifier).
    :param env: variables the tests get, ``{NAME: VALUE}``, set over the pinned ones (default:
        the sample's ``env`` metadata; docs/scoring.md#determinism).
    :param retries: the tests that did not pass run again, each time in a fresh pytest process
        and a fresh copy of the repository, up to this many times (docs/scoring.md#reruns).
    :param flaky: how a test whose attempts differ counts: ``"fail"`` (it must pass every
        attempt), ``"pass"`` (one passing attempt is enough), ``"exclude"`` (left out of
        ``total``); the flaky tests are in the score's ``flaky`` metadata.
    :param evidence: what the sample's store keeps for scoring again without the sandbox
        (``inspect score``): ``"none"``, ``"diffs"`` (the run's outcomes) or ``"all"``
        (docs/inspect.md#inspect-rescoring).
    """
    return build(
        "percent_passing_tests",
        repo_path=repo_path,
        expected_tests=expected_tests,
        strict=strict,
        tests_from=tests_from,
        black_box=black_box,
        verifier_sandbox=verifier_sandbox,
        env=env,
        retries=retries,
        flaky=flaky,
        evidence=evidence,
    )


@scorer(name="percent_failing_tests", metrics=type_metrics("percent_failing_tests"))
def percent_failing_tests_scorer(
    *,
    repo_path: str | None = None,
    expected_tests: Any = None,
    strict: str | Sequence[str] = "default",
    tests_from: str | Path | None = None,
    black_box: bool = False,
    verifier_sandbox: str | None = None,
    env: Mapping[str, str] | None = None,
    retries: int = 0,
    flaky: str = DEFAULT_FLAKY,
    evidence: str = DEFAULT_LEVEL,
) -> Scorer:
    """``100 - percent_passing_tests``.

    :param repo_path: the repository in the sandbox (default: the sample's ``repo_path``
        metadata, else ``/workspace``; a relative path is taken from the sandbox's working
        folder).
    :param expected_tests: the tests that count and what each must do (default: the sample's
        ``expected_tests`` metadata): a list of ids, ``{id: outcome}``, JSON text of either, or
        a file or folder on the evaluator's machine (docs/scoring.md#expected-tests).
    :param strict: the integrity signal kinds that make the score ``"N"``, counted as failed
        (docs/scoring.md#integrity): ``"none"``, ``"default"``, ``"all"``, or kinds.
    :param tests_from: a folder of the evaluator's machine laid out like the repository (usually
        the reference): its tests, conftests and pytest configuration replace the repository's
        in the sandbox before the tests run, by ``run --tests-from``'s rule (default: the
        sample's ``tests_from`` metadata; docs/inspect.md#inspect-tests-from).
    :param black_box: with ``tests_from`` only: the test process may load no file of the
        repository but the evaluator's tests (``run --black-box``): one that does ends the
        session, and the score is ``"N"`` naming it (docs/inspect.md#inspect-black-box).
    :param verifier_sandbox: a second sandbox of the sample (a service of the pristine image):
        only the files under the repository are copied there and the tests run there, away from
        the agent's processes and site-packages (docs/inspect.md#inspect-verifier).
    :param env: variables the tests get, ``{NAME: VALUE}``, set over the pinned ones (default:
        the sample's ``env`` metadata; docs/scoring.md#determinism).
    :param retries: the tests that did not pass run again, each time in a fresh pytest process
        and a fresh copy of the repository, up to this many times (docs/scoring.md#reruns).
    :param flaky: how a test whose attempts differ counts: ``"fail"`` (it must pass every
        attempt), ``"pass"`` (one passing attempt is enough), ``"exclude"`` (left out of
        ``total``); the flaky tests are in the score's ``flaky`` metadata.
    :param evidence: what the sample's store keeps for scoring again without the sandbox
        (``inspect score``): ``"none"``, ``"diffs"`` (the run's outcomes) or ``"all"``
        (docs/inspect.md#inspect-rescoring).
    """
    return build(
        "percent_failing_tests",
        repo_path=repo_path,
        expected_tests=expected_tests,
        strict=strict,
        tests_from=tests_from,
        black_box=black_box,
        verifier_sandbox=verifier_sandbox,
        env=env,
        retries=retries,
        flaky=flaky,
        evidence=evidence,
    )


def test_runner_scorer(
    scoring_method: str = "percent-pass",
    *,
    repo_path: str | None = None,
    expected_tests: Any = None,
    strict: str | Sequence[str] = "default",
    tests_from: str | Path | None = None,
    black_box: bool = False,
    verifier_sandbox: str | None = None,
    env: Mapping[str, str] | None = None,
    retries: int = 0,
    flaky: str = DEFAULT_FLAKY,
    evidence: str = DEFAULT_LEVEL,
) -> Scorer:
    """One test scorer chosen by ``scoring_method``.

    :param scoring_method: ``"pass-fail"``, ``"percent-pass"`` or ``"percent-fail"``.
    :param repo_path: the repository in the sandbox (default: the sample's ``repo_path``
        metadata, else ``/workspace``; a relative path is taken from the sandbox's working
        folder).
    :param expected_tests: the tests that count and what each must do (default: the sample's
        ``expected_tests`` metadata): a list of ids, ``{id: outcome}``, JSON text of either, or
        a file or folder on the evaluator's machine (docs/scoring.md#expected-tests).
    :param strict: the integrity signal kinds that make the score ``"N"``, counted as failed
        (docs/scoring.md#integrity): ``"none"``, ``"default"``, ``"all"``, or kinds.
    :param tests_from: a folder of the evaluator's machine laid out like the repository (usually
        the reference): its tests, conftests and pytest configuration replace the repository's
        in the sandbox before the tests run, by ``run --tests-from``'s rule (default: the
        sample's ``tests_from`` metadata; docs/inspect.md#inspect-tests-from).
    :param black_box: with ``tests_from`` only: the test process may load no file of the
        repository but the evaluator's tests (``run --black-box``): one that does ends the
        session, and the score is ``"N"`` naming it (docs/inspect.md#inspect-black-box).
    :param verifier_sandbox: a second sandbox of the sample (a service of the pristine image):
        only the files under the repository are copied there and the tests run there, away from
        the agent's processes and site-packages (docs/inspect.md#inspect-verifier).
    :param env: variables the tests get, ``{NAME: VALUE}``, set over the pinned ones (default:
        the sample's ``env`` metadata; docs/scoring.md#determinism).
    :param retries: the tests that did not pass run again, each time in a fresh pytest process
        and a fresh copy of the repository, up to this many times (docs/scoring.md#reruns).
    :param flaky: how a test whose attempts differ counts: ``"fail"`` (it must pass every
        attempt), ``"pass"`` (one passing attempt is enough), ``"exclude"`` (left out of
        ``total``); the flaky tests are in the score's ``flaky`` metadata.
    :param evidence: what the sample's store keeps for scoring again without the sandbox
        (``inspect score``): ``"none"``, ``"diffs"`` (the run's outcomes) or ``"all"``
        (docs/inspect.md#inspect-rescoring).
    """
    return build(
        "test_runner",
        scoring_method=scoring_method,
        repo_path=repo_path,
        expected_tests=expected_tests,
        strict=strict,
        tests_from=tests_from,
        black_box=black_box,
        verifier_sandbox=verifier_sandbox,
        env=env,
        retries=retries,
        flaky=flaky,
        evidence=evidence,
    )


@scorer(name="db_change_scorer", metrics=type_metrics("db_change"))
def db_change_scorer(
    selector: Any = None,
    interim_score: bool = False,
    *,
    repo_path: str | None = None,
    evidence: str = DEFAULT_LEVEL,
) -> Scorer:
    """Score what the test session did to the databases. Before: the diff ``diff_databases``
    stored, else ``snapshot:[first]`` or the sample's ``reference_repo_dir``; after: the
    repository once its tests ran.

    :param selector: a selector (a JSON object, see docs/selectors.md) the session diff must
        match; ``None`` scores ``"C"`` when any table changed in data or schema.
    :param interim_score: compute a fresh diff and leave nothing for other scorers.
    :param repo_path: the repository in the sandbox (default: the sample's ``repo_path``
        metadata, else ``/workspace``; a relative path is taken from the sandbox's working
        folder).
    :param evidence: what the sample's store keeps for scoring again without the sandbox:
        ``"none"``, ``"diffs"`` (the diff with every changed row) or ``"all"`` (the final
        databases too; docs/inspect.md#inspect-rescoring).
    """
    return build(
        "db_change",
        selector=selector,
        interim_score=interim_score,
        repo_path=repo_path,
        evidence=evidence,
    )


@scorer(name="db_diff_change_scorer", metrics=type_metrics("db_diff_change"))
def db_diff_change_scorer(
    selector: Any = None,
    test_patterns: Sequence[str] | None = None,
    *,
    repo_path: str | None = None,
    count_test_changes: bool = True,
    evidence: str = DEFAULT_LEVEL,
) -> Scorer:
    """Score changes that happen only in this repository, not in the reference checkout. The
    reference checkout is the sample's ``reference_repo_dir``; both runs take place in the
    sandbox (docs/inspect.md).

    :param selector: a selector (JSON object) for the changes this repository makes and the
        reference does not: the ``after_only`` part of the diff-of-diffs, with the
        ``from_tests`` part; None scores ``"C"`` for any such change.
    :param test_patterns: globs of test files copied into the reference copy, default
        ``tests/**/*.py``, ``tests/**/*.js``, ``tests/**/*.ts``.
    :param repo_path: the repository in the sandbox (default: the sample's ``repo_path``
        metadata, else ``/workspace``; a relative path is taken from the sandbox's working
        folder).
    :param count_test_changes: false leaves out ``from_tests`` (the changes this repository's
        test files make, found by running the reference's own tests): only ``after_only``
        counts, and no baseline runs.
    :param evidence: what the sample's store keeps for scoring again without the sandbox:
        ``"none"``, or ``"diffs"`` and ``"all"`` (the three diffs with every changed row;
        docs/inspect.md#inspect-rescoring).
    """
    return build(
        "db_diff_change",
        selector=selector,
        test_patterns=test_patterns,
        repo_path=repo_path,
        count_test_changes=count_test_changes,
        evidence=evidence,
    )


@scorer(name="file_contents_scorer", metrics=type_metrics("file_contents"))
def file_contents_scorer(
    folder_path: str,
    search_string: str,
    case_sensitive: bool = True,
    recursive: bool = True,
    file_extensions: Sequence[str] | None = None,
    interim_score: bool = False,
    *,
    repo_path: str | None = None,
    exclude: list[str] | None = None,
) -> Scorer:
    """A scorer that looks for ``search_string`` in the files under ``folder_path``. The folder
    is read to the evaluator's machine and searched there, every file, binary ones too
    (docs/inspect.md).

    :param folder_path: the folder in the sandbox: absolute, or relative to the repository.
    :param search_string: the text to find, as its UTF-8 bytes (in binary files too).
    :param case_sensitive: false also finds the string in other letter cases.
    :param recursive: false searches only the files directly in ``folder_path``.
    :param file_extensions: only files ending so (``[".py", "txt"]``); all when None.
    :param interim_score: kept for compatibility; a search shares nothing anyway.
    :param repo_path: the repository in the sandbox (default: the sample's ``repo_path``
        metadata, else ``/workspace``; a relative path is taken from the sandbox's working
        folder).
    :param exclude: folders not to search, relative to the repository root.
    """
    return build(
        "file_contents",
        folder_path=folder_path,
        search_string=search_string,
        case_sensitive=case_sensitive,
        recursive=recursive,
        file_extensions=file_extensions,
        interim_score=interim_score,
        repo_path=repo_path,
        exclude=exclude,
    )


@scorer(name="sandbox_state_scorer", metrics=type_metrics("sandbox_state"))
def sandbox_state_scorer(
    command: str,
    cwd: str | None = None,
    timeout: int | None = 60,
    *,
    repo_path: str | None = None,
    env: dict[str, str] | None = None,
) -> Scorer:
    """A scorer that runs ``command`` with ``/bin/sh -c`` and checks its exit code. It runs in
    the sandbox; the repository cannot shadow it: ``PATH`` and ``PYTHONPATH`` keep no folder
    inside it, ``PYTHONSAFEPATH=1``, ``env`` is set last.

    :param command: the shell command; ``"C"`` when it exits with status 0.
    :param cwd: the folder it runs in, in the sandbox: absolute, or relative to the repository
        (default: the repository).
    :param timeout: seconds; past it the command's whole process group is killed. ``None``: no
        timeout.
    :param repo_path: the repository in the sandbox (default: the sample's ``repo_path``
        metadata, else ``/workspace``; a relative path is taken from the sandbox's working
        folder).
    :param env: environment variables the evaluator adds (after ``PATH`` and ``PYTHONSAFEPATH``
        are set, so it may change them).
    """
    return build(
        "sandbox_state",
        command=command,
        cwd=cwd,
        timeout=timeout,
        repo_path=repo_path,
        env=env,
    )


@scorer(name="composite_scorer", metrics=type_metrics("composite"))
def composite_scorer(
    scorers: Sequence[Scorer],
    formula: str | composite.FormulaFunction,
) -> Scorer:
    """A scorer whose value is ``formula`` over the scores of ``scorers``.

    :param scorers: Inspect scorers of this package or others; each one's name in the formula is
        its registry name without ``_scorer`` (``db_diff_change.value == "C"``). Those of this
        package that already scored the sample are reused (unless ``interim_score``); others are
        run now.
    :param formula: an expression such as ``"max(a.value, b.value)"`` (checked now; the language
        is in docs/configuration.md), or a callable taking the scores by name, each a
        :class:`ScoreView` (``scores["a"].value`` or ``scores["a"]["value"]``).
    """
    return build(
        "composite",
        scorers=scorers,
        formula=formula,
    )


# [[[end]]]


def register_log_names(scorers: Sequence[Callable[..., Scorer]]) -> None:
    """Each of ``scorers`` also under the name Inspect writes into eval logs, the registry
    name without this package's prefix (``db_change_scorer``), unless that name is taken.

    ``inspect score LOG`` without ``--scorer`` looks the log's names up as they are, after
    loading the task file (which imports this module); Inspect itself finds only the prefixed
    name (``pytest_scoring/db_change_scorer``), by this package's entry point. The alias builds
    the same scorer, so a re-scored log names it as the eval did.
    """
    from inspect_ai._util.registry import RegistryInfo
    from inspect_ai._util.registry import registry_add
    from inspect_ai._util.registry import registry_lookup

    for factory in scorers:
        info = registry_info(factory)
        short = info.name.rpartition("/")[2]
        if short != info.name and registry_lookup("scorer", short) is None:
            alias = functools.wraps(factory)(functools.partial(factory))
            registry_add(alias, RegistryInfo(type="scorer", name=short, metadata=info.metadata))


register_log_names(
    [
        globals()[f"{kind.name}_scorer"]
        for kind in BUILTIN_TYPES.values()
        if kind.inspect and kind.inspect.registered
    ]
)
