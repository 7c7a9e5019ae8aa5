"""Integrity signals: what a scored repository did that can shape its own test outcomes.

PYTEST_DONT_REWRITE (pytest never rewrites or warns about this module, whatever the
repository's ``filterwarnings`` says).

The kinds, and what each route can see, are in docs/scoring.md#integrity. Every signal is
``{"kind", "detail", "file"}``; ``file`` is relative to the repository root, or None.

This module imports only the standard library and pytest, never pytest_scoring, and keeps to
Python 3.8 syntax: the stdlib probe that reports outcomes from a child pytest (any interpreter,
pytest >= 7) reuses it as a file. Detection is best effort by nature: code that runs inside
the session can hide from code beside it; the signals make the cheap attacks visible.
"""

from __future__ import annotations

import ast
import importlib.util
import inspect
import json
import os
import shlex
import sys
from collections.abc import Generator
from collections.abc import Iterable
from collections.abc import Mapping
from pathlib import Path
from typing import Any
from typing import TypedDict

import pytest

#: Hooks through which a conftest or plugin can decide, change or hide a test's outcome, or
#: which tests exist. Implementing one is ``outcome_hook`` (information only: pytest's own
#: documentation recipes implement ``pytest_runtest_makereport`` in honest suites).
OUTCOME_HOOKS = (
    "pytest_collection_modifyitems",
    "pytest_deselected",
    "pytest_ignore_collect",
    "pytest_pycollect_makeitem",
    "pytest_runtest_protocol",
    "pytest_runtest_setup",
    "pytest_runtest_call",
    "pytest_pyfunc_call",
    "pytest_runtest_teardown",
    "pytest_runtest_makereport",
    "pytest_runtest_logreport",
    "pytest_report_teststatus",
    "pytest_report_to_serializable",
    "pytest_report_from_serializable",
)

#: Attribute set on each phase report when outcome hooks exist: the outcomes pytest itself
#: could report for the phase, joined by ``|``. JSON-safe, so it travels with pytest-xdist.
COMPUTED_ATTR = "scoring_pytest_outcomes"
#: How favourable a phase outcome is to the test (``rerun`` marks a failed attempt).
_RANK = {"failed": 0, "rerun": 0, "skipped": 1, "passed": 2}

#: ini keys that choose which tests exist.
SELECTION_INI_KEYS = ("testpaths", "python_files", "python_functions", "python_classes")
#: Command-line flags that select or stop tests, as they may appear in ``addopts``.
SELECTION_FLAGS = (
    "-k",
    "-m",
    "--deselect",
    "--ignore",
    "--ignore-glob",
    "-x",
    "--exitfirst",
    "--maxfail",
    "--lf",
    "--last-failed",
    "--sw",
    "--stepwise",
    "--stepwise-skip",
)
#: Names under which ``-p no:NAME`` turns our plugin off.
PLUGIN_NAMES = ("scoring", "pytest_scoring.plugin")


class SignalRecord(TypedDict):
    """One integrity signal as the kit sends it: the shape of
    ``pytest_scoring.core.signals.Signal``, which the kit cannot import."""

    kind: str
    detail: str
    file: str | None


def signal_record(kind: str, detail: str, file: str | None = None) -> SignalRecord:
    return {"kind": kind, "detail": detail, "file": file}


def _kit_module(name: str) -> Any:
    """Another module of the kit, loaded from beside this file under a name of its own: the
    kit's files are ``tripwire.py`` in the package and ``_pytest_scoring_tripwire.py`` in a
    child's folder, and this file's own name says which."""
    folder, own = os.path.split(os.path.abspath(__file__))
    path = os.path.join(folder, own.replace("integrity", name))
    spec = importlib.util.spec_from_file_location(f"{__name__}-{name}", path)
    if spec is None or spec.loader is None:
        raise ImportError(f"the kit has no module {name} beside {own}")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


#: What a file is (the repository's, the interpreter's…): the tripwire's classifier.
_PLACES = _kit_module("tripwire")


def relative_inside(path: object, root: Path) -> str | None:
    """``path`` relative to ``root`` (POSIX), or None when it is not inside, or lies in the
    running interpreter's own environment: pytest's files in a ``.tox`` or ``.venv`` folder of
    the repository are not the repository's."""
    try:
        file: str | None = _PLACES.repository_file(path, root)
    except (ValueError, OSError, RuntimeError):
        return None
    return file


def _function_file(function: object) -> str | None:
    try:
        return inspect.getsourcefile(inspect.unwrap(function))  # type: ignore[arg-type]
    except (TypeError, ValueError):
        return None


# --- outcome_hook ---------------------------------------------------------------------


def outcome_hook_signals(
    pluginmanager: pytest.PytestPluginManager,
    root: Path,
    inside: dict[str, str | None] | None = None,
) -> list[SignalRecord]:
    """One ``outcome_hook`` signal per (hook, file inside ``root``) among registered plugins.

    Conftest modules, plugins a conftest names in ``pytest_plugins``, ``-p`` modules and
    objects registered at run time all count when their hook functions live in the repository.

    :param inside: source files already resolved, and where they are in ``root``: most
        implementations share a few files (pytest's own modules), each resolved once for all
        the looks of a session.
    """
    signals: list[SignalRecord] = []
    inside = {} if inside is None else inside
    root = root.resolve()
    for name in OUTCOME_HOOKS:
        caller = getattr(pluginmanager.hook, name, None)
        if caller is None:
            continue
        files = set()
        for impl in caller.get_hookimpls():
            source = _function_file(impl.function)
            if source is not None and source not in inside:
                inside[source] = relative_inside(source, root)
            relative = None if source is None else inside[source]
            if relative is not None:
                files.add(relative)
        signals.extend(
            signal_record("outcome_hook", f"{name} implemented in {file}", file)
            for file in sorted(files)
        )
    return signals


def hooks_in_source(source: str) -> list[str]:
    """The outcome hooks a Python file defines at top level or in a class (a static look, for
    routes that read a repository without running it)."""
    try:
        tree = ast.parse(source)
    except (SyntaxError, ValueError):
        return []
    names = {
        node.name
        for node in ast.walk(tree)
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) and node.name in OUTCOME_HOOKS
    }
    return [name for name in OUTCOME_HOOKS if name in names]


# --- outcome_changed ------------------------------------------------------------------


def _classify(excinfo: Any) -> str:
    """The phase outcome an exception (or none) means to pytest."""
    if excinfo is None:
        return "passed"
    error = excinfo.value
    unittest = sys.modules.get("unittest")
    skips: tuple[type, ...] = (pytest.skip.Exception, pytest.xfail.Exception)
    if unittest is not None:
        skips += (unittest.SkipTest,)
    return "skipped" if isinstance(error, skips) else "failed"


def computed_outcomes(item: pytest.Item, call: pytest.CallInfo[None], before: Any) -> str:
    """The outcomes pytest itself could report for this phase, ``|``-joined.

    :param before: ``call.excinfo`` as it was before the other ``makereport``
        implementations ran (pytest's unittest support fills it in during them).
    """
    outcomes = [_classify(before), _classify(call.excinfo)]
    worst = min(outcomes, key=_RANK.__getitem__)
    xfail = item.get_closest_marker("xfail") is not None and not item.config.option.runxfail
    if worst == "failed" and xfail:
        return "failed|skipped"  # an expected failure is reported as skipped
    return worst


def outcome_changed(report: Any, comparing: bool) -> str | None:
    """Why this phase report is more favourable than pytest computed, or None.

    Only changes in the test's favour count: pytest itself turns a passing test with failed
    subtests into ``failed`` after the report is made, and pytest-rerunfailures marks a
    failed attempt ``rerun``.

    :param comparing: outcome hooks exist, so every phase report must carry
        :data:`COMPUTED_ATTR`; a favourable one without it was made outside pytest's
        ``pytest_runtest_makereport``.
    """
    computed = getattr(report, COMPUTED_ATTR, None)
    if not (comparing or isinstance(computed, str)):  # most sessions: nothing to compare
        return None
    outcome = getattr(report, "outcome", None)
    if outcome not in _RANK or getattr(report, "when", None) is None:
        return None
    if not isinstance(computed, str):
        if outcome != "failed":
            where = f"{report.nodeid} {report.when}"
            return f"{where}: a {outcome} report that pytest's makereport did not make"
        return None
    allowed = [name for name in computed.split("|") if name in _RANK]
    if allowed and _RANK[outcome] > max(_RANK[name] for name in allowed):
        return "{} {}: pytest computed {}, the report says {}".format(
            report.nodeid, report.when, " or ".join(allowed), outcome
        )
    return None


class ReportStamp:
    """Stamps every phase report with :data:`COMPUTED_ATTR`; registered only once outcome
    hooks are found, so a repository without them pays nothing per test."""

    # tryfirst, and registered after the conftests: the outermost wrapper, so it sees the
    # call before any other implementation can change it. An old-style wrapper: pluggy 1.0
    # (Debian's pytest 7.2) knows no ``wrapper=True``, and this module must load there.
    @pytest.hookimpl(hookwrapper=True, tryfirst=True)
    def pytest_runtest_makereport(
        self, item: pytest.Item, call: pytest.CallInfo[None]
    ) -> Generator[None, Any, None]:
        before = call.excinfo
        outcome = yield
        if outcome.excinfo is None:
            setattr(outcome.get_result(), COMPUTED_ATTR, computed_outcomes(item, call, before))


# --- patched --------------------------------------------------------------------------


class PatchGuard:
    """Tells which functions are no longer the ones their module defines.

    A conftest runs before any plugin's ``pytest_configure``, so a snapshot taken then could
    already hold its replacement; instead each function is checked against where it must
    come from: its name and the file of the module that owns it.
    """

    def __init__(self, targets: Iterable[tuple[str, object, str]]):
        #: ``(label, owner, attribute)``: a module or class, and the function's name in it.
        self.targets = list(targets)

    def signals(self, root: Path) -> list[SignalRecord]:
        """A ``patched`` signal for each function replaced (or its code swapped)."""
        signals = []
        for label, owner, attribute in self.targets:
            now = _unwrap_static(inspect.getattr_static(owner, attribute, None))
            code = getattr(now, "__code__", None)
            home = _home_file(owner)
            if code is not None and code.co_name == attribute and _same_file(code, home):
                continue
            source = _function_file(now)
            file = None if source is None else relative_inside(source, root)
            signals.append(signal_record("patched", f"{label} was replaced", file))
        return signals


def _home_file(owner: object) -> str | None:
    module = owner if inspect.ismodule(owner) else sys.modules.get(getattr(owner, "__module__", ""))
    return getattr(module, "__file__", None)


def _same_file(code: Any, home: str | None) -> bool:
    try:
        return home is not None and Path(code.co_filename).resolve() == Path(home).resolve()
    except (OSError, RuntimeError):
        return False


def _unwrap_static(value: object) -> object:
    return getattr(value, "__func__", value)


#: pytest's own functions that decide a phase's outcome; replacing them changes every verdict.
PYTEST_TARGETS = (
    ("pytest.CallInfo.from_call", pytest.CallInfo, "from_call"),
    ("pytest.TestReport.from_item_and_call", pytest.TestReport, "from_item_and_call"),
)


# --- selection and plugin_disabled, from the repository's ini ---------------------------


def _addopts(ini: Mapping[str, Any]) -> list[str]:
    value = ini.get("addopts", "")
    if isinstance(value, (list, tuple)):
        value = " ".join(str(part) for part in value)
    try:
        return shlex.split(str(value))
    except ValueError:
        return str(value).split()


def _flag_name(arg: str) -> str | None:
    """The selection flag an argument starts with (``-kfoo``, ``--maxfail=2``), or None."""
    for flag in SELECTION_FLAGS:
        if arg == flag or arg.startswith(flag + "="):
            return flag
        if len(flag) == 2 and arg.startswith(flag) and flag in ("-k", "-m"):
            return flag
    if arg.startswith("-") and not arg.startswith("--") and "x" in arg[1:] and arg[1:].isalpha():
        return "-x"  # -x among combined short flags, e.g. -qx
    return None


def selection_signals(ini: Mapping[str, Any], inifile: str | None) -> list[SignalRecord]:
    """``selection`` signals for the ini settings and ``addopts`` flags that choose tests."""
    signals: list[SignalRecord] = []
    args = _addopts(ini)
    for index, arg in enumerate(args):
        flag = _flag_name(arg)
        if flag is None:
            continue
        shown = arg
        takes_value = flag not in ("-x", "--exitfirst", "--lf", "--last-failed", "--sw")
        takes_value = takes_value and flag not in ("--stepwise", "--stepwise-skip")
        if takes_value and arg == flag and index + 1 < len(args):
            shown = f"{arg} {args[index + 1]}"
        signals.append(signal_record("selection", f"addopts: {shown}", inifile))
    for key in SELECTION_INI_KEYS:
        if key in ini:
            value = ini[key]
            if isinstance(value, (list, tuple)):
                value = " ".join(str(part) for part in value)
            shown = " ".join(str(value).split())
            signals.append(signal_record("selection", f"{key} = {shown}", inifile))
    return signals


def plugin_disabled_signals(ini: Mapping[str, Any], inifile: str | None) -> list[SignalRecord]:
    """``plugin_disabled`` when the ini's ``addopts`` turn our plugin off (``-p no:scoring``)."""
    args = _addopts(ini)
    signals: list[SignalRecord] = []
    for index, arg in enumerate(args):
        value = None
        if arg == "-p" and index + 1 < len(args):
            value = args[index + 1]
        elif arg.startswith("-p"):
            value = arg[2:].lstrip("=")
        if value is not None and value.startswith("no:") and value[3:] in PLUGIN_NAMES:
            detail = f"addopts: -p {value}"
            signals.append(signal_record("plugin_disabled", detail, inifile))
    return signals


#: The files pytest reads settings from, in the order it looks for them in a folder.
INI_FILES = (
    "pytest.toml",
    ".pytest.toml",
    "pytest.ini",
    ".pytest.ini",
    "pyproject.toml",
    "tox.ini",
    "setup.cfg",
)


def find_ini(root: Path) -> Path | None:
    """The settings file pytest would take in ``root``, or None."""
    for name in INI_FILES:
        path = root / name
        if path.is_file() and (name in INI_FILES[:4] or read_ini(path) is not None):
            return path
    return None


def read_ini(path: Path) -> dict[str, Any] | None:
    """The pytest settings in one file (None when the file has no pytest section)."""
    name = path.name
    if name.endswith(".toml"):
        content = _toml(path)
        if name != "pyproject.toml":
            table = content.get("pytest")
            return table if isinstance(table, dict) else {}
        tool = content.get("tool")
        table = tool.get("pytest") if isinstance(tool, dict) else None
        if not isinstance(table, dict):
            return None
        options = table.get("ini_options")
        return options if isinstance(options, dict) else table
    # Loaded only for an INI-style file (pytest.ini, tox.ini, setup.cfg), not for TOML.
    import configparser

    section = "tool:pytest" if name == "setup.cfg" else "pytest"
    parser = configparser.ConfigParser(interpolation=None)
    try:
        parser.read(str(path), encoding="utf-8")
    except (configparser.Error, UnicodeDecodeError, OSError):
        return None
    if parser.has_section(section):
        return dict(parser[section])
    return {} if name in ("pytest.ini", ".pytest.ini") else None


def _toml(path: Path) -> dict[str, Any]:
    try:
        import tomllib
    except ImportError:  # Python < 3.11: the probe's interpreter may lack it
        return {}
    try:
        content = tomllib.loads(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, tomllib.TOMLDecodeError):
        return {}
    return content if isinstance(content, dict) else {}


def ini_signals(path: Path | None, root: Path, selection: bool) -> list[SignalRecord]:
    """``plugin_disabled`` (and, when ``selection``, ``selection``) signals for the settings
    file at ``path``, when it lies inside the repository at ``root``."""
    relative = None if path is None else relative_inside(path, root)
    if path is None or relative is None:
        return []
    ini = read_ini(path) or {}
    signals = plugin_disabled_signals(ini, relative)
    return [*signals, *selection_signals(ini, relative)] if selection else signals


# --- early_end ------------------------------------------------------------------------


def exit_location(excinfo: Any, root: Path) -> tuple[str | None, str]:
    """Where a ``pytest.exit()`` (or any exception) was raised from inside ``root``:
    ``(file, "file:line")``, or ``(None, "")`` when no frame of it lies inside."""
    for entry in reversed(list(getattr(excinfo, "traceback", []))):
        relative = relative_inside(entry.path, root)
        if relative is not None:
            return relative, f"{relative}:{entry.lineno + 1}"
    return None, ""


#: Key of the signals a pytest-xdist worker hands to the controller.
WORKER_OUTPUT_KEY = "scoring_integrity"
#: How :func:`stop_reason` starts when pytest stopped itself (``-x``, ``--maxfail``, stepwise).
STOPPED_EARLY = "pytest stopped early"


def stop_reason(session: pytest.Session, excinfo: Any, root: Path) -> tuple[str, str | None]:
    """What ended the session early, and the file it came from: ``pytest.exit()``, an
    interrupt, or pytest's own stop (``-x``, ``--maxfail``); ``("", None)`` for none."""
    if excinfo is not None:
        if isinstance(excinfo.value, pytest.exit.Exception):
            file, where = exit_location(excinfo, root)
            at = f" at {where}" if where else ""
            return f"pytest.exit({str(excinfo.value.msg)!r}) called{at}", file
        return f"interrupted ({excinfo.typename}: Ctrl-C, a signal or a timeout)", None
    stop = session.shouldfail or session.shouldstop
    return (f"{STOPPED_EARLY}: {stop}", None) if stop else ("", None)


class IntegrityWatch:
    """Gathers one pytest process's signals: outcome hooks, changed outcomes, patches.

    Registered in every process of a scored session, the controller and each pytest-xdist
    worker; a worker hands its signals to the controller when it finishes.
    """

    def __init__(
        self, config: pytest.Config, root: Path, guarded: Iterable[tuple[str, object, str]] = ()
    ):
        self.config = config
        self.root = root
        #: Each signal once, in the order found (keyed by all of it).
        self._signals: dict[tuple[str, str, str | None], SignalRecord] = {}
        #: Outcome hooks were found: phase reports are stamped and compared.
        self.comparing = False
        #: Hook files resolved by the looks so far (see outcome_hook_signals).
        self._inside: dict[str, str | None] = {}
        self._guard = PatchGuard([*PYTEST_TARGETS, *guarded])

    def look_for_outcome_hooks(self) -> None:
        """Record the outcome hooks registered by now; stamp reports from now on if any."""
        found = outcome_hook_signals(self.config.pluginmanager, self.root, self._inside)
        self.add(found)
        if found and not self.comparing:
            self.comparing = True
            name = "scoring-report-stamp"
            self.config.pluginmanager.register(ReportStamp(), name)
            self.config.add_cleanup(lambda: self.config.pluginmanager.unregister(name=name))

    @pytest.hookimpl
    def pytest_sessionstart(self, session: pytest.Session) -> None:
        # The initial conftests are loaded (the xdist controller collects nothing more).
        self.look_for_outcome_hooks()

    @pytest.hookimpl
    def pytest_collection_finish(self, session: pytest.Session) -> None:
        self.look_for_outcome_hooks()  # every conftest of the collected folders is loaded

    def check_report(self, report: Any) -> None:
        """An ``outcome_changed`` signal when this phase report is better than pytest said."""
        if not (self.comparing or hasattr(report, COMPUTED_ATTR)):
            return  # most sessions, every phase: nothing to compare (outcome_changed's test)
        detail = outcome_changed(report, self.comparing)
        if detail is not None:
            self.add([signal_record("outcome_changed", detail, self._changed_by())])

    def _changed_by(self) -> str | None:
        """The file that changed an outcome: the one file implementing outcome hooks now (an
        evaluator's conftest alone is the evaluator's doing), or None when several might
        have, or none did (looked at again: a hook registered since counts too)."""
        found = outcome_hook_signals(self.config.pluginmanager, self.root, self._inside)
        self.add(found)
        files = {signal["file"] for signal in found}
        return files.pop() if len(files) == 1 else None

    def add(self, signals: Iterable[SignalRecord]) -> None:
        for signal in signals:
            self._signals.setdefault((signal["kind"], signal["detail"], signal["file"]), signal)

    @property
    def signals(self) -> list[SignalRecord]:
        """The signals found so far, each once."""
        return list(self._signals.values())

    def finish(self) -> list[SignalRecord]:
        """This process's signals at the end: hooks registered late, functions replaced (in a
        pytest-xdist worker of ``run``, what its tripwire and self-check found)."""
        self.look_for_outcome_hooks()
        self.add(self._guard.signals(self.root))
        if _DEFENCE is not None and hasattr(self.config, "workerinput"):
            self.add(_DEFENCE[1].check(True))
        return self.signals

    @pytest.hookimpl
    def pytest_sessionfinish(self, session: pytest.Session) -> None:
        workeroutput = getattr(self.config, "workeroutput", None)
        if workeroutput is not None:  # an xdist worker: the controller reads them
            workeroutput[WORKER_OUTPUT_KEY] = self.finish()
            if _DEFENCE is not None and _DEFENCE[0].refusal() is not None:
                workeroutput[REFUSED_KEY] = _DEFENCE[0].refusal()

    @pytest.hookimpl(optionalhook=True)
    def pytest_testnodedown(self, node: Any, error: Any) -> None:
        """On the controller: take a worker's signals (only well-formed ones)."""
        output = getattr(node, "workeroutput", None) or {}
        for item in output.get(WORKER_OUTPUT_KEY, []):
            if isinstance(item, dict) and {"kind", "detail", "file"} <= set(item):
                file = item["file"] if isinstance(item["file"], str) else None
                self.add([signal_record(str(item["kind"]), str(item["detail"]), file)])


def repository_root(config: pytest.Config) -> Path:
    """The scored repository's root: where pytest was started, when pytest's rootdir lies
    inside it (an ini file in a subfolder moves the rootdir, not the repository)."""
    invocation, rootdir = Path(config.invocation_params.dir), Path(config.rootpath)
    return invocation if _is_inside(rootdir, invocation) else rootdir


def _is_inside(path: Path, folder: Path) -> bool:
    try:
        path.relative_to(folder)
    except ValueError:
        return False
    return True


#: Set by pytest-xdist in each of its workers before the worker reads any configuration (the
#: launcher removes it from a session it starts: that one is no worker).
XDIST_WORKER = "PYTEST_XDIST_WORKER"
#: ``--black-box``'s places for the workers, set by the launcher: ``{"evaluator", "repository"}``
#: (no code of the repository runs in the controller that could change it).
BLACK_BOX_VARIABLE = "PYTEST_SCORING_BLACK_BOX"
#: Key of a worker's ``--black-box`` refusal in what it hands the controller.
REFUSED_KEY = "scoring_refused"


def _worker_defence() -> Any:
    """In a pytest-xdist worker of ``pytest-scoring run``: the tripwire and the self-check of
    docs/security.md#inside-the-test-process, set up when ``-p`` imports this module, before
    the worker reads any conftest (the launcher does it for the controller). The worker hands
    what they found to the controller with its other signals, at its end."""
    if not (__name__.startswith("_pytest_scoring_") and os.environ.get(XDIST_WORKER)):
        return None  # in process, or the controller
    wire = _kit_module("tripwire").install(os.getcwd())
    black_box = os.environ.get(BLACK_BOX_VARIABLE)
    if black_box:
        places = json.loads(black_box)
        wire.evaluator_paths(places["evaluator"])
        wire.repository_paths(places["repository"])
        wire.black_box()
    return wire, _kit_module("selfcheck").take(wire, [sys.modules[__name__]])


#: The worker's tripwire and self-check (None elsewhere).
_DEFENCE = _worker_defence()


#: The worker's plugin manager, once the self-check watches it.
_WATCHED: list[Any] = []


def pytest_plugin_registered(plugin: object, manager: Any) -> None:
    """In a pytest-xdist worker, as soon as ``-p`` registered this module (before any
    conftest: a conftest's ``pytest_configure`` runs before this one's), the self-check takes
    what it compares."""
    if _DEFENCE is not None and plugin is sys.modules.get(__name__) and not _WATCHED:
        _WATCHED.append(manager)
        _DEFENCE[1].watch(manager)
        _DEFENCE[1].configured()


def pytest_configure(config: pytest.Config) -> None:
    """Loaded by name (``-p``, by the launcher of ``pytest-scoring run``): watch each
    pytest-xdist worker, which hands its signals to the controller's watch (the probe's)."""
    if hasattr(config, "workerinput"):
        watch = IntegrityWatch(config, repository_root(config))
        config.pluginmanager.register(watch, "pytest-scoring-integrity")
