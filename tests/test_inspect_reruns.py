"""``env=``, ``retries=`` and ``flaky=`` of the Inspect test scorers, in real offline evals
(docs/scoring.md#determinism, docs/scoring.md#reruns)."""

from __future__ import annotations

import gc
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from inspect_ai import Task
from inspect_ai.dataset import Sample
from test_inspect import BENCHJACK
from test_inspect import agent_done
from test_inspect import evaluate
from test_inspect import make
from test_inspect import sandbox_python  # noqa: F401 (a fixture)
from test_inspect import scores

from pytest_scoring.errors import OptionError
from pytest_scoring.inspect import all_tests_pass_scorer
from pytest_scoring.inspect import percent_failing_tests_scorer
from pytest_scoring.inspect import percent_passing_tests_scorer
from pytest_scoring.inspect import run_tests
from pytest_scoring.inspect import test_runner_scorer as runner_scorer

pytestmark = pytest.mark.filterwarnings(
    "ignore:Exception ignored in.*MemoryObjectReceiveStream:pytest.PytestUnraisableExceptionWarning"
)


@pytest.fixture(autouse=True)
def collect_inspects_streams() -> Iterator[None]:
    """Inspect's eval leaves anyio memory streams to the garbage collector: collected in the
    test's teardown, where the warning above is ignored, not when the session ends."""
    yield
    gc.collect()


#: One test passes, one fails its first attempt only (its attempts are counted in a file of
#: the evaluator's, outside every copy of the repository: seeded, the same every time), one
#: always fails, one passes only with the evaluator's ``env``.
FLAKY_SUITE = """\
import os, pathlib

def test_passes():
    pass

def test_fails_the_first_time():
    counter = pathlib.Path(os.environ["ATTEMPTS_FILE"])
    runs = int(counter.read_text()) if counter.exists() else 0
    counter.write_text(str(runs + 1))
    assert runs >= 1

def test_always_fails():
    assert False

def test_gets_the_evaluators_variables():
    assert os.environ["SCORING_FLAVOUR"] == "mint"
    assert os.environ["TZ"] == "Europe/Paris" and os.environ["LANG"] == "C.UTF-8"
"""
FLAKY = "test_flaky.py::test_fails_the_first_time"
ALWAYS = "test_flaky.py::test_always_fails"


def flaky_repo(tmp_path: Path, conftest: str = "") -> Path:
    repo = make(tmp_path / "repo")
    (repo / "test_flaky.py").write_text(FLAKY_SUITE)
    if conftest:
        (repo / "conftest.py").write_text(conftest)
    return repo


def sample(repo: Path, name: str = "repo", **metadata: Any) -> Sample:
    files = {"repo": str(repo)}
    return Sample(id=name, input="x", files=files, metadata={"repo_path": "repo", **metadata})


def flaky_task(tmp_path: Path, scorers: list[Any], conftest: str = "") -> Task:
    dataset = [sample(flaky_repo(tmp_path, conftest))]
    return Task(dataset=dataset, solver=agent_done(), scorer=scorers, sandbox="local")


def variables(tmp_path: Path) -> dict[str, str]:
    """The evaluator's ``env=``: where the flaky test counts its attempts, and two more."""
    attempts = tmp_path / "attempts"
    return {"ATTEMPTS_FILE": str(attempts), "SCORING_FLAVOUR": "mint", "TZ": "Europe/Paris"}


@pytest.mark.slow
@pytest.mark.usefixtures("sandbox_python")
def test_a_seeded_flaky_test_is_found_with_retries_and_counts_as_flaky_says(
    tmp_path: Path,
) -> None:
    env = variables(tmp_path)
    task = flaky_task(
        tmp_path,
        [
            all_tests_pass_scorer(env=env, retries=2),  # flaky="fail"
            percent_passing_tests_scorer(env=env, retries=2, flaky="pass"),
            percent_failing_tests_scorer(env=env, retries=2, flaky="exclude"),
        ],
    )
    found = scores(evaluate(task, tmp_path))["repo"]
    # Three attempts of the test that always fails, two of the flaky one: one test run, two
    # reruns (the second of the only test left), shared by the three scorers.
    assert Path(env["ATTEMPTS_FILE"]).read_text() == "2"
    for score in found.values():
        assert score.metadata["flaky"] == {FLAKY: ["failed", "passed"]}, score.explanation
        assert ALWAYS in score.metadata["failed_tests"]
    failing = found["all_tests_pass"]
    assert failing.value == "I"
    assert failing.metadata["counts"]["passed"] == 2  # the flaky test failed an attempt
    passing = found["percent_passing_tests"]
    assert passing.value == 75, passing.explanation
    excluded = found["percent_failing_tests"]
    assert excluded.metadata["counts"]["total"] == 3 and excluded.metadata["counts"]["flaky"] == 1
    assert excluded.value == pytest.approx(100 / 3, abs=0.01)


@pytest.mark.slow
@pytest.mark.usefixtures("sandbox_python")
def test_without_retries_the_flaky_test_fails_and_without_env_the_pinned_values_stay(
    tmp_path: Path,
) -> None:
    env = variables(tmp_path)
    task = flaky_task(
        tmp_path,
        [percent_passing_tests_scorer(env={"ATTEMPTS_FILE": env["ATTEMPTS_FILE"]})],
    )
    score = scores(evaluate(task, tmp_path))["repo"]["percent_passing_tests"]
    assert score.value == 25, score.explanation
    assert "flaky" not in score.metadata
    assert "test_flaky.py::test_gets_the_evaluators_variables" in score.metadata["failed_tests"]


#: A repository that rewrites its outcomes only when its tests run again.
REWRITES_ON_RERUN = f"""
import os, pathlib
if pathlib.Path(os.environ["ATTEMPTS_FILE"]).exists():
{BENCHJACK.replace(chr(10), chr(10) + "    ")}
"""


@pytest.mark.slow
@pytest.mark.usefixtures("sandbox_python")
def test_a_repository_that_tampers_only_when_rerun_is_n(tmp_path: Path) -> None:
    env = variables(tmp_path)
    task = flaky_task(tmp_path, [runner_scorer("pass-fail", env=env, retries=1)], REWRITES_ON_RERUN)
    score = scores(evaluate(task, tmp_path))["repo"]["all_tests_pass"]
    assert score.value == "N", score.explanation
    # the rerun's report of the test that always fails said passed
    changed = [sig for sig in score.metadata["integrity"] if sig["kind"] == "outcome_changed"]
    assert changed and ALWAYS in changed[0]["detail"], score.metadata["integrity"]


@pytest.mark.parametrize(
    ("parameters", "message"),
    [
        ({"env": {"A=B": "1"}}, r"env: 'A=B': '1' is not NAME=VALUE"),
        ({"env": {"TZ": 5}}, r"env: 'TZ': 5 is not NAME=VALUE"),
        ({"env": ["TZ=UTC"]}, r"env: expected a mapping of NAME to VALUE, got list"),
        ({"retries": -1}, r"retries: -1 is not a number of reruns"),
        ({"retries": "2"}, r"retries: '2' is not a number of reruns"),
        ({"flaky": "sometimes"}, r"flaky: 'sometimes' is not one of fail, pass, exclude"),
    ],
)
def test_bad_env_retries_and_flaky_are_refused_before_any_sample_runs(
    parameters: dict[str, Any], message: str
) -> None:
    with pytest.raises(OptionError, match=message):
        percent_passing_tests_scorer(**parameters)
    with pytest.raises(OptionError, match=message):
        runner_scorer("pass-fail", **parameters)


@pytest.mark.slow
@pytest.mark.usefixtures("sandbox_python")
def test_the_samples_env_and_run_tests_reruns_are_what_the_scorers_use(tmp_path: Path) -> None:
    env = variables(tmp_path)
    repo = flaky_repo(tmp_path)
    task = Task(
        dataset=[sample(repo, env=env), sample(repo, "bad", env={"TZ": 1})],
        solver=run_tests(retries=2),
        scorer=percent_passing_tests_scorer(retries=2, flaky="pass"),
        sandbox="local",
    )
    found = scores(evaluate(task, tmp_path))
    score = found["repo"]["percent_passing_tests"]
    assert score.value == 75, score.explanation
    assert score.metadata["flaky"] == {FLAKY: ["failed", "passed"]}
    assert Path(env["ATTEMPTS_FILE"]).read_text() == "2"  # the solver's run, not run again
    refused = found["bad"]["percent_passing_tests"]
    assert refused.value == "N"
    assert "the sample's metadata 'env': 'TZ': 1 is not NAME=VALUE" in refused.explanation


@pytest.mark.slow
@pytest.mark.usefixtures("sandbox_python")
def test_reruns_of_the_evaluators_tests_under_black_box_run_in_their_copy(
    tmp_path: Path,
) -> None:
    reference = make(tmp_path / "reference")
    (reference / "pytest.ini").write_text("[pytest]\ntestpaths = tests\n")
    (make(reference / "tests") / "__init__.py").write_text("")
    (reference / "tests" / "test_flaky.py").write_text(FLAKY_SUITE)
    repo = make(tmp_path / "repo")
    (repo / "calc.py").write_text("def add(a, b):\n    return a + b\n")
    env = variables(tmp_path)
    task = Task(
        dataset=[sample(repo, tests_from=str(reference))],
        solver=agent_done(),
        scorer=percent_passing_tests_scorer(black_box=True, env=env, retries=2, flaky="pass"),
        sandbox="local",
    )
    score = scores(evaluate(task, tmp_path))["repo"]["percent_passing_tests"]
    # the evaluator's test files of each rerun's copy are the ones the process may load
    assert score.value == 75, score.explanation
    assert score.metadata["flaky"] == {f"tests/{FLAKY}": ["failed", "passed"]}
    assert Path(env["ATTEMPTS_FILE"]).read_text() == "2"
