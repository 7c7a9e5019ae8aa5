"""The docs document every command and option, their examples work, and the README gives the
command CI runs. The docs build itself (``sphinx-build -W``) runs in ``.ci/run``."""

from __future__ import annotations

import ast
import importlib.util
import json
import re
import tomllib
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest
import yaml
from click.testing import CliRunner

from pytest_scoring import parse_selector
from pytest_scoring.cli.main import main
from pytest_scoring.scorers.registry import BUILTIN_TYPES
from pytest_scoring.scorers.registry import resolve_type

ROOT = Path(__file__).parent.parent
DOCS = ROOT / "docs"
README = (ROOT / "README.md").read_text(encoding="utf-8")
PAGES = {page.stem: page.read_text(encoding="utf-8") for page in sorted(DOCS.glob("*.md"))}
COMMANDS = sorted(main.commands)


def code_blocks(text: str, language: str) -> list[str]:
    """The fenced code blocks of one language in a Markdown text."""
    return re.findall(rf"^```{language}\n(.*?)^```$", text, flags=re.S | re.M)


def every_block(language: str) -> list[tuple[str, str]]:
    """``(page, block)`` for every block of ``language`` in the docs and the README."""
    texts = {**PAGES, "README": README}
    return [(page, block) for page, text in texts.items() for block in code_blocks(text, language)]


def block_id(item: tuple[str, str]) -> str:
    return f"{item[0]}:{item[1].splitlines()[0][:40]}"


def load_cog_helpers() -> ModuleType:
    spec = importlib.util.spec_from_file_location("cog_helpers", DOCS / "cog_helpers.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_there_are_the_documented_commands() -> None:
    assert COMMANDS == ["diff", "junit", "list", "match", "rescore", "run", "show"]


@pytest.mark.parametrize("name", COMMANDS)
def test_every_command_has_help_with_an_example_and_its_help_in_the_cli_page(name: str) -> None:
    result = CliRunner().invoke(main, [name, "--help"])
    assert result.exit_code == 0
    assert f"Example: pytest-scoring {name}" in result.output
    assert f"\n## `{name}`\n" in PAGES["cli"]
    assert f"$ pytest-scoring {name} --help\n" in PAGES["cli"]


def test_every_pytest_option_is_in_the_options_table(pytester: pytest.Pytester) -> None:
    result = pytester.runpytest("--help")
    options = set(re.findall(r"(--score[-a-z]*)", result.stdout.str()))
    assert len(options) >= 11
    assert sorted(option for option in options if f"| `{option}" not in PAGES["scoring"]) == []


def test_the_generated_parts_of_the_docs_are_up_to_date() -> None:
    """Option, command, scorer type, column and API lists are regenerated from the code by
    ``python docs/cog_helpers.py``; a stale page fails here instead of misleading users."""
    assert load_cog_helpers().run_cog("--check") == 0


def test_the_readme_test_command_is_what_ci_runs_last() -> None:
    ci_command = (ROOT / ".ci" / "run").read_text().strip().splitlines()[-1]
    assert ci_command.endswith("pytest -n 2")
    assert f"{ci_command}\n" in code_blocks(README, "sh")


def test_the_readme_stays_short_and_links_every_page() -> None:
    assert len(README.encode()) <= 8 * 1024
    assert sorted(page for page in PAGES if f"(docs/{page}.md)" not in README) == []


def test_no_page_cites_a_document_users_do_not_have() -> None:
    texts = {**PAGES, "README": README}
    # A word of its own: Inspect's INSPECT_SANDBOX_* variables hold the letters too.
    cites = re.compile(r"\bSPEC\b")
    assert sorted(page for page, text in texts.items() if cites.search(text)) == []


@pytest.mark.parametrize("item", every_block("python"), ids=block_id)
def test_python_examples_are_valid_python(item: tuple[str, str]) -> None:
    ast.parse(item[1])


@pytest.mark.parametrize("item", every_block("json"), ids=block_id)
def test_json_examples_are_valid_json(item: tuple[str, str]) -> None:
    json.loads(item[1])


@pytest.mark.parametrize("block", code_blocks(PAGES["selectors"], "json"))
def test_every_selector_example_is_a_valid_selector(block: str) -> None:
    parse_selector(json.loads(block))


def scorer_lists(content: dict[str, Any]) -> list[list[dict[str, object]]]:
    """The scorer lists of a configuration: its ``scorers``, or each fixture's ``scorer:``."""
    if "fixtures" not in content:
        return [content["scorers"]]
    blocks = [entry["scorer"] for entry in content["fixtures"].values() if "scorer" in entry]
    return [block if isinstance(block, list) else [block] for block in blocks]


def configuration_examples() -> list[tuple[str, list[dict[str, object]]]]:
    """Every scorer list shown in the docs, from its YAML or TOML block."""
    examples = [(page, yaml.safe_load(block)) for page, block in every_block("yaml")]
    examples += [(page, tomllib.loads(block)) for page, block in every_block("toml")]
    return [(page, scorers) for page, content in examples for scorers in scorer_lists(content)]


@pytest.mark.parametrize(("page", "scorers"), configuration_examples(), ids=lambda x: str(x)[:40])
def test_configuration_examples_name_known_scorer_types(
    page: str, scorers: list[dict[str, object]]
) -> None:
    custom = {"line_count"}  # registered by the example conftest of docs/configuration.md
    known = {*BUILTIN_TYPES, *custom}
    types = [str(entry["type"]) for entry in scorers]
    assert [name for name in types if resolve_type(name, known) is None] == []


def test_the_custom_scorer_example_is_the_one_the_hook_tests_run() -> None:
    from test_scorer_hook import CONFIG
    from test_scorer_hook import CONFTEST

    assert CONFTEST.strip() in code_blocks(PAGES["configuration"], "python")[-1]
    assert CONFIG.strip() == code_blocks(PAGES["configuration"], "yaml")[-1].strip()


def test_the_shipped_example_configuration_is_the_one_shown() -> None:
    shown = code_blocks(PAGES["getting-started"], "yaml")[0]
    shipped = (ROOT / "examples" / "scorers.yaml").read_text()
    assert shown in shipped


def test_every_module_is_on_the_architecture_map() -> None:
    package = ROOT / "pytest_scoring"
    modules = [path for path in package.rglob("*.py") if path.name != "__init__.py"]
    folders = [path for path in package.iterdir() if (path / "__init__.py").exists()]
    names = [f"{folder.name}/" for folder in folders] + [module.name for module in modules]
    assert sorted(name for name in names if f" {name} " not in PAGES["architecture"]) == []


def test_every_public_name_is_importable_from_the_package() -> None:
    import pytest_scoring

    for name in pytest_scoring.__all__:
        assert getattr(pytest_scoring, name) is not None, name
    with pytest.raises(AttributeError, match="no attribute 'nothing_here'"):
        _ = pytest_scoring.nothing_here


def test_a_version_in_a_docs_example_is_this_release() -> None:
    from pytest_scoring import __version__

    texts = {**PAGES, "README": README}
    shown = {
        (page, version)
        for page, text in texts.items()
        for version in re.findall(r'"(?:version|package_version)": "([^"]+)"', text)
    }
    assert {version for _, version in shown} <= {__version__}, sorted(shown)
