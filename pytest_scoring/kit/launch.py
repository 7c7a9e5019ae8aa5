"""The launcher of a child pytest: the probe first, the repository after it (docs/architecture.md).

Copied as a plain file with the rest of the kit (:mod:`pytest_scoring.kit`) into a folder that
only the evaluator can write, and run as ``python <folder>/_pytest_scoring_launch.py
[--deterministic] [--ignore-option FLAG[=]]... -- PYTEST_ARGS``. Like all of the kit, it needs
only the standard library and pytest, because the interpreter may be any one the evaluator names.

* Its own folder comes first on ``sys.path`` (Python puts a script's folder there), so
  ``pytest`` and the probe are imported before the repository's folder is added: a
  ``pytest.py`` or ``_pytest_scoring_probe.py`` planted in the repository is never what runs.
* The plugins installed for pytest are imported next, before the repository's folder is on
  ``sys.path``: a module of the repository named like one is never loaded in its place.
* Then the current folder (the repository) is added after it, as ``python -m pytest`` would,
  so that flat-layout repositories import their modules as they always do.
* pytest runs with ``-p no:scoring``: a pytest-scoring installed in that interpreter never
  scores inside the child (the evaluator outside does). The evaluator's own names are still
  accepted, without any effect: ``--ignore-option`` registers its options and ini names, and
  implementations of its hooks (``pytest_scoring_*``) count as optional, so that a repository
  that names them in its ``addopts``, ini files or ``conftest.py`` still runs.

``--check`` only reports the interpreter and pytest versions as JSON: the evaluator asks it
first, to learn whether the child's user can run this interpreter at all.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import sys
from collections.abc import Sequence
from typing import Any

LAUNCHER = "_pytest_scoring_launch.py"
PROBE = "_pytest_scoring_probe"
DETERMINISTIC = "_pytest_scoring_deterministic"
#: The evaluator's hooks start so; the child never calls them (the evaluator does).
OUR_HOOKS = "pytest_scoring_"
#: Exit status when this interpreter cannot import pytest (pytest's own statuses are 0 to 5).
NO_PYTEST = 121
#: ``--ignore-option=--flag`` (a switch), ``--ignore-option=--flag=`` (takes a value),
#: ``--ignore-option=ini:name``.
IGNORE = "--ignore-option="


def main(argv: Sequence[str]) -> int:
    options, pytest_args = _split(argv)
    try:
        import pytest
    except ImportError as error:
        sys.stderr.write(
            f"pytest-scoring: {sys.executable} cannot import pytest ({error}): the repository's "
            "tests need an interpreter with pytest installed\n"
        )
        return NO_PYTEST
    if "--check" in options:
        versions = {"python": platform.python_version(), "pytest": pytest.__version__}
        sys.stdout.write(json.dumps(versions) + "\n")
        return 0
    probe = __import__(PROBE)
    import_installed_plugins()
    sys.path.insert(1, os.getcwd())  # after this folder, as ``python -m pytest`` puts it first
    sys.argv = ["pytest", *pytest_args]  # pytest's messages name "pytest", as users know them
    plugins = [plugin for plugin in [probe.Probe.from_environment()] if plugin is not None]
    args = ["-p", "no:scoring"]
    if "--deterministic" in options:
        args += ["-p", DETERMINISTIC]  # by name: pytest-xdist's workers load it too
    if probe.integrity_module() is not None:
        args += ["-p", probe.INTEGRITY]  # it watches xdist's workers (the probe: the controller)
    ignored = [option[len(IGNORE) :] for option in options if option.startswith(IGNORE)]
    plugins.append(EvaluatorNames(ignored))
    return int(pytest.main(args + list(pytest_args), plugins=plugins))


def import_installed_plugins() -> None:
    """Import the plugins installed for pytest (its ``pytest11`` entry points) while only the
    interpreter's folders are on ``sys.path``: a module of the repository named like one (a
    planted ``pytest_rerunfailures.py``) would otherwise be loaded as that plugin, hooks and
    all. pytest then finds them imported; one that fails is left for pytest to report."""
    if os.environ.get("PYTEST_DISABLE_PLUGIN_AUTOLOAD"):
        return
    from importlib import import_module
    from importlib import metadata

    found: Any = metadata.entry_points()
    entries = (
        found.select(group="pytest11") if hasattr(found, "select") else found.get("pytest11", [])
    )
    for entry in entries:
        try:
            import_module(entry.value.split(":")[0].strip())
        except Exception:  # pytest reports it when it loads the plugin
            continue


def _split(argv: Sequence[str]) -> tuple[list[str], list[str]]:
    """The launcher's own options (before ``--``) and pytest's arguments (after it)."""
    arguments = list(argv)
    if "--" not in arguments:
        return arguments, []
    separator = arguments.index("--")
    return arguments[:separator], arguments[separator + 1 :]


class EvaluatorNames:
    """Accepts the evaluator's options, ini names and hooks in the repository's configuration."""

    def __init__(self, names: Sequence[str]) -> None:
        #: ``--flag`` (a switch), ``--flag=`` (takes a value) or ``ini:name``.
        self.names = list(names)

    def pytest_plugin_registered(self, plugin: object, manager: Any) -> None:
        """A conftest's implementation of one of our hooks has no specification here:
        marking it optional keeps pytest from refusing it as an unknown hook."""
        for name in dir(plugin):
            hook = getattr(manager.hook, name, None) if name.startswith(OUR_HOOKS) else None
            if hook is not None and not hook.has_spec():
                for implementation in hook.get_hookimpls():
                    implementation.optionalhook = True

    def pytest_addoption(self, parser: Any) -> None:
        group = parser.getgroup("pytest-scoring (ignored in the child)")
        for name in self.names:
            dest = "_ignored_" + name.strip("-=:").replace("-", "_").replace(":", "_")
            if name.startswith("ini:"):
                parser.addini(name[4:], "ignored under pytest-scoring run")
            elif name.endswith("="):
                group.addoption(name[:-1], action="append", dest=dest, help=argparse.SUPPRESS)
            else:
                group.addoption(name, action="count", dest=dest, help=argparse.SUPPRESS)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
