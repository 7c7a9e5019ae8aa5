"""Tables and help texts that docs/*.md generate from the code with cog, so they cannot drift.

Regenerate after changing an option, a command, a scorer type or a report column::

    python docs/cog_helpers.py          # rewrite the generated parts of docs/*.md and the
                                        # Inspect scorers of pytest_scoring/inspect/scorers.py
    python docs/cog_helpers.py --check  # exit 1 when one is out of date (tests/test_docs.py)
"""

from __future__ import annotations

import inspect
import json
import os
import re
import subprocess
import sys
import tempfile
import textwrap
from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from pytest_scoring.scorers.scorer_type import ScorerType

DOCS = Path(__file__).resolve().parent
#: The module whose Inspect scorers are generated from the registry of scorer types.
GENERATED_CODE = DOCS.parent / "pytest_scoring" / "inspect" / "scorers.py"
#: Width of the generated help texts: the same on every machine, whatever its terminal.
HELP_WIDTH = 88


def pytest_help() -> str:
    """``pytest --help`` as a user sees it, run in an empty folder (no ini file, no conftest)."""
    env = {**os.environ, "COLUMNS": "200"}
    env.pop("PYTEST_ADDOPTS", None)
    with tempfile.TemporaryDirectory() as empty:
        return subprocess.run(
            [sys.executable, "-m", "pytest", "--help"],
            cwd=empty,
            env=env,
            capture_output=True,
            text=True,
            check=True,
        ).stdout


def _entries(lines: list[str]) -> list[tuple[str, str]]:
    """``(name, help)`` pairs of an argparse-style listing (continuation lines joined)."""
    entries: list[tuple[str, str]] = []
    for line in lines:
        match = re.match(r"  (\S.*?)(?:\s{2,}(\S.*))?$", line)
        if match and not line.startswith(" " * 4):
            entries.append((match.group(1), match.group(2) or ""))
        elif entries and line.strip():
            name, text = entries[-1]
            entries[-1] = (name, f"{text} {line.strip()}".strip())
    return entries


def _section(text: str, heading: str) -> list[str]:
    """The lines of one section of ``pytest --help``, from its heading to the next blank line."""
    lines = text.splitlines()
    start = next(i for i, line in enumerate(lines) if line.startswith(heading))
    end = next((i for i in range(start + 1, len(lines)) if not lines[i].strip()), len(lines))
    return lines[start + 1 : end]


def pytest_options_table() -> str:
    """The ``--score*`` options of ``pytest --help`` with their ini twins, as a Markdown table."""
    text = pytest_help()
    options = _entries(_section(text, "score the session (pytest-scoring)"))
    ini = {}
    lines = text.splitlines()
    for number, line in enumerate(lines):
        setting = re.match(r"  (score\w*) \(([^)]*)\):\s*(.*)$", line)
        if setting:
            help_text = setting.group(3) or lines[number + 1].strip()
            flag = re.search(r"(--score[-a-z]*)", help_text)
            if flag:
                ini[flag.group(1)] = f"`{setting.group(1)}` ({setting.group(2)})"
    rows = ["| option | ini setting | what it does |", "|---|---|---|"]
    for invocation, help_text in options:
        flag = invocation.split("=")[0]
        cell = invocation.replace("|", "\\|")
        meaning = help_text.replace("*", "\\*")
        rows.append(f"| `{cell}` | {ini.get(flag, '')} | {meaning} |")
    return "\n".join(rows) + "\n"


def cli_help(command: str | None = None) -> str:
    """``pytest-scoring [COMMAND] --help`` as a fenced block."""
    from click.testing import CliRunner

    from pytest_scoring.cli.main import main

    args = [command, "--help"] if command else ["--help"]
    result = CliRunner().invoke(main, args, prog_name="pytest-scoring", terminal_width=HELP_WIDTH)
    if result.exit_code != 0:
        raise RuntimeError(f"pytest-scoring {' '.join(args)} failed:\n{result.output}")
    return f"```text\n$ pytest-scoring {' '.join(args)}\n{result.output.rstrip()}\n```\n"


def scorer_types_table(types: Mapping[str, ScorerType] | None = None) -> str:
    """Every scorer type of the registry (default: the built-in ones) from its entry: what
    it promises, then its parameters with their types, defaults and docs (read from the
    factories)."""
    from pytest_scoring.scorers.registry import BUILTIN_TYPES

    rows = [
        "| type | what it scores | metrics | detector | re-scored from evidence | Inspect scorer |",
        "|---|---|---|---|---|---|",
    ]
    details = []
    for kind in sorted((types or BUILTIN_TYPES).values(), key=lambda kind: kind.name):
        metrics = (
            "those of the chosen scorer"
            if kind.metrics is None
            else (", ".join(metric.name for metric in kind.metrics))
        )
        form = kind.inspect
        inspect_name = "none" if form is None else f"`{form.name}`"
        rows.append(
            f"| `{kind.name}` | {_markdown(kind.summary)} | {metrics} | {_yes(kind.detects)} "
            f"| {_yes(kind.from_evidence)} | {inspect_name} |"
        )
        lines = [f"`{kind.name}` (`{kind.factory.__name__}`):", ""]
        for parameter in kind.parameters:
            default = "required" if parameter.required else f"default `{parameter.default!r}`"
            type_text = parameter.annotation_text.replace("|", "or")
            doc = _markdown(parameter.doc)
            lines.append(f"- `{parameter.name}` ({type_text}, {default}): {doc}")
        if not kind.parameters:
            lines.append("- no parameters")
        details.append("\n".join(lines) + "\n")
    return "\n".join(rows) + "\n\n" + "\n".join(details)


def _yes(flag: bool) -> str:
    return "yes" if flag else "no"


def _markdown(text: str) -> str:
    """A docstring's reStructuredText as Markdown: ``code`` and :role:`name` as `code`."""
    return re.sub(r":\w+:`([^`]+)`", r"`\1`", text.replace("``", "`"))


#: Width of the generated Python code (the project's line length).
CODE_WIDTH = 100


def inspect_scorers_code(types: Mapping[str, ScorerType] | None = None) -> str:
    """The module-level Inspect scorers of ``pytest_scoring/inspect/scorers.py``, one per
    type of the registry (default: the built-in ones), each calling ``build``: their names,
    metrics, parameters and docs come from the registry entries, so that they cannot drift."""
    from pytest_scoring.scorers.registry import BUILTIN_TYPES

    chosen = types or BUILTIN_TYPES
    scorers = [_inspect_scorer(kind) for kind in chosen.values() if kind.inspect]
    return "\n\n".join(scorers) + "\n\n"  # ruff's two blank lines before the end marker


def inspect_scorers_table() -> str:
    """The Inspect scorers of docs/inspect.md, from the registry: how each is called, its name
    in the log, its metrics and what it reads of a sample."""
    from pytest_scoring.scorers.registry import BUILTIN_TYPES

    rows = ["| scorer | name in the log | metrics | reads |", "|---|---|---|---|"]
    for kind in BUILTIN_TYPES.values():
        form = kind.inspect
        if form is None:
            continue
        arguments = []
        for name in form.positional:
            own = kind.parameter(name)
            assert own is not None, f"{kind.name}: {name} is not a parameter of the type"
            default = "" if own.required else f"={_python(own.default)}"
            arguments.append(f"{name}{default}")
        call = f"`{kind.name}_scorer({', '.join(arguments)})`"
        logged = f"`{form.name}`" if form.registered else "the scorer it chooses"
        metrics = "its metrics" if kind.metrics is None else _metric_names(kind)
        rows.append(f"| {call} | {logged} | {metrics} | {form.reads} |")
    return "\n".join(rows) + "\n"


def _python(value: object) -> str:
    """A default as Python source, strings in double quotes (as ruff writes them)."""
    return json.dumps(value) if isinstance(value, str) else repr(value)


def _metric_names(kind: ScorerType) -> str:
    return ", ".join(metric.name for metric in kind.metrics or ())


def _inspect_scorer(kind: ScorerType) -> str:
    """One generated Inspect scorer: decorator, signature, docstring, the call to ``build``."""
    form = kind.inspect
    assert form is not None
    lines = []
    if form.registered:
        lines.append(f'@scorer(name="{form.name}", metrics=type_metrics("{kind.name}"))')
    names = [*form.positional, *form.keyword]
    signature = [f"    {_inspect_parameter(kind, name)}," for name in form.positional]
    if form.keyword:
        signature += [
            "    *,",
            *(f"    {_inspect_parameter(kind, name)}," for name in form.keyword),
        ]
    if signature:
        lines += [f"def {kind.name}_scorer(", *signature, ") -> Scorer:"]
    else:
        lines.append(f"def {kind.name}_scorer() -> Scorer:")
    lines += _docstring(kind, names)
    if names:
        lines += ["    return build(", f'        "{kind.name}",']
        lines += [f"        {name}={name}," for name in names]
        lines.append("    )")
    else:
        lines.append(f'    return build("{kind.name}")')
    return "\n".join(lines) + "\n"


def _inspect_parameter(kind: ScorerType, name: str) -> str:
    """``name: annotation = default`` of one parameter: the type's own, or the front end's."""
    from pytest_scoring.inspect.parameters import FRONT_PARAMETERS

    form = kind.inspect
    assert form is not None
    own = kind.parameter(name)
    if own is None:
        front = FRONT_PARAMETERS[name]
        return f"{name}: {front.annotation} = {front.default}"
    annotation = form.annotations.get(name, own.annotation_text)
    if own.required:
        return f"{name}: {annotation}"
    return f"{name}: {annotation} = {_python(own.default)}"


def _docstring(kind: ScorerType, names: list[str]) -> list[str]:
    """The generated scorer's docstring: the type's summary and each parameter's doc."""
    from pytest_scoring.inspect.parameters import FRONT_PARAMETERS

    width = CODE_WIDTH - 4
    form = kind.inspect
    assert form is not None
    summary = f"{kind.summary} {form.note}".strip()
    lines = textwrap.wrap(summary, width, initial_indent='    """', subsequent_indent="    ")
    if names:
        lines.append("")
    for name in names:
        own = kind.parameter(name)
        doc = own.doc if own is not None else FRONT_PARAMETERS[name].doc
        doc = form.docs.get(name, doc)
        lines += textwrap.wrap(
            f":param {name}: {doc}",
            width,
            initial_indent="    ",
            subsequent_indent="        ",
            break_on_hyphens=False,
        )
    if names:
        lines.append('    """')
    else:
        lines[-1] += '"""'
    return lines


#: What pytest-scoring writes in each column of a Parquet file (docs/report.md).
COLUMN_MEANINGS = {
    "transcript_id": "the scored repository: the scan id in a report of one repository; in a "
    "batch, 22 characters derived from the repository's path and content",
    "transcript_source_type": "`pytest_scoring`",
    "transcript_source_id": "the transcript id",
    "transcript_source_uri": "the repository's path",
    "transcript_date": "when the repository was scored (ISO 8601)",
    "transcript_task_set": "the repository's folder name",
    "transcript_task_id": "the repository's path",
    "transcript_task_repeat": "`1`",
    "transcript_total_time": "the sum of the test durations, in seconds",
    "transcript_metadata": 'JSON: `{"tests": <test counts>}`',
    "scan_id": "the scan id (the folder's `scan_id=` part)",
    "scan_tags": "`[]`",
    "scan_metadata": 'JSON: `{"repository": <path>}`; in a batch `{"batch_key": <key>, '
    '"repositories": <count>}`',
    "scanner_key": "the file's stem: the scorer's name, percent-escaped",
    "scanner_name": "the scorer's name as configured",
    "scanner_version": "`0`",
    "scanner_package_version": "the version of pytest-scoring",
    "scanner_params": 'JSON: `{"type": <scorer type>, ...}` plus the scorer\'s `params`',
    "input_type": "`transcript`",
    "input_ids": "JSON list holding the transcript id",
    "uuid": "a new random id for this result",
    "value": "the score's value as text (see `value_type`)",
    "value_type": "`string`, `number`, `boolean`, `array`, `object` or `null`",
    "answer": "the score's `answer`",
    "explanation": "the score's `explanation`",
    "metadata": "the score's `metadata`, as JSON text",
    "message_references": "`[]`",
    "event_references": "`[]`",
    "scan_error": "`metadata.error` of a score that could not be decided, else null",
    "scan_error_traceback": "the traceback when the scorer raised, else null",
    "scan_total_tokens": "`0`",
    "scan_model_usage": "`{}`",
    "timestamp": "when the repository was scored (ISO 8601)",
    "counted_as": "what the row counted as in the metrics, as text: `C`, `I` or `P` for those "
    "values; for any other value the number it counted as (`62.5`, `1` for `true` or `yes`, "
    "`0` for `false`, `no` or text that is no number); a `N` counts as `0`, a "
    "[tampering `N`](scoring.md#strict-kinds) as its scorer's failed value (`I`; `0` for "
    "`percent_passing_tests`, `100` for `percent_failing_tests`)",
    "flaky": "in the rows of the test scorers after reruns ([`--retries`](scoring.md#reruns)): "
    "the session's flaky tests, each with every attempt's outcome, as JSON text "
    "(`tests.flaky`); else null",
}


def report_columns_table() -> str:
    """The Parquet columns in the order they are written, with their Arrow types and content."""
    from pytest_scoring.report.parquet import COLUMNS

    unknown = set(COLUMN_MEANINGS) - {name for name, _ in COLUMNS}
    if unknown:
        raise RuntimeError(f"COLUMN_MEANINGS names columns that are not written: {unknown}")
    rows = ["| # | column | type | content |", "|---|---|---|---|"]
    for number, (name, kind) in enumerate(COLUMNS, start=1):
        meaning = COLUMN_MEANINGS.get(name, "null (no meaning for a scored repository)")
        rows.append(f"| {number} | `{name}` | {kind} | {meaning} |")
    return "\n".join(rows) + "\n"


#: Sections of the API page, by the subpackage a public name comes from (first match wins).
API_SECTIONS = (
    ("Scores and metrics", ("pytest_scoring.core.score", "pytest_scoring.core.metrics")),
    ("Scorers", ("pytest_scoring.scorers",)),
    ("Databases", ("pytest_scoring.db",)),
    ("Selectors", ("pytest_scoring.selector",)),
    (
        "Sessions and reports",
        ("pytest_scoring.plugin", "pytest_scoring.evaluation", "pytest_scoring.report"),
    ),
    ("Errors", ("pytest_scoring.errors",)),
)


def _api_section(module: str) -> str:
    for title, prefixes in API_SECTIONS:
        if module.startswith(prefixes):
            return title
    return "Other"


def _directive(name: str, value: object) -> str:
    qualified = f"pytest_scoring.{name}"
    if isinstance(value, type) and issubclass(value, BaseException):
        return f".. autoexception:: {qualified}\n"
    if isinstance(value, type):
        return f".. autoclass:: {qualified}\n   :members:\n"
    if inspect.isfunction(value):
        return f".. autofunction:: {qualified}\n"
    metric_name = getattr(value, "name", None)
    if type(value).__name__ == "Metric" and isinstance(metric_name, str):
        return (
            f".. py:data:: {qualified}\n   :type: Metric\n\n"
            f"   The metric ``{metric_name}`` (see :ref:`metrics`): call it with the\n"
            f"   scores of all samples to get one number.\n"
        )
    return f".. autodata:: {qualified}\n   :no-value:\n"


def api_reference() -> str:
    """One autodoc directive per name of ``pytest_scoring.__all__``, grouped by subpackage."""
    import pytest_scoring

    sections: dict[str, list[str]] = {}
    for name in pytest_scoring.__all__:
        value = getattr(pytest_scoring, name)
        module = getattr(value, "__module__", None) or "pytest_scoring"
        sections.setdefault(_api_section(module), []).append(_directive(name, value))
    parts = []
    for title in dict.fromkeys([title for title, _ in API_SECTIONS] + ["Other"]):
        if title in sections:
            directives = "\n".join(sections[title])
            parts.append(f"## {title}\n\n```{{eval-rst}}\n{directives}```\n")
    return "\n".join(parts)


def run_cog(*options: str) -> int:
    """Run cog over every page of docs/ with this folder importable; returns its exit status."""
    from cogapp import Cog

    pages = [*sorted(str(page) for page in DOCS.glob("*.md")), str(GENERATED_CODE)]
    return int(Cog().main(["cog", *options, "-I", str(DOCS), *pages]))


if __name__ == "__main__":
    sys.exit(run_cog("--check") if "--check" in sys.argv[1:] else run_cog("-r"))
