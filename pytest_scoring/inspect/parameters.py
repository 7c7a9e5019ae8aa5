"""The Inspect scorers' own parameters: how a sample's inputs are gathered in its sandbox.

A scorer type's parameters come from its registry entry
(:class:`~pytest_scoring.scorers.scorer_type.ScorerType`); these are the ones only the Inspect
front end has. A type's :class:`~pytest_scoring.scorers.scorer_type.InspectForm` names those
its Inspect scorer takes, and ``python docs/cog_helpers.py`` writes the scorers of
``pytest_scoring/inspect/scorers.py`` from both. Importing this module imports no Inspect AI.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Final
from typing import final


@final
@dataclass(frozen=True)
class FrontParameter:
    """One parameter of the Inspect front end, as the generated code writes it."""

    #: Its annotation, as source text.
    annotation: str
    #: Its default, as source text.
    default: str
    #: What it does (one paragraph).
    doc: str


FRONT_PARAMETERS: Final = {
    "repo_path": FrontParameter(
        "str | None",
        "None",
        "the repository in the sandbox (default: the sample's ``repo_path`` metadata, else "
        "``/workspace``; a relative path is taken from the sandbox's working folder).",
    ),
    "expected_tests": FrontParameter(
        "Any",
        "None",
        "the tests that count and what each must do (default: the sample's "
        "``expected_tests`` metadata): a list of ids, ``{id: outcome}``, JSON text of either, "
        "or a file or folder on the evaluator's machine (docs/scoring.md#expected-tests).",
    ),
    "strict": FrontParameter(
        "str | Sequence[str]",
        '"default"',
        'the integrity signal kinds that make the score ``"N"``, counted as failed '
        '(docs/scoring.md#integrity): ``"none"``, ``"default"``, ``"all"``, or kinds.',
    ),
    "tests_from": FrontParameter(
        "str | Path | None",
        "None",
        "a folder of the evaluator's machine laid out like the repository (usually the "
        "reference): its tests, conftests and pytest configuration replace the repository's "
        "in the sandbox before the tests run, by ``run --tests-from``'s rule (default: the "
        "sample's ``tests_from`` metadata; docs/inspect.md#inspect-tests-from).",
    ),
    "black_box": FrontParameter(
        "bool",
        "False",
        "with ``tests_from`` only: the test process may load no file of the repository but "
        "the evaluator's tests (``run --black-box``): one that does ends the session, and the "
        'score is ``"N"`` naming it (docs/inspect.md#inspect-black-box).',
    ),
    "verifier_sandbox": FrontParameter(
        "str | None",
        "None",
        "a second sandbox of the sample (a service of the pristine image): only the files "
        "under the repository are copied there and the tests run there, away from the agent's "
        "processes and site-packages (docs/inspect.md#inspect-verifier).",
    ),
    "env": FrontParameter(
        "Mapping[str, str] | None",
        "None",
        "variables the tests get, ``{NAME: VALUE}``, set over the pinned ones (default: the "
        "sample's ``env`` metadata; docs/scoring.md#determinism).",
    ),
    "retries": FrontParameter(
        "int",
        "0",
        "the tests that did not pass run again, each time in a fresh pytest process and a "
        "fresh copy of the repository, up to this many times (docs/scoring.md#reruns).",
    ),
    "flaky": FrontParameter(
        "str",
        "DEFAULT_FLAKY",
        'how a test whose attempts differ counts: ``"fail"`` (it must pass every attempt), '
        '``"pass"`` (one passing attempt is enough), ``"exclude"`` (left out of ``total``); '
        "the flaky tests are in the score's ``flaky`` metadata.",
    ),
    "evidence": FrontParameter(
        "str",
        "DEFAULT_LEVEL",
        "what the sample's store keeps for scoring again without the sandbox (``inspect "
        'score``): ``"none"``, ``"diffs"`` (the run\'s outcomes) or ``"all"`` '
        "(docs/inspect.md#inspect-rescoring).",
    ),
}
