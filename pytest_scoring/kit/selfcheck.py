"""The probe's self-check: what decides a test's outcome, compared with what it was before any
code of the repository ran (docs/security.md#self-checks).

PYTEST_DONT_REWRITE (pytest never rewrites or warns about this module, whatever the
repository's ``filterwarnings`` says).

The launcher takes the references (:func:`take`) right after importing pytest, before pytest
reads the repository's configuration or conftest files: pytest's ``TestReport`` and
``CallInfo`` and the functions of ``_pytest.runner`` that run each test's protocol, pluggy's
call loop, and every function of the kit. The probe, once registered, adds the hooks it
implements and pytest's own implementations of the test protocol (:func:`watch`). It then
compares everything at every record it writes, and once more at the end with the code of
every function of pytest's outcome machinery, and reports each change once as ``patched``.

The comparison runs on a sealed copy of this module (``tripwire.seal``): replacing a name in
this module, or a builtin, changes nothing it does.
"""

from __future__ import annotations

import importlib
import os
import sys
import types
from collections.abc import Callable
from collections.abc import Iterable
from typing import TYPE_CHECKING
from typing import Any
from typing import NamedTuple
from typing import TypeVar

import pytest

if TYPE_CHECKING:
    from typing import TypeGuard

_T = TypeVar("_T")

#: Compared at every record (``module:qualified name``): what runs each test and makes its
#: report. Names a version of pytest or pluggy lacks are left out.
CORE = (
    "pytest:TestReport",
    "pytest:CallInfo",
    "_pytest.runner:call_and_report",
    "_pytest.runner:runtestprotocol",
    "_pytest.runner:call_runtest_hook",
    "_pytest.runner:check_interactive_exception",
    "_pytest.runner:pytest_runtest_protocol",
    "_pytest.runner:pytest_runtest_makereport",
    "_pytest.runner:pytest_runtest_setup",
    "_pytest.runner:pytest_runtest_call",
    "_pytest.runner:pytest_runtest_teardown",
    "_pytest.runner:CallInfo",
    "_pytest.runner:TestReport",
    "_pytest.runner:CallInfo.from_call",
    "_pytest.runner:CallInfo.__init__",
    "_pytest.reports:TestReport",
    "_pytest.reports:TestReport.from_item_and_call",
    "_pytest.reports:TestReport.__init__",
    "_pytest.reports:BaseReport.passed",
    "_pytest.reports:BaseReport.failed",
    "_pytest.reports:BaseReport.skipped",
    "_pytest.python:pytest_pyfunc_call",
    "_pytest.main:pytest_runtestloop",
    "pluggy._manager:_multicall",
    "pluggy._manager:PluginManager._hookexec",
    "pluggy._callers:_multicall",
    "pluggy._hooks:_HookCaller.__call__",
    "pluggy._hooks:_HookCaller.get_hookimpls",
    "pluggy._hooks:HookCaller.__call__",
    "pluggy._hooks:HookCaller.get_hookimpls",
    "pluggy._caller:HookCaller.__call__",
    "pluggy._caller:HookCaller.get_hookimpls",
)
#: Compared whole at the end: every function and class of the modules of these packages
#: (with their methods), and the code of each function.
PACKAGES = ("pytest", "_pytest", "pluggy")
#: Hooks whose implementations by pytest (and by the probe, which adds its own) are compared.
HOOKS = (
    "pytest_runtestloop",
    "pytest_runtest_protocol",
    "pytest_runtest_setup",
    "pytest_runtest_call",
    "pytest_runtest_teardown",
    "pytest_runtest_makereport",
    "pytest_runtest_logreport",
    "pytest_pyfunc_call",
    "pytest_make_collect_report",
    "pytest_collectreport",
    "pytest_collection",
    "pytest_collection_finish",
    "pytest_sessionfinish",
    "pytest_unconfigure",
)
#: Key of a pytest-xdist worker's ``--black-box`` refusal (``integrity.REFUSED_KEY``).
REFUSED_KEY = "scoring_refused"
#: pytest's helpers that act on what their caller hands them (the tripwire walks through).
WRAPPERS = ("monkeypatch.py", "_code")
#: What the tripwire calls the files whose replacements are not signals: pytest's, pluggy's
#: and the kit's own, and the interpreter's installed plugins (the evaluator's).
TRUSTED = frozenset({"machinery", "interpreter"})
_MISSING = object()
_Function = types.FunctionType
#: A class's ``__mro__`` and ``__dict__`` read through ``type``'s own descriptors (a
#: metaclass of the repository's cannot answer for them).
_MRO = type.__dict__["__mro__"].__get__
_CLASS_DICT = type.__dict__["__dict__"].__get__


class SelfCheck(NamedTuple):
    """The probe's calls."""

    #: ``own(plugin)``: the probe's hooks, as made (before pytest reads any conftest).
    own: Callable[[object], None]
    #: ``watch(pluginmanager)``: as soon as the probe is registered, before pytest loads any
    #: conftest or plugin of the repository, compare its hook implementations, pytest's,
    #: their hook callers and pluggy's call loop as they are then.
    watch: Callable[[Any], None]
    #: ``configured()``: the probe's ``pytest_configure`` ran (a record before it is a sign
    #: that the probe was kept out).
    configured: Callable[[], None]
    #: ``check(final)``: what changed and what the tripwire found since the last call, as
    #: signals (a pytest-xdist worker has no channel: it hands them on at its end).
    check: Callable[[bool], list[dict[str, Any]]]


def take(
    wire: Any, kit: Iterable[types.ModuleType], send: Callable[[Any], None] | None = None
) -> SelfCheck:
    """The references, taken now: call it before pytest reads any file of the repository.

    From now on, before the channel sends a record, the tripwire's hook compares them and
    sends (with ``send``) a ``patched`` ``integrity`` record for each change since the start,
    the tripwire's own findings and the ``refused`` record of ``--black-box``, each once;
    before the end record it compares the code of every function as well.

    :param wire: the installed tripwire, told about pytest's and pluggy's folders and given
        every reference to protect.
    :param kit: the kit's modules loaded in this process (the probe, its integrity watch).
    :param send: the channel's own ``send`` (None: a pytest-xdist worker, which calls
        ``check`` itself).
    """
    import _pytest
    import pluggy

    _import_builtin_plugins()
    wire.machinery(_pytest, pytest, pluggy)
    folder = os.path.dirname(_pytest.__file__)
    wire.wrappers(*(os.path.join(folder, path) for path in WRAPPERS))
    code = wire.seal(globals())
    check: SelfCheck = code["_take"](wire, list(kit), send)
    return check


def _import_builtin_plugins() -> None:
    """pytest's own plugins, imported now (pytest would a moment later) so that their
    functions are referenced before any conftest runs."""
    import _pytest.config

    for name in getattr(_pytest.config, "default_plugins", ()):
        try:
            importlib.import_module(f"_pytest.{name}")
        except ImportError:  # a plugin this pytest names but cannot load (its extra is missing)
            continue


def _take(wire: Any, kit: list[types.ModuleType], send: Callable[[Any], None] | None) -> SelfCheck:
    everything = _references(_machinery_modules())
    own = _references(kit)
    core = [ref for ref in everything if ref[0] in CORE]
    state: dict[str, Any] = {
        "wire": wire,
        "quiet": wire.quiet,
        "relative": wire.relative,
        "kind": wire.kind,
        "core": core + own,
        "all": everything + own,
        "originals": {(id(owner), name): value for _, owner, name, value in everything + own},
        "codes": [],
        "hooks": [],
        "callers": [],
        "loop": [],
        "reported": set(),
        "session": None,
        "plugin": None,
        "own": {},
        "configured": False,
    }
    with wire.quiet():
        state["codes"] = [(label, fn, fn.__code__) for label, fn in _functions(state)]
    # The kit's own objects are protected (their id(), their memory); pytest's are compared.
    wire.protect(*(ref[3] for ref in own))
    if send is not None:
        wire.on_record(_bound(_lines, state), send)
        wire.protect(send)
    calls = (_own, _watch, _configured, _check)
    return SelfCheck(*(_bound(call, state) for call in calls))


def _bound(function: Callable[..., Any], state: dict[str, Any]) -> Callable[..., Any]:
    def bound(*args: Any) -> Any:
        return function(state, *args)

    return bound


def _machinery_modules() -> list[types.ModuleType]:
    return [
        module
        for name, module in sorted(sys.modules.items())
        if name.partition(".")[0] in PACKAGES and isinstance(module, types.ModuleType)
    ]


def _module_label(module: types.ModuleType) -> str:
    """A module as signals name it: the kit's under its file's name (it loads under a
    random one)."""
    name = module.__name__
    if name.startswith("_pytest_scoring_"):
        return os.path.splitext(os.path.basename(str(module.__file__)))[0]
    return name


def _references(modules: Iterable[types.ModuleType]) -> list[tuple[str, Any, str, Any]]:
    """``(label, owner, name, value)`` for every function and class each module holds (its
    own and what it takes from the machinery), and every method of its own classes; the
    label reads ``module:name`` or ``module:Class.name``."""
    references: list[tuple[str, Any, str, Any]] = []
    classes: set[int] = set()  # a class pytest re-exports is looked at once
    for module in modules:
        home, shown = module.__name__, _module_label(module)
        for name, value in list(vars(module).items()):
            if isinstance(value, (_Function, type)) and _ours(value, home):
                references.append((f"{shown}:{name}", module, name, value))
            if isinstance(value, type) and value.__module__ == home and id(value) not in classes:
                classes.add(id(value))
                for attribute, member in list(vars(value).items()):
                    if isinstance(member, (_Function, classmethod, staticmethod, property)):
                        label = f"{shown}:{value.__qualname__}.{attribute}"
                        references.append((label, value, attribute, member))
    return references


def _ours(value: object, home: str) -> bool:
    """A function or class of this module, or one it holds of pytest's or pluggy's."""
    module = str(getattr(value, "__module__", "") or "")
    return module == home or module.partition(".")[0] in PACKAGES


def _functions(state: dict[str, Any]) -> list[tuple[str, Any]]:
    """Every plain function behind the references (a method's, a property's accessors)."""
    found = []
    for label, _, _, value in state["all"]:
        for function in _accessors(value):
            found.append((label, function))
    return found


def _accessors(value: object) -> list[Any]:
    """The functions a value of a class or module runs: a function, a method's, a property's
    accessors. Told by type only: a replacement may be the repository's object, whose code
    must not run here (the comparison runs inside the tripwire's hook)."""
    if _is(value, classmethod) or _is(value, staticmethod) or _is(value, types.MethodType):
        value = value.__func__
    if _is(value, property):
        parts = (value.fget, value.fset, value.fdel)
        return [part for part in parts if _is(part, _Function)]
    return [value] if _is(value, _Function) else []


def _is(value: object, kinds: type[_T] | tuple[type[_T], ...]) -> TypeGuard[_T]:
    """``isinstance`` by the value's type alone (as the tripwire's: no ``__class__`` of the
    repository's runs)."""
    return issubclass(type(value), kinds)


# --- the hooks, once the probe is registered ---------------------------------------------


def _own(state: dict[str, Any], plugin: object) -> None:
    """The probe's hook functions, their code and the cells they close over, as made."""
    state["plugin"] = plugin
    hooks = {name: value for name, value in vars(plugin).items() if name.startswith("pytest_")}
    state["own"] = hooks
    cells: dict[int, tuple[Any, Any, str]] = {}
    for name, function in hooks.items():
        for cell in function.__closure__ or ():  # shared by the hooks: each looked at once
            cells.setdefault(id(cell), (cell, _content(cell), name))
        state["codes"].append((f"the probe's {name}", function, function.__code__))
    state["cells"] = list(cells.values())
    state["wire"].protect(plugin, *hooks.values(), *(entry[1] for entry in cells.values()))


def _watch(state: dict[str, Any], pluginmanager: Any) -> None:
    """Once the probe is registered, before any conftest: the hook callers of the test
    protocol and of the probe's hooks, pytest's and the probe's implementations of them,
    and pluggy's call loop. (A conftest's ``pytest_configure`` runs before the probe's, so
    anything taken there could already be the repository's.)"""
    relay, plugin = vars(pluginmanager.hook), state["plugin"]
    state["loop"] = [pluginmanager, getattr(pluginmanager, "_inner_hookexec", None)]
    for name in sorted(set(HOOKS) | set(state["own"])):
        caller = relay.get(name)
        if caller is None:
            continue
        state["callers"].append((name, relay, caller))
        for impl in _hookimpls(state, caller):
            expected = _expected(state, name, impl, plugin)
            if expected is not None:
                state["hooks"].append((name, caller, impl, *expected))
    state["wire"].protect(*(entry[2] for entry in state["hooks"] if entry[2].plugin is plugin))

    @pytest.hookimpl(tryfirst=True)
    def pytest_sessionstart(session: Any) -> None:
        state["session"] = session

    @pytest.hookimpl(optionalhook=True)
    def pytest_testnodedown(node: Any, error: Any) -> None:
        """On pytest-xdist's controller: a worker's ``--black-box`` refusal."""
        output = getattr(node, "workeroutput", None) or {}
        if REFUSED_KEY in output:
            state["wire"].refused_elsewhere(output[REFUSED_KEY])

    sessions = types.ModuleType("pytest-scoring-sessions")  # a plugin pluggy can hash
    vars(sessions).update(
        pytest_sessionstart=pytest_sessionstart, pytest_testnodedown=pytest_testnodedown
    )
    pluginmanager.register(sessions, "pytest-scoring-sessions")


def _configured(state: dict[str, Any]) -> None:
    state["configured"] = True


def _hookimpls(state: dict[str, Any], caller: Any) -> list[Any]:
    """The caller's implementations, read with pluggy's own method as it was at the start."""
    for owner in type(caller).__mro__:
        original = state["originals"].get((id(owner), "get_hookimpls"))
        if original is not None:
            return list(original(caller))
    return list(caller.get_hookimpls())


def _expected(
    state: dict[str, Any], name: str, impl: Any, plugin: object
) -> tuple[str, Any] | None:
    """``(whose, function)`` an implementation of hook ``name`` must keep: the probe's own
    function as made, or pytest's as it was at the start; None for the implementations of
    other plugins and conftests."""
    function, owner, originals = impl.function, impl.plugin, state["originals"]
    if owner is plugin:
        return "the probe's", state["own"].get(name, function)
    names = (name, str(getattr(function, "__name__", "")))
    owners = [owner] if isinstance(owner, types.ModuleType) else list(type(owner).__mro__)
    for home in owners:
        for attribute in names:
            original = originals.get((id(home), attribute))
            if original is not None:
                return f"{getattr(home, '__name__', home)}'s", original
    return None


def _content(cell: Any) -> Any:
    try:
        return cell.cell_contents
    except ValueError:  # a cell not filled yet
        return _MISSING


# --- the comparison ------------------------------------------------------------------------


def _check(state: dict[str, Any], final: bool) -> list[dict[str, Any]]:
    with state["quiet"]():
        return [*_changes(state, final), *state["wire"].drain()]


def _lines(state: dict[str, Any], final: bool) -> list[dict[str, Any]]:
    """What to send before the channel's next record (see :func:`take`)."""
    wire = state["wire"]
    signals = [*_changes(state, final), *wire.drain()]
    if not state["configured"] and state["plugin"] is not None and "unwatched" not in state:
        state["unwatched"] = True  # the probe's pytest_configure never ran: it was kept out
        what = "the probe's pytest_configure implementation did not run"
        signals.append({"kind": "patched", "detail": what, "file": None})
    records = [{"type": "integrity", **signal} for signal in signals]
    refused, session = wire.refusal(), state["session"]
    if refused is not None and session is not None and not session.shouldstop:
        # The tripwire sent the refusal; stop at the next test: nothing the tests do counts.
        session.shouldstop = f"--black-box refused {refused['file']}"
    return records


def _changes(state: dict[str, Any], full: bool) -> list[dict[str, Any]]:
    found: list[tuple[str, object]] = []
    with state["quiet"]():
        for label, owner, name, value in state["all" if full else "core"]:
            now = vars(owner).get(name, _MISSING)
            if now is not value:
                found.append((f"{_shown(label)} was replaced", now))
        found.extend(_hook_changes(state))
        if full:
            for label, function, code in state["codes"]:
                if function.__code__ is not code:
                    found.append((f"the code of {_shown(label)} was replaced", function.__code__))
        return [_patched(state, *change) for change in found if _new(state, *change)]


def _new(state: dict[str, Any], detail: str, replacement: object) -> bool:
    """Not reported yet, and not trusted: pytest's own patches (``legacypath``) and those of
    the interpreter's installed plugins (hypothesis') are the evaluator's."""
    if detail in state["reported"]:
        return False
    state["reported"].add(detail)
    filename = _filename_of(replacement)
    return filename is None or state["kind"](filename) not in TRUSTED


def _patched(state: dict[str, Any], detail: str, replacement: object) -> dict[str, Any]:
    filename = _filename_of(replacement)
    file = None if filename is None else state["relative"](filename)
    return {"kind": "patched", "detail": detail, "file": file}


def _hook_changes(state: dict[str, Any]) -> list[tuple[str, object]]:
    found: list[tuple[str, object]] = []
    for name, relay, caller in state["callers"]:
        now = relay.get(name)
        if now is not caller:
            found.append((f"pytest's hook caller {name} was replaced", now))
    for name, caller, impl, who, expected in state["hooks"]:
        if not any(present is impl for present in _hookimpls(state, caller)):
            # pytest's plugin objects come and go (junitxml's LogXML leaves at unconfigure);
            # the probe's and pytest's plugin modules stay for the whole session, but those
            # a ``-p no:NAME`` blocks (configuration, as a repository's ini may hold).
            module = _is(impl.plugin, types.ModuleType) and not _blocked(state, impl)
            if impl.plugin is state["plugin"] or module:
                found.append((f"{who} {name} implementation was removed", None))
        elif not _same_function(impl.function, expected, impl.plugin):
            found.append((f"{who} {name} implementation was replaced", impl.function))
    for cell, content, name in state.get("cells", ()):
        now = _content(cell)
        if now is not content:
            found.append((f"what the probe's {name} implementation uses was replaced", now))
    found.extend(_loop_changes(state))
    return found


def _blocked(state: dict[str, Any], impl: Any) -> bool:
    """The implementation's plugin was unregistered by blocking its name (``-p no:NAME``),
    read from pluggy's own record with ``dict``'s method (no code of the repository runs)."""
    names = vars(state["loop"][0]).get("_name2plugin") if state["loop"] else None
    return _is(names, dict) and dict.get(names, impl.plugin_name, _MISSING) is None


def _loop_changes(state: dict[str, Any]) -> list[tuple[str, object]]:
    """pluggy's call loop: the manager's ``_inner_hookexec`` and each caller's ``_hookexec``."""
    if not state["loop"]:
        return []
    pluginmanager, loop = state["loop"]
    found: list[tuple[str, object]] = []
    now = getattr(pluginmanager, "_inner_hookexec", None)
    if now is not loop:
        found.append(("pluggy's call loop (PluginManager._inner_hookexec) was replaced", now))
    execute = None
    for owner in type(pluginmanager).__mro__:
        execute = state["originals"].get((id(owner), "_hookexec"), execute)
    for name, _, caller in state["callers"]:
        bound = getattr(caller, "_hookexec", None)
        same = getattr(bound, "__self__", None) is pluginmanager
        if execute is not None and not (same and getattr(bound, "__func__", None) is execute):
            found.append((f"the call loop of pytest's hook caller {name} was replaced", bound))
    return found


def _same_function(now: object, expected: object, plugin: object) -> bool:
    """``now`` is ``expected``, or ``expected`` bound to ``plugin`` (told by type only)."""
    if now is expected:
        return True
    if _is(expected, classmethod) or _is(expected, staticmethod):
        expected = expected.__func__
    return _is(now, types.MethodType) and now.__func__ is expected and now.__self__ is plugin


def _shown(label: str) -> str:
    module, _, name = label.partition(":")
    return f"{module}.{name}"


def _filename_of(replacement: object) -> str | None:
    """The file a replacement's code comes from (a function's, a method's, a property's, a
    code object's own, or the ``__call__`` of a callable object's class), or None for
    anything else (a mock, a builtin, a removal)."""
    for function in _accessors(replacement):
        filename: str = function.__code__.co_filename
        return filename
    if _is(replacement, types.CodeType):
        return replacement.co_filename
    for owner in _MRO(type(replacement)):  # type's own slots: no code of the class runs
        call = _CLASS_DICT(owner).get("__call__")
        if _is(call, _Function):
            return str(call.__code__.co_filename)
    return None
