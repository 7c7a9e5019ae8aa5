"""The registry of scorer types: one entry per type, declared in the scorer's module, gives
the configuration loader's checks, the docs table and the Inspect scorer."""

from __future__ import annotations

import ast
import importlib
import importlib.util
import inspect
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest

from pytest_scoring.core.outcomes import OutcomeTally
from pytest_scoring.errors import ConfigError
from pytest_scoring.scorers.base import ScoringContext
from pytest_scoring.scorers.base import run_scorer
from pytest_scoring.scorers.config_file import scorers_from_data
from pytest_scoring.scorers.registry import BUILTIN_TYPES
from pytest_scoring.scorers.registry import scorer_types
from pytest_scoring.scorers.scorer_type import REQUIRED
from pytest_scoring.scorers.scorer_type import ScorerType
from pytest_scoring.scorers.scorer_type import parameter_docs
from pytest_scoring.scorers.scorer_type import types_by_name

DOCS = Path(__file__).resolve().parent.parent / "docs"

#: What each built-in type needs at least to build a scorer.
REQUIRED_PARAMETERS: dict[str, dict[str, Any]] = {
    "file_contents": {"folder_path": ".", "search_string": "x"},
    "sandbox_state": {"command": "true"},
    "composite": {"scorers": ["all_tests_pass"], "formula": "all_tests_pass.value"},
}

#: A scorer type's whole module, as a plugin or a new built-in type would write it.
LINE_COUNT_MODULE = '''
from typing import Final

from pytest_scoring.core.metrics import mean
from pytest_scoring.core.score import make_score
from pytest_scoring.scorers.scorer_type import InspectForm
from pytest_scoring.scorers.scorer_type import ScorerType


class LineCount:
    type = "line_count"
    metrics = (mean,)

    def __init__(self, path: str, at_least: int) -> None:
        self.name, self.path, self.at_least = "line_count", path, at_least

    def score(self, context):
        lines = (context.root / self.path).read_text().count("\\n")
        return make_score("C" if lines >= self.at_least else "I", self.type)


def line_count_scorer(path: str, at_least: int = 1) -> LineCount:
    """Whether a file has at least some lines.

    :param path: the file, relative to the repository.
    :param at_least: how many lines it needs.
    """
    return LineCount(path, at_least)


TYPE: Final = ScorerType(
    "line_count",
    line_count_scorer,
    (mean,),
    inspect=InspectForm(
        "line_count_scorer", positional=("path", "at_least"), keyword=("repo_path",)
    ),
)
'''


def load_cog_helpers() -> ModuleType:
    spec = importlib.util.spec_from_file_location("cog_helpers", DOCS / "cog_helpers.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.fixture
def with_line_count(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> dict[str, ScorerType]:
    """The built-in types plus ``line_count``: its module and one registration."""
    (tmp_path / "line_count_type.py").write_text(LINE_COUNT_MODULE, encoding="utf-8")
    monkeypatch.syspath_prepend(str(tmp_path))
    module = importlib.import_module("line_count_type")
    return {**BUILTIN_TYPES, **types_by_name(module.TYPE)}


def build(type_name: str) -> Any:
    data = [
        {"type": "all_tests_pass"},
        {"type": type_name, "name": "probe", **REQUIRED_PARAMETERS.get(type_name, {})},
    ]
    return scorers_from_data(data, "c", BUILTIN_TYPES)[-1]


@pytest.mark.parametrize("kind", BUILTIN_TYPES.values(), ids=lambda kind: kind.name)
def test_every_parameter_has_a_type_a_default_or_none_and_a_doc(kind: ScorerType) -> None:
    for parameter in kind.parameters:
        assert parameter.annotation is not REQUIRED, f"{kind.name}.{parameter.name}: no type"
        assert parameter.doc, f"{kind.name}.{parameter.name}: no :param line"
    assert set(parameter_docs(kind.factory)) <= {p.name for p in kind.parameters}
    assert kind.summary and not kind.open_ended


@pytest.mark.parametrize("kind", BUILTIN_TYPES.values(), ids=lambda kind: kind.name)
def test_a_built_scorer_keeps_what_its_entry_promises(kind: ScorerType) -> None:
    scorer = build(kind.name)
    assert scorer.detects is kind.detects
    if kind.metrics is not None:
        assert tuple(scorer.metrics) == kind.metrics
        assert scorer.type == kind.name


@pytest.mark.parametrize("kind", BUILTIN_TYPES.values(), ids=lambda kind: kind.name)
def test_every_entry_has_its_row_and_parameters_in_the_docs(kind: ScorerType) -> None:
    page = (DOCS / "configuration.md").read_text(encoding="utf-8")
    assert f"| `{kind.name}` | " in page
    for parameter in kind.parameters:
        assert f"- `{parameter.name}` (" in page


def test_the_loader_checks_an_entry_against_its_registry_entry() -> None:
    db_change = BUILTIN_TYPES["db_change"]
    assert db_change.parameter("selector_timeout") is not None
    with pytest.raises(
        ConfigError, match=r"scorers\[0\]\.selector_timeout: expected number or null"
    ):
        scorers_from_data([{"type": "db_change", "selector_timeout": "soon"}], "c", BUILTIN_TYPES)


def test_a_registered_type_reads_its_parameters_from_its_factory() -> None:
    def counting_scorer(limit: int, label: str = "x") -> Any:
        raise AssertionError("not built")

    (kind,) = [
        k for name, k in scorer_types([{"counting": counting_scorer}]).items() if name == "counting"
    ]
    assert [(p.name, p.required, p.default) for p in kind.parameters] == [
        ("limit", True, inspect.Parameter.empty),
        ("label", False, "x"),
    ]
    assert (kind.inspect, kind.from_evidence, kind.detects) == (None, False, False)


def test_a_new_type_needs_its_module_and_one_registration(
    with_line_count: dict[str, ScorerType], tmp_path: Path
) -> None:
    # The configuration loader checks and builds it.
    with pytest.raises(ConfigError, match=r"c: scorers\[0\]\.path: expected string, got 7"):
        scorers_from_data([{"type": "line_count", "path": 7}], "c", with_line_count)
    (scorer,) = scorers_from_data(
        [{"type": "line_count_scorer", "path": "notes.txt", "at_least": 2}], "c", with_line_count
    )
    (tmp_path / "notes.txt").write_text("one\ntwo\n", encoding="utf-8")
    assert run_scorer(scorer, ScoringContext(root=tmp_path, tally=OutcomeTally()))["value"] == "C"
    # The docs table shows it, with its parameters.
    table = load_cog_helpers().scorer_types_table(with_line_count)
    assert "| `line_count` | Whether a file has at least some lines. | mean | no | no |" in table
    assert "- `at_least` (int, default `1`): how many lines it needs." in table


def test_two_types_of_one_name_are_refused_at_registration() -> None:
    with pytest.raises(ValueError, match="scorer type 'db_change' is declared twice"):
        types_by_name(BUILTIN_TYPES["db_change"], BUILTIN_TYPES["db_change"])


@pytest.mark.parametrize("kind", BUILTIN_TYPES.values(), ids=lambda kind: kind.name)
def test_every_entry_has_its_inspect_scorer_under_its_stable_name(kind: ScorerType) -> None:
    from inspect_ai.util import registry_info

    from pytest_scoring.inspect import scorers

    form = kind.inspect
    assert form is not None
    function = getattr(scorers, f"{kind.name}_scorer")
    parameters = inspect.signature(function).parameters.values()
    assert [p.name for p in parameters] == [*form.positional, *form.keyword]
    keyword_only = [p.name for p in parameters if p.kind is p.KEYWORD_ONLY]
    assert keyword_only == list(form.keyword)
    if form.registered:
        assert registry_info(function).name.rsplit("/", 1)[-1] == form.name


def test_a_new_type_gets_its_inspect_scorer_from_the_generator(
    with_line_count: dict[str, ScorerType],
) -> None:
    code = load_cog_helpers().inspect_scorers_code(with_line_count)
    (function,) = [
        node
        for node in ast.parse(code).body
        if isinstance(node, ast.FunctionDef) and node.name == "line_count_scorer"
    ]
    assert [arg.arg for arg in function.args.args] == ["path", "at_least"]
    assert [arg.arg for arg in function.args.kwonlyargs] == ["repo_path"]
    assert ast.unparse(function.decorator_list[0]) == (
        "scorer(name='line_count_scorer', metrics=type_metrics('line_count'))"
    )
    assert ast.get_docstring(function) is not None
    assert "how many lines it needs." in (ast.get_docstring(function) or "")


def test_a_stale_generated_inspect_scorer_fails_the_check(tmp_path: Path) -> None:
    from cogapp import Cog

    generated = DOCS.parent / "pytest_scoring" / "inspect" / "scorers.py"
    copy = tmp_path / "scorers.py"
    copy.write_text(generated.read_text(encoding="utf-8"), encoding="utf-8")
    check = ["cog", "--check", "-I", str(DOCS), str(copy)]
    assert Cog().main(check) == 0
    text = copy.read_text(encoding="utf-8")
    copy.write_text(text.replace("interim_score: bool = False,", "interim_score: bool = True,"))
    assert Cog().main(check) != 0


@pytest.mark.filterwarnings(
    # Inspect's eval leaves memory streams of its own (anyio's) to the garbage collector.
    "ignore:Exception ignored in.*MemoryObjectReceiveStream:pytest.PytestUnraisableExceptionWarning"
)
def test_a_new_types_generated_inspect_scorer_scores_in_a_real_eval(
    with_line_count: dict[str, ScorerType], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A type with no Inspect front end of its own scores the repository read from the sandbox."""
    from inspect_ai import Task
    from inspect_ai import eval as inspect_eval
    from inspect_ai.dataset import Sample
    from inspect_ai.solver import Generate
    from inspect_ai.solver import TaskState
    from inspect_ai.solver import solver

    from pytest_scoring.inspect import scorers

    monkeypatch.setitem(BUILTIN_TYPES, "line_count", with_line_count["line_count"])
    monkeypatch.setenv("TMPDIR", str(tmp_path))
    code = load_cog_helpers().inspect_scorers_code({"line_count": with_line_count["line_count"]})
    namespace = dict(vars(scorers))
    exec(compile(code, "generated", "exec"), namespace)  # what cog writes into the module

    @solver
    def agent_done() -> Any:
        async def solve(state: TaskState, generate: Generate) -> TaskState:
            return state

        return solve

    samples = [
        Sample(id=name, input="x", files={"repo/notes.txt": text}, metadata={"repo_path": "repo"})
        for name, text in (("two", "one\ntwo\n"), ("one", "one\n"))
    ]
    task = Task(
        dataset=samples,
        solver=agent_done(),
        scorer=namespace["line_count_scorer"]("notes.txt", 2),
        sandbox="local",
    )
    (log,) = inspect_eval(
        task, model="mockllm/model", display="none", log_dir=str(tmp_path / "logs")
    )
    assert log.status == "success", log.error
    assert log.samples is not None
    values = {str(sample.id): sample.scores["line_count_scorer"].value for sample in log.samples}  # type: ignore[index]
    assert values == {"two": "C", "one": "I"}
