"""The probe's channel: lines only the key's holder can write, and the chain the evaluator checks.

The probe's side (``kit/channel.py``) writes into a real pipe or file; the evaluator's side
(``process/stream.py``) reads what arrived. The attacks on a whole run are in
``tests/test_channel_attacks.py``.
"""

from __future__ import annotations

import hmac
import json
import os
import secrets
import tempfile
from pathlib import Path

import pytest

from pytest_scoring.core.rule import MESSAGE_CAP
from pytest_scoring.kit.channel import FIRST_PREVIOUS
from pytest_scoring.kit.channel import KEY_BYTES
from pytest_scoring.kit.channel import Channel
from pytest_scoring.kit.channel import ChannelError
from pytest_scoring.kit.channel import open_channel
from pytest_scoring.process.stream import MAX_LINE
from pytest_scoring.process.stream import MAX_PROPERTY_CHARS
from pytest_scoring.process.stream import ProbeState
from pytest_scoring.process.stream import feed_chunks
from pytest_scoring.process.witness import ChildEnding
from pytest_scoring.process.witness import witness_signals

START = {"type": "start", "rootdir": "/repo"}
PHASE = {"type": "phase", "nodeid": "test_a.py::test_a", "when": "call", "outcome": "passed"}


def end(phases: int) -> dict[str, object]:
    return {"type": "end", "exitstatus": 0, "interrupted": False, "phases": phases}


def written(key: bytes, *records: dict[str, object]) -> list[bytes]:
    """The lines a channel with ``key`` writes for ``records``, as they arrive (in a file: a
    pipe nobody reads yet holds 64 KiB)."""
    with tempfile.TemporaryFile() as stream:
        channel = Channel(key, os.dup(stream.fileno()))
        for record in records:
            channel.send(record)
        channel.close()
        stream.seek(0)
        return stream.read().splitlines(keepends=True)


def read(key: bytes, lines: list[bytes]) -> ProbeState:
    return feed_chunks(ProbeState(root=Path("/repo"), key=key), [b"".join(lines)])


@pytest.fixture
def key() -> bytes:
    return secrets.token_bytes(KEY_BYTES)


def test_each_line_is_its_mac_its_number_the_mac_before_it_and_the_record(key: bytes) -> None:
    first, second = written(key, START, PHASE)
    mac, seq, previous, record = first.rstrip(b"\n").split(b" ", 3)
    assert (seq, previous, json.loads(record)) == (b"1", FIRST_PREVIOUS.encode(), START)
    assert mac == hmac.new(key, first[65:-1], "sha256").hexdigest().encode()
    assert second.split(b" ", 3)[1:3] == [b"2", mac]


def test_the_lines_of_the_runs_key_are_read_and_nothing_is_wrong(key: bytes) -> None:
    state = read(key, written(key, START, PHASE, end(1)))
    assert state.start == START and state.end == end(1)
    assert state.tally.outcome_of("test_a.py::test_a") == "passed"
    assert (state.rejected, state.stream_problems()) == (0, [])


def test_lines_written_with_any_other_key_are_all_left_out(key: bytes) -> None:
    state = read(key, written(secrets.token_bytes(KEY_BYTES), START, PHASE, end(1)))
    assert state.start is None and state.end is None
    assert state.tally.records() == []
    assert state.stream_problems() == ["3 line(s) did not verify"]


def test_a_line_changed_on_its_way_is_left_out(key: bytes) -> None:
    lines = written(key, START, {**PHASE, "outcome": "failed"}, end(1))
    lines[1] = lines[1].replace(b'"failed"', b'"passed"')
    state = read(key, lines)
    assert state.tally.outcome_of("test_a.py::test_a") is None
    assert state.stream_problems() == [
        "1 line(s) did not verify",
        "the chain skips lines (line 3 after line 1)",
        "the end record counts 1 phase(s), 0 arrived",
    ]


def test_a_line_taken_out_of_the_stream_is_a_gap(key: bytes) -> None:
    failed = {**PHASE, "nodeid": "test_a.py::test_b", "outcome": "failed"}
    lines = written(key, START, failed, PHASE, end(2))
    state = read(key, [lines[0], *lines[2:]])
    assert state.tally.outcome_of("test_a.py::test_a") == "passed"  # it verified: it is kept
    assert state.stream_problems() == [
        "the chain skips lines (line 3 after line 1)",
        "the end record counts 2 phase(s), 1 arrived",
    ]


def test_a_line_that_comes_again_counts_once(key: bytes) -> None:
    lines = written(key, START, PHASE, end(1))
    state = read(key, [lines[0], lines[1], lines[1], lines[2]])
    assert state.phases == 1 and state.rejected == 1
    assert state.stream_problems() == ["1 line(s) came again"]


def test_nothing_after_the_end_record_is_read(key: bytes) -> None:
    state = read(key, written(key, START, end(0), PHASE))
    assert state.tally.records() == []
    assert state.stream_problems() == ["1 line(s) came after the end record"]


def test_a_cut_last_line_matters_only_when_nothing_killed_the_child(key: bytes) -> None:
    lines = written(key, START, PHASE)
    state = read(key, [lines[0], lines[1][:40]])
    assert state.stream_problems(cut_expected=True) == []
    assert state.stream_problems() == ["the stream ends in the middle of a line"]


def test_a_forked_child_of_the_probe_writes_nothing(key: bytes) -> None:
    read_end, write_end = os.pipe()
    channel = Channel(key, write_end)
    channel.send(START)
    pid = os.fork()
    if pid == 0:  # the child sends with the probe's own key and state: silently dropped
        channel.send({**PHASE, "outcome": "failed"})
        os._exit(0)
    os.waitpid(pid, 0)
    channel.send(PHASE)
    channel.send(end(1))
    channel.close()
    with os.fdopen(read_end, "rb") as stream:
        state = read(key, [stream.read()])
    assert state.tally.outcome_of("test_a.py::test_a") == "passed"
    assert state.stream_problems() == []


def test_the_key_is_read_from_its_descriptor_which_is_then_closed(key: bytes) -> None:
    key_read, key_write = os.pipe()
    os.write(key_write, key.hex().encode())
    os.close(key_write)
    stream_read, stream_write = os.pipe()
    os.set_inheritable(stream_write, True)
    channel = open_channel(stream_fd=stream_write, key_fd=key_read)
    assert channel is not None
    with pytest.raises(OSError):
        os.fstat(key_read)
    assert not os.get_inheritable(stream_write)  # programs the tests start do not get it
    channel.send(START)
    channel.close()
    with os.fdopen(stream_read, "rb") as stream:
        assert read(key, [stream.read()]).start == START


@pytest.mark.parametrize("text", ["", "00" * (KEY_BYTES - 1), "zz" * KEY_BYTES])
def test_a_key_that_is_not_one_is_refused(text: str) -> None:
    key_read, key_write = os.pipe()
    os.write(key_write, text.encode())
    os.close(key_write)
    stream_read, stream_write = os.pipe()
    with pytest.raises(ChannelError, match="not 32 bytes"):
        open_channel(stream_fd=stream_write, key_fd=key_read)
    os.close(stream_read)
    os.close(stream_write)


def test_no_end_record_is_a_forgery_only_when_nothing_else_ended_the_child(key: bytes) -> None:
    failed = {**PHASE, "outcome": "failed"}
    state = read(key, written(key, START, failed))
    (forged,) = witness_signals(state, ChildEnding(exit_code=1))
    assert forged["detail"] == "no end record (pytest exited with status 1)"
    for ending in (ChildEnding(exit_code=None), ChildEnding(exit_code=1, by_evaluator=True)):
        assert witness_signals(state, ending) == []  # a signal killed it, or the evaluator
    # pytest-timeout's thread method ends the process itself, and says so first.
    installed = {"plugins": ["timeout"], "installed": ["timeout"]}
    with_timeout = read(key, written(key, {**START, **installed}, failed))
    output = "+++++++++++ Timeout +++++++++++\n...stacks...\n+++++++++++ Timeout +++++++++++\n"
    assert witness_signals(with_timeout, ChildEnding(exit_code=1, output=output)) == []
    assert witness_signals(state, ChildEnding(exit_code=1, output=output)) == [forged]


def phases(count: int, **fields: object) -> list[dict[str, object]]:
    return [{**PHASE, "nodeid": f"test_a.py::test_{i}", **fields} for i in range(count)]


def test_a_stream_keeps_only_its_share_of_user_properties(key: bytes) -> None:
    # Each value is capped by the probe, not how many a test records: a session of tests
    # that each record 64 KiB would otherwise keep all of it, test after test.
    blob = [["blob", "x" * 65536]]
    state = read(key, written(key, START, *phases(100, user_properties=blob), end(100)))
    kept = [bool(record["user_properties"]) for record in state.tally.records()]
    share = MAX_PROPERTY_CHARS // len(json.dumps(blob))  # 63 tests' worth
    assert kept == [True] * share + [False] * (100 - share)
    assert state.tally.counts()["passed"] == 100
    assert (state.rejected, state.stream_problems()) == (0, [])


def test_a_phase_message_is_kept_to_the_length_it_has_in_process(key: bytes) -> None:
    failed = {**PHASE, "outcome": "failed", "longrepr": "E" * 20000}
    state = read(key, written(key, START, failed, end(1)))
    (record,) = state.tally.records()
    assert record["message"].startswith("E" * MESSAGE_CAP + "\n… [19000 more characters cut]")


def test_a_stream_read_in_chunks_leaves_out_a_line_past_the_bound(key: bytes) -> None:
    first, second, last = written(key, START, PHASE, end(1))
    chunks = [first, second[:10], b"x" * (MAX_LINE + 1), b"\n", second, last]
    state = feed_chunks(ProbeState(root=Path("/repo"), key=key), chunks)
    assert state.rejected == 1 and state.end is not None
    assert state.tally.outcome_of("test_a.py::test_a") == "passed"
