"""What an in-process source module can still do unseen: the residual list of
docs/security.md#what-in-process-code-can-still-do, measured.

Each test is one entry of the list: the attack works (the score is above the truth) and no
signal says so. If one of these starts to fail because the attack is seen, the limit moved:
update the list in docs/security.md with the test.

Every repository here has honest tests (``tests/test_calc.py``, 2 of 4 pass: the truth is
50 %) and a hostile source module (``calc.py``) that the tests import.
"""

from __future__ import annotations

import textwrap
from pathlib import Path
from typing import Any

import pytest
from runs import AS_OTHER_USERS
from runs import SYSTEM_PYTHON
from runs import only_report
from runs import run_cli

#: Full containment (an interpreter the children's user can run): no signal at all is due.
pytestmark = [pytest.mark.slow, *AS_OTHER_USERS]

TRUTH = 50.0
HONEST_TESTS = """
    import sys
    from pathlib import Path
    sys.path.insert(0, str(Path(__file__).parents[1]))
    import calc
    from helpers import expect

    def test_add():
        assert calc.add(2, 2) == 4

    def test_sub():
        assert calc.sub(5, 3) == 2

    def test_mul():
        expect(calc.mul(2, 3), 6)

    def test_div():
        expect(calc.div(6, 3), 2)
"""
HELPERS = """
    def expect(got, wanted):
        assert got == wanted, f"{got} != {wanted}"
"""
#: A calc.py with the right add and sub and wrong mul and div, before each attack.
HONEST_PART = """
    def add(a, b):
        return a + b

    def sub(a, b):
        return a - b
"""
WRONG_PART = """
    def mul(a, b):
        return a + b

    def div(a, b):
        return a - b
"""


def scored(tmp_path: Path, *calc: str) -> dict[str, Any]:
    """The report of the honest tests run against ``calc.py`` made of ``calc``'s parts."""
    repo = tmp_path / "repo"
    for path, text in {
        "calc.py": "".join(textwrap.dedent(part) for part in calc),
        "tests/test_calc.py": textwrap.dedent(HONEST_TESTS),
        "tests/helpers.py": textwrap.dedent(HELPERS),
    }.items():
        (repo / path).parent.mkdir(parents=True, exist_ok=True)
        (repo / path).write_text(text)
    result = run_cli(repo, "--report", tmp_path / "out", "--python", SYSTEM_PYTHON)
    assert result.exit_code in (0, 1), result.output
    return only_report(tmp_path / "out")


def unseen(report: dict[str, Any]) -> None:
    """The score is above the truth and no signal says why."""
    assert report["containment"] == "full"
    assert report["scores"]["percent_passing_tests"]["value"] == 100.0, report["integrity"]
    assert report["integrity"] == []


def test_i_walking_frames_a_source_module_marks_a_failing_test_expected_to_fail(
    tmp_path: Path,
) -> None:
    # f_back and f_locals raise no audit event: the module finds the test's item in pytest's
    # frames and marks it xfail, so its failure counts as expected (and the score leaves it
    # out). No patch, nothing the tripwire sees.
    report = scored(
        tmp_path,
        HONEST_PART,
        """
    import sys
    import pytest

    def _excuse():
        frame = sys._getframe(0)  # its own frame: honest code does this every day
        while frame is not None:
            item = frame.f_locals.get("item") or frame.f_locals.get("pyfuncitem")
            if item is not None and hasattr(item, "add_marker"):
                item.add_marker(pytest.mark.xfail(reason="excused"))
                return
            frame = frame.f_back

    def mul(a, b):
        _excuse()
        return a + b

    def div(a, b):
        _excuse()
        return a - b
    """,
    )
    assert report["tests"]["counts"]["xfailed"] == 2
    unseen(report)


def test_i_reading_closures_a_source_module_forges_the_stream_from_the_probes_memory(
    tmp_path: Path,
) -> None:
    # __closure__ and cell contents raise no audit event: the module reads the channel's MAC
    # and chain from the probe's hook (found through the test's item, found through f_back)
    # and writes well-formed records itself, then ends the process.
    report = scored(
        tmp_path,
        HONEST_PART,
        WRONG_PART,
        """
    import json, os, sys

    def _cells(function):
        return [cell.cell_contents for cell in function.__closure__ or ()]

    def _forge():
        frame = sys._getframe(0)
        while "item" not in frame.f_locals:
            frame = frame.f_back
        item = frame.f_locals["item"]
        hook = item.config.pluginmanager.hook.pytest_runtest_logreport
        probe = next(i.function for i in hook.get_hookimpls() if "probe" in i.function.__qualname__)
        state = next(v for v in _cells(probe) if isinstance(v, dict) and "phases" in v)
        send = next(v for v in _cells(probe) if getattr(v, "__name__", "") == "send")
        inside = {getattr(v, "__name__", None): v for v in _cells(send)}
        mac, write_all = inside["mac"], inside["write_all"]
        previous = next(v for v in _cells(send) if isinstance(v, str) and len(v) == 64)
        seq = next(v for v in _cells(send) if type(v) is int and v != os.getpid())
        records = [_phase(item.nodeid, "call"), _phase(item.nodeid, "teardown")]
        for other in item.session.items[item.session.items.index(item) + 1 :]:
            records += [_phase(other.nodeid, when) for when in ("setup", "call", "teardown")]
        records.append({"type": "end", "exitstatus": 0, "interrupted": False, "stop_reason": "",
                        "stop_file": None, "phases": state["phases"] + len(records)})
        for record in records:
            rest = f"{seq + 1} {previous} {json.dumps(record)}"
            previous, seq = mac(rest.encode("ascii")), seq + 1
            write_all(f"{previous} {rest}\\n".encode("ascii"))
        os._exit(0)

    def _phase(nodeid, when):
        return {"type": "phase", "nodeid": nodeid, "when": when, "outcome": "passed",
                "duration": 0.0, "user_properties": []}

    def add(a, b):
        _forge()
    """,
    )
    assert report["tests"]["counts"]["passed"] == 4
    unseen(report)


#: (ii): the code under test lies about its results; pytest and the probe are untouched.
LIES = {
    "an __eq__ that is always true": (
        """
        class Anything(int):
            def __eq__(self, other):
                return True

        def mul(a, b):
            return Anything(a + b)

        def div(a, b):
            return Anything(a - b)
        """,
    ),
    "the test's inputs special-cased": (
        """
        def mul(a, b):
            return 6 if (a, b) == (2, 3) else a + b

        def div(a, b):
            return 2 if (a, b) == (6, 3) else a - b
        """,
    ),
    "the test's own helper patched": (
        WRONG_PART,
        """
        import helpers

        # The tests' own helper, replaced before the tests take it.
        helpers.expect = lambda got, wanted: None
        """,
    ),
}


@pytest.mark.parametrize("lie", list(LIES))
def test_ii_a_source_module_changes_what_the_code_under_test_returns(
    tmp_path: Path, lie: str
) -> None:
    unseen(scored(tmp_path, HONEST_PART, *LIES[lie]))
