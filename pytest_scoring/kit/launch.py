"""The launcher of a child pytest: the channel and the probe first, the repository after them.

PYTEST_DONT_REWRITE (pytest never rewrites or warns about this module, whatever the
repository's ``filterwarnings`` says).

Copied as a plain file with the rest of the kit (:mod:`pytest_scoring.kit`) into a folder that
only the evaluator can write, and run as ``python <kit>/private/_pytest_scoring_launch.py
[CHANNEL] [--deterministic] [--ignore-option FLAG[=]]... [--black-box [--evaluator-path=PATH]...
[--repository-path=PATH]...] -- PYTEST_ARGS``, where CHANNEL is
``--stream-fd=N --key-fd=N``: inherited descriptors (from ``run``'s supervisor, or in an
Inspect sandbox from the helper's). Like all of the kit, it needs only the standard library and
pytest, because the interpreter may be any one the evaluator names. Before any code of the
repository can run, in this order (docs/security.md):

* the tripwire's audit hook is installed (:mod:`pytest_scoring.kit.tripwire`), first of all;
* the process becomes non-dumpable (Linux ``prctl(PR_SET_DUMPABLE, 0)``): another process of
  the same user cannot open its descriptors or read its memory through ``/proc``;
* the channel opens (:mod:`pytest_scoring.kit.channel`): the key is read and its descriptor
  closed, or its file deleted; the stream's descriptor is made non-inheritable;
* the channel and the probe are loaded from this folder under names of their own, never in
  ``sys.modules``, each with its own copy of the builtins (:func:`private_module`): nothing
  the repository imports or patches by name is what writes the stream, and this folder is
  never on ``sys.path``, so no test can import them by name either;
* once pytest is imported, the self-check takes its references to pytest's, pluggy's and the
  kit's functions (:mod:`pytest_scoring.kit.selfcheck`); under ``--black-box`` the tripwire
  refuses every file of the repository but the evaluator's paths.

Then:

* The kit's folder (above this one) comes first on ``sys.path``, in place of this one (Python
  puts a script's folder there); ``pytest`` is imported before the repository's folder is
  added: a ``pytest.py`` planted in the repository is never what runs.
* The current folder (the repository) is added after it once pytest has loaded its installed
  plugins, before any conftest (as ``python -m pytest`` would, but later): flat-layout
  repositories import their modules as they always do, and a module of the repository named
  like an installed plugin is never loaded in its place.
* pytest runs with ``-p no:scoring``: a pytest-scoring installed in that interpreter never
  scores inside the child (the evaluator outside does). The evaluator's own names are still
  accepted, without any effect: ``--ignore-option`` registers its options and ini names, and
  implementations of its hooks (``pytest_scoring_*``) count as optional, so that a repository
  that names them in its ``addopts``, ini files or ``conftest.py`` still runs.

This file runs as ``__main__``: nothing in it is looked up once the session runs.

``--check`` only reports the interpreter and pytest versions as JSON: the evaluator asks it
first, to learn whether the child's user can run this interpreter at all.
"""

from __future__ import annotations

import argparse
import builtins
import importlib.util
import json
import os
import platform
import sys
import types
from collections.abc import Sequence
from typing import Any

#: What the kit's modules are named in this folder (``pytest_scoring.kit.PREFIX``).
PREFIX = "_pytest_scoring_"
DETERMINISTIC = PREFIX + "deterministic"
INTEGRITY = PREFIX + "integrity"
#: The evaluator's hooks start so; the child never calls them (the evaluator does).
OUR_HOOKS = "pytest_scoring_"
#: The evaluator's ini names start so (``score_strict``…).
OUR_INI = "score_"
#: Exit status when this interpreter cannot import pytest (pytest's own statuses are 0 to 5).
NO_PYTEST = 121
#: Exit status when the channel the evaluator named cannot be used.
NO_CHANNEL = 122
#: ``--ignore-option=--flag`` (a switch), ``--ignore-option=--flag=`` (takes a value),
#: ``--ignore-option=ini:name``.
IGNORE = "--ignore-option="
#: ``--black-box``: the test process loads no file of the repository but the evaluator's,
#: each named by ``--evaluator-path=PATH`` (its tests in the copy); ``--repository-path=PATH``
#: names another place of the repository's (REPO itself).
BLACK_BOX, EVALUATOR_PATH = "--black-box", "--evaluator-path="
REPOSITORY_PATH = "--repository-path="
#: The same, for pytest-xdist's workers (``integrity.BLACK_BOX_VARIABLE``).
BLACK_BOX_VARIABLE = "PYTEST_SCORING_BLACK_BOX"
#: ``--only=FILE``: a file of test ids, one a line; the session runs those only (a rerun of
#: ``--retries``), the others deselected after every other plugin's selection.
ONLY = "--only="
#: The channel's options: inherited descriptors (no path names the channel).
STREAM_FD, KEY_FD = "--stream-fd=", "--key-fd="
#: This file's folder, which holds the channel and the probe and is never on ``sys.path``
#: (``pytest_scoring.kit.PRIVATE_FOLDER``), and the kit's folder above it, which is.
FOLDER = os.path.dirname(os.path.abspath(__file__))
KIT_FOLDER = os.path.dirname(FOLDER)
PR_SET_DUMPABLE = 4


def main(argv: Sequence[str]) -> int:
    # First of all, before pytest and any code of the repository (docs/security.md#the-tripwire).
    wire = private_module("tripwire").install(os.getcwd())
    os.environ.pop("PYTEST_XDIST_WORKER", None)  # this session is no worker, whoever started it
    dumpable_problem = make_non_dumpable()
    options, pytest_args = _split(argv)
    channel_module = private_module("channel")
    try:
        channel_options = _channel_options(options)
        channel = channel_module.open_channel(**channel_options)
    except (channel_module.ChannelError, ValueError) as error:
        sys.stderr.write(f"pytest-scoring: the probe's channel cannot be opened: {error}\n")
        return NO_CHANNEL
    if channel_options.get("stream_fd") is not None:
        wire.protect_file(channel_options["stream_fd"])  # opening it again is reach-in
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
    if dumpable_problem is not None:
        sys.stderr.write(f"pytest-scoring: {dumpable_problem}\n")
    # Python put this folder first, unless told not to (PYTHONSAFEPATH): the kit's goes there.
    rest = [entry for entry in sys.path if entry not in (FOLDER, KIT_FOLDER)]
    sys.path[:] = [KIT_FOLDER, *rest]
    args, plugins = ["-p", "no:scoring"], []
    integrity = _integrity_module()
    if channel is not None:
        probe = private_module("probe")
        kit = [module for module in (probe, integrity, channel_module) if module is not None]
        defence = private_module("selfcheck").take(wire, kit, channel.send)
        plugins.append(probe.probe_plugin(channel, integrity, defence))
        if integrity is not None:
            args += ["-p", INTEGRITY]  # it watches xdist's workers (the probe: the controller)
    if "--deterministic" in options:
        args += ["-p", DETERMINISTIC]  # by name: pytest-xdist's workers load it too
    ignored = [option[len(IGNORE) :] for option in options if option.startswith(IGNORE)]
    plugins.append(EvaluatorNames(ignored, getattr(integrity, "read_ini", None)))
    for path in _values(options, ONLY):
        plugins.append(only_tests(pytest, path))
    if BLACK_BOX in options:
        places = {"evaluator": _values(options, EVALUATOR_PATH)}
        places["repository"] = _values(options, REPOSITORY_PATH)
        wire.evaluator_paths(places["evaluator"])
        wire.repository_paths(places["repository"])
        wire.black_box()
        os.environ[BLACK_BOX_VARIABLE] = json.dumps(places)  # for pytest-xdist's workers
    sys.argv = ["pytest", *pytest_args]  # pytest's messages name "pytest", as users know them
    return int(pytest.main(args + list(pytest_args), plugins=plugins))


def only_tests(pytest: Any, path: str) -> Any:
    """A plugin that keeps only the tests the file at ``path`` names (``--only``)."""
    with open(path, encoding="utf-8") as listed:
        wanted = {line.rstrip("\n") for line in listed if line.strip()}

    def pytest_collection_modifyitems(config: Any, items: list[Any]) -> None:
        dropped = [item for item in items if item.nodeid not in wanted]
        if dropped:
            config.hook.pytest_deselected(items=dropped)
            items[:] = [item for item in items if item.nodeid in wanted]

    hook = pytest.hookimpl(trylast=True)(pytest_collection_modifyitems)
    return types.SimpleNamespace(pytest_collection_modifyitems=hook)


def make_non_dumpable() -> str | None:
    """Make this process non-dumpable (Linux): its ``/proc`` files (descriptors, memory) are
    closed to every other process of its user, programs it starts get their own state back.

    :returns: why not, or None when it worked (elsewhere than on Linux: nothing to do).
    """
    if not sys.platform.startswith("linux"):
        return None
    import ctypes
    import ctypes.util

    try:
        libc = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6", use_errno=True)
        if libc.prctl(PR_SET_DUMPABLE, 0, 0, 0, 0) == 0:
            return None
        reason = os.strerror(ctypes.get_errno())
    except (OSError, AttributeError) as error:
        reason = str(error)
    return f"prctl(PR_SET_DUMPABLE) failed ({reason}): the test process stays dumpable"


def private_module(name: str) -> Any:
    """The kit's module ``name``, loaded from this folder under a random name of its own.

    It is in no ``sys.modules`` entry and has its own copy of the builtins, taken now: what the
    repository later imports, patches or replaces by name (``builtins.isinstance`` too) is
    never what this module's functions call.
    """
    path = os.path.join(FOLDER, PREFIX + name + ".py")
    if not os.path.exists(path):
        path = os.path.join(KIT_FOLDER, PREFIX + name + ".py")
    spec = importlib.util.spec_from_file_location(PREFIX + os.urandom(8).hex(), path)
    if spec is None or spec.loader is None:
        raise ImportError(f"the kit has no module {name} in {KIT_FOLDER}")
    module = importlib.util.module_from_spec(spec)
    module.__builtins__ = dict(vars(builtins))  # type: ignore[attr-defined]
    spec.loader.exec_module(module)
    return module


def _integrity_module() -> Any:
    """The integrity module of the kit, or None (not copied, or it cannot load here)."""
    try:
        return private_module("integrity")
    except Exception:  # its absence only means no integrity lines
        return None


def _values(options: Sequence[str], prefix: str) -> list[str]:
    """The values of a repeatable ``--name=VALUE`` option."""
    return [option[len(prefix) :] for option in options if option.startswith(prefix)]


def _split(argv: Sequence[str]) -> tuple[list[str], list[str]]:
    """The launcher's own options (before ``--``) and pytest's arguments (after it)."""
    arguments = list(argv)
    if "--" not in arguments:
        return arguments, []
    separator = arguments.index("--")
    return arguments[:separator], arguments[separator + 1 :]


def _channel_options(options: Sequence[str]) -> dict[str, Any]:
    """``open_channel``'s arguments from the launcher's options.

    :raises ValueError: for a descriptor that is not a number.
    """
    found: dict[str, Any] = {}
    names = {STREAM_FD: "stream_fd", KEY_FD: "key_fd"}
    for option in options:
        for prefix, name in names.items():
            if option.startswith(prefix):
                value = option[len(prefix) :]
                found[name] = int(value)
    return found


class EvaluatorNames:
    """Accepts the evaluator's options, ini names and hooks in the repository's configuration."""

    def __init__(self, names: Sequence[str], read_ini: Any = None) -> None:
        #: ``--flag`` (a switch), ``--flag=`` (takes a value) or ``ini:name``.
        self.names = list(names)
        #: Reads a configuration file's pytest settings (the integrity module's), or None.
        self.read_ini = read_ini

    def pytest_load_initial_conftests(self, early_config: Any, parser: Any, args: Any) -> None:
        """The repository's folder goes on ``sys.path`` now, after this folder, as ``python -m
        pytest`` puts it first: pytest has loaded the installed plugins by now, so a module of
        the repository named like one (a planted ``pytest_rerunfailures.py``) is never loaded
        in its place, and none of them is imported before pytest marks it for rewriting.

        Every ``score_*`` name of the configuration file is accepted, whether or not the
        evaluator named it: a child whose configuration names one the evaluator did not pass
        (a reference's rerun or baseline, an expected-tests folder) still runs. An unknown
        name is a warning, an error under ``filterwarnings = error`` or ``--strict-config``."""
        sys.path.insert(1, os.getcwd())
        path = getattr(early_config, "inipath", None)
        settings = self.read_ini(path) if path is not None and self.read_ini else None
        for name in settings or {}:
            if str(name).startswith(OUR_INI) and not _known_ini(early_config, str(name)):
                parser.addini(str(name), "ignored under pytest-scoring run")

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


def _known_ini(config: Any, name: str) -> bool:
    try:
        config.getini(name)
    except ValueError:  # "unknown configuration value"
        return False
    return True


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
