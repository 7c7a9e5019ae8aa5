"""Benchmark: the evaluator's memory for the probe's stream of a session of many tests.

Writes, with the channel's own code, the stream a session of ``--tests`` passing tests sends
(a start record, the collected ids, three phases per test, the end record), then reads it
back as ``run`` does (:func:`pytest_scoring.process.stream.feed_file`) in a fresh process,
with and without ``--limit tests`` (:data:`pytest_scoring.evaluation.options.DEFAULT_LIMITS`),
and prints the reader's peak RSS (``getrusage(RUSAGE_SELF)``: the writer runs in a process of
its own).

    python bench/bench_stream_memory.py --tests 20000 100000 400000
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import secrets
import subprocess
import sys
import tempfile
from pathlib import Path

from pytest_scoring.evaluation.options import DEFAULT_LIMITS
from pytest_scoring.kit.channel import KEY_BYTES
from pytest_scoring.kit.channel import Channel
from pytest_scoring.process.stream import ProbeState
from pytest_scoring.process.stream import feed_file


def write_stream(path: Path, key: bytes, tests: int) -> None:
    channel = Channel(key, os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600))
    channel.send({"type": "start", "rootdir": "/repo", "invocation_dir": "/repo", "args": []})
    ids = [
        f"tests/test_module_{i // 100}.py::test_a_case_with_a_longish_name_{i}"
        for i in range(tests)
    ]
    for start in range(0, tests, 1000):
        channel.send({"type": "collected", "nodeids": ids[start : start + 1000]})
    for nodeid in ids:
        for when in ("setup", "call", "teardown"):
            phase = {"nodeid": nodeid, "when": when, "outcome": "passed", "duration": 0.001}
            channel.send({"type": "phase", **phase, "user_properties": []})
    end = {"exitstatus": 0, "interrupted": False, "stop_reason": "", "phases": 3 * tests}
    channel.send({"type": "end", **end, "stop_file": None})
    channel.close()


def read_stream(path: Path, key: bytes, limit: int | None) -> dict[str, object]:
    state = ProbeState(root=Path("/repo"), key=key)
    state.max_tests = limit
    feed_file(state, path)
    return {
        "recorded": len(state.tally.tests),
        "past_limit": state.past_max_tests,
        "peak_rss_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss // 1024,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--tests", type=int, nargs="+", default=[20_000, 100_000, 400_000])
    parser.add_argument("--read", nargs=3, metavar=("PATH", "KEY", "LIMIT"), help=argparse.SUPPRESS)
    options = parser.parse_args()
    if options.read:
        path, key, limit = options.read
        print(json.dumps(read_stream(Path(path), bytes.fromhex(key), int(limit) or None)))
        return
    print("| tests | stream | limit | tests recorded | reader's peak RSS |")
    print("|---|---|---|---|---|")
    for tests in options.tests:
        with tempfile.TemporaryDirectory() as folder:
            key, path = secrets.token_bytes(KEY_BYTES), Path(folder) / "stream"
            write_stream(path, key, tests)
            size = path.stat().st_size // 2**20
            for limit in (0, DEFAULT_LIMITS.tests or 0):
                command = [sys.executable, __file__, "--read", str(path), key.hex(), str(limit)]
                found = json.loads(subprocess.run(command, capture_output=True, check=True).stdout)
                shown = f"{limit:,}" if limit else "none"
                print(
                    f"| {tests:,} | {size} MB | {shown} | {found['recorded']:,} "
                    f"| {found['peak_rss_mb']} MB |"
                )


if __name__ == "__main__":
    main()
