"""The sandbox's interpreter, checked before its tests run: ``interpreter_modified``.

In an Inspect sandbox the agent had a shell, often as root: it can have edited pytest's own
files, added a ``.pth`` file or a ``sitecustomize.py``. Before the tests, the helper
(:mod:`pytest_scoring.kit.sandbox`, running under ``-I``, so no startup file of the sandbox
runs in it) compares the files of the sandbox's pytest, pluggy and iniconfig with their
distributions' ``RECORD`` (or Debian's package sums), and lists the startup files on the
tests' path that no installer recorded. Here each ``RECORD`` is also compared with the
evaluator's copy of the same version, so that an edited file whose ``RECORD`` was edited too
is seen (docs/inspect.md#the-sandboxs-interpreter).
"""

from __future__ import annotations

import csv
import importlib.metadata
from collections.abc import Mapping
from typing import Any
from typing import Final

from pytest_scoring.core.signals import Signal
from pytest_scoring.core.signals import make_signal

KIND: Final = "interpreter_modified"
#: Files one signal names at most.
NAMED: Final = 10
#: What the helper says of a distribution's file, as a signal says it.
STATES: Final = {
    "changed": "differ from what recorded them",
    "unrecorded": "were recorded by no installer",
    "missing": "are missing",
}


def interpreter_signals(answer: Mapping[str, Any]) -> list[Signal]:
    """``interpreter_modified`` signals from the helper's ``interpreter`` answer."""
    signals = []
    for name, found in answer.get("distributions", {}).items():
        if not found.get("found"):
            continue  # no such distribution: pytest's own run says what is missing
        what = f"{name} {found['version']} in the sandbox ({found['folder']})"
        for state, says in STATES.items():
            if found.get(state):
                signals.append(_signal(f"{what}: files that {says}", found[state]))
        differ = _differs_from_ours(name, found["version"], found.get("record") or {})
        if differ:
            detail = f"{what}: RECORD differs from the evaluator's copy of that version"
            signals.append(_signal(detail, differ))
    if answer.get("startup"):
        detail = "files the sandbox's Python runs at start that no installer recorded"
        signals.append(_signal(detail, answer["startup"]))
    return signals


def _signal(detail: str, files: list[str]) -> Signal:
    named = ", ".join(files[:NAMED])
    more = f" and {len(files) - NAMED} more" if len(files) > NAMED else ""
    return make_signal(KIND, f"{detail}: {named}{more}")


def _differs_from_ours(name: str, version: str, record: Mapping[str, str]) -> list[str]:
    """The module files whose hash in the sandbox's ``RECORD`` is not the one the
    evaluator's copy of that version records (nothing to compare: another version here)."""
    try:
        ours = importlib.metadata.distribution(name)
    except importlib.metadata.PackageNotFoundError:
        return []
    if ours.version != version:
        return []
    rows = csv.reader((ours.read_text("RECORD") or "").splitlines())
    hashes = {row[0]: row[1] for row in rows if len(row) > 1 and row[0].endswith(".py")}
    return sorted(path for path, digest in record.items() if hashes.get(path) != digest)
