"""A configuration of 20,000 scorers loads, in the right order, each as written; past the
documented limit one is refused in one line before any test runs (issue 32).

How long loading takes is measured by ``bench/bench_config.py``, not asserted here.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from pytest_scoring.errors import ConfigError
from pytest_scoring.errors import FormulaError
from pytest_scoring.scorers.composite import CompositeScorer
from pytest_scoring.scorers.config_file import MAX_SCORERS
from pytest_scoring.scorers.config_file import load_configuration
from pytest_scoring.scorers.config_file import scorers_from_data
from pytest_scoring.scorers.formula import parse_formula
from pytest_scoring.scorers.registry import BUILTIN_TYPES
from pytest_scoring.selector.language import Selector

SCORERS = 20_000
#: A command-line selector of 1,000 clauses: each entry that leaves out ``selector`` takes it.
SELECTOR = {"$or": [{"rows": {"changed": {"has_one": [f"column{i}"]}}} for i in range(1_000)]}


def _entry(index: int) -> dict[str, Any]:
    """Entry ``index`` of the large configuration: four kinds in turn, the composites each
    reading the next composite, so the whole chain is built back to front."""
    kind = index % 4
    if kind == 0:
        return {"type": "file_contents", "name": f"todo{index}", "folder_path": "src",
                "search_string": f"TODO{index}"}  # fmt: skip
    if kind == 1:
        return {"type": "db_change", "name": f"db{index}"}
    if kind == 2:
        return {"type": "percent_passing_tests", "name": f"tests{index}"}
    reads = [f"tests{index - 1}"] + ([f"chain{index + 4}"] if index + 4 < SCORERS else [])
    formula = f"tests{index - 1}.value == 100"
    return {"type": "composite", "name": f"chain{index}", "scorers": reads, "formula": formula}


def test_twenty_thousand_scorers_load_each_as_written_in_build_order(tmp_path: Path) -> None:
    config = tmp_path / "scores.json"
    config.write_text(json.dumps({"scorers": [_entry(i) for i in range(SCORERS)]}))
    loaded = load_configuration(config, BUILTIN_TYPES, {"selector": SELECTOR})
    scorers = loaded.scorers
    assert len(scorers) == SCORERS
    assert len({scorer.name for scorer in scorers}) == SCORERS
    position = {scorer.name: index for index, scorer in enumerate(scorers)}
    composites = [scorer for scorer in scorers if isinstance(scorer, CompositeScorer)]
    assert len(composites) == SCORERS // 4
    for composite in composites:
        for child in composite.children:
            assert position[child.name] < position[composite.name]  # type: ignore[union-attr]
    # The last composite reads no other: it is built first, the first composite last.
    assert (composites[0].name, composites[-1].name) == (f"chain{SCORERS - 1}", "chain3")
    databases = [scorer for scorer in scorers if scorer.type == "db_change"]
    assert len(databases) == SCORERS // 4
    selectors = {id(scorer.selector) for scorer in databases}  # type: ignore[attr-defined]
    assert len(selectors) == 1  # the command line's selector, parsed once for all
    first = databases[0].selector  # type: ignore[attr-defined]
    assert isinstance(first, Selector) and first.source is SELECTOR


def test_a_chain_of_composites_in_a_cycle_is_refused_naming_where() -> None:
    data = [
        {"type": "composite", "name": f"c{i}", "scorers": [f"c{(i + 1) % 5_000}"], "formula": "1"}
        for i in range(5_000)
    ]
    with pytest.raises(ConfigError, match=r"^c\.json: scorers\[0\]\.scorers: composites read "):
        scorers_from_data(data, "c.json", BUILTIN_TYPES)


def test_a_message_listing_names_stays_one_short_line() -> None:
    data = [{"type": "percent_passing_tests", "name": f"t{i}"} for i in range(SCORERS)]
    data.append({"type": "composite", "name": "x", "scorers": ["ghost"], "formula": "1"})
    with pytest.raises(ConfigError) as raised:
        scorers_from_data(data, "c.json", BUILTIN_TYPES)
    message = str(raised.value)
    assert message.startswith(f"c.json: scorers[{SCORERS}].scorers[0]: 'ghost' is not another")
    assert message.endswith(f"t8, t9, … {SCORERS - 10:,} more)")
    names = [f"n{i}" for i in range(SCORERS)]
    with pytest.raises(FormulaError, match=r"the listed scorers: n0, n1, .*, … 19,990 more\)$"):
        parse_formula("ghost", names)


def test_a_configuration_past_the_most_scorers_stops_the_session_before_any_test(
    pytester: pytest.Pytester,
) -> None:
    pytester.makepyfile("def test_writes(): open('ran.txt', 'w').close()")
    entries = [{"type": "percent_passing_tests", "name": f"t{i}"} for i in range(MAX_SCORERS + 1)]
    pytester.makefile(".json", scores=json.dumps(entries))
    result = pytester.runpytest_subprocess("--score-config=scores.json")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    where = f"scores.json: scorers[{MAX_SCORERS}]"
    line = f"ERROR: {where}: more than {MAX_SCORERS:,} scorers, the most a file may list"
    assert [text for text in result.stderr.lines if text] == [line]
    assert not pytester.path.joinpath("ran.txt").exists()
