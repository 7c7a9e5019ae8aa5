"""The probe: the pytest plugin that streams what a test session does (docs/architecture.md).

PYTEST_DONT_REWRITE (pytest never rewrites or warns about this module, whatever the
repository's ``filterwarnings`` says).

It needs only the standard library and pytest (7.0 or newer) and keeps to Python 3.8 syntax,
because it runs wherever the scored repository's tests run: in the child of
``pytest-scoring run``, under another interpreter (``run --python``), in a sandbox. The
launcher (:mod:`pytest_scoring.kit.launch`) loads it from the kit under a name of its own,
never in ``sys.modules``, and registers :func:`probe_plugin`'s hooks; it writes one record
per line on the authenticated channel (:mod:`pytest_scoring.kit.channel`):

* ``start``: rootdir, invocation dir, pytest and Python versions, arguments, plugins (and
  which of them an installed distribution's entry point loaded), the ini values that select
  tests;
* ``collect``: one per collector report (``longrepr`` when it failed or skipped);
* ``collected``: the test ids collected and those deselected (in parts of at most
  :data:`IDS_PER_LINE` ids each: every part adds to the others);
* ``phase``: one per finished setup, call or teardown, in the shape of
  ``pytest_scoring.core.outcomes.PhaseRecord``; only for a report logged while pytest's
  runner runs that very test (or replayed by pytest-xdist's controller): any other was made
  by the repository, and is an ``outcome_changed`` line instead;
* ``integrity``: ``{kind, detail, file}``, one per integrity signal, when the integrity module
  (:mod:`pytest_scoring.kit.integrity`) could be loaded;
* ``end``, the last line, after the last phase: pytest's exit status, whether a real
  interrupt (Ctrl-C) stopped it, what ended the session early (``stop_reason``,
  ``stop_file``), if anything did, and ``phases``, how many phase lines came before it.

The hooks are closures over the channel and their own state: nothing they do looks anything
up on a class, or on a module the repository can reach, once the session runs. Replacing a
method of the plugin object or of a class, or a name of a module found in ``sys.modules``,
changes nothing the probe writes; what still reaches it are the closures themselves
(``__closure__``, ``__globals__``) and the frames (docs/security.md).
"""

from __future__ import annotations

import platform
import sys
from collections.abc import Callable
from collections.abc import Sequence
from typing import Any

import pytest

#: Characters of a failure's text kept in a line (the end of it says what went wrong).
LONGREPR_CAP = 20000
#: Characters of one user property's JSON kept in a line (a test may record anything).
PROPERTY_CAP = 65536
#: Test ids in one ``collected`` line: a line stays far below the evaluator's limit.
IDS_PER_LINE = 10000
#: ini values that decide which tests a session collects.
SELECTION_INI = ("testpaths", "python_files", "python_classes", "python_functions", "addopts")
#: Read when the probe loads, before any code of the repository can change them.
_INTERRUPTED = pytest.Session.Interrupted
_VERSIONS = {"pytest": pytest.__version__, "python": platform.python_version()}
_EXECUTABLE = sys.executable


def _cap(text: str) -> str:
    if len(text) <= LONGREPR_CAP:
        return text
    return f"[... {len(text) - LONGREPR_CAP} characters cut ...]\n{text[-LONGREPR_CAP:]}"


def probe_plugin(channel: Any, integrity: Any = None, defence: Any = None) -> Any:
    """The probe's hooks, to register with pytest (``pytest.main(plugins=[...])``).

    :param channel: the open channel (:class:`pytest_scoring.kit.channel.Channel`); its
        ``send``, ``close`` and ``encode`` are taken now.
    :param integrity: the integrity module, or None (no integrity lines).
    :param defence: the self-check (:mod:`pytest_scoring.kit.selfcheck`), or None: it is
        given the hooks now, and the plugin manager once registered; it compares them at
        every record the channel sends.
    """
    send, close, encode = channel.send, channel.close, channel.encode
    watch_defence: Any = None if defence is None else defence.watch
    configured: Any = None if defence is None else defence.configured
    state: dict[str, Any] = {
        "deselected": [],
        "exitstatus": None,
        "interrupted": False,
        "stopped_by": None,
        "config": None,
        "watch": None,
        "stop": ("", None),
        "phases": 0,
        "xdist_collected": False,
        # The test pytest's runner runs now (its protocol), and whether reports come from
        # elsewhere (pytest-xdist's controller replays its workers' reports).
        "running": None,
        "replayed": False,
        "registered": False,
    }

    hooks = _Hooks()

    def hook(**options: Any) -> Callable[[Any], Any]:
        """Mark a function as a hook implementation (``pytest.hookimpl``) of the probe."""

        def register(function: Any) -> Any:
            setattr(hooks, function.__name__, pytest.hookimpl(**options)(function))
            return function

        return register

    def safe(value: object) -> object:
        """A value of the tests' own that the line can hold, capped."""
        try:
            text = encode(value)
        except (TypeError, ValueError, RecursionError):
            return _cap(repr(value))
        if len(text) > PROPERTY_CAP:
            return f"[{len(text)} characters of JSON cut] {text[:PROPERTY_CAP]}"
        return value

    @hook()
    def pytest_plugin_registered(plugin: object, manager: Any) -> None:
        """The probe itself registered (``pytest.main(plugins=...)``), before pytest reads any
        conftest or plugin of the repository: the self-check takes what it compares now."""
        if plugin is hooks and not state["registered"]:
            state["registered"] = True
            if watch_defence is not None:
                watch_defence(manager)

    @hook(trylast=True)
    def pytest_configure(config: pytest.Config) -> None:
        state["config"] = config
        if integrity is not None:
            watch = integrity.IntegrityWatch(config, integrity.repository_root(config))
            config.pluginmanager.register(watch, "pytest-scoring-integrity")
            state["watch"] = watch
            # Its methods as they are now: replacing them on the object later changes nothing.
            state["check_report"], state["finish"] = watch.check_report, watch.finish
        if configured is not None:
            configured()
        manager = config.pluginmanager
        plugins = sorted(name for name, plugin in manager.list_name_plugin() if plugin is not None)
        # Plugins an installed distribution's entry point loaded (a conftest can register an
        # object under any name, not as one of these).
        names = (manager.get_name(plugin) for plugin, _ in manager.list_plugin_distinfo())
        installed = sorted({name for name in names if name is not None})
        send(
            {
                "type": "start",
                "rootdir": str(config.rootpath),
                "invocation_dir": str(config.invocation_params.dir),
                **_VERSIONS,
                "executable": _EXECUTABLE,
                "args": [str(arg) for arg in config.invocation_params.args],
                "plugins": plugins,
                "installed": installed,
                "ini": {name: safe(value) for name, value in _selection_ini(config).items()},
            }
        )

    @hook()
    def pytest_collectreport(report: pytest.CollectReport) -> None:
        line: dict[str, Any] = {
            "type": "collect",
            "nodeid": report.nodeid,
            "outcome": report.outcome,
        }
        if report.outcome != "passed":
            line["longrepr"] = _cap(str(report.longrepr))
        send(line)

    @hook()
    def pytest_deselected(items: Sequence[pytest.Item]) -> None:
        state["deselected"].extend(item.nodeid for item in items)

    @hook()
    def pytest_collection_finish(session: pytest.Session) -> None:
        nodeids = [item.nodeid for item in session.items]
        deselected = state["deselected"]
        for start in range(0, max(len(nodeids), len(deselected), 1), IDS_PER_LINE):
            part = slice(start, start + IDS_PER_LINE)
            send({"type": "collected", "nodeids": nodeids[part], "deselected": deselected[part]})

    @hook(optionalhook=True)
    def pytest_xdist_node_collection_finished(node: Any, ids: Sequence[str]) -> None:
        """Under pytest-xdist the workers collect: the first one's ids are the session's."""
        if not state["xdist_collected"]:
            state["xdist_collected"] = True
            for start in range(0, len(ids), IDS_PER_LINE):
                send({"type": "collected", "nodeids": list(ids[start : start + IDS_PER_LINE])})

    @hook()
    def pytest_sessionstart(session: pytest.Session) -> None:
        state["replayed"] = _replays_reports(session.config)  # xdist's is registered now

    # tryfirst: the outermost wrapper, around every other implementation of the protocol.
    @hook(hookwrapper=True, tryfirst=True)
    def pytest_runtest_protocol(item: pytest.Item, nextitem: Any) -> Any:
        state["running"] = item.nodeid
        try:
            yield
        finally:
            state["running"] = None

    @hook()
    def pytest_runtest_logreport(report: pytest.TestReport) -> None:
        if report.nodeid != state["running"] and not state["replayed"]:
            if report.outcome != "failed":  # made by the repository: it never counts
                send(_outside_its_run(report))
            return
        send(phase_line(report, safe))
        state["phases"] += 1
        if state["watch"] is not None:
            state["check_report"](report)

    @hook()
    def pytest_keyboard_interrupt(excinfo: pytest.ExceptionInfo[Any]) -> None:
        # pytest stops itself after collection errors with Session.Interrupted (a
        # KeyboardInterrupt): only a real interrupt makes the session incomplete.
        interrupted = not isinstance(excinfo.value, _INTERRUPTED)
        state["interrupted"], state["stopped_by"] = interrupted, excinfo if interrupted else None

    # trylast: read the exit status after every other plugin had its say.
    @hook(trylast=True)
    def pytest_sessionfinish(session: pytest.Session, exitstatus: object) -> None:
        state["exitstatus"] = int(session.exitstatus)
        watch, config = state["watch"], state["config"]
        if watch is None or config is None:
            return
        signals = [*state["finish"](), *integrity.ini_signals(config.inipath, watch.root, True)]
        for signal in signals:
            send({"type": "integrity", **signal})
        state["stop"] = integrity.stop_reason(session, state["stopped_by"], watch.root)

    # trylast: the last line of the stream, after every other plugin's unconfigure.
    @hook(trylast=True)
    def pytest_unconfigure(config: pytest.Config) -> None:
        reason, file = state["stop"]
        send(
            {
                "type": "end",
                "exitstatus": state["exitstatus"],
                "interrupted": state["interrupted"],
                "stop_reason": reason,
                "stop_file": file,
                "phases": state["phases"],
            }
        )
        close()

    if defence is not None:
        defence.own(hooks)
    return hooks


class _Hooks:
    """The probe's hooks as one plugin object (pluggy keeps its plugins by identity, so it
    must be hashable); pluggy takes each function when the object is registered."""


def _replays_reports(config: pytest.Config) -> bool:
    """pytest-xdist's controller runs no test: it logs the reports its workers send."""
    dsession = config.pluginmanager.get_plugin("dsession")
    kind = getattr(sys.modules.get("xdist.dsession"), "DSession", None)
    return isinstance(kind, type) and isinstance(dsession, kind)


def _outside_its_run(report: pytest.TestReport) -> dict[str, Any]:
    """The ``outcome_changed`` line of a report logged while pytest did not run its test:
    code of the repository made it and called the hook (the phase is not counted)."""
    detail = (
        f"{report.nodeid} {report.when}: a {report.outcome} report logged outside that "
        "test's run (pytest's runner did not make it)"
    )
    return {"type": "integrity", "kind": "outcome_changed", "detail": detail, "file": None}


def phase_line(report: pytest.TestReport, safe: Any) -> dict[str, Any]:
    """The ``phase`` line of one finished setup, call or teardown.

    :param safe: makes a value of the test's own (a user property) one the line can hold.
    """
    line: dict[str, Any] = {
        "type": "phase",
        "nodeid": report.nodeid,
        "when": report.when,
        "outcome": report.outcome,
        "duration": float(getattr(report, "duration", 0.0) or 0.0),
        "user_properties": [
            [str(name), safe(value)] for name, value in getattr(report, "user_properties", [])
        ],
    }
    if hasattr(report, "wasxfail"):
        line["wasxfail"] = str(report.wasxfail)
    context = getattr(report, "context", None)  # a subtest's report (pytest-subtests, pytest 9)
    if context is not None and hasattr(context, "kwargs"):
        line["subtest"] = {
            "msg": safe(getattr(context, "msg", None)),
            "kwargs": {str(key): safe(value) for key, value in context.kwargs.items()},
        }
    if report.outcome != "passed":
        text = short_longrepr(report.longrepr)
        if text:
            line["longrepr"] = text
    return line


def short_longrepr(longrepr: object) -> str:
    """A failure's crash line, or a skip's reason, as the tally keeps it in process
    (``pytest_scoring.core.outcomes.short_longrepr``: one message for every route)."""
    crash = getattr(longrepr, "reprcrash", None)
    if crash is not None and getattr(crash, "message", None):
        return _cap(str(crash.message))
    if isinstance(longrepr, tuple) and len(longrepr) == 3:
        return _cap(str(longrepr[2]))
    return "" if longrepr is None else _cap(str(longrepr))


def _selection_ini(config: pytest.Config) -> dict[str, object]:
    values = {}
    for name in SELECTION_INI:
        try:
            values[name] = config.getini(name)
        except (ValueError, KeyError):  # not registered in this pytest
            continue
    return values
