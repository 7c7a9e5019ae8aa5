"""The README documents every command and option, and gives the command CI runs."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from click.testing import CliRunner

from pytest_scoring.cli.main import main

ROOT = Path(__file__).parent.parent
README = (ROOT / "README.md").read_text(encoding="utf-8")
COMMANDS = sorted(main.commands)


def test_there_are_the_commands_of_the_spec() -> None:
    assert COMMANDS == ["diff", "junit", "list", "match", "run", "show"]


@pytest.mark.parametrize("name", COMMANDS)
def test_every_command_has_help_with_an_example_and_is_in_the_readme(name: str) -> None:
    result = CliRunner().invoke(main, [name, "--help"])
    assert result.exit_code == 0
    assert f"Example: pytest-scoring {name}" in result.output
    assert f"pytest-scoring {name}" in README


def test_every_pytest_option_is_in_the_readme(pytester: pytest.Pytester) -> None:
    result = pytester.runpytest("--help")
    options = set(re.findall(r"(--score[-a-z]*)", result.stdout.str()))
    assert len(options) >= 11
    assert sorted(option for option in options if f"`{option}" not in README) == []


def test_the_readme_test_command_is_what_ci_runs() -> None:
    ci_command = (ROOT / ".ci" / "run").read_text().strip().splitlines()[-1]
    assert f"```\n{ci_command}\n```" in README


def test_every_public_name_is_importable_from_the_package() -> None:
    import pytest_scoring

    for name in pytest_scoring.__all__:
        assert getattr(pytest_scoring, name) is not None, name
    with pytest.raises(AttributeError, match="no attribute 'nothing_here'"):
        _ = pytest_scoring.nothing_here
