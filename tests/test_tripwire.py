"""The tripwire and the self-check under ``pytest-scoring run``: code of the repository that
reaches into the probe, pytest or pluggy is seen, whichever of its files does it; honest code
that looks at its own frames, objects and memory is not (docs/security.md#the-tripwire).

Each hostile repository is built in the test and scored once with ``run``; the tests read the
signals from the report, as an evaluator would.
"""

from __future__ import annotations

import textwrap
from pathlib import Path
from typing import Any

import pytest
from runs import AS_EVALUATOR
from runs import only_report
from runs import run_cli

pytestmark = pytest.mark.slow

#: One test per reach-in, each on a line of its own: ``name -> (body, what the signal says)``;
#: the signal names the innermost line of the repository's, a helper's when one does it.
REACH_INS: dict[str, tuple[str, str]] = {
    "sys._getframe": ("sys._getframe(1)", "sys._getframe() returned a frame of _pytest/"),
    "inspect.stack": ("inspect.stack()", "read f_code of a frame of "),
    "traceback.walk_tb": ("list(traceback.walk_tb(pytest_traceback()))", "read tb_frame of a "),
    "sys._current_frames": ("sys._current_frames()", "called sys._current_frames()"),
    "gc.get_referrers": (
        "gc.get_referrers(pytest.TestReport)",
        "gc handed out what refers to or from _pytest.reports.TestReport",
    ),
    "gc.get_referents": (
        "gc.get_referents(request.config)",
        "gc handed out what refers to or from a _pytest.config.Config",
    ),
    "tb_frame": ("pytest_frame()", "read tb_frame of a frame of _pytest/outcomes.py"),
    "a path object": (
        "os.close(os.open(Sly('/proc/self/mem'), os.O_RDONLY))",
        "opened the process's memory",
    ),
    "__code__": (
        "pytest.TestReport.from_item_and_call.__func__.__code__",
        "read __code__ of _pytest.reports.TestReport.from_item_and_call",
    ),
    "__defaults__": (
        "_pytest.runner.call_and_report.__defaults__",
        "read __defaults__ of _pytest.runner.call_and_report",
    ),
    "gi_frame": (
        "_pytest.pathlib.visit('.', lambda entry: False).gi_frame",
        "read gi_frame of a frame of _pytest/pathlib.py",
    ),
    "/proc/self/mem": ("open('/proc/self/mem', 'rb').close()", "opened the process's memory"),
    "/proc/self/fd": ("os.listdir('/dev/fd')", "listed the process's fd folder"),
    "the channel": ("reopen_the_channel()", "opened the probe's channel"),
    "the channel's send": ("send(request)({'type': 'end'})", "sent a record on the probe's"),
    "id": ("id(probe_hook(request))", "id() of one of the probe's protected objects"),
    "ctypes.string_at": (
        "ctypes.string_at(address(probe_hook(request)), 8)",
        "ctypes read or mapped the memory of one of the probe's protected objects",
    ),
    "ctypes.from_address": (
        "ctypes.c_char.from_address(address(probe_hook(request)))",
        "ctypes read or mapped the memory of one of the probe's protected objects",
    ),
    "ctypes.memmove": (
        "ctypes.memmove(ctypes.create_string_buffer(8), address(probe_hook(request)), 8)",
        "ctypes wrote or cast the memory of one of the probe's protected objects",
    ),
    "ctypes.cast": (
        "ctypes.cast(address(probe_hook(request)), ctypes.POINTER(ctypes.c_char))",
        "ctypes wrote or cast the memory of one of the probe's protected objects",
    ),
    "ctypes.pythonapi": ("ctypes.pythonapi.Py_IncRef", "ctypes looked up Py_IncRef"),
    "memcpy": ("ctypes.CDLL(None).memcpy", "ctypes looked up memcpy"),
    "sys.settrace": ("sys.settrace(None)", "called sys.settrace()"),
    "doctest's settrace": ("launder_a_trace()", "called sys.settrace()"),
    "a fresh ctypes": ("fresh_ctypes()", "imported ctypes afresh"),
    "sys.setprofile": ("sys.setprofile(None)", "called sys.setprofile()"),
    "a borrowed name": (
        "compile('x = 1', _pytest.runner.__file__, 'exec')",
        "compiled code under the name of _pytest/runner.py",
    ),
    "__code__ set": (
        "_pytest.runner.show_test_item.__code__ = (lambda item: None).__code__",
        "set __code__ of _pytest.runner.show_test_item",
    ),
}
HOSTILE_HEADER = '''
import ctypes, doctest, gc, inspect, os, stat, sys, traceback
import _pytest.pathlib
import _pytest.runner
import pytest


def pytest_frame():
    return pytest_traceback().tb_next.tb_frame


def pytest_traceback():
    try:
        pytest.fail("to get a traceback through pytest")
    except BaseException as error:
        return error.__traceback__


def probe_hook(request):
    """The probe's hook, through pytest's public plugin manager."""
    hook = request.config.pluginmanager.hook.pytest_runtest_logreport
    return next(i.function for i in hook.get_hookimpls() if "probe" in i.function.__qualname__)


def address(value):
    """An address without id(): object.__repr__ names it."""
    return int(object.__repr__(value).rsplit(" at ", 1)[1].rstrip(">"), 16)


class Sly:
    """A path that names one file to the tripwire and another to open()."""

    def __init__(self, path):
        self.path, self.asked = path, 0

    def __fspath__(self):
        self.asked += 1
        return self.path if self.asked == 1 else "/dev/null"


def send(request):
    """The channel's own send, read from the probe's hook (no audit event)."""
    cells = [cell.cell_contents for cell in probe_hook(request).__closure__]
    return next(value for value in cells if getattr(value, "__name__", "") == "send")


def launder_a_trace():
    """doctest puts back the trace function sys.gettrace() named when it started: here, one
    of the repository's.

    >>> 1 + 1
    2
    """
    sys.gettrace = lambda: (lambda frame, event, arg: None)
    doctest.testmod(sys.modules[__name__])


def fresh_ctypes():
    """ctypes imported again, whose memmove the launcher never guarded."""
    saved = sys.modules.pop("ctypes")
    try:
        import ctypes as fresh
    except ImportError:
        pass
    finally:
        sys.modules["ctypes"] = saved


def reopen_the_channel():
    """The probe's pipe, found without listing /proc/self/fd, opened again."""
    for descriptor in range(3, 1024):
        try:
            if stat.S_ISFIFO(os.fstat(descriptor).st_mode):
                os.close(os.open(f"/proc/self/fd/{descriptor}", os.O_WRONLY | os.O_NONBLOCK))
        except OSError:
            continue
'''


#: The line of the helper that does the reach-in.
HELPER_LINES = {
    "tb_frame": "return pytest_traceback().tb_next.tb_frame",
    "the channel": 'os.close(os.open(f"/proc/self/fd/{descriptor}", os.O_WRONLY | os.O_NONBLOCK))',
    "doctest's settrace": "doctest.testmod(sys.modules[__name__])",
    "a fresh ctypes": "import ctypes as fresh",
}


def write(path: Path, text: str) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(textwrap.dedent(text))
    return path


def scored(repo: Path, out: Path, *args: str) -> dict[str, Any]:
    result = run_cli(repo, "--report", out, *args)
    assert result.exit_code in (0, 1), result.output
    return only_report(out)


def signals(report: dict[str, Any], *kinds: str) -> list[dict[str, Any]]:
    return [signal for signal in report["integrity"] if signal["kind"] in kinds]


def line_of(path: Path, text: str) -> int:
    lines = path.read_text().splitlines()
    return next(number for number, line in enumerate(lines, 1) if line.strip() == text)


#: Reach-ins per session: a report keeps 20 signals of one kind.
PER_SESSION = 14


@pytest.fixture(scope="module")
def reach_ins(tmp_path_factory: pytest.TempPathFactory) -> dict[str, tuple[Path, dict[str, Any]]]:
    """Sessions whose every test reaches in once (each on its own line), each scored once:
    for each reach-in, its session's test file and report."""
    names, found = list(REACH_INS), {}
    for first in range(0, len(names), PER_SESSION):
        group = names[first : first + PER_SESSION]
        repo = tmp_path_factory.mktemp("reach-ins")
        body = "".join(
            f"\n\ndef test_{index}(request):\n    {REACH_INS[name][0]}\n"
            for index, name in enumerate(group)
        )
        tests = write(repo / "tests" / "test_reach_in.py", HOSTILE_HEADER + body)
        report = scored(repo, tmp_path_factory.mktemp("out"))
        found.update((name, (tests, report)) for name in group)
    return found


@pytest.mark.parametrize("name", list(REACH_INS))
def test_a_reach_in_from_a_test_is_a_signal_naming_its_line(
    reach_ins: dict[str, tuple[Path, dict[str, Any]]], name: str
) -> None:
    tests, report = reach_ins[name]
    code, said = REACH_INS[name]
    where = f"tests/test_reach_in.py:{line_of(tests, HELPER_LINES.get(name, code))}"
    found = [s for s in signals(report, "tripwire", "patched") if where in s["detail"]]
    assert any(said in s["detail"] for s in found), (where, report["integrity"])
    assert all(s["file"] == "tests/test_reach_in.py" for s in found)


SOURCE_REACH_IN = """
import inspect, sys

def caller_names():
    # Library code reaching into the frames of whoever runs it: here, pytest's.
    return [frame.function for frame in inspect.stack()]

def grandparent():
    return sys._getframe(3)
"""


def test_a_reach_in_from_a_source_module_names_the_source_file(tmp_path: Path) -> None:
    repo = tmp_path / "repo"
    write(repo / "src" / "app.py", SOURCE_REACH_IN)
    write(
        repo / "tests" / "test_app.py",
        """
        import sys
        from pathlib import Path
        sys.path.insert(0, str(Path(__file__).parents[1] / "src"))
        import app

        def test_app():
            assert app.caller_names()
            assert app.grandparent() is not None
        """,
    )
    report = scored(repo, tmp_path / "out")
    found = signals(report, "tripwire")
    assert {s["file"] for s in found} == {"src/app.py"}, report["integrity"]
    details = " ".join(s["detail"] for s in found)
    assert "(from src/app.py:6)" in details  # inspect.stack() does not launder it
    assert "sys._getframe() returned a frame of " in details


#: What a conftest or a source module does to what decides a test's outcome.
PATCHES = {
    "the probe's hook": (
        """
        def pytest_configure(config):
            hook = config.pluginmanager.hook.pytest_runtest_logreport
            for impl in hook.get_hookimpls():
                if "probe" in impl.function.__qualname__:
                    original = impl.function

                    def forgiving(report, original=original):
                        if report.failed:
                            report.outcome = "passed"
                        return original(report)

                    impl.function = forgiving
        """,
        "the probe's pytest_runtest_logreport implementation was replaced",
    ),
    "the probe's writer": (
        """
        def pytest_configure(config):
            hook = config.pluginmanager.hook.pytest_runtest_logreport
            for impl in hook.get_hookimpls():
                for cell in impl.function.__closure__ or ():
                    real = cell.cell_contents
                    if getattr(real, "__name__", "") == "send":

                        def lying(record, real=real):
                            if record.get("type") == "phase" and record["outcome"] == "failed":
                                record = {**record, "outcome": "passed"}
                                record.pop("longrepr", None)
                            real(record)

                        cell.cell_contents = lying
        """,
        "what the probe's",
    ),
    "pytest's report": (
        """
        import pytest

        made = pytest.TestReport.from_item_and_call.__func__

        def forgiving(cls, item, call):
            report = made(cls, item, call)
            report.outcome, report.longrepr = "passed", None
            return report

        pytest.TestReport.from_item_and_call = classmethod(forgiving)
        """,
        "_pytest.reports.TestReport.from_item_and_call was replaced",
    ),
    "pytest's runner": (
        """
        import _pytest.runner

        made = _pytest.runner.call_and_report

        def forgiving(item, when, log=True, **kwargs):
            report = made(item, when, log=False, **kwargs)
            report.outcome, report.longrepr = "passed", None
            if log:
                item.ihook.pytest_runtest_logreport(report=report)
            return report

        _pytest.runner.call_and_report = forgiving
        """,
        "_pytest.runner.call_and_report was replaced",
    ),
    "pytest's call information": (
        """
        import _pytest.runner

        made = _pytest.runner.CallInfo.from_call.__func__

        def forgiving(cls, func, when, reraise=None):
            return made(cls, lambda: None, when, reraise)

        _pytest.runner.CallInfo.from_call = classmethod(forgiving)
        """,
        "_pytest.runner.CallInfo.from_call was replaced",
    ),
    # A conftest's pytest_configure runs before the probe's (which is trylast): what it
    # swaps there must still be compared with what pluggy had before any conftest loaded.
    "pluggy's call loop": (
        """
        def pytest_configure(config):
            manager = config.pluginmanager
            real = manager._inner_hookexec

            def forgiving(hook_name, methods, kwargs, firstresult):
                report = kwargs.get("report")
                if hook_name == "pytest_runtest_logreport" and report.failed:
                    report.outcome, report.longrepr = "passed", None
                return real(hook_name, methods, kwargs, firstresult)

            manager._inner_hookexec = forgiving
        """,
        "pluggy's call loop (PluginManager._inner_hookexec) was replaced",
    ),
    "pytest's hook caller": (
        """
        def pytest_configure(config):
            relay = config.pluginmanager.hook
            real = relay.pytest_runtest_logreport

            class Forgiving:
                def __getattr__(self, name):
                    return getattr(real, name)

                def __call__(self, **kwargs):
                    report = kwargs["report"]
                    if report.failed:
                        report.outcome, report.longrepr = "passed", None
                    return real(**kwargs)

            relay.pytest_runtest_logreport = Forgiving()
        """,
        "pytest's hook caller pytest_runtest_logreport was replaced",
    ),
}
#: A source module has no hook: it finds pytest's config in the frames that import it.
FROM_THE_SOURCE = """

def _config():
    frame = sys._getframe(0)
    while frame is not None:
        found = frame.f_locals.get("config") or getattr(frame.f_locals.get("self"), "config", None)
        if hasattr(found, "pluginmanager"):
            return found
        frame = frame.f_back

pytest_configure(_config())
"""
FAILING_TESTS = """
    import sys
    from pathlib import Path
    sys.path.insert(0, str(Path(__file__).parents[1]))
    import app  # noqa: F401 - its import is what patches

    def test_passes():
        pass

    def test_fails():
        assert False
"""


@pytest.mark.parametrize("where", ["conftest.py", "app.py"])
@pytest.mark.parametrize("patch", list(PATCHES))
def test_a_patch_of_the_probe_or_pytest_is_patched_and_strict_withholds_the_score(
    tmp_path: Path, patch: str, where: str
) -> None:
    repo = tmp_path / "repo"
    code, said = PATCHES[patch]
    if where == "app.py" and "def pytest_configure" in code:
        code = "import sys\n" + textwrap.dedent(code) + FROM_THE_SOURCE
    write(repo / where, code)
    if where == "conftest.py":
        write(repo / "app.py", "")
    write(repo / "tests" / "test_app.py", FAILING_TESTS)
    report = scored(repo, tmp_path / "out", "--strict=patched")
    found = [s for s in signals(report, "patched") if said in s["detail"]]
    assert found, report["integrity"]
    assert found[0]["file"] == where
    assert report["scores"]["percent_passing_tests"]["value"] == "N"


HONEST_TESTS = """
    import collections, copy, ctypes, dataclasses, doctest, enum, functools, gc, inspect
    import logging
    import os, pickle, subprocess, sys, threading, traceback, typing, warnings
    from unittest import mock

    import attr
    import pytest

    T = typing.TypeVar("T")
    Point = collections.namedtuple("Point", "x y")
    Made = attr.make_class("Made", ["a"])


    @dataclasses.dataclass
    class Record:
        name: str


    class Colour(enum.Enum):
        RED = 1


    def helper():
        return inspect.currentframe().f_code.co_name, sys._getframe(0).f_lineno


    def test_frames_of_its_own():
        assert helper()[0] == "helper"
        assert inspect.signature(helper).parameters == {}
        assert functools.wraps(helper)(lambda: None).__name__ == "helper"


    def test_logging_and_warnings(caplog):
        logging.getLogger("app").warning("careful")
        with pytest.warns(UserWarning):
            warnings.warn("careful", stacklevel=2)
        assert "careful" in caplog.text


    def test_its_own_exceptions():
        try:
            raise ValueError("bad input")
        except ValueError:
            assert "bad input" in traceback.format_exc()
        try:
            pytest.fail("through pytest's own frames")
        except BaseException:
            assert "pytest" in traceback.format_exc()
        # Library code that finds its caller for a warning (pyparsing does so).
        assert traceback.extract_stack(limit=200)[-1].name == "test_its_own_exceptions"
        with pytest.raises(ZeroDivisionError):
            1 / 0


    def test_ctypes_for_its_own_work():
        libc = ctypes.CDLL(None)
        assert libc.getpid() == os.getpid()
        buffer, source = ctypes.create_string_buffer(4), ctypes.create_string_buffer(b"abc")
        ctypes.memmove(buffer, source, 4)
        ctypes.memset(source, 0, 4)
        assert buffer.value == b"abc" and ctypes.string_at(ctypes.addressof(buffer)) == b"abc"
        assert ctypes.cast(buffer, ctypes.c_char_p).value == b"abc"


    def test_objects_of_its_own(tmp_path, monkeypatch):
        gc.collect()
        record = Record("x")
        assert gc.get_referents(record) and id(record)
        assert copy.deepcopy({"a": [record]})["a"][0] == record
        assert pickle.loads(pickle.dumps(Point(1, 2))) == Point(1, 2)
        assert Made(1).a == 1 and Colour.RED.value == 1
        monkeypatch.setattr(Record, "kind", "patched", raising=False)
        with mock.patch.object(os, "getcwd", return_value="/nowhere"):
            assert os.getcwd() == "/nowhere"
        (tmp_path / "data.txt").write_text("x")
        assert os.listdir(tmp_path) == ["data.txt"]
        assert open("/proc/self/status").read()


    def double(value):
        '''
        >>> double(2)
        4
        '''
        return 2 * value


    def test_leaks_and_doctests():
        # A leak test that counts objects (MarkupSafe's), a module's doctests (toolz').
        gc.collect()
        assert len(gc.get_objects()) > 0
        assert doctest.testmod(sys.modules[__name__]).attempted == 1


    def test_without_ctypes(monkeypatch):
        # packaging's: a fallback tried with ctypes made unimportable.
        monkeypatch.setitem(sys.modules, "ctypes", None)
        with pytest.raises(ImportError):
            import ctypes as missing


    def test_threads_and_processes():
        done = []
        thread = threading.Thread(target=lambda: done.append(sys._getframe(0).f_code.co_name))
        thread.start()
        thread.join()
        assert done == ["<lambda>"]
        run = subprocess.run([sys.executable, "-c", "print(1)"], capture_output=True, text=True)
        assert run.stdout == "1\\n"


    def test_a_real_failure():
        assert {"a": 1} == {"a": 2}
"""


def test_an_honest_suite_that_looks_at_its_own_frames_and_memory_raises_nothing(
    tmp_path: Path,
) -> None:
    repo = tmp_path / "repo"
    write(repo / "tests" / "test_honest.py", HONEST_TESTS)
    report = scored(repo, tmp_path / "out")
    assert signals(report, "tripwire", "patched", "stream_forged") == []
    counts = report["tests"]["counts"]
    assert (counts["passed"], counts["failed"]) == (8, 1), report["tests"]


#: Patches made in pytest-xdist's workers only: ``where -> (code, what the signal says)``.
IN_WORKERS = {
    # The tests, and so the source module they import, run in the workers only.
    "app.py": (PATCHES["pytest's runner"][0], "_pytest.runner.call_and_report was replaced"),
    # A worker's conftest runs its pytest_configure before the worker's integrity watch does.
    "conftest.py": (
        textwrap.dedent(PATCHES["pluggy's call loop"][0]).replace(
            "    manager = config.pluginmanager",
            "    if not hasattr(config, 'workerinput'):\n        return\n"
            "    manager = config.pluginmanager",
        ),
        PATCHES["pluggy's call loop"][1],
    ),
}


@pytest.mark.parametrize("where", list(IN_WORKERS))
def test_a_patch_made_in_a_pytest_xdist_worker_is_patched(tmp_path: Path, where: str) -> None:
    repo = tmp_path / "repo"
    code, said = IN_WORKERS[where]
    write(repo / "app.py", "")
    write(repo / where, code)
    write(repo / "tests" / "test_app.py", FAILING_TESTS)
    report = scored(repo, tmp_path / "out", "--strict=patched", "--", "-n", "2")
    found = [s for s in signals(report, "patched") if said in s["detail"]]
    assert found and found[0]["file"] == where, report["integrity"]
    assert report["scores"]["percent_passing_tests"]["value"] == "N"


#: A forked child of the test process sends nothing (its probe is silent), so what its
#: tripwire finds would never reach the evaluator. This one looks for the channel's send with
#: gc.get_objects(), reads the MAC and the chain from its cells (residual (i)), and hands
#: well-chained lines (every test passed, the end record) to its parent, which writes them.
FORK_FORGER = r"""
import gc, os, types
import pytest


def cells(function):
    names = function.__code__.co_freevars
    return dict(zip(names, [cell.cell_contents for cell in function.__closure__ or ()]))


def forged_lines(ids):
    try:
        objects = gc.get_objects()
    except Exception:  # refused
        return b""
    send = next(
        value for value in objects
        if isinstance(value, types.FunctionType) and value.__name__ == "send"
        and value.__code__.co_filename.endswith("channel.py")
    )
    found = cells(send)
    seq, previous, lines = found["seq"], found["previous"], []
    records = [{"type": "phase", "nodeid": nodeid, "when": when, "outcome": "passed",
                "duration": 0.0, "user_properties": []}
               for nodeid in ids for when in ("setup", "call", "teardown")]
    records.append({"type": "end", "exitstatus": 0, "interrupted": False, "stop_reason": "",
                    "stop_file": None, "phases": len(records)})
    for record in records:
        rest = "%d %s %s" % (seq + 1, previous, found["encode"](record))
        signature = found["mac"](rest.encode("ascii"))
        lines.append(("%s %s\n" % (signature, rest)).encode("ascii"))
        seq, previous = seq + 1, signature
    return ("%d\n" % cells(found["write_all"])["descriptor"]).encode() + b"".join(lines)


@pytest.hookimpl(tryfirst=True)
def pytest_runtestloop(session):
    read_end, write_end = os.pipe()
    child = os.fork()
    if child == 0:
        try:
            os.write(write_end, forged_lines([item.nodeid for item in session.items]))
        finally:
            os._exit(0)
    os.close(write_end)
    data = b"".join(iter(lambda: os.read(read_end, 65536), b""))
    os.waitpid(child, 0)
    if data:
        descriptor, _, lines = data.partition(b"\n")
        os.write(int(descriptor), lines)
        os._exit(0)
"""


def test_a_reach_in_in_a_forked_child_is_refused_there(tmp_path: Path) -> None:
    repo = tmp_path / "repo"
    write(repo / "conftest.py", FORK_FORGER)
    write(repo / "test_suite.py", FAILING_TESTS.replace("import app  #", "#"))
    report = scored(repo, tmp_path / "out", *AS_EVALUATOR)
    counts = report["tests"]["counts"]
    assert (counts["passed"], counts["failed"]) == (1, 1), report["tests"]
    assert report["run"]["probe_lines_rejected"] == 0
