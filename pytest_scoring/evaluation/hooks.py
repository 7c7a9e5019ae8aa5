"""Scorer types and session hooks under ``pytest-scoring run``: the evaluator's side only.

In process, our hooks (``pytest_scoring_scorers``, ``pytest_scoring_session_scored``) are
pytest's, so any ``conftest.py`` may implement them, the scored repository's included. Under
``run`` the outer process keeps a pluggy plugin manager of its own with the same hook
specifications, and registers only what the evaluator installed or named: the ``pytest11``
entry points that implement a ``pytest_scoring_*`` hook, and each ``--plugin MODULE``. The
hooks' ``config`` argument is then ``run``'s options object
(:class:`~pytest_scoring.evaluation.options.EvaluatorOptions`), which answers ``getoption``.
"""

from __future__ import annotations

import importlib
import importlib.util
import inspect
import sys
from collections.abc import Sequence
from importlib.metadata import entry_points
from pathlib import Path
from types import ModuleType
from typing import Final
from typing import cast

import pluggy

from pytest_scoring.errors import OptionError
from pytest_scoring.evaluation import hookspecs

#: The project name of pytest's hooks: our specifications are pytest's hookspecs.
PROJECT: Final = "pytest"
HOOK_PREFIX: Final = "pytest_scoring_"


class EvaluatorPluginManager(pluggy.PluginManager):
    """pytest's hooks outside pytest: like pytest, it takes unmarked ``pytest_scoring_*``
    functions as implementations (a plugin written for pytest works unchanged)."""

    def __init__(self) -> None:
        super().__init__(PROJECT)

    def parse_hookimpl_opts(self, plugin: object, name: str) -> pluggy.HookimplOpts | None:
        options = super().parse_hookimpl_opts(plugin, name)
        unmarked = options is None and name.startswith(HOOK_PREFIX)
        if unmarked and inspect.isroutine(getattr(plugin, name, None)):
            return cast(pluggy.HookimplOpts, {})
        return options


def evaluator_plugins(modules: Sequence[str] = ()) -> pluggy.PluginManager:
    """A plugin manager with our hook specifications, the installed plugins that implement
    them and the ``--plugin`` modules.

    :raises OptionError: when a ``--plugin`` module cannot be imported.
    """
    manager = EvaluatorPluginManager()
    manager.add_hookspecs(hookspecs)
    for entry_point in entry_points(group="pytest11"):
        try:
            plugin = entry_point.load()
        except Exception:  # a broken pytest plugin is pytest's business, not the evaluator's
            continue
        if _implements_our_hooks(plugin) and manager.get_plugin(entry_point.name) is None:
            manager.register(plugin, name=entry_point.name)
    for module in modules:
        try:
            manager.register(_import(module), name=f"--plugin {module}")
        except pluggy.PluginValidationError as error:
            raise OptionError(f"--plugin {module}: {error}") from None
    return manager


def _implements_our_hooks(plugin: object) -> bool:
    return any(name.startswith(HOOK_PREFIX) for name in dir(plugin))


def _import(module: str) -> ModuleType:
    """A module by name, or by the path of its ``.py`` file."""
    try:
        if module.endswith(".py"):
            return _import_file(Path(module))
        return importlib.import_module(module)
    except Exception as error:
        raise OptionError(
            f"--plugin {module}: cannot import it ({type(error).__name__}: {error})"
        ) from None


def _import_file(path: Path) -> ModuleType:
    name = f"pytest_scoring_plugin_{path.stem}"
    spec = importlib.util.spec_from_file_location(name, path)
    if spec is None or spec.loader is None:
        raise ImportError(f"{path} is not a Python file")
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    spec.loader.exec_module(module)
    return module
