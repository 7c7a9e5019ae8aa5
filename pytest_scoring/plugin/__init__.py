"""pytest hooks of pytest-scoring: options, and wiring the session to plain functions.

Kept thin and cheap to import: the scoring machinery is imported inside the hooks.
"""

from __future__ import annotations

import pytest

# Imported now, when pytest loads the plugin: it keeps the environment as it is before any
# conftest.py of the scored repository can change it (docs/security.md).
from pytest_scoring.process import environment  # noqa: F401


def is_xdist_worker(config: pytest.Config) -> bool:
    """True inside a pytest-xdist worker process."""
    return hasattr(config, "workerinput")


@pytest.hookimpl
def pytest_addoption(parser: pytest.Parser) -> None:
    from pytest_scoring.evaluation.flags import add_options

    add_options(parser)


@pytest.hookimpl
def pytest_addhooks(pluginmanager: pytest.PytestPluginManager) -> None:
    from pytest_scoring.evaluation import hookspecs

    pluginmanager.add_hookspecs(hookspecs)


# tryfirst: the tree is checked, and the databases' start snapshot taken, before pytest
# imports any of its conftest.py files (pytest's own implementation, which imports them, is
# trylast).
@pytest.hookimpl(tryfirst=True)
def pytest_load_initial_conftests(early_config: pytest.Config) -> None:
    from pytest_scoring.plugin.assemble import prepare_scoring

    if getattr(early_config.known_args_namespace, "score_verify_tests", None):
        from pytest_scoring.plugin.assemble import verify_tests_first

        verify_tests_first(early_config)
    prepare_scoring(early_config)


@pytest.hookimpl
def pytest_configure(config: pytest.Config) -> None:
    from pytest_scoring.plugin.assemble import configure_scoring

    configure_scoring(config, is_worker=is_xdist_worker(config))
