"""The scorers of one evaluation, built from its settings before any test runs.

Every front-end builds its scorers here: the plugin in process, ``pytest-scoring run`` and a
batch from the evaluator's command line, the Inspect scorers from their parameters. Each
scorer's module is imported only when that scorer runs (the reference's is heavy).
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING
from typing import Any
from typing import Final

from pytest_scoring.core.settings import DEFAULT_TEST_PATTERNS
from pytest_scoring.core.settings import ScoringSettings
from pytest_scoring.core.settings import ServerDatabase
from pytest_scoring.errors import OptionError
from pytest_scoring.errors import SelectorError

#: The scorer types that read a selector, database patterns and ``--score-db-reset``.
DATABASE_TYPES: Final = frozenset({"db_change", "db_diff_change"})

if TYPE_CHECKING:
    from collections.abc import Mapping

    from pytest_scoring.scorers.base import Scorer


def build_scorers(hooks: Any, hook_config: object, settings: ScoringSettings) -> list[Scorer]:
    """The scorers this session runs, built (and validated) before any test runs.

    Without ``--score-config``: the test scorers. With it: exactly the file's scorers, the
    types of the ``pytest_scoring_scorers`` hook included; entries that leave out
    ``selector`` or ``test_patterns`` take the command line's, and its ``paths:`` table
    fills the sandbox paths ``--score-path-map`` leaves out. Then the options add what they
    need (:func:`_option_scorers`).

    :param hooks: the pluggy hook relay that answers ``pytest_scoring_scorers`` (pytest's in
        process, the evaluator's own under ``run``).
    :param hook_config: its ``config`` argument (pytest's config, or ``run``'s options).
    """
    from pytest_scoring.scorers import default_test_scorers

    _check_command_line_patterns(settings.test_patterns)
    if settings.config_file is None:
        scorers = default_test_scorers()
    else:
        scorers = _configured_scorers(hooks, hook_config, settings, settings.config_file)
    scorers = [*scorers, *_option_scorers(settings, {scorer.type for scorer in scorers})]
    copies_tests = any(scorer.type == "db_diff_change" for scorer in scorers)
    if "score_test_patterns" in settings.explicit and not copies_tests:
        raise OptionError(
            "--score-test-pattern: only db_diff_change copies test files, and none runs; "
            "add --score-reference=DIR (or a db_diff_change scorer to --score-config)"
        )
    return scorers


def _check_command_line_patterns(patterns: list[str]) -> None:
    """``--score-test-pattern``s, named as such whichever ``db_diff_change`` takes them."""
    if tuple(patterns) == DEFAULT_TEST_PATTERNS:
        return  # ours, known good: not worth importing the reference's copier for
    from pytest_scoring.reference.copy import check_test_pattern

    for pattern in patterns:
        try:
            check_test_pattern(pattern)
        except OptionError as error:
            raise OptionError(f"--score-test-pattern {error}") from None


def _configured_scorers(
    hooks: Any, hook_config: object, settings: ScoringSettings, config_file: Path
) -> list[Scorer]:
    from pytest_scoring.evaluation.settings import path_map
    from pytest_scoring.scorers.config_file import load_configuration
    from pytest_scoring.scorers.registry import scorer_types

    types = scorer_types(hooks.pytest_scoring_scorers(config=hook_config))
    command_line = {"selector": settings.selector, "test_patterns": settings.test_patterns}
    loaded = load_configuration(config_file, types, command_line, settings.config_entry)
    from_file = path_map(
        loaded.paths.items(), settings.root.resolve(), f"{config_file.name}: paths"
    )
    settings.path_map = {**from_file, **settings.path_map}  # the command line wins
    settings.notes.extend(loaded.notes)
    # The configuration is the evaluator's: its folders are relative to the repository root.
    settings.db_exclude += [settings.root / folder for folder in loaded.exclude]
    settings.environment.update(loaded.env)
    settings.databases += _configured_databases(settings, loaded.databases, config_file.name)
    return loaded.scorers


def _configured_databases(
    settings: ScoringSettings, entries: list[dict[str, str]], source: str
) -> list[ServerDatabase]:
    """The configuration's ``databases:``, ``${VAR}`` read from the evaluator's environment.

    An ``admin_url`` counts only in a configuration the command line named: one that the
    scored repository's ini file names is ignored (an integrity signal), and the entry takes
    ``--score-db-admin-url``.

    :raises OptionError: naming the file and entry.
    """
    from pytest_scoring.db.servers import check_names
    from pytest_scoring.db.servers import check_repository_databases
    from pytest_scoring.db.servers import server_database
    from pytest_scoring.process.environment import captured_environment

    environ = captured_environment()
    evaluators = "score_config" in settings.explicit
    found = []
    for index, entry in enumerate(entries):
        where = f"{source}: databases[{index}]"
        admin_url = entry.get("admin_url")
        if admin_url is not None and not evaluators:
            settings.ignored_ini[f"score_config {where}.admin_url"] = "(a URL)"
            admin_url = None
        values = {
            key: _expanded(value, environ, f"{where}.{key}", evaluators, key.endswith("url"))
            for key, value in entry.items()
            if evaluators or key != "admin_url"
        }
        found.append(
            server_database(
                values["url"],
                settings.db_admin_url if admin_url is None else values["admin_url"],
                where,
                values.get("name"),
                values.get("env"),
                None if evaluators else where,
            )
        )
    check_names([*settings.databases, *found])
    check_repository_databases(found, settings.db_reset_servers)
    return found


def _expanded(
    value: str, environ: Mapping[str, str], what: str, evaluators: bool, url: bool
) -> str:
    """``${NAME}`` in a ``databases:`` value, as far as the configuration's author may."""
    from pytest_scoring.db.servers import expand
    from pytest_scoring.db.servers import expand_from_repository

    if evaluators:
        return expand(value, environ, what)
    return expand_from_repository(value, environ, what, url)


def _wants_db_change(settings: ScoringSettings, present: set[str]) -> bool:
    """``--score-db-diff``; or a database option that no database scorer would read
    (``--score-selector``, ``--score-db-pattern``, ``--score-db-reset``): it turns on
    ``db_change`` rather than being ignored (a reference rerun adds nothing)."""
    if settings.db_diff:
        return "db_change" not in present
    if present & DATABASE_TYPES:
        return False
    return (
        settings.selector is not None
        or settings.db_reset
        or bool(settings.databases)
        or "score_db_patterns" in settings.explicit
    )


def _option_scorers(settings: ScoringSettings, present: set[str]) -> list[Scorer]:
    """The database scorers that options ask for and the scorer list lacks."""
    # Each scorer's module is imported only when it runs: the reference's is heavy.
    added: list[Scorer] = []
    try:
        if settings.reference is not None and "db_diff_change" not in present:
            from pytest_scoring.scorers.db_diff_change import db_diff_change_scorer

            added.append(db_diff_change_scorer(settings.selector, settings.test_patterns))
        if _wants_db_change(settings, present | {scorer.type for scorer in added}):
            from pytest_scoring.scorers.db_change import db_change_scorer

            added.insert(0, db_change_scorer(settings.selector))
    except SelectorError as error:
        raise SelectorError(f"--score-selector: {error}") from None
    return added


def check_scorer_settings(settings: ScoringSettings, scorers: list[Scorer]) -> None:
    """What the scorers need of the settings, checked before any test runs.

    :raises ScoringError: e.g. ``db_diff_change`` without a readable reference.
    """
    if any(scorer.type == "db_diff_change" for scorer in scorers):
        from pytest_scoring.scorers.db_diff_change import check_reference_setting

        check_reference_setting(settings)
