"""What the Inspect scorers of one sample share: the kit, the one test run, host folders.

Every scorer and solver of a sample looks up the same :class:`SampleScoring` (by the sample's
``TaskState``): the repository's tests run once per sample and repository, through the launcher
and the probe, whose stream the sandbox keeps in a file; every scorer folds that stream into its
own tally (with its own expected set) by the one outcome rule
(:mod:`pytest_scoring.core.outcomes`). Right after the run the helper backs up the
repository's databases in the sandbox, so the state the tests left is the one diffed, whatever
later scorers run there.

Host folders (pulled snapshots, the reference copy, the diff store) are removed when the
sample's state is gone.
"""

from __future__ import annotations

import posixpath
import secrets
import shutil
import tempfile
import weakref
from collections.abc import Mapping
from collections.abc import Sequence
from dataclasses import dataclass
from dataclasses import field
from pathlib import Path
from pathlib import PurePosixPath
from typing import Any
from typing import Final

import anyio
from inspect_ai.hooks import Hooks
from inspect_ai.hooks import SampleEnd
from inspect_ai.hooks import hooks
from inspect_ai.solver import TaskState
from inspect_ai.util import SandboxEnvironment
from inspect_ai.util import sandbox

from pytest_scoring.core.determinism import DEFAULT_FLAKY
from pytest_scoring.core.determinism import PINNED_UMASK
from pytest_scoring.core.determinism import FlakyRule
from pytest_scoring.core.determinism import check_retries
from pytest_scoring.core.determinism import env_assignments
from pytest_scoring.core.determinism import pinned_environment
from pytest_scoring.core.outcomes import OutcomeTally
from pytest_scoring.core.score import Score
from pytest_scoring.core.score import cap_text
from pytest_scoring.core.settings import DEFAULT_DB_PATTERNS
from pytest_scoring.core.settings import ScoringSettings
from pytest_scoring.core.signals import DEFAULT_STRICT
from pytest_scoring.core.signals import EvaluatorSide
from pytest_scoring.core.signals import Signal
from pytest_scoring.core.signals import StrictKinds
from pytest_scoring.core.signals import cap_signals
from pytest_scoring.core.signals import early_end_signal
from pytest_scoring.db.discovery import matches_pattern
from pytest_scoring.db.snapshot import Snapshot
from pytest_scoring.errors import OptionError
from pytest_scoring.errors import ScoringError
from pytest_scoring.evaluation.area import EvaluatorsTests
from pytest_scoring.evaluation.options import ScoreOptionParser
from pytest_scoring.fs.walk import SKIPPED_DIRS
from pytest_scoring.inspect.interpreter import interpreter_signals
from pytest_scoring.inspect.kit import HELPER_TIMEOUT
from pytest_scoring.inspect.kit import SandboxKit
from pytest_scoring.inspect.kit import SandboxProblem
from pytest_scoring.kit.channel import KEY_BYTES
from pytest_scoring.kit.launch import BLACK_BOX
from pytest_scoring.kit.launch import ONLY
from pytest_scoring.process.children import BlackBox
from pytest_scoring.process.children import grace_period
from pytest_scoring.process.stream import ProbeState
from pytest_scoring.process.stream import feed_file
from pytest_scoring.process.witness import ChildEnding
from pytest_scoring.process.witness import black_box_refusal
from pytest_scoring.process.witness import not_started
from pytest_scoring.process.witness import witness_signals
from pytest_scoring.reference.child import OUTPUT_TAIL
from pytest_scoring.reference.child import ChildRun
from pytest_scoring.reference.child import reference_timeout
from pytest_scoring.reference.expected import ExpectedTests
from pytest_scoring.reference.test_changes import change_signals
from pytest_scoring.reference.test_changes import compare_tests
from pytest_scoring.reference.tests_from import install_tests
from pytest_scoring.scorers.base import ScoringContext
from pytest_scoring.scorers.inputs import ScorerInputs

#: Where the repository is in the sandbox when neither the scorer nor the sample says.
DEFAULT_REPO_PATH: Final = "/workspace"
#: Sample metadata keys the scorers read.
REPO_PATH_KEY: Final = "repo_path"
DETERMINISTIC_KEY: Final = "deterministic"
TESTS_FROM_KEY: Final = "tests_from"
ENV_KEY: Final = "env"
#: pytest's arguments in the sandbox: no cache folder written into the repository.
PYTEST_ARGS: Final = ("-p", "no:cacheprovider")
#: pytest's exit statuses of a session that ended as pytest meant it to.
PYTEST_ENDED: Final = frozenset({0, 1, 2, 5})


@dataclass
class TestRun:
    """One pytest session in a folder of the sandbox, and what its probe wrote."""

    # pytest would try to collect a class named Test*; this one is no test.
    __test__ = False

    #: The folder it ran in (absolute, in the sandbox).
    root: str
    #: The probe's stream, as it was written, read back to a file of the host (read a chunk
    #: at a time: the repository's code can write into it).
    stream: Path
    #: The run's key: only the lines it verifies are read.
    key: bytes
    run: ChildRun
    #: The helper's answer about the databases it backed up after the run.
    databases: dict[str, Any]
    #: Where those backups are in the sandbox.
    backups: str
    #: The snapshot read back to the host (on first use).
    snapshot: Snapshot | None = None
    #: ``tests_from``: the evaluator's tests put in before the run, and what the repository
    #: had changed in its own (``tests_modified``).
    tests: EvaluatorsTests | None = None
    #: ``interpreter_modified``: what the check of the sandbox's interpreter found first.
    interpreter: list[Signal] = field(default_factory=list)
    #: ``black_box``: the test process could load no file of the repository but the tests'.
    black_box: bool = False
    #: The sample's sandbox it ran in (None: the default one; else ``verifier_sandbox``).
    sandbox: str | None = None
    #: ``{"pid", "command"}`` of each process the agent left running, stopped before the run.
    stopped: list[dict[str, Any]] = field(default_factory=list)
    #: ``retries``: the reruns after this run, in order, each in a fresh copy of the folder.
    reruns: list[TestRun] = field(default_factory=list)
    #: Of a rerun: the ids (as this run's tally has them) of the tests it was to run.
    selected: frozenset[str] = frozenset()
    #: How it ran (None: a rerun), for its reruns.
    launch: _Launch | None = None
    #: A copy of the folder made before the run, for reruns ("": none).
    pristine: str = ""

    def probe(self, tally: OutcomeTally | None = None) -> ProbeState:
        """The stream folded into ``tally`` (a new one by default)."""
        state = ProbeState(root=Path(self.root), key=self.key, tally=tally or OutcomeTally())
        return feed_file(state, self.stream)

    def ending(self) -> ChildEnding:
        """How the run ended, for its witnesses (the helper's deadline is the evaluator's)."""
        run = self.run
        killed = run.signal is not None or run.error is not None
        return ChildEnding(
            exit_code=None if killed else run.exit_code,
            by_evaluator=run.timed_out,
            output=run.output,
        )

    def complete(self, state: ProbeState) -> bool:
        """The session ended as pytest meant it to (no timeout, no interrupt, no kill)."""
        status = state.exit_status()
        return (
            state.finished_session()
            and not state.interrupted()
            and status in PYTEST_ENDED
            and self.run.exit_code == status
            and not (self.run.timed_out or self.run.signal or self.run.error)
        )

    def context(
        self,
        settings: ScoringSettings,
        expected: ExpectedTests | None = None,
        strict: StrictKinds = DEFAULT_STRICT,
        flaky: FlakyRule = DEFAULT_FLAKY,
        retries: int = 0,
    ) -> ScoringContext:
        """A scoring context over this run and its first ``retries`` reruns, with
        ``expected`` as the expected set, ``strict`` the kinds that make the test scores
        ``"N"`` and ``flaky`` how a test whose attempts differ counts."""
        tally = OutcomeTally(flaky_rule=flaky)
        if expected is not None:
            tally.expected, tally.expected_source = expected.outcomes, expected.describe()
        state = self.probe(tally)
        side = self.evaluator_side(state)
        rerun_signals, side = self.attempts(tally, side, retries)
        inputs = ScorerInputs()
        if self.tests is not None:
            settings.tests_from = Path(self.tests.installed.path)
            self.tests.give(inputs)
        integrity = cap_signals([*self.signals(state, side), *rerun_signals], side)
        reason = not_started(state, self.ending())
        if state.refused is not None:  # black_box: the refusal ended the session, not tampering
            reason = black_box_refusal(state.refused, "black_box")
            integrity = [signal for signal in integrity if signal["kind"] != "early_end"]
        return ScoringContext(
            root=settings.root,
            tally=tally,
            settings=settings,
            inputs=inputs,
            integrity=integrity,
            # No process here is contained by us: partial containment as root cannot be.
            strict=strict.for_run(as_root=False).kinds,
            evaluator_side=side,
            complete=self.complete(state),
            not_started=reason,
        )

    def attempts(
        self, tally: OutcomeTally, side: EvaluatorSide, retries: int
    ) -> tuple[list[Signal], EvaluatorSide]:
        """The first ``retries`` reruns' outcomes as attempts of the tests ``tally`` reruns
        (with an expected set, its tests only; docs/scoring.md#reruns); the integrity
        signals of those reruns, which count as the run's own, and ``side`` with what the
        evaluator caused in them (its deadline)."""
        found: list[Signal] = []
        caused = list(side.caused)
        for rerun in self.reruns[:retries]:
            ids = [nodeid for nodeid in tally.rerun_ids() if nodeid in rerun.selected]
            state = rerun.probe()
            its_side = rerun.evaluator_side(state)
            found += rerun.signals(state, its_side)
            caused += its_side.caused
            theirs = state.tally
            for nodeid in ids:
                its_id = theirs.id_prefix + nodeid.removeprefix(tally.id_prefix)
                tally.record_attempt(nodeid, theirs.outcome_of(its_id))
        return found, EvaluatorSide(paths=side.paths, caused=tuple(caused))

    def signals(self, state: ProbeState, side: EvaluatorSide) -> list[Signal]:
        """The integrity signals of the run, as ``pytest-scoring run`` reports them (``side``:
        what the evaluator caused)."""
        signals = [*state.integrity, *witness_signals(state, self.ending())]
        signals += self.interpreter
        if self.tests is not None:
            signals += change_signals(self.tests.changes)
        if state.tally.expected is not None:  # with a set, selection cannot change a score
            signals = [signal for signal in signals if signal["kind"] != "selection"]
        early = self._early_end(state)
        return cap_signals([*signals, *([early] if early else [])], side)

    def _early_end(self, state: ProbeState) -> Signal | None:
        reason, file = state.stop()
        if not state.finished_session():
            reason = "the run timed out" if self.run.timed_out else "pytest ended early"
        return early_end_signal(state.tally.not_run(), reason, file)

    def evaluator_side(self, state: ProbeState) -> EvaluatorSide:
        """The evaluator's deadline ended the run: its ``early_end`` informs (the tests that
        did not run still count as failed)."""
        paths = frozenset(self.tests.installed.evaluators if self.tests else ())
        early = self._early_end(state)
        if early is None or not self.run.timed_out or early["file"] is not None:
            return EvaluatorSide(paths=paths)
        return EvaluatorSide(paths=paths, caused=(early,))


class SampleScoring:
    """The kit, the runs and the host folder of one sample (one epoch of it)."""

    def __init__(self) -> None:
        self.folder = Path(tempfile.mkdtemp(prefix="pytest-scoring-inspect-"))
        self.lock = anyio.Lock()
        #: The kit in each sandbox of the sample used so far (None: the default sandbox).
        self._kits: dict[str | None, SandboxKit | SandboxProblem] = {}
        #: Folders of a sandbox whose files are this machine's, removed with the host folder.
        self.shared: list[Path] = []
        self._runs: dict[str, TestRun] = {}
        #: ``repo_path`` as given -> the folder it names in the sandbox.
        self._repositories: dict[str, str] = {}
        #: That folder -> ``repo_path`` as given (where a verifier gets its copy).
        self._given: dict[str, str] = {}
        #: Scores of this package's scorers, by the scorer's identity (``composite`` reuses).
        self.scores: dict[int, Score] = {}
        #: Shared inputs by name (a diff of ``diff_databases``, a reference side…).
        self.resources: dict[str, Any] = {}
        self._count = 0

    def local(self, name: str) -> Path:
        """A new path in the host folder (not created)."""
        self._count += 1
        return self.folder / f"{self._count:04d}-{name}"

    async def kit(self, name: str | None = None) -> SandboxKit:
        """The kit in the sample's sandbox ``name`` (default: the default one), written on
        first use.

        :raises SandboxProblem: when the sandbox has no Python or pytest to run the tests, or
            the sample has no sandbox of that name.
        """
        found = self._kits.get(name)
        if isinstance(found, SandboxProblem):
            raise found  # found once: every scorer says the same, nothing is written again
        if found is None:
            try:
                found = await SandboxKit.open(_environment(name))
            except SandboxProblem as problem:
                self._kits[name] = problem
                raise
            self._kits[name] = found
            if found.shared:
                self.shared.append(Path(found.folder))
        return found

    async def repository(self, state: TaskState, repo_path: str | None) -> str:
        """The repository's absolute path in the sandbox: ``repo_path``, else the sample's
        ``repo_path`` metadata, else ``/workspace``; a relative one is taken from the sandbox's
        working folder.

        :raises SandboxProblem: when it is not a folder there.
        """
        path = repo_path or state.metadata.get(REPO_PATH_KEY) or DEFAULT_REPO_PATH
        if not isinstance(path, str):
            raise SandboxProblem(f"repo_path: expected a path, got {type(path).__name__}")
        if path not in self._repositories:
            found = await (await self.kit()).resolve(path)
            if not found["is_dir"]:
                raise SandboxProblem(f"repo_path {path!r} is not a folder in the sandbox")
            self._repositories[path] = str(found["path"])
            self._given[str(found["path"])] = path
        return self._repositories[path]

    async def test_run(
        self,
        state: TaskState,
        repo: str,
        tests_from: str | None = None,
        black_box: bool = False,
        verifier: str | None = None,
        env: Mapping[str, str] | None = None,
        retries: int = 0,
    ) -> TestRun:
        """The repository's tests, run once for this sample (the first caller runs them); with
        ``tests_from`` (default: the sample's ``tests_from`` metadata), the evaluator's tests
        put in first, by ``run --tests-from``'s rule; with ``black_box`` as well, the test
        process may load no file of the repository but those (``run --black-box``); with
        ``verifier`` (a sandbox of the sample), the tests run there on a copy of ``repo``;
        ``env`` (default: the sample's ``env`` metadata) set over the pinned variables; the
        tests that did not pass run again up to ``retries`` times, each time in a fresh copy
        of the folder as it was before the run.

        :raises SandboxProblem: when the evaluator's tests cannot be put in, ``black_box``
            has no ``tests_from``, the verifier cannot be used, or the metadata's ``env`` is
            no mapping of variables.
        """
        if env is None and state.metadata.get(ENV_KEY) is not None:
            try:
                env = check_env(state.metadata[ENV_KEY], f"the sample's metadata {ENV_KEY!r}")
            except OptionError as error:
                raise SandboxProblem(str(error)) from None
        tests_from = tests_from or state.metadata.get(TESTS_FROM_KEY)
        if tests_from is not None and not isinstance(tests_from, str | Path):
            raise SandboxProblem(f"tests_from: expected a folder, got {type(tests_from).__name__}")
        if black_box and tests_from is None:
            raise SandboxProblem(
                "black_box: needs tests_from (or the sample's tests_from metadata): the "
                "evaluator's tests are the only files the test process may load"
            )
        variables = sorted((env or {}).items())
        key = f"{repo}|{tests_from or ''}|{black_box}|{verifier or ''}|{variables}"
        async with self.lock:
            if key not in self._runs:
                deterministic = bool(state.metadata.get(DETERMINISTIC_KEY))
                root = repo if verifier is None else await self.to_verifier(repo, verifier)
                tests = None
                if tests_from is not None:
                    tests = await self.put_tests(root, tests_from, verifier)
                args = tests.installed.args if tests else ()
                options = black_box_options(root, tests) if black_box else []
                test_run = await self.run_tests(
                    root, deterministic, args, options, verifier, env, retries
                )
                test_run.tests, test_run.black_box = tests, black_box
                self._runs[key] = test_run
            test_run = self._runs[key]
            while len(test_run.reruns) < retries and await self.rerun(test_run):
                pass
            return test_run

    async def to_verifier(self, repo: str, verifier: str) -> str:
        """Copy the files under ``repo`` (nothing else of the agent's sandbox) into the
        sandbox ``verifier``, at the ``repo_path`` it was given by; the copy's absolute path.

        :raises SandboxProblem: when ``verifier`` is no sandbox of the sample, or has no
            Python and pytest.
        """
        copy = self.local("repository")
        await (await self.kit()).pull(repo, copy)
        kit = await self.kit(verifier)
        await kit.push(copy, self._given.get(repo, repo))
        shutil.rmtree(copy, ignore_errors=True)
        return str((await kit.resolve(self._given.get(repo, repo)))["path"])

    async def put_tests(
        self, repo: str, tests_from: str | Path, sandbox_name: str | None = None
    ) -> EvaluatorsTests:
        """Make the tests of ``repo`` in the sandbox those of ``tests_from`` (a folder of the
        evaluator's machine), after the agent has finished and before any test runs: the
        repository is read back, compared (``tests_modified``) and given PATH's tests here by
        :func:`~pytest_scoring.reference.tests_from.install_tests`; what that replaced or
        removed goes in the sandbox (``sandbox_name``: default, the default one), and what
        it put in is written there.

        :raises SandboxProblem: naming PATH's problem (not a folder, a configuration that
            cannot be read, a file that cannot be copied).
        """
        path = Path(tests_from)
        if not path.is_dir():
            raise SandboxProblem(f"tests_from: {path} is not a folder on the evaluator's machine")
        kit = await self.kit(sandbox_name)
        copy = self.local("repository")
        await kit.pull(repo, copy)
        try:
            placed = await anyio.to_thread.run_sync(_put_tests, path, copy)
        except (ScoringError, OSError) as error:
            raise SandboxProblem(f"tests_from: {error}") from None
        installed = placed.installed
        theirs = sorted({*installed.replaced, *installed.added, *installed.evaluators})
        kit.discard(
            *(sandbox_join(repo, relpath) for relpath in sorted({*theirs, *installed.removed}))
        )
        staging = self.local("tests-from")
        await anyio.to_thread.run_sync(_stage, copy, theirs, staging)
        await kit.push(staging, repo)
        shutil.rmtree(copy, ignore_errors=True)
        return placed

    async def run_tests(
        self,
        root: str,
        deterministic: bool,
        args: Sequence[str] = (),
        launcher_options: Sequence[str] = (),
        sandbox_name: str | None = None,
        env: Mapping[str, str] | None = None,
        retries: int = 0,
    ) -> TestRun:
        """Run pytest in ``root`` of the sandbox ``sandbox_name`` (default: the default one)
        through the launcher (given ``launcher_options`` too), under the kit's supervisor;
        then back up the databases it left (one helper process for all three). With
        ``retries``, a copy of ``root`` is made first, from which each rerun gets its own
        (:meth:`rerun`).

        The channel is ``run``'s: the helper gets the run's key on its standard input and hands
        it to the launcher on a pipe, and the probe writes to a descriptor of a file without a
        name, which the helper saves once the run's whole tree is gone. No path and no
        variable names either (docs/inspect.md#trust). The tests get ``run``'s pinned
        environment and umask, ``env`` over it (docs/scoring.md#determinism).
        """
        kit = await self.kit(sandbox_name)
        backups = kit.path("databases")
        launch = _Launch(deterministic, tuple(args), tuple(launcher_options), env)
        first = [["interpreter"], kit.stop_command()]
        pristine = ""
        if retries:
            pristine = posixpath.join(kit.path("pristine"), posixpath.basename(root))
            first.append(["copy", f"--source={root}", f"--dest={pristine}"])
        test_run, answers = await self._launch(
            kit, launch, root, first, [snapshot_args(root, backups)]
        )
        checked, stopped = answers[:2]
        test_run.databases, test_run.backups = answers[-1], backups
        test_run.sandbox, test_run.stopped = sandbox_name, stopped["stopped"]
        test_run.interpreter = interpreter_signals(checked)
        test_run.launch, test_run.pristine = launch, pristine
        return test_run

    async def rerun(self, test_run: TestRun) -> bool:
        """One more rerun of the tests of ``test_run`` that did not pass in their latest
        attempt (none left: False): a fresh pytest process through the same launcher, probe
        and channel, in a fresh copy of the folder as it was before the run (as it was after
        it when the first caller asked for no reruns), given the launcher's ``--only``
        (docs/scoring.md#reruns)."""
        state = test_run.probe()
        tally = state.tally
        test_run.attempts(tally, EvaluatorSide(), len(test_run.reruns))
        ids = tally.rerun_ids()
        if not ids or test_run.launch is None or not test_run.complete(state):
            return False  # reruns follow a session that ended as pytest meant it to
        kit, launch = await self.kit(test_run.sandbox), test_run.launch
        pristine = test_run.pristine or test_run.root
        attempt = len(test_run.reruns) + 1
        only = kit.path("only.txt")
        listed = "".join(f"{nodeid.removeprefix(tally.id_prefix)}\n" for nodeid in ids)
        await kit.environment.write_file(only, listed.encode())
        copy = posixpath.join(kit.path(f"rerun-{attempt}"), posixpath.basename(pristine))
        rerun = launch.with_root(copy, test_run.tests, test_run.black_box)
        copied = [["copy", f"--source={pristine}", f"--dest={copy}"]]
        found, _ = await self._launch(kit, rerun, copy, copied, [], f"{ONLY}{only}")
        # With the next helper command (this one removed what was left first); nothing of
        # a rerun's copy is read afterwards.
        kit.discard(only, posixpath.dirname(copy))
        found.selected = frozenset(ids)
        test_run.reruns.append(found)
        return True

    async def _launch(
        self,
        kit: SandboxKit,
        launch: _Launch,
        root: str,
        before: list[list[str]],
        after: list[list[str]],
        *only: str,
    ) -> tuple[TestRun, list[dict[str, Any]]]:
        """pytest through the launcher in ``root``, helper commands ``before`` and ``after``
        it in the same helper process; the run, and the answers of those commands."""
        key = secrets.token_bytes(KEY_BYTES)
        probe_file = kit.path("probe.jsonl")
        options = ["--deterministic"] if launch.deterministic else []
        options += [*launch.options, *only]
        options += [f"--ignore-option={name}" for name in ScoreOptionParser().ignored_in_child()]
        timeout = reference_timeout()
        pytest = [kit.python, kit.launcher(), *options, "--", *PYTEST_ARGS, *launch.args]
        grace = grace_period(timeout)
        run = kit.run_command(
            pytest,
            root,
            timeout,
            env=pinned_environment({}, launch.env),
            umask=PINNED_UMASK,
            log=kit.path("pytest.log"),
            ends=OUTPUT_TAIL,
            grace=grace,
            stream=probe_file,
        )
        commands = [*before, run, kit.parts_command(probe_file), *after]
        seconds = timeout + grace + HELPER_TIMEOUT
        answers = await kit.batch(commands, timeout=seconds, secret=key.hex())
        answer, stream = answers[len(before) : len(before) + 2]
        local = self.local("probe.jsonl")
        await kit.read_parts(stream["parts"], local)
        test_run = TestRun(root, local, key, _child_run(answer), {}, "")
        probe = test_run.probe()
        tampered = "; ".join(s["detail"] for s in witness_signals(probe, test_run.ending()))
        test_run.run.tampered = tampered or None
        if probe.finished_session() and not test_run.run.timed_out and not tampered:
            test_run.run.tally = probe.to_json()
        return test_run, [*answers[: len(before)], *answers[len(before) + 2 :]]

    async def snapshot(self, test_run: TestRun, patterns: list[str], source: str) -> Snapshot:
        """The databases ``test_run`` left, read back to the host once (other patterns than the
        default ones: the databases under its folder now)."""
        if not set(patterns) <= set(DEFAULT_DB_PATTERNS):
            return await self.sandbox_snapshot(test_run.root, patterns, source, test_run.sandbox)
        if test_run.snapshot is None:
            kit = await self.kit(test_run.sandbox)
            target = self.local("databases")
            await kit.pull(test_run.backups, target)
            test_run.snapshot = read_snapshot(test_run.databases, target, test_run.root, source)
        return only_matching(test_run.snapshot, patterns)

    async def sandbox_snapshot(
        self, root: str, patterns: list[str], source: str, sandbox_name: str | None = None
    ) -> Snapshot:
        """The databases under ``root`` of the sandbox ``sandbox_name`` (default: the default
        one) now, backed up there, read back."""
        kit = await self.kit(sandbox_name)
        backups = kit.path("databases")
        answer = await kit.helper(*snapshot_args(root, backups, patterns))
        target = self.local("databases")
        await kit.pull(backups, target)
        kit.discard(backups)
        return only_matching(read_snapshot(answer, target, root, source), patterns)


@dataclass(frozen=True)
class _Launch:
    """How the tests of one sample run, the same for the run and each rerun."""

    deterministic: bool
    args: tuple[str, ...]
    options: tuple[str, ...]
    env: Mapping[str, str] | None

    def with_root(self, root: str, tests: EvaluatorsTests | None, black_box: bool) -> _Launch:
        """The same in ``root`` (a rerun's copy): ``black_box``'s paths are the copy's."""
        options = tuple(black_box_options(root, tests)) if black_box else self.options
        return _Launch(self.deterministic, self.args, options, self.env)


def check_env(value: Any, where: str) -> dict[str, str]:
    """``env=``: variables for the tests, ``{NAME: VALUE}``, checked as ``--env`` is.

    :raises OptionError: naming ``where`` and what is wrong.
    """
    if not isinstance(value, Mapping):
        raise OptionError(
            f"{where}: expected a mapping of NAME to VALUE, got {type(value).__name__}"
        )
    for name, text in value.items():
        if not isinstance(name, str) or not isinstance(text, str) or "=" in name:
            raise OptionError(
                f"{where}: {name!r}: {text!r} is not NAME=VALUE (e.g. TZ=Europe/Paris)"
            )
    return env_assignments([f"{name}={text}" for name, text in value.items()], where)


def check_reruns(retries: Any) -> int:
    """``retries=``: a whole number from 0.

    :raises OptionError: naming it.
    """
    if not isinstance(retries, int) or isinstance(retries, bool):
        raise OptionError(f"retries: {retries!r} is not a number of reruns (0 or more)")
    return check_retries(retries, "retries")


def _environment(name: str | None) -> SandboxEnvironment:
    """The sample's sandbox ``name`` (None: the default one).

    :raises SandboxProblem: when the sample has none of that name.
    """
    try:
        return sandbox(name)
    except ValueError as error:
        raise SandboxProblem(f"verifier_sandbox: {error}") from None


def check_tests_from(tests_from: str | Path | None) -> None:
    """``tests_from=``: a folder of the evaluator's machine.

    :raises OptionError: naming what it is instead.
    """
    if tests_from is not None and not Path(tests_from).is_dir():
        raise OptionError(f"tests_from: {tests_from} is not a folder")


def black_box_options(repo: str, tests: EvaluatorsTests | None) -> list[str]:
    """The launcher's ``--black-box`` options in the sandbox: the files ``tests_from`` put
    into ``repo`` are the only ones of it the test process may load."""
    evaluators = tests.installed.evaluators if tests is not None else ()
    paths = [PurePosixPath(sandbox_join(repo, relpath)) for relpath in evaluators]
    return [BLACK_BOX, *BlackBox(paths).options()]


def _put_tests(path: Path, copy: Path) -> EvaluatorsTests:
    """``run --tests-from``'s rule on the host's copy of the repository: compared, then
    given PATH's tests."""
    changes = compare_tests(copy, path)
    return EvaluatorsTests(install_tests(path, copy, str(path)), changes)


def _stage(copy: Path, relpaths: Sequence[str], staging: Path) -> None:
    """The files and folders ``relpaths`` of ``copy`` (PATH's, just put in) in ``staging``."""
    staging.mkdir()
    for relpath in relpaths:
        source, target = copy / relpath, staging / relpath
        target.parent.mkdir(parents=True, exist_ok=True)
        if source.is_dir() and not source.is_symlink():
            shutil.copytree(source, target, symlinks=True)
        elif source.exists() or source.is_symlink():
            shutil.copy2(source, target, follow_symlinks=False)


def _child_run(answer: dict[str, Any]) -> ChildRun:
    """How the helper says a run ended, as the plugin's reference rerun reports it."""
    output = answer.get("stdout", {}).get("tail", "")
    return ChildRun(
        exit_code=answer.get("exit_code"),
        timed_out=bool(answer.get("timed_out")),
        duration=float(answer.get("duration") or 0.0),
        tally=None,
        output=cap_text(output, OUTPUT_TAIL),
        signal=answer.get("signal"),
        error=answer.get("error"),
    )


def snapshot_args(
    root: str, out: str, patterns: list[str] | tuple[str, ...] = DEFAULT_DB_PATTERNS
) -> list[str]:
    """The helper's ``snapshot`` of ``root`` into ``out``: every name a pattern may match."""
    args = ["snapshot", f"--root={root}", f"--out={out}"]
    args += [f"--pattern={pattern}" for pattern in patterns]
    return args + [f"--skip={name}" for name in SKIPPED_DIRS]


def read_snapshot(answer: dict[str, Any], copies: Path, root: str, source: str) -> Snapshot:
    """The helper's backups (pulled to ``copies``) as a :class:`Snapshot` of ``root``."""
    snapshot = Snapshot(source=source, root=Path(PurePosixPath(root)))
    for relpath, entry in answer["databases"].items():
        if "error" in entry:
            snapshot.errors[relpath] = entry["error"]
        elif (copies / relpath).is_file():
            snapshot.files[relpath] = copies / relpath
        else:
            snapshot.errors[relpath] = f"{relpath}: its copy did not reach the evaluator"
        if "real_path" in entry:
            snapshot.real_paths[relpath] = entry["real_path"]
    return snapshot


def only_matching(snapshot: Snapshot, patterns: list[str]) -> Snapshot:
    """The databases of ``snapshot`` that ``patterns`` match (``db/discovery.py``'s rule)."""

    def wanted(relpath: str) -> bool:
        return any(matches_pattern(relpath, pattern) for pattern in patterns)

    return Snapshot(
        source=snapshot.source,
        files={key: path for key, path in snapshot.files.items() if wanted(key)},
        errors={key: text for key, text in snapshot.errors.items() if wanted(key)},
        root=snapshot.root,
        real_paths={key: path for key, path in snapshot.real_paths.items() if wanted(key)},
    )


def close_resources(resources: dict[str, Any], folder: Path, shared: list[Path]) -> None:
    """Close the shared resources (diff stores) and remove the host folder, and the kit's
    folder of a sandbox whose files are this machine's (Inspect's ``local``: its temporary
    folder is the evaluator's)."""
    for resource in resources.values():
        close = getattr(resource, "close", None)
        if callable(close):
            close()
    resources.clear()
    for path in [folder, *shared]:
        shutil.rmtree(path, ignore_errors=True)


_SAMPLES: weakref.WeakKeyDictionary[TaskState, SampleScoring] = weakref.WeakKeyDictionary()
#: The same, by the sample's run (``TaskState.uuid``): closed when Inspect says it ended.
_RUNNING: dict[str, SampleScoring] = {}


def sample_scoring(state: TaskState) -> SampleScoring:
    """The sample's shared state (made on first use, removed when the sample ends, or at the
    latest when ``state`` is gone)."""
    found = _SAMPLES.get(state)
    if found is None:
        found = _SAMPLES[state] = _RUNNING[state.uuid] = SampleScoring()
        weakref.finalize(state, close_resources, found.resources, found.folder, found.shared)
    return found


@hooks(name="pytest_scoring_cleanup", description="Removes pytest-scoring's folders of a sample")
class SampleCleanup(Hooks):
    """Removes a sample's folders as soon as it ends: Inspect may keep its ``TaskState`` for
    the rest of the process, and the ``local`` sandbox's kit folder is in the evaluator's
    temporary folder (one per sample, else)."""

    async def on_sample_end(self, data: SampleEnd) -> None:
        found = _RUNNING.pop(data.sample_id, None)
        if found is not None:
            close_resources(found.resources, found.folder, found.shared)


def sandbox_join(root: str, path: str) -> str:
    """``path`` (absolute, or relative to ``root``) as a sandbox path."""
    return posixpath.normpath(posixpath.join(root, path))
