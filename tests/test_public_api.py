"""The public API: what ``from pytest_scoring import NAME`` gives, and the types it accepts."""

from __future__ import annotations

import importlib
import pkgutil
import sqlite3
from pathlib import Path

import pytest_scoring


def _import_every_submodule() -> None:
    for module in pkgutil.walk_packages(pytest_scoring.__path__, "pytest_scoring."):
        if module.name != "pytest_scoring.__main__":
            importlib.import_module(module.name)


def test_every_public_name_is_the_same_object_on_every_access() -> None:
    first = {name: getattr(pytest_scoring, name) for name in pytest_scoring.__all__}
    _import_every_submodule()  # binds submodules as package attributes
    for name in pytest_scoring.__all__:
        namespace: dict[str, object] = {}
        exec(f"from pytest_scoring import {name}", namespace)
        assert namespace[name] is first[name], name
        assert not isinstance(first[name], type(pytest_scoring)), f"{name} is a module"


def test_all_is_sorted_and_names_what_a_custom_scorer_needs() -> None:
    assert pytest_scoring.__all__ == sorted(pytest_scoring.__all__)
    needed = {"Scorer", "ScoringContext", "make_score", "Metric", "ScoringError", "ConfigError"}
    assert needed <= set(pytest_scoring.__all__)


def test_a_custom_scorer_built_from_public_names_runs(tmp_path: Path) -> None:
    from pytest_scoring import Metric
    from pytest_scoring import Scorer
    from pytest_scoring import ScoringContext
    from pytest_scoring import make_score
    from pytest_scoring import mean
    from pytest_scoring.core.outcomes import OutcomeTally
    from pytest_scoring.scorers.base import run_scorers

    class Always:
        name = type = "always"
        metrics: tuple[Metric, ...] = (mean,)

        def score(self, context: ScoringContext) -> pytest_scoring.Score:
            return make_score("C", "always", explanation=str(context.root))

    scorer: Scorer = Always()
    scores = run_scorers([scorer], ScoringContext(root=tmp_path, tally=OutcomeTally()))
    assert scores["always"]["value"] == "C"
    assert scores["always"]["explanation"] == str(tmp_path)


def test_path_taking_functions_accept_strings(tmp_path: Path) -> None:
    for name in ("before.db", "after.db"):
        with sqlite3.connect(tmp_path / name) as connection:
            connection.execute("CREATE TABLE t (x)")
        connection.close()
    with sqlite3.connect(tmp_path / "after.db") as connection:
        connection.execute("INSERT INTO t VALUES (1)")
    connection.close()
    diff = pytest_scoring.diff_paths(str(tmp_path / "before.db"), str(tmp_path / "after.db"))
    assert diff["comparisons"]["after.db"]["comparisons"]["data"]["has_changes"] is True
    snapshot = pytest_scoring.take_snapshot(str(tmp_path), ["after.db"], str(tmp_path / "copy"))
    assert (tmp_path / "copy" / "after.db").is_file()
    assert list(snapshot.files) == ["after.db"]
