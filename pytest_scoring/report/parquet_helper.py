"""The report's Parquet files, written by a helper process that imports pyarrow early (#17).

Importing pyarrow takes about 0.35 s of CPU: most of what a scored session used to add to a
fast suite. A thread would save little, as an import holds the GIL the tests need; a
process runs on another core, at a lower priority (:data:`HELPER_NICENESS`) so that on a
machine whose cores are all busy it does not take the tests' share. So an evaluation starts
a :class:`ParquetHelper` when its session starts (on pytest-xdist's controller only: workers
hold no evaluation). The helper imports pyarrow while the tests run, then waits. At the end
the writer hands it the rows of each Parquet file; it writes them into the report folder
being built, answers, and exits. The writer still renames the folder into place once every
file is in it.

Whatever keeps the helper from writing (it could not start, import or write, it died, it took
longer than :data:`WRITE_TIMEOUT`), the writer writes the files itself as it always did: the
report, or the one-line error saying why it could not be written, is the same either way.
"""

from __future__ import annotations

import contextlib
import fcntl
import io
import json
import os
import select
import subprocess
import sys
import time
from collections.abc import Mapping
from pathlib import Path
from typing import Final
from typing import final

from pytest_scoring.process.environment import captured_environment

#: The helper's answer once every file is written.
WRITTEN: Final = b"written\n"
#: Longest wait for that answer, in seconds, before the writer writes the files itself (it
#: normally comes in milliseconds; importing pyarrow from a cold disk on a loaded machine,
#: which the helper may still be doing for a short session, can take seconds).
WRITE_TIMEOUT: Final = 60.0
#: How much lower the helper's scheduling priority is than the session's: on a machine with
#: every core busy it gets about a tenth of the CPU time the session gets (Linux's weights).
HELPER_NICENESS: Final = 10
#: The most the pipe to the helper is asked to hold (Linux's limit for an ordinary user):
#: files whose rows take more are written by the session itself.
PIPE_SIZE: Final = 1 << 20


@final
class ParquetHelper:
    """A helper process that writes Parquet files for this process (see the module)."""

    __slots__ = ("_process",)

    def __init__(self, process: subprocess.Popen[bytes]):
        self._process = process

    @classmethod
    def start(cls) -> ParquetHelper | None:
        """Start a helper; None when pyarrow is imported here already, or none can start."""
        if "pyarrow.parquet" in sys.modules:  # a later evaluation in the same process
            return None
        try:
            process = subprocess.Popen(
                _command(),
                stdin=subprocess.PIPE,
                stdout=subprocess.PIPE,
                stderr=subprocess.DEVNULL,
                # The evaluator's environment, as the scored repository's code found it.
                env=captured_environment(),
                # Out of the terminal's process group: Ctrl-C is the session's to handle.
                start_new_session=True,
            )
        except OSError:
            return None
        return cls(process)

    def send(self, files: Mapping[Path, bytes]) -> bool:
        """Hand the helper the files to write, each as its rows' JSON lines, without waiting:
        it writes them while this process goes on with the rest of the report.

        :returns: whether the helper has them; if not, it is ended and the caller writes them.
        """
        # The lines are UTF-8 (write_parquet's input): they travel as one line of ASCII JSON.
        request = json.dumps({str(path): lines.decode("utf-8") for path, lines in files.items()})
        data = f"{request}\n".encode()
        assert self._process.stdin is not None
        descriptor = self._process.stdin.fileno()
        # Never blocked by a helper that is busy or stuck: what does not fit in the pipe at
        # once is written here instead.
        _make_room(descriptor, len(data))
        os.set_blocking(descriptor, False)
        sent = 0
        if self._process.poll() is None:  # not to a pipe nobody reads (SIGPIPE)
            with contextlib.suppress(OSError):  # the pipe is full, or the helper just ended
                sent = os.write(descriptor, data)
        if sent < len(data):
            self.close()
            return False
        return True

    def written(self) -> bool:
        """Wait for the helper to have written the files it was sent, and end it.

        :returns: whether it wrote every one; if not, the caller writes them.
        """
        assert self._process.stdout is not None
        descriptor, answer = self._process.stdout.fileno(), b""
        deadline = time.monotonic() + WRITE_TIMEOUT
        while len(answer) < len(WRITTEN):
            remaining = deadline - time.monotonic()
            if remaining <= 0 or not select.select([descriptor], [], [], remaining)[0]:
                break
            chunk = os.read(descriptor, len(WRITTEN))
            if not chunk:
                break
            answer += chunk
        self.close()
        return answer == WRITTEN

    def close(self) -> None:
        """End the helper if it still runs, and reap it (a session may end before its report)."""
        if self._process.poll() is None:
            self._process.kill()
        with self._process:  # closes its pipes and waits
            pass


def _make_room(descriptor: int, size: int) -> None:
    """Ask for a pipe that holds ``size`` bytes, up to :data:`PIPE_SIZE` (Linux only)."""
    resize = getattr(fcntl, "F_SETPIPE_SZ", None)
    if resize is not None and size > fcntl.fcntl(descriptor, fcntl.F_GETPIPE_SZ):
        with contextlib.suppress(OSError):
            fcntl.fcntl(descriptor, resize, min(size, PIPE_SIZE))


def _command() -> list[str]:
    """The helper's command line: this interpreter, importing this package's copy of the
    module (``-P``: the current folder, the scored repository, is not put on ``sys.path``)."""
    imported_from = str(Path(__file__).resolve().parent.parent.parent)
    code = (
        f"import sys; sys.path.insert(0, {imported_from!r}); "
        "from pytest_scoring.report.parquet_helper import serve; serve()"
    )
    return [sys.executable, "-P", "-c", code]


def serve() -> None:
    """The helper's side: import pyarrow now; write the files asked for on stdin, then answer.

    Any failure ends the helper without the answer, and the session writes the files itself.
    """
    # Spare CPU only: on a busy machine the tests keep their core. When the session waits for
    # the helper at its end, that core is free again for it.
    with contextlib.suppress(AttributeError, OSError):  # no os.nice outside POSIX
        os.nice(HELPER_NICENESS)
    from pytest_scoring.report.parquet import json_lines
    from pytest_scoring.report.parquet import write_parquet

    # Import pyarrow and write one table now, while the tests run (the point of it all): a
    # first write sets up more than the later ones need.
    without_numpy()
    write_parquet(io.BytesIO(), json_lines([{}]))
    request = json.loads(sys.stdin.buffer.readline())
    for path, text in request.items():
        write_parquet(Path(path), text.encode("utf-8"))
    sys.stdout.buffer.write(WRITTEN)
    sys.stdout.buffer.flush()
    # The files are closed: skip the interpreter's teardown, which takes longer with pyarrow
    # loaded than the writing did, while the session waits for the helper to end.
    os._exit(0)


def without_numpy() -> None:
    """Keep the pyarrow this process imports from importing numpy.

    pyarrow imports numpy whenever it is installed, though writing a table from JSON lines
    never uses it: that was two thirds of the helper's CPU time (about 0.2 s of 0.3 s), taken
    on the core next to the tests'. A pyarrow that cannot do without numpy fails to import,
    and the session writes the files itself, as for any failure of the helper.
    """
    sys.modules.setdefault("numpy", None)  # type: ignore[arg-type]
