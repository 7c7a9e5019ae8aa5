"""The ``pytest_scoring_scorers`` hook, through a conftest that implements it."""

from __future__ import annotations

import json

import pytest

#: The example conftest of docs/configuration.md, verbatim (tests/test_docs.py checks it).
CONFTEST = '''
from __future__ import annotations

import pytest

from pytest_scoring import ConfigError
from pytest_scoring import make_score
from pytest_scoring import mean


class LineCountScorer:
    """How many lines a file of the repository has, as a number."""

    type = "line_count"
    metrics = (mean,)

    def __init__(self, path: str, at_most: int | None = None):
        self.name = "line_count"
        self.path = path
        self.at_most = at_most

    def score(self, context):
        lines = len((context.root / self.path).read_text().splitlines())
        within = self.at_most is None or lines <= self.at_most
        return make_score(
            lines if within else "I",
            self.type,
            explanation=f"{self.path} has {lines} lines",
            metadata={"lines": lines},
        )


def line_count_scorer(path: str, at_most: int | None = None) -> LineCountScorer:
    if path.startswith("/"):
        raise ConfigError(f"path: {path!r} must be relative to the repository")
    return LineCountScorer(path, at_most)


@pytest.hookimpl
def pytest_scoring_scorers(config):
    return {"line_count": line_count_scorer}
'''

#: The example configuration of docs/configuration.md using it.
CONFIG = """
scorers:
  - type: all_tests_pass
  - type: line_count
    path: app.py
  - type: line_count
    name: app_is_short
    path: app.py
    at_most: 1
  - type: composite
    name: short_and_green
    scorers: [all_tests_pass, line_count]
    formula: "all_tests_pass.value == 'C' and line_count.value < 10"
"""


@pytest.fixture
def hooked(pytester: pytest.Pytester) -> pytest.Pytester:
    pytester.makeconftest(CONFTEST)
    pytester.makepyfile(test_app="def test_ok(): pass")
    pytester.path.joinpath("app.py").write_text("a = 1\nb = 2\n")
    return pytester


def test_a_conftest_registers_a_scorer_type_for_the_config_file(hooked: pytest.Pytester) -> None:
    hooked.makefile(".yaml", scores=CONFIG)
    result = hooked.runpytest("--score-config=scores.yaml", "-p", "no:cacheprovider")
    result.assert_outcomes(passed=1)
    result.stdout.fnmatch_lines(
        [
            "all_tests_pass: C *",
            "line_count: 2 *app.py has 2 lines*",
            "app_is_short: I *",
            "short_and_green: C *",
        ]
    )
    (report,) = hooked.path.joinpath("scores").glob("scan_id=*")
    report_json = json.loads(report.joinpath("scores.json").read_text())
    assert report_json["scores"]["line_count"]["metadata"] == {"scorer": "line_count", "lines": 2}
    assert report_json["metrics"]["line_count"] == {"mean": 2.0}


def test_a_registered_type_checks_its_parameters_like_a_built_in_one(
    hooked: pytest.Pytester,
) -> None:
    hooked.makefile(".yaml", scores="scorers:\n  - type: line_count\n    at_most: many\n")
    result = hooked.runpytest("--score-config=scores.yaml")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines(["ERROR: scores.yaml: scorers[0].path: missing required parameter"])


def test_a_registered_factory_can_refuse_a_value(hooked: pytest.Pytester) -> None:
    hooked.makefile(
        ".yaml", scores="scorers:\n  - type: line_count_scorer\n    path: /etc/passwd\n"
    )
    result = hooked.runpytest("--score-config=scores.yaml")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines(
        ["ERROR: scores.yaml: scorers[0].path: '/etc/passwd' must be relative to the repository"]
    )


def test_a_hook_may_not_replace_a_built_in_type(pytester: pytest.Pytester) -> None:
    pytester.makeconftest(
        "def pytest_scoring_scorers(config):\n    return {'composite': lambda: None}\n"
    )
    pytester.makefile(".yaml", scores="scorers:\n  - type: all_tests_pass\n")
    pytester.makepyfile("def test_ok(): pass")
    result = pytester.runpytest("--score-config=scores.yaml")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines(["*type 'composite' is already registered*"])
