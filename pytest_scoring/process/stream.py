"""Reading the probe's stream: the lines a child pytest writes, folded into one outcome tally.

The probe (:mod:`pytest_scoring.kit.probe`) writes JSON lines to a pipe; a thread of the evaluator
reads them here as they come. Everything that arrived is kept, whatever happens to the child
afterwards; a line that is not what the probe writes (malformed, or forged by the code under
test with the wrong shape) is counted and left out. Test ids are made relative to the
repository's root, whatever rootdir pytest chose inside it.
"""

from __future__ import annotations

import json
import math
import os
import threading
from dataclasses import dataclass
from dataclasses import field
from pathlib import Path
from typing import Any
from typing import Final

from pytest_scoring.core.outcomes import OutcomeTally
from pytest_scoring.core.outcomes import PhaseRecord
from pytest_scoring.core.signals import KINDS
from pytest_scoring.core.signals import Signal
from pytest_scoring.core.signals import make_signal

#: A line longer than this is dropped (a test writing endless text must not fill memory).
MAX_LINE: Final = 16 * 1024 * 1024
_CHUNK: Final = 64 * 1024
_PHASES: Final = ("setup", "call", "teardown")
_OUTCOMES: Final = ("passed", "failed", "skipped", "rerun")
#: Failure texts kept from the collection errors, for messages.
COLLECT_ERRORS_KEPT: Final = 20


@dataclass(frozen=True)
class _Collector:
    """A collector's report as :meth:`OutcomeTally.record_collection` reads it."""

    nodeid: str
    outcome: str
    longrepr: str


@dataclass
class Progress:
    """What the stream says so far, for a progress line."""

    collected: int | None
    done: int
    failed: int
    current: str | None
    ended: bool


@dataclass
class ProbeState:
    """Everything the probe of one child reported."""

    #: The child's root folder: test ids are made relative to it.
    root: Path
    tally: OutcomeTally = field(default_factory=OutcomeTally)
    start: dict[str, Any] | None = None
    end: dict[str, Any] | None = None
    #: ``{"nodeid", "longrepr"}`` of the collectors that failed (the first few).
    collect_errors: list[dict[str, str]] = field(default_factory=list)
    #: The integrity signals the probe reported (docs/scoring.md#integrity).
    integrity: list[Signal] = field(default_factory=list)
    collected: int | None = None
    #: Lines that were not what the probe writes.
    rejected: int = 0
    _done: set[str] = field(default_factory=set)
    _current: str | None = None
    _lock: threading.Lock = field(default_factory=threading.Lock)

    def feed_line(self, text: bytes) -> None:
        """Take one line of the stream."""
        try:
            line = json.loads(text)
        except ValueError:
            line = None
        with self._lock:
            if not (isinstance(line, dict) and self._apply(line)):
                self.rejected += 1

    def _apply(self, line: dict[str, Any]) -> bool:
        kind = line.get("type")
        if kind == "start" and self.start is None:
            self.start = line
            self.tally.id_prefix = _prefix(self.root, line.get("rootdir"))
            return True
        if kind == "collect":
            return self._collect(line)
        if kind == "collected":
            return self._collected(line)
        if kind == "phase":
            return self._phase(line)
        if kind == "integrity":
            return self._signal(line)
        if kind == "end":
            self.end = line
            return True
        return False

    def _collect(self, line: dict[str, Any]) -> bool:
        nodeid, outcome = line.get("nodeid"), line.get("outcome")
        if not isinstance(nodeid, str) or not isinstance(outcome, str):
            return False
        longrepr = line.get("longrepr")
        text = longrepr if isinstance(longrepr, str) else ""
        self.tally.record_collection(_Collector(nodeid, outcome, text))
        if outcome == "failed" and len(self.collect_errors) < COLLECT_ERRORS_KEPT:
            full_id = self.tally.id_prefix + nodeid
            self.collect_errors.append({"nodeid": full_id, "longrepr": text})
        return True

    def _collected(self, line: dict[str, Any]) -> bool:
        nodeids = line.get("nodeids")
        if not isinstance(nodeids, list) or not all(isinstance(n, str) for n in nodeids):
            return False
        self.tally.record_collected(nodeids)
        self.collected = len(nodeids)
        return True

    def _phase(self, line: dict[str, Any]) -> bool:
        record = _phase_record(line)
        if record is None:
            return False
        self.tally.record_phase(record)
        if record["when"] == "setup":
            self._current = self.tally.id_prefix + record["nodeid"]
        elif record["when"] == "teardown":
            self._done.add(record["nodeid"])
            self._current = None
        return True

    def _signal(self, line: dict[str, Any]) -> bool:
        kind, detail, file = line.get("kind"), line.get("detail"), line.get("file")
        if kind not in KINDS or not isinstance(detail, str) or not isinstance(file, str | None):
            return False
        self.integrity.append(make_signal(str(kind), detail, file))
        return True

    def progress(self) -> Progress:
        with self._lock:
            counts = self.tally.counts()
            return Progress(
                collected=self.collected,
                done=len(self._done),
                failed=counts["failed"] + counts["error"],
                current=self._current,
                ended=self.end is not None,
            )

    def finished_session(self) -> bool:
        """The probe's last line arrived: pytest ended its session (as it meant to or not)."""
        return self.end is not None

    def interrupted(self) -> bool:
        """pytest said a real interrupt (Ctrl-C, SIGINT) stopped it."""
        return bool(self.end and self.end.get("interrupted"))

    def stop(self) -> tuple[str, str | None]:
        """What ended the session early, as the probe saw it, and the file it came from."""
        end = self.end or {}
        reason, file = end.get("stop_reason"), end.get("stop_file")
        return (reason if isinstance(reason, str) else ""), (
            file if isinstance(file, str) else None
        )

    def exit_status(self) -> int | None:
        """pytest's exit status as the probe saw it at the session's end."""
        status = (self.end or {}).get("exitstatus")
        return status if isinstance(status, int) and not isinstance(status, bool) else None

    def to_json(self) -> dict[str, Any]:
        """``tests`` of the report, with the collected ids (the reference rerun keeps them)."""
        collected = self.tally.collected | set(self.tally.tests)  # collection errors too
        return {**self.tally.to_json(), "collected": sorted(collected)}


def _prefix(root: Path, rootdir: object) -> str:
    """What makes ids relative to ``rootdir`` relative to ``root`` (``"sub/"`` or ``""``)."""
    if not isinstance(rootdir, str):
        return ""
    try:
        relative = Path(rootdir).resolve().relative_to(root.resolve())
    except (ValueError, OSError):
        return ""
    return "" if relative == Path() else f"{relative.as_posix()}/"


def _phase_record(line: dict[str, Any]) -> PhaseRecord | None:
    """The line as a :class:`PhaseRecord`, or None when it is not one."""
    nodeid, when, outcome = line.get("nodeid"), line.get("when"), line.get("outcome")
    duration = line.get("duration", 0.0)
    properties = line.get("user_properties", [])
    if not (isinstance(nodeid, str) and when in _PHASES and outcome in _OUTCOMES):
        return None
    if isinstance(duration, bool) or not isinstance(duration, int | float):
        return None
    if not isinstance(properties, list) or not all(
        isinstance(item, list) and len(item) == 2 and isinstance(item[0], str)
        for item in properties
    ):
        return None
    record: PhaseRecord = {
        "nodeid": nodeid,
        "when": when,
        "outcome": outcome,
        "duration": float(duration) if math.isfinite(duration) and duration >= 0 else 0.0,
        "user_properties": properties,
    }
    for key in ("wasxfail", "longrepr"):
        if isinstance(line.get(key), str):
            record[key] = line[key]
    if isinstance(line.get("subtest"), dict):
        record["subtest"] = line["subtest"]
    return record


class StreamReader:
    """Reads a probe channel in a thread of its own until every writer has closed it."""

    def __init__(self, descriptor: int, state: ProbeState):
        self.state = state
        self._descriptor = descriptor
        self._thread = threading.Thread(target=self._read, name="pytest-scoring-probe", daemon=True)
        self._thread.start()

    def _read(self) -> None:
        pending, dropping = b"", False
        with os.fdopen(self._descriptor, "rb", buffering=0) as channel:
            while chunk := channel.read(_CHUNK):
                *lines, pending = (pending + chunk).split(b"\n")
                for line in lines:
                    if dropping:
                        dropping = False  # the end of a line that was too long
                        self.state.feed_line(b"")
                    elif line.strip():
                        self.state.feed_line(line)
                if len(pending) > MAX_LINE:
                    pending, dropping = b"", True
        if pending.strip() and not dropping:
            self.state.feed_line(pending)

    def join(self) -> None:
        """Wait for the end of the stream (after the child's whole tree is gone)."""
        self._thread.join()
