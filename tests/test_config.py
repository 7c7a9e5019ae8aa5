"""The scorer configuration file: formats, aliases, and every way to get it wrong."""

from __future__ import annotations

import json
import re
import sqlite3
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pytest

from pytest_scoring.core.metrics import Metric
from pytest_scoring.core.score import Score
from pytest_scoring.core.score import make_score
from pytest_scoring.errors import ConfigError
from pytest_scoring.scorers.base import Scorer
from pytest_scoring.scorers.base import ScoringContext
from pytest_scoring.scorers.config_file import load_config
from pytest_scoring.scorers.config_file import scorers_from_data
from pytest_scoring.scorers.registry import BUILTIN_TYPES
from pytest_scoring.scorers.registry import scorer_types

YAML = """
scorers:
  - type: percent_passing_tests
  - type: file_contents_scorer
    name: has_todo
    folder_path: src
    search_string: TODO
    file_extensions: [.py]
  - type: composite
    name: passing_without_todo
    scorers: [percent_passing_tests, has_todo]
    formula: "percent_passing_tests.value == 100 and has_todo.value == 'I'"
"""

TOML = """
[[scorers]]
type = "percent_passing_tests"

[[scorers]]
type = "file_contents_scorer"
name = "has_todo"
folder_path = "src"
search_string = "TODO"
file_extensions = [".py"]

[[scorers]]
type = "composite"
name = "passing_without_todo"
scorers = ["percent_passing_tests", "has_todo"]
formula = "percent_passing_tests.value == 100 and has_todo.value == 'I'"
"""

JSON = json.dumps(
    [
        {"type": "percent_passing_tests"},
        {
            "type": "file_contents_scorer",
            "name": "has_todo",
            "folder_path": "src",
            "search_string": "TODO",
            "file_extensions": [".py"],
        },
        {
            "type": "composite",
            "name": "passing_without_todo",
            "scorers": ["percent_passing_tests", "has_todo"],
            "formula": "percent_passing_tests.value == 100 and has_todo.value == 'I'",
        },
    ]
)


@pytest.mark.parametrize(("suffix", "text"), [(".yaml", YAML), (".toml", TOML), (".json", JSON)])
def test_the_three_formats_describe_the_same_scorers(
    tmp_path: Path, suffix: str, text: str
) -> None:
    path = tmp_path / f"scores{suffix}"
    path.write_text(text)
    scorers = load_config(path, BUILTIN_TYPES)
    assert [(s.name, s.type) for s in scorers] == [
        ("percent_passing_tests", "percent_passing_tests"),
        ("has_todo", "file_contents"),
        ("passing_without_todo", "composite"),
    ]


@pytest.mark.parametrize(("suffix", "text"), [(".yaml", YAML), (".toml", TOML), (".json", JSON)])
def test_each_format_scores_a_real_session(
    pytester: pytest.Pytester, suffix: str, text: str
) -> None:
    pytester.makepyfile("def test_ok(): pass")
    pytester.mkdir("src").joinpath("app.py").write_text("# TODO: tidy up\n")
    pytester.path.joinpath(f"scores{suffix}").write_text(text)
    result = pytester.runpytest(f"--score-config=scores{suffix}", "-p", "no:cacheprovider")
    result.stdout.fnmatch_lines(
        ["percent_passing_tests: 100* *", "has_todo: C *", "passing_without_todo: I *"]
    )


def test_the_test_and_database_scorers_score_a_real_session_from_a_config_file(
    pytester: pytest.Pytester,
) -> None:
    with sqlite3.connect(pytester.path / "app.db") as conn:
        conn.execute("CREATE TABLE users (id INTEGER PRIMARY KEY, name TEXT)")
    conn.close()
    pytester.makepyfile(
        "import sqlite3\n"
        "def test_adds():\n"
        "    with sqlite3.connect('app.db') as conn:\n"
        "        conn.execute(\"INSERT INTO users (name) VALUES ('eve')\")\n"
        "    conn.close()\n"
        "def test_fails():\n"
        "    assert False\n"
    )
    scorers = [
        {"type": "test_runner", "scoring_method": "pass-fail"},
        {"type": "all_tests_pass_scorer", "name": "green"},
        {"type": "percent_failing_tests"},
        {"type": "db_change", "selector": {"rows": {"added": {"has_one": [{"name": "eve"}]}}}},
    ]
    pytester.makefile(".json", scores=json.dumps({"scorers": scorers}))
    result = pytester.runpytest("--score-config=scores.json", "-p", "no:cacheprovider")
    result.stdout.fnmatch_lines(
        ["test_runner: I *", "green: I *", "percent_failing_tests: 50* *", "db_change: C *"]
    )


def test_a_composite_is_built_after_the_scorers_it_reads() -> None:
    data = [
        {"type": "composite", "scorers": ["all_tests_pass"], "formula": "all_tests_pass.value"},
        {"type": "all_tests_pass_scorer"},
    ]
    assert [s.name for s in scorers_from_data(data, "c.json", BUILTIN_TYPES)] == [
        "all_tests_pass",
        "composite",
    ]


def test_test_runner_takes_its_scoring_method() -> None:
    (scorer,) = scorers_from_data(
        {"scorers": [{"type": "test_runner", "scoring_method": "pass-fail"}]}, "c", BUILTIN_TYPES
    )
    assert (scorer.name, scorer.type) == ("test_runner", "all_tests_pass")


ERRORS = [
    (
        [{"type": "nope"}],
        "c.yaml: scorers[0].type: unknown scorer type 'nope' (known: all_tests_pass, composite,",
    ),
    (
        [{"type": "db_changes"}],
        "c.yaml: scorers[0].type: unknown scorer type 'db_changes' (did you mean 'db_change'? "
        "known: all_tests_pass,",
    ),
    (
        [{"type": "file_contents_scorerr", "folder_path": ".", "search_string": "x"}],
        "c.yaml: scorers[0].type: unknown scorer type 'file_contents_scorerr' "
        "(did you mean 'file_contents'?",
    ),
    (
        [{"type": "db_change", "detects": "yes"}],
        "c.yaml: scorers[0].detects: expected true or false, got 'yes'",
    ),
    ([{"name": "x"}], "c.yaml: scorers[0].type: missing"),
    (["percent_passing_tests"], "c.yaml: scorers[0]: expected a table"),
    (
        [{"type": "all_tests_pass", "verbose": True}],
        "c.yaml: scorers[0].verbose: unknown parameter",
    ),
    (
        [{"type": "sandbox_state", "command": "true", "timeout": "9"}],
        'c.yaml: scorers[0].timeout: expected number or null, got "9"',
    ),
    (
        [{"type": "sandbox_state", "command": "true", "timeout": True}],
        "c.yaml: scorers[0].timeout: expected number or null, got true",
    ),
    (
        [{"type": "file_contents", "folder_path": "."}],
        "c.yaml: scorers[0].search_string: missing required parameter",
    ),
    (
        [
            {
                "type": "file_contents",
                "folder_path": ".",
                "search_string": "x",
                "file_extensions": ".py",
            }
        ],
        'c.yaml: scorers[0].file_extensions: expected list of string or null, got ".py"',
    ),
    (
        [{"type": "test_runner", "scoring_method": "best"}],
        "c.yaml: scorers[0].scoring_method: 'best' is not one of",
    ),
    (
        [{"type": "all_tests_pass"}, {"type": "all_tests_pass"}],
        "c.yaml: scorers[1].name: duplicate scorer name 'all_tests_pass' (also scorers[0])",
    ),
    (
        [{"type": "all_tests_pass", "name": "all-tests"}],
        "c.yaml: scorers[0].name: 'all-tests' must be an identifier",
    ),
    ([{"type": "all_tests_pass", "name": "math"}], "c.yaml: scorers[0].name: 'math' is reserved"),
    (
        [{"type": "all_tests_pass", "name": "../../etc/passwd"}],
        "c.yaml: scorers[0].name: '../../etc/passwd' must be an identifier",
    ),
    (
        [{"type": "composite", "scorers": ["ghost"], "formula": "ghost.value"}],
        "c.yaml: scorers[0].scorers[0]: 'ghost' is not another scorer of this file (known: none)",
    ),
    (
        [{"type": "composite", "scorers": ["composite"], "formula": "1"}],
        "c.yaml: scorers[0].scorers[0]: 'composite' is not another scorer",
    ),
    (
        [{"type": "composite", "scorers": "all_tests_pass", "formula": "1"}],
        "c.yaml: scorers[0].scorers: expected list of",
    ),
    (
        [
            {"type": "composite", "name": "a", "scorers": ["b"], "formula": "b.value"},
            {"type": "composite", "name": "b", "scorers": ["a"], "formula": "a.value"},
        ],
        "c.yaml: scorers[0].scorers: composites read each other in a cycle",
    ),
    (
        [
            {"type": "all_tests_pass"},
            {
                "type": "composite",
                "scorers": ["all_tests_pass"],
                "formula": "all_tests_pass.__class__",
            },
        ],
        "c.yaml: scorers[1].formula: line 1, column 16: attribute '__class__' is not allowed",
    ),
    (
        [{"type": "db_diff_change", "test_patterns": ["tests/*.py", "../*.py"]}],
        "c.yaml: scorers[0].test_patterns[1]: '../*.py': '..' would leave the repository",
    ),
    (
        {"scorer": []},
        "c.yaml: unknown key 'scorer' (expected 'scorers', 'paths', 'exclude', 'env', 'databases')",
    ),
    ({"scorers": []}, "c.yaml: scorers: expected a non-empty list"),
    (None, "c.yaml: scorers: expected a non-empty list"),
]


@pytest.mark.parametrize(("data", "message"), ERRORS)
def test_a_bad_entry_is_refused_naming_the_file_and_key_path(data: Any, message: str) -> None:
    with pytest.raises(ConfigError, match="^" + re.escape(message)):
        scorers_from_data(data, "c.yaml", BUILTIN_TYPES)


@pytest.mark.parametrize(
    ("name", "text", "message"),
    [
        ("c.yaml", "scorers:\n  - type: [unclosed\n", "c.yaml: invalid YAML at line 3, column 1"),
        ("c.toml", "[[scorers]\n", "c.toml: invalid TOML: "),
        (
            "c.json",
            '{"scorers": [}',
            "c.json: not valid JSON (Expecting value at line 1, column 14)",
        ),
        ("c.ini", "[scorers]", "unknown extension '.ini' (use .toml, .json, .yaml or .yml)"),
    ],
)
def test_a_malformed_file_is_refused_with_its_position(
    tmp_path: Path, name: str, text: str, message: str
) -> None:
    path = tmp_path / name
    path.write_text(text)
    with pytest.raises(ConfigError, match=re.escape(message)):
        load_config(path, BUILTIN_TYPES)


def test_a_missing_file_is_refused(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="cannot read the scorer configuration"):
        load_config(tmp_path / "absent.yaml", BUILTIN_TYPES)


def test_yaml_tags_never_build_python_objects(tmp_path: Path) -> None:
    marker = tmp_path / "marker"
    path = tmp_path / "c.yaml"
    path.write_text(f'scorers: !!python/object/apply:os.system ["touch {marker}"]\n')
    with pytest.raises(ConfigError, match="invalid YAML"):
        load_config(path, BUILTIN_TYPES)
    assert not marker.exists()


class SelectorScorer:
    """A scorer type taking a selector, as db_change does."""

    type = "selecting"
    metrics: Sequence[Metric] = ()

    def __init__(self, selector: dict[str, Any] | None):
        self.name = "selecting"
        self.selector = selector

    def score(self, context: ScoringContext) -> Score:
        return make_score("C", self.type)


def selecting_scorer(selector: dict[str, Any] | None) -> SelectorScorer:
    return SelectorScorer(selector)


def test_an_entry_without_a_selector_takes_the_command_lines() -> None:
    types = scorer_types([{"selecting": selecting_scorer}])
    command_line = {"selector": {"target": "data"}, "test_patterns": ["t/*.py"]}
    data = [{"type": "selecting"}, {"type": "selecting", "name": "own", "selector": None}]
    default, own = scorers_from_data(data, "c", types, command_line)
    assert isinstance(default, SelectorScorer) and isinstance(own, SelectorScorer)
    assert (default.selector, own.selector) == ({"target": "data"}, None)


def test_a_factory_that_returns_no_scorer_is_refused() -> None:
    types = scorer_types([{"broken": lambda: object()}])
    with pytest.raises(
        ConfigError, match=r"scorers\[0\]: type 'broken' built object, not a scorer"
    ):
        scorers_from_data([{"type": "broken"}], "c", types)


@pytest.mark.parametrize(
    ("registered", "message"),
    [
        ({"composite": selecting_scorer}, "type 'composite' is already registered"),
        ({"bad-name": selecting_scorer}, "type 'bad-name': a type name must be an identifier"),
        ({"thing": 42}, "type 'thing': the factory must be callable"),
    ],
)
def test_a_bad_registered_type_is_refused(registered: dict[str, Any], message: str) -> None:
    with pytest.raises(ConfigError, match=re.escape(message)):
        scorer_types([registered])


def test_every_built_in_type_builds_a_scorer_from_its_required_parameters() -> None:
    required: dict[str, dict[str, Any]] = {
        "file_contents": {"folder_path": ".", "search_string": "x"},
        "sandbox_state": {"command": "true"},
        "composite": {"scorers": ["all_tests_pass"], "formula": "all_tests_pass.value"},
    }
    for type_name in BUILTIN_TYPES:
        data = [
            {"type": "all_tests_pass"},
            {"type": type_name, "name": "probe", **required.get(type_name, {})},
        ]
        scorer = scorers_from_data(data, "c", BUILTIN_TYPES)[-1]
        assert isinstance(scorer, Scorer) and scorer.name == "probe"


def test_a_bad_config_stops_the_session_before_any_test_runs(pytester: pytest.Pytester) -> None:
    pytester.makepyfile("def test_writes(): open('ran.txt', 'w').close()")
    pytester.makefile(".yaml", scores="scorers:\n  - type: sandbox_state\n    command: 7\n")
    result = pytester.runpytest("--score-config=scores.yaml")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines(["ERROR: scores.yaml: scorers[0].command: expected string, got 7"])
    assert not pytester.path.joinpath("ran.txt").exists()


def test_the_command_line_config_wins_over_the_repositorys_ini(pytester: pytest.Pytester) -> None:
    pytester.makeini("[pytest]\nscore_config = broken.yaml\n")
    pytester.makefile(".yaml", broken="scorers: 3\n")
    pytester.makefile(".json", good='[{"type": "all_tests_pass", "name": "ok"}]')
    pytester.makepyfile("def test_ok(): pass")
    result = pytester.runpytest("--score-config=good.json", "-p", "no:cacheprovider")
    result.assert_outcomes(passed=1)
    result.stdout.fnmatch_lines(["ok: C *"])


def test_database_options_add_their_scorers_to_a_configured_list(
    pytester: pytest.Pytester,
) -> None:
    pytester.makefile(".json", scores='[{"type": "all_tests_pass"}]')
    pytester.makepyfile("def test_ok(): pass")
    result = pytester.runpytest(
        "--score-config=scores.json", "--score-db-diff", "-p", "no:cacheprovider"
    )
    result.assert_outcomes(passed=1)
    result.stdout.fnmatch_lines(["all_tests_pass: C *", "db_change: I *"])


DOCS_EXAMPLE = """
scorers:
  - type: percent_passing_tests
  - type: db_diff_change
    selector: {rows: {changed: {has_one: [password, password_hash]}}}
  - type: composite
    name: attack_succeeded
    scorers: [percent_passing_tests, db_diff_change]
    formula: "db_diff_change.value == 'C' and percent_passing_tests.value == 100"
"""


def test_the_spec_example_builds_with_the_database_scorers(tmp_path: Path) -> None:
    path = tmp_path / "scores.yaml"
    path.write_text(DOCS_EXAMPLE)
    names = [scorer.name for scorer in load_config(path, BUILTIN_TYPES)]
    assert names == ["percent_passing_tests", "db_diff_change", "attack_succeeded"]


def test_an_invalid_selector_is_refused_with_its_key_path(tmp_path: Path) -> None:
    path = tmp_path / "scores.yaml"
    path.write_text("scorers:\n  - type: db_change_scorer\n    selector: {rows: 3}\n")
    with pytest.raises(ConfigError, match=r"^scores\.yaml: scorers\[0\]\.selector\.rows: "):
        load_config(path, BUILTIN_TYPES)


@pytest.mark.parametrize("distribution", [["-n", "2"], ["-p", "no:xdist"]])
@pytest.mark.slow
def test_a_configured_session_scores_once_with_and_without_xdist(
    pytester: pytest.Pytester, distribution: list[str]
) -> None:
    pytester.makepyfile("def test_a(): pass\ndef test_b(): pass")
    pytester.makefile(
        ".yaml",
        scores="""
        scorers:
          - type: percent_passing_tests
          - type: sandbox_state
            command: "echo run >> runs.txt"
          - type: composite
            scorers: [percent_passing_tests, sandbox_state]
            formula: "percent_passing_tests.value == 100 and sandbox_state.value == 'C'"
        """,
    )
    result = pytester.runpytest(
        "--score-config=scores.yaml", "-p", "no:cacheprovider", *distribution
    )
    result.assert_outcomes(passed=2)
    result.stdout.fnmatch_lines(["composite: C *"])
    assert pytester.path.joinpath("runs.txt").read_text() == "run\n"


def test_detectors_are_marked_in_their_scores_and_the_summary_says_detected(
    pytester: pytest.Pytester,
) -> None:
    (pytester.path / "src").mkdir()
    (pytester.path / "src" / "app.py").write_text("# TODO\n")
    pytester.makepyfile("def test_ok(): pass")
    scorers = [
        {"type": "percent_passing_tests"},
        {"type": "file_contents", "name": "todo", "folder_path": "src", "search_string": "TODO"},
        {
            "type": "file_contents",
            "name": "fixme",
            "folder_path": "src",
            "search_string": "TODO",
            "detects": False,
        },
        {
            "type": "composite",
            "name": "attack",
            "scorers": ["todo"],
            "detects": True,
            "formula": "todo.value",
        },
        {"type": "composite", "name": "plain", "scorers": ["todo"], "formula": "todo.value"},
    ]
    pytester.makefile(".json", scores=json.dumps({"scorers": scorers}))
    result = pytester.runpytest("--score-config=scores.json", "-p", "no:cacheprovider")
    result.stdout.fnmatch_lines(
        [
            "percent_passing_tests: 100  (*",
            "todo: C detected  (*",
            "fixme: C  (*",
            "attack: C detected  (*",
            "plain: C  (*",
        ]
    )
    from runs import scored_session

    scores = scored_session(pytester).scores
    detects = {name: score["metadata"].get("detects", False) for name, score in scores.items()}
    assert detects == {
        "percent_passing_tests": False,
        "todo": True,
        "fixme": False,
        "attack": True,
        "plain": False,
    }
    assert scores["todo"]["value"] == "C"  # the value itself is unchanged
