"""Reading the probe's stream: the lines a child pytest writes, folded into one outcome tally.

The probe (:mod:`pytest_scoring.kit.probe`) writes authenticated lines to a pipe or a file
(the wire format: :mod:`pytest_scoring.kit.channel`); a thread of the evaluator reads them
here as they come. Each line's MAC is checked with the run's key before anything of it is
read: a line that does not verify (forged by code in the child, cut, or not a line of the
probe's at all) is counted and left out, and so is a repeat of a line already read. What the
chain says about the lines that did verify (a gap, a repeat, lines after the end record, an
end record that counts other phases than arrived) is kept for the ``stream_forged`` signal
(:mod:`pytest_scoring.process.witness`). Everything that verified is kept, whatever happens
to the child afterwards. Test ids are made relative to the repository's root, whatever
rootdir pytest chose inside it.
"""

from __future__ import annotations

import functools
import hmac
import json
import math
import os
import threading
from collections.abc import Iterable
from dataclasses import dataclass
from dataclasses import field
from pathlib import Path
from typing import Any
from typing import Final

from pytest_scoring.core.outcomes import OutcomeTally
from pytest_scoring.core.outcomes import PhaseRecord
from pytest_scoring.core.rule import MESSAGE_CAP
from pytest_scoring.core.score import cap_text
from pytest_scoring.core.signals import KINDS
from pytest_scoring.core.signals import Signal
from pytest_scoring.core.signals import make_signal
from pytest_scoring.kit.channel import FIRST_PREVIOUS
from pytest_scoring.kit.channel import MAC_CHARS
from pytest_scoring.text import shown_counts

#: A line longer than this is dropped (a test writing endless text must not fill memory).
MAX_LINE: Final = 16 * 1024 * 1024
#: Characters of ``user_properties`` kept from one stream (each value is capped by the probe,
#: but not how many a test records): later phases' properties are left out.
MAX_PROPERTY_CHARS: Final = 4 * 1024 * 1024
_CHUNK: Final = 64 * 1024
_PHASES: Final = ("setup", "call", "teardown")
_OUTCOMES: Final = ("passed", "failed", "skipped", "rerun")
#: Failure texts kept from the collection errors, for messages.
COLLECT_ERRORS_KEPT: Final = 20
#: Gaps in the chain named one by one in ``stream_forged``'s detail.
GAPS_NAMED: Final = 5


@dataclass
class ChainCheck:
    """The channel's chain as the evaluator has read it: which line comes next, and what
    did not fit (docs/security.md#the-probes-channel)."""

    key: bytes
    #: The number the next line must have, and the MAC it must name as the one before it.
    next_seq: int = 1
    previous: bytes = FIRST_PREVIOUS.encode("ascii")
    #: Lines whose MAC did not verify, or that are not framed as the probe frames its lines.
    unverified: int = 0
    #: ``(expected, arrived)``: where a line that verified did not follow the one before it.
    gaps: list[tuple[int, int]] = field(default_factory=list)
    #: Lines that verified but came again, or out of order (left out).
    repeats: int = 0
    #: Lines that verified after the end record (left out).
    after_end: int = 0
    #: The stream ended in the middle of a line (a child killed while the probe wrote).
    cut: bool = False

    def verify(self, line: bytes, ended: bool) -> bytes | None:
        """The record (JSON text) of a line that verifies and is new, else None.

        :param ended: the end record has arrived: nothing may follow it.
        """
        mac, _, rest = line.partition(b" ")
        parts = rest.split(b" ", 2)
        expected = hmac.new(self.key, rest, "sha256").hexdigest().encode("ascii")
        if len(mac) != MAC_CHARS or len(parts) != 3 or not hmac.compare_digest(mac, expected):
            self.unverified += 1
            return None
        seq_text, previous, record = parts
        if not seq_text.isdigit():  # it verified, so it never happens: but never crash here
            self.unverified += 1
            return None
        seq = int(seq_text)
        if seq < self.next_seq:
            self.repeats += 1
            return None
        if ended:
            self.after_end += 1
            return None
        if seq != self.next_seq or previous != self.previous:
            self.gaps.append((self.next_seq, seq))
        self.next_seq, self.previous = seq + 1, mac
        return record

    def problems(self, cut_expected: bool) -> list[str]:
        """What is wrong with the chain, one phrase each (empty when nothing is).

        :param cut_expected: the child was killed (by a signal, or by the evaluator): its
            last line may be cut, which then says nothing.
        """
        found = []
        if self.cut and not cut_expected:
            found.append("the stream ends in the middle of a line")
        if self.unverified:
            found.append(f"{self.unverified} line(s) did not verify")
        if self.gaps:
            named = ", ".join(
                f"line {arrived} after line {expected - 1}"
                for expected, arrived in self.gaps[:GAPS_NAMED]
            )
            more = len(self.gaps) - GAPS_NAMED
            found.append(f"the chain skips lines ({named}{f', {more} more' if more > 0 else ''})")
        if self.repeats:
            found.append(f"{self.repeats} line(s) came again")
        if self.after_end:
            found.append(f"{self.after_end} line(s) came after the end record")
        return found


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
    passed: int
    #: Tests that ran and failed: never one that has not run yet.
    failed: int
    error: int
    #: Tests collected that have not run yet.
    pending: int
    current: str | None
    ended: bool


@dataclass
class ProbeState:
    """Everything the probe of one child reported, in lines that verified."""

    #: The child's root folder: test ids are made relative to it.
    root: Path
    #: The run's key: only lines it verifies are read.
    key: bytes
    tally: OutcomeTally = field(default_factory=OutcomeTally)
    start: dict[str, Any] | None = None
    end: dict[str, Any] | None = None
    #: ``{"nodeid", "longrepr"}`` of the collectors that failed (the first few).
    collect_errors: list[dict[str, str]] = field(default_factory=list)
    #: The integrity signals the probe reported (docs/scoring.md#integrity).
    integrity: list[Signal] = field(default_factory=list)
    #: ``--black-box``: ``{"file", "event"}`` of the first file of the repository the test
    #: process was refused, or None.
    refused: dict[str, str] | None = None
    collected: int | None = None
    #: Lines left out: not the probe's (forged, cut, malformed), or repeated.
    rejected: int = 0
    #: Phase lines read (the end record says how many the probe sent).
    phases: int = 0
    #: Characters of ``user_properties`` the tally may still keep (:data:`MAX_PROPERTY_CHARS`).
    property_chars: int = MAX_PROPERTY_CHARS
    #: Most tests recorded (``--limit tests``; None: no limit): the tests past it are left
    #: out, and :attr:`past_max_tests` says so.
    max_tests: int | None = None
    past_max_tests: bool = False
    chain: ChainCheck = field(init=False)
    _done: set[str] = field(default_factory=set)
    #: Every test id recorded, while a limit is set.
    _recorded: set[str] = field(default_factory=set)
    _current: str | None = None
    _lock: threading.Lock = field(default_factory=threading.Lock)

    def __post_init__(self) -> None:
        self.chain = ChainCheck(self.key)

    def feed_line(self, text: bytes) -> None:
        """Take one line of the stream."""
        with self._lock:
            record = self.chain.verify(text, ended=self.end is not None)
            line = None if record is None else _json_object(record)
            if line is None or not self._apply(line):
                self.rejected += 1

    def feed_tail(self) -> None:
        """Take what followed the stream's last newline: a line the probe was writing when
        its process was killed (it never ends the stream without one)."""
        with self._lock:
            self.chain.cut = True
            self.rejected += 1

    def stream_problems(self, cut_expected: bool = False) -> list[str]:
        """What the stream shows was done to it, one phrase each: lines that did not verify,
        gaps and repeats in the chain, an end record counting other phases than arrived.
        (A missing end record depends on how the child ended: the witness judges it.)

        :param cut_expected: the child was killed: a cut last line says nothing.
        """
        with self._lock:
            found = self.chain.problems(cut_expected)
            sent = (self.end or {}).get("phases")
            if isinstance(sent, int) and sent != self.phases:
                found.append(f"the end record counts {sent} phase(s), {self.phases} arrived")
            return found

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
        if kind == "refused":
            return self._refused(line)
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
        """One part of the collected ids (a large session's come in several)."""
        nodeids = line.get("nodeids")
        if not isinstance(nodeids, list) or not all(isinstance(n, str) for n in nodeids):
            return False
        self.collected = (self.collected or 0) + len(nodeids)
        self.tally.record_collected([nodeid for nodeid in nodeids if self._records(nodeid)])
        return True

    def _records(self, nodeid: str) -> bool:
        """Whether the test ``nodeid`` is recorded: always, unless it would be one more than
        :attr:`max_tests` (the evaluator's memory grows with each)."""
        if self.max_tests is None or nodeid in self._recorded:
            return True
        if len(self._recorded) >= self.max_tests:
            self.past_max_tests = True
            return False
        self._recorded.add(nodeid)
        return True

    def _phase(self, line: dict[str, Any]) -> bool:
        record = _phase_record(line)
        if record is None:
            return False
        if not self._records(record["nodeid"]):
            self.phases += 1  # it verified: the end record counts it
            return True
        self._keep_properties(record)
        self.phases += 1
        self.tally.record_phase(record)
        if record["when"] == "setup":
            self._current = self.tally.id_prefix + record["nodeid"]
        elif record["when"] == "teardown":
            self._done.add(record["nodeid"])
            self._current = None
        return True

    def _keep_properties(self, record: PhaseRecord) -> None:
        """Leave a phase's ``user_properties`` out once the stream's have used up their share."""
        properties = record["user_properties"]
        if properties:
            self.property_chars -= len(json.dumps(properties))
            if self.property_chars < 0:
                record["user_properties"] = []

    def _refused(self, line: dict[str, Any]) -> bool:
        file, event = line.get("file"), line.get("event")
        if not (isinstance(file, str) and isinstance(event, str)) or self.refused is not None:
            return False
        self.refused = {"file": file, "event": event}
        return True

    def _signal(self, line: dict[str, Any]) -> bool:
        kind, detail, file = line.get("kind"), line.get("detail"), line.get("file")
        if kind not in KINDS or not isinstance(detail, str) or not isinstance(file, str | None):
            return False
        self.integrity.append(make_signal(str(kind), detail, file))
        return True

    def progress(self) -> Progress:
        with self._lock:
            tally = self.tally
            shown = shown_counts(
                tally.counts(), tally.counted_not_run(), tally.expected is not None
            )
            return Progress(
                collected=self.collected,
                done=len(self._done),
                passed=shown["passed"],
                failed=shown["failed"],
                error=shown["error"],
                pending=len(tally.not_run()),
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


def _json_object(text: bytes) -> dict[str, Any] | None:
    try:
        value = json.loads(text)
    except ValueError:
        return None
    return value if isinstance(value, dict) else None


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
            record[key] = cap_text(line[key], MESSAGE_CAP)  # as in process: each test's kept
    if isinstance(line.get("subtest"), dict):
        record["subtest"] = line["subtest"]
    return record


def feed_chunks(state: ProbeState, chunks: Iterable[bytes]) -> ProbeState:
    """Every line of a stream that arrives in ``chunks`` into ``state``, one line at a time: a
    line past :data:`MAX_LINE` is left out (never held whole), a cut last line is a tail."""
    pending, dropping = b"", False
    for chunk in chunks:
        *lines, pending = (pending + chunk).split(b"\n")
        for line in lines:
            if dropping or len(line) > MAX_LINE:
                dropping = False  # the end of a line that was too long
                state.feed_line(b"")
            elif line.strip():
                state.feed_line(line)
        if len(pending) > MAX_LINE:
            pending, dropping = b"", True
    if dropping or pending:
        state.feed_tail()
    return state


def feed_file(state: ProbeState, path: Path) -> ProbeState:
    """The stream a sandbox's probe wrote to a file (read back to ``path``) into ``state``,
    a chunk at a time."""
    with path.open("rb") as stream:
        return feed_chunks(state, iter(functools.partial(stream.read, _CHUNK), b""))


class StreamReader:
    """Reads a probe channel in a thread of its own until every writer has closed it."""

    def __init__(self, descriptor: int, state: ProbeState):
        self.state = state
        self._descriptor = descriptor
        self._thread = threading.Thread(target=self._read, name="pytest-scoring-probe", daemon=True)
        self._thread.start()

    def _read(self) -> None:
        with os.fdopen(self._descriptor, "rb", buffering=0) as channel:
            feed_chunks(self.state, iter(functools.partial(channel.read, _CHUNK), b""))

    def join(self) -> None:
        """Wait for the end of the stream (after the child's whole tree is gone)."""
        self._thread.join()
