"""The probe: a pytest plugin that streams what a test session does (docs/architecture.md).

It needs only the standard library and pytest (7.0 or newer) and keeps to Python 3.8 syntax,
because it runs wherever the scored repository's tests run: in the child of
``pytest-scoring run``, under another interpreter (``run --python``), in a sandbox. It is
copied as a plain file into a private folder and loaded from there, so it imports nothing of
pytest-scoring.

It writes one JSON object per line, flushed as it goes, to the inherited file descriptor
named by ``PYTEST_SCORING_PROBE_FD`` (or appends to the file ``PYTEST_SCORING_PROBE_FILE``):

* ``start``: rootdir, invocation dir, pytest and Python versions, arguments, plugins, the
  ini values that select tests;
* ``collect``: one per collector report (``longrepr`` when it failed or skipped);
* ``collected``: the test ids collected and those deselected;
* ``phase``: one per finished setup, call or teardown, in the shape of
  ``pytest_scoring.core.outcomes.PhaseRecord``;
* ``integrity``: ``{kind, detail, file}``, one per integrity signal, when the integrity module
  (:mod:`pytest_scoring.kit.integrity`, copied beside the probe as
  ``_pytest_scoring_integrity``) can be loaded (it needs pluggy 1.1 or newer);
* ``end``: pytest's exit status, whether a real interrupt (Ctrl-C) stopped it, and what ended
  the session early (``stop_reason``, ``stop_file``), if anything did.

The channel protects the stream from other processes, not from the code under test: a test
can write lines of its own to the same descriptor (docs/security.md).
"""

from __future__ import annotations

import json
import os
import platform
import sys
from collections.abc import Sequence
from typing import IO
from typing import Any

import pytest

FD_VARIABLE = "PYTEST_SCORING_PROBE_FD"
FILE_VARIABLE = "PYTEST_SCORING_PROBE_FILE"
PLUGIN_NAME = "pytest-scoring-probe"
#: The integrity module's name beside the probe (the launcher's kit).
INTEGRITY = "_pytest_scoring_integrity"
#: Characters of a failure's text kept in a line (the end of it says what went wrong).
LONGREPR_CAP = 20000
#: ini values that decide which tests a session collects.
SELECTION_INI = ("testpaths", "python_files", "python_classes", "python_functions", "addopts")


def _cap(text: str) -> str:
    if len(text) <= LONGREPR_CAP:
        return text
    return f"[... {len(text) - LONGREPR_CAP} characters cut ...]\n{text[-LONGREPR_CAP:]}"


def _json_safe(value: object) -> object:
    """A value JSON can hold: user properties may be anything."""
    try:
        json.dumps(value)
    except (TypeError, ValueError):
        return repr(value)
    return value


class Probe:
    """Writes the session's events as JSON lines to ``stream``."""

    def __init__(self, stream: IO[str]) -> None:
        self._stream = stream
        self._deselected: list[str] = []
        self._exitstatus: int | None = None
        self._interrupted = False
        self._stopped_by: Any = None
        self._config: pytest.Config | None = None
        self._integrity: Any = None
        self._watch: Any = None
        self._stop: tuple[str, str | None] = ("", None)

    @classmethod
    def from_environment(cls) -> Probe | None:
        """The probe the environment asks for, or None when it names no channel."""
        fd = os.environ.get(FD_VARIABLE, "")
        if fd.isdigit():
            descriptor = int(fd)
            os.set_inheritable(descriptor, False)  # programs the tests start do not get it
            return cls(os.fdopen(descriptor, "w", encoding="utf-8", closefd=False))
        path = os.environ.get(FILE_VARIABLE, "")
        if path:
            return cls(open(path, "a", encoding="utf-8"))
        return None

    def write(self, line: dict[str, Any]) -> None:
        try:
            self._stream.write(json.dumps(line, default=repr) + "\n")
            self._stream.flush()
        except (OSError, ValueError):  # the reader is gone: the tests still run to their end
            pass

    @pytest.hookimpl(trylast=True)
    def pytest_configure(self, config: pytest.Config) -> None:
        self._config = config
        self._integrity = integrity_module()
        if self._integrity is not None:
            root = self._integrity.repository_root(config)
            self._watch = self._integrity.IntegrityWatch(config, root)
            config.pluginmanager.register(self._watch, "pytest-scoring-integrity")
        plugins = sorted(
            name for name, plugin in config.pluginmanager.list_name_plugin() if plugin is not None
        )
        self.write(
            {
                "type": "start",
                "rootdir": str(config.rootpath),
                "invocation_dir": str(config.invocation_params.dir),
                "pytest": pytest.__version__,
                "python": platform.python_version(),
                "executable": sys.executable,
                "args": [str(arg) for arg in config.invocation_params.args],
                "plugins": plugins,
                "ini": _selection_ini(config),
            }
        )

    @pytest.hookimpl
    def pytest_collectreport(self, report: pytest.CollectReport) -> None:
        line: dict[str, Any] = {
            "type": "collect",
            "nodeid": report.nodeid,
            "outcome": report.outcome,
        }
        if report.outcome != "passed":
            line["longrepr"] = _cap(str(report.longrepr))
        self.write(line)

    @pytest.hookimpl
    def pytest_deselected(self, items: Sequence[pytest.Item]) -> None:
        self._deselected.extend(item.nodeid for item in items)

    @pytest.hookimpl
    def pytest_collection_finish(self, session: pytest.Session) -> None:
        self.write(
            {
                "type": "collected",
                "nodeids": [item.nodeid for item in session.items],
                "deselected": self._deselected,
            }
        )

    @pytest.hookimpl
    def pytest_runtest_logreport(self, report: pytest.TestReport) -> None:
        self.write(phase_line(report))
        if self._watch is not None:
            self._watch.check_report(report)

    @pytest.hookimpl
    def pytest_keyboard_interrupt(self, excinfo: pytest.ExceptionInfo[Any]) -> None:
        # pytest stops itself after collection errors with Session.Interrupted (a
        # KeyboardInterrupt): only a real interrupt makes the session incomplete.
        self._interrupted = not isinstance(excinfo.value, pytest.Session.Interrupted)
        self._stopped_by = excinfo if self._interrupted else None

    # trylast: read the exit status after every other plugin had its say.
    @pytest.hookimpl(trylast=True)
    def pytest_sessionfinish(self, session: pytest.Session, exitstatus: object) -> None:
        self._exitstatus = int(session.exitstatus)
        if self._watch is None or self._config is None:
            return
        integrity, root = self._integrity, self._watch.root
        inifile = self._config.inipath
        signals = [*self._watch.finish(), *integrity.ini_signals(inifile, root, selection=True)]
        for signal in signals:
            self.write({"type": "integrity", **signal})
        self._stop = integrity.stop_reason(session, self._stopped_by, root)

    # trylast: the last line of the stream, after every other plugin's unconfigure.
    @pytest.hookimpl(trylast=True)
    def pytest_unconfigure(self, config: pytest.Config) -> None:
        reason, file = self._stop
        self.write(
            {
                "type": "end",
                "exitstatus": self._exitstatus,
                "interrupted": self._interrupted,
                "stop_reason": reason,
                "stop_file": file,
            }
        )


def phase_line(report: pytest.TestReport) -> dict[str, Any]:
    """The ``phase`` line of one finished setup, call or teardown."""
    line: dict[str, Any] = {
        "type": "phase",
        "nodeid": report.nodeid,
        "when": report.when,
        "outcome": report.outcome,
        "duration": float(getattr(report, "duration", 0.0) or 0.0),
        "user_properties": [
            [str(name), _json_safe(value)] for name, value in getattr(report, "user_properties", [])
        ],
    }
    if hasattr(report, "wasxfail"):
        line["wasxfail"] = str(report.wasxfail)
    context = getattr(report, "context", None)  # a subtest's report (pytest-subtests, pytest 9)
    if context is not None and hasattr(context, "kwargs"):
        line["subtest"] = {
            "msg": _json_safe(getattr(context, "msg", None)),
            "kwargs": {str(key): _json_safe(value) for key, value in context.kwargs.items()},
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


def integrity_module() -> Any:
    """The integrity module beside the probe, or None (not copied, or pluggy too old)."""
    try:
        return __import__(INTEGRITY)
    except Exception:  # its absence only means no integrity lines
        return None


def _selection_ini(config: pytest.Config) -> dict[str, object]:
    values = {}
    for name in SELECTION_INI:
        try:
            values[name] = _json_safe(config.getini(name))
        except (ValueError, KeyError):  # not registered in this pytest
            continue
    return values


def pytest_configure(config: pytest.Config) -> None:
    """Loaded with ``-p``: register a probe writing where the environment says."""
    if hasattr(config, "workerinput") or config.pluginmanager.has_plugin(PLUGIN_NAME):
        return  # xdist workers' reports reach the controller, whose probe writes them
    probe = Probe.from_environment()
    if probe is not None:
        config.pluginmanager.register(probe, PLUGIN_NAME)
