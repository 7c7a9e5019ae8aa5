"""``pytest-scoring run`` against repositories that attack the probe's channel.

Each test builds a small hostile repository whose truth is 3 of 5 expected tests passing
(60 %), scores it with ``run --expected-tests``, and checks that the score is the truth or
``"N"`` with ``stream_forged`` or ``exit_mismatch``, and that the tally never counts more
passes than the truth. The forgers know the protocol from the kit's source
(``kit/channel.py``) but not the run's key: they do not read the probe's memory.

Under ``--strict=stream_forged,exit_mismatch`` "N" comes from those two kinds alone.
"""

from __future__ import annotations

import textwrap
from pathlib import Path
from typing import Any

import pytest
from runs import AS_EVALUATOR
from runs import AS_OTHER_USERS
from runs import SYSTEM_PYTHON
from runs import only_report
from runs import run_cli

from pytest_scoring.process.users import FIRST_UID

pytestmark = pytest.mark.slow

SUITE = """
def test_one(): pass
def test_two(): pass
def test_three(): pass
def test_four(): assert False, "the truth: this fails"
def test_five(): assert False, "the truth: this fails"
"""
IDS = [f"test_suite.py::test_{name}" for name in ("one", "two", "three", "four", "five")]
TRUTH = 60.0
TAMPERING = {"stream_forged", "exit_mismatch"}

#: What every forger shares: perfectly formed lines for every collected test (each phase
#: passed), then the probe's end record, numbered where the probe's own lines stop, each with
#: a MAC under the only key the forger has: one it made up.
FORGED_LINES = """
import hmac, json, os, stat, sys
import pytest

COLLECT_REPORTS = []

def pytest_collectreport(report):
    COLLECT_REPORTS.append(report.nodeid)

def forged_lines(session):
    key = os.urandom(32)  # the run's key never reaches the repository
    seq = 1 + len(COLLECT_REPORTS) + 1  # start, one line per collector, collected
    previous, lines, phases = "0" * 64, [], 0
    records = []
    for item in session.items:
        for when in ("setup", "call", "teardown"):
            records.append({"type": "phase", "nodeid": item.nodeid, "when": when,
                            "outcome": "passed", "duration": 0.0, "user_properties": []})
            phases += 1
    records.append({"type": "end", "exitstatus": 0, "interrupted": False,
                    "stop_reason": "", "stop_file": None, "phases": phases})
    for record in records:
        seq += 1
        rest = "%d %s %s" % (seq, previous, json.dumps(record))
        previous = hmac.new(key, rest.encode(), "sha256").hexdigest()
        lines.append(("%s %s\\n" % (previous, rest)).encode())
    return b"".join(lines)

def write_to_every_pipe(data, path="/proc/self/fd"):
    for fd in range(3, 1024):
        try:
            if path == "/proc/self/fd":
                if stat.S_ISFIFO(os.fstat(fd).st_mode):
                    os.write(fd, data)
            elif stat.S_ISFIFO(os.stat("%s/%d" % (path, fd)).st_mode):
                out = os.open("%s/%d" % (path, fd), os.O_WRONLY | os.O_NONBLOCK)
                os.write(out, data)
                os.close(out)
        except OSError:
            continue
"""
FORGERS = {
    "descriptors found with fstat": """
        @pytest.hookimpl(tryfirst=True)
        def pytest_runtestloop(session):
            write_to_every_pipe(forged_lines(session))
            os._exit(0)
    """,
    "a subprocess through /proc/ppid/fd": """
        import inspect, subprocess

        @pytest.hookimpl(tryfirst=True)
        def pytest_runtestloop(session):
            script = "import os, stat, sys\\n" + inspect.getsource(write_to_every_pipe)
            script += "write_to_every_pipe(sys.stdin.buffer.read(), '/proc/%d/fd')" % os.getpid()
            subprocess.run([sys.executable, "-c", script], input=forged_lines(session))
            os._exit(0)
    """,
    "a forked child": """
        @pytest.hookimpl(tryfirst=True)
        def pytest_runtestloop(session):
            data = forged_lines(session)
            child = os.fork()
            if child == 0:
                write_to_every_pipe(data)
                os._exit(0)
            os.waitpid(child, 0)
            os._exit(0)
    """,
}
#: As root, the children run as root (the test's folders are closed to others); as "nobody"
#: with Debian's interpreter the non-dumpable test process is closed to its subprocesses.
USERS = {
    "as the evaluator": AS_EVALUATOR,
    "as nobody": ["--python", str(SYSTEM_PYTHON)],
}


def write(path: Path, text: str) -> None:
    path.write_text(textwrap.dedent(text))


def hostile_repository(tmp_path: Path, conftest: str) -> Path:
    repo = tmp_path / "repo"
    repo.mkdir()
    write(repo / "test_suite.py", SUITE)
    write(repo / "conftest.py", conftest)
    return repo


def score(tmp_path: Path, repo: Path, *args: str) -> dict[str, Any]:
    ids = tmp_path / "ids.txt"
    ids.write_text("\n".join(IDS) + "\n")
    result = run_cli(repo, "--report", tmp_path / "out", "--expected-tests", ids, *args)
    assert result.exception is None or isinstance(result.exception, SystemExit), result.output
    return only_report(tmp_path / "out")


def kinds(report: dict[str, Any]) -> set[str]:
    return {signal["kind"] for signal in report["integrity"]}


def user_marks(user: str) -> list[pytest.MarkDecorator]:
    return AS_OTHER_USERS if user == "as nobody" else []


@pytest.mark.parametrize(
    "user", [pytest.param(name, marks=user_marks(name)) for name in USERS], ids=list(USERS)
)
@pytest.mark.parametrize("forger", sorted(FORGERS))
def test_a_forger_that_knows_the_protocol_but_not_the_key_scores_no_answer(
    tmp_path: Path, forger: str, user: str
) -> None:
    repo = hostile_repository(tmp_path, FORGED_LINES + textwrap.dedent(FORGERS[forger]))
    report = score(tmp_path, repo, *USERS[user])
    # 15 phases and an end record reached the stream and failed to verify; as nobody, a
    # subprocess cannot even open the pipe (the evaluator's) through /proc.
    closed = user == "as nobody" and "subprocess" in forger
    assert report["run"]["probe_lines_rejected"] == (0 if closed else 16)
    assert report["tests"]["counts"]["passed"] <= 3
    assert kinds(report) & TAMPERING, report["integrity"]
    for name in ("percent_passing_tests", "all_tests_pass", "percent_failing_tests"):
        assert report["scores"][name]["value"] == "N", report["scores"][name]
    assert report["complete"] is False


PEEKS_AT_ITS_PARENT = '''
import os, subprocess, sys

PEEK = """
import os, sys
pid = sys.argv[1]
for path in ("/proc/%s/fd" % pid, "/proc/%s/mem" % pid, "/proc/%s/environ" % pid):
    try:
        os.listdir(path) if path.endswith("fd") else open(path, "rb").read(1)
    except PermissionError:
        continue
    sys.exit(path + " is open to another process of the same user")
"""

def test_a_subprocess_cannot_see_the_test_processs_descriptors_nor_memory():
    peek = subprocess.run([sys.executable, "-c", PEEK, str(os.getpid())])
    assert peek.returncode == 0
'''


@AS_OTHER_USERS[0]
@AS_OTHER_USERS[1]
def test_the_test_process_is_closed_to_its_subprocesses(tmp_path: Path) -> None:
    # Its memory holds the run's key: no other process of its user may read it.
    repo = tmp_path / "repo"
    repo.mkdir()
    write(repo / "test_peek.py", PEEKS_AT_ITS_PARENT)
    result = run_cli(repo, "--report", tmp_path / "out", "--python", SYSTEM_PYTHON)
    report = only_report(tmp_path / "out")
    assert int(report["run"]["user"]) >= FIRST_UID, result.output
    assert report["tests"]["counts"]["passed"] == 1, report["tests"]["tests"]


LOOKS_FOR_THE_PROBE = """
import importlib.util, os, sys

def test_no_module_of_the_channel_is_importable_or_imported_by_name():
    for name in ("probe", "channel", "launch"):
        assert importlib.util.find_spec("_pytest_scoring_" + name) is None, name
        assert "_pytest_scoring_" + name not in sys.modules, name

def test_no_environment_variable_names_the_channel():
    assert not [name for name in os.environ if "PROBE" in name], os.environ
"""


def test_nothing_in_the_test_process_names_the_channel_or_the_probe(tmp_path: Path) -> None:
    repo = tmp_path / "repo"
    repo.mkdir()
    write(repo / "test_looks.py", LOOKS_FOR_THE_PROBE)
    run_cli(repo, "--report", tmp_path / "out", *AS_EVALUATOR)
    tests = only_report(tmp_path / "out")["tests"]["tests"]
    assert [test["outcome"] for test in tests] == ["passed", "passed"], tests


#: Replaces everything it can find that writes, encodes or signs the probe's lines, so that
#: every ``failed`` goes out as ``passed`` and integrity lines are dropped; keeps any key that
#: passes through what it patched, and forges an all-passing stream with it at the end.
PATCHES_THE_WRITER = '''
import builtins, hashlib, hmac, importlib, json, os, sys
import pytest

STOLEN = []
SEEN = []
IDS = []
FOUND = []

def lie(text):
    return text.replace('"failed"', '"passed"') if isinstance(text, str) else text

def lying(function):
    def replacement(*args, **kwargs):
        result = function(*args, **kwargs)
        if isinstance(result, dict):
            if result.get("type") == "integrity":
                return None
            return {**result, "outcome": "passed"} if "outcome" in result else result
        return lie(result)
    return replacement

def stealing(function):
    def replacement(*args, **kwargs):
        STOLEN.extend(a for a in args if isinstance(a, bytes) and len(a) == 32)
        return function(*args, **kwargs)
    return replacement

def patch_object(owner):
    """Every function or method of a module or class, and its writers, made to lie."""
    for name in dir(owner):
        value = getattr(owner, name, None)
        if name.startswith("__") or not callable(value) or isinstance(value, type(sys)):
            continue
        try:
            setattr(owner, name, lying(value))
        except (AttributeError, TypeError):
            pass

def patch_everything_found(config=None):
    for name, module in list(sys.modules.items()):
        ours = name.startswith(("pytest_scoring", "_pytest_scoring"))
        if ours or hasattr(module, "phase_line") or hasattr(module, "Probe"):
            patch_object(module)
            for value in list(vars(module).values()):
                if isinstance(value, type):
                    patch_object(value)
    for name in ("_pytest_scoring_probe", "_pytest_scoring_channel", "_pytest_scoring_launch"):
        try:
            module = importlib.import_module(name)
        except Exception:
            continue
        patch_object(module)
        for value in list(vars(module).values()):
            if isinstance(value, type):
                patch_object(value)
    patch_object(sys.modules["__main__"])
    if config is not None:  # the probe's plugin object is the one of a kit module
        for plugin in config.pluginmanager.get_plugins():
            if type(plugin).__module__.startswith("_pytest_scoring"):
                FOUND.append(plugin)
                patch_object(plugin)
                patch_object(type(plugin))

# The shared machinery every writer might call.
json.dumps = lying(json.dumps)
json.JSONEncoder.encode = lying(json.JSONEncoder.encode)
hmac.new = stealing(hmac.new)
hmac.digest = stealing(hmac.digest)
hashlib.sha256 = stealing(hashlib.sha256)
real_write = os.write
def write(fd, data):
    SEEN.append(bytes(data))
    return real_write(fd, lie(bytes(data).decode("latin-1")).encode("latin-1"))
os.write = write
patch_everything_found()

def pytest_configure(config):
    patch_everything_found(config)

def pytest_collection_modifyitems(items):
    IDS.extend(item.nodeid for item in items)  # an outcome hook: an integrity line says so

def pytest_sessionstart(session):
    patch_everything_found(session.config)

@pytest.hookimpl(tryfirst=True)
def pytest_unconfigure(config):
    assert FOUND, "the probe's plugin object was found and patched"
    # With a stolen key, an all-passing stream that continues the chain it saw.
    lines = [line for chunk in SEEN for line in chunk.splitlines() if line.count(b" ") >= 3]
    for key in STOLEN[:1] if lines else []:
        mac, seq = lines[-1].split(b" ")[:2]
        previous, seq = mac.decode(), int(seq)
        for nodeid in IDS:
            seq += 1
            record = {"type": "phase", "nodeid": nodeid, "when": "call", "outcome": "passed"}
            rest = "%d %s %s" % (seq, previous, json.dumps(record))
            previous = hmac.HMAC(key, rest.encode(), "sha256").hexdigest()
            for fd in range(3, 1024):
                try:
                    real_write(fd, ("%s %s\\n" % (previous, rest)).encode())
                except OSError:
                    pass
'''


def test_a_conftest_that_patches_the_probes_writer_changes_no_outcome(tmp_path: Path) -> None:
    repo = hostile_repository(tmp_path, PATCHES_THE_WRITER)
    report = score(tmp_path, repo, *USERS["as the evaluator"])
    outcomes = {test["nodeid"]: test["outcome"] for test in report["tests"]["tests"]}
    assert outcomes == {**dict.fromkeys(IDS[:3], "passed"), **dict.fromkeys(IDS[3:], "failed")}
    # What it replaced of the kit is seen (the self-check), and proven tampering is "N".
    patched = [signal for signal in report["integrity"] if signal["kind"] == "patched"]
    assert patched and {signal["file"] for signal in patched} == {"conftest.py"}
    assert not kinds(report) & TAMPERING, report["integrity"]
    assert report["scores"]["percent_passing_tests"]["value"] == "N"
    assert report["run"]["probe_lines_rejected"] == 0
    hooks = [signal for signal in report["integrity"] if signal["kind"] == "outcome_hook"]
    assert hooks and hooks[0]["file"] == "conftest.py", "the integrity lines still arrive"


#: Feeds the probe instead of forging its lines: pytest reports made by the repository,
#: logged through pytest's own hook, for tests that never run.
FEEDS_THE_PROBE = {
    "from pytest_runtestloop": """
        import pytest
        from _pytest.reports import TestReport

        @pytest.hookimpl(tryfirst=True)
        def pytest_runtestloop(session):
            for item in session.items:
                for when in ("setup", "call", "teardown"):
                    report = TestReport(item.nodeid, item.location, {}, "passed", None, when)
                    session.config.hook.pytest_runtest_logreport(report=report)
            return True  # no test runs
    """,
    "from a test, for the tests after it": """
        import pytest
        from _pytest.reports import TestReport

        @pytest.fixture(autouse=True)
        def feed(request):
            session = request.session
            if request.node is session.items[0]:
                for item in session.items[3:]:  # the two failing tests
                    for when in ("setup", "call", "teardown"):
                        report = TestReport(item.nodeid, item.location, {}, "passed", None, when)
                        request.config.hook.pytest_runtest_logreport(report=report)
                del session.items[3:]  # and they never run
            yield
    """,
}


@pytest.mark.parametrize("feeder", sorted(FEEDS_THE_PROBE))
def test_reports_the_repository_makes_and_logs_itself_never_count(
    tmp_path: Path, feeder: str
) -> None:
    repo = hostile_repository(tmp_path, FEEDS_THE_PROBE[feeder])
    report = score(tmp_path, repo, *USERS["as the evaluator"])
    passed = [test["nodeid"] for test in report["tests"]["tests"] if test["outcome"] == "passed"]
    assert set(passed) <= set(IDS[:3])
    changed = [s for s in report["integrity"] if s["kind"] == "outcome_changed"]
    assert changed and "logged outside that test's run" in changed[0]["detail"]
    assert "exit_mismatch" in kinds(report), report["integrity"]
    assert report["scores"]["percent_passing_tests"]["value"] == "N"
