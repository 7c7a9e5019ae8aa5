"""Every cache the evaluator reads is the evaluator's (docs/security.md#keeping-the-caches-clean).

A repository whose tests pass 3 of 5 expected tests (the truth: 60 %) plants an entry of the
expected-tests cache that lists only its 3 passing tests: trusted, it would score 100 %.
"""

from __future__ import annotations

import json
import textwrap
from pathlib import Path
from typing import Any

import pytest
from runs import AS_EVALUATOR
from runs import AS_OTHER_USERS
from runs import ATTEMPT
from runs import SYSTEM_PYTHON
from runs import only_report
from runs import run_cli

from pytest_scoring.process import environment
from pytest_scoring.reference.expected import CACHE_KIND
from pytest_scoring.reference.expected import cache_key
from pytest_scoring.reference.private_cache import PrivateCache

pytestmark = pytest.mark.slow

NAMES = ("a", "b", "c", "d", "e")
IDS = [f"checks/test_suite.py::test_{name}" for name in NAMES]
#: The evaluator's folder: every test passes there.
EVALUATORS_SUITE = "".join(f"def test_{name}(): pass\n" for name in NAMES)
#: The scored repository: d and e fail.
REPOSITORYS_SUITE = EVALUATORS_SUITE.replace("test_d(): pass", "test_d(): assert False").replace(
    "test_e(): pass", "test_e(): assert False"
)
#: What the issue's repository did: the entry, in the cache's old layout, planted in a cache
#: inside the repository it points XDG_CACHE_HOME at, and in the user's real cache.
PLANTS_ENTRIES = """
    import json, os
    from pathlib import Path
    from pytest_scoring.reference.expected import cache_key

    key = cache_key(Path({folder!r}).resolve())
    entry = json.dumps({{"expected": {{i: "passed" for i in {passing!r}}}, "dropped": []}})
    real = Path(os.environ["XDG_CACHE_HOME"])
    os.environ["XDG_CACHE_HOME"] = str(Path(__file__).parent / "cache")
    for home in (real, Path(os.environ["XDG_CACHE_HOME"])):
        for route in ("", "in-process", "evaluator"):
            folder = home / "pytest-scoring" / "expected-tests" / route
            folder.mkdir(parents=True, exist_ok=True)
            (folder / f"{{key}}.json").write_text(entry)
"""
#: A repository that knows the new layout: it writes, with pytest-scoring's own code, an entry
#: that checks out where an in-process session keeps them (it runs as the evaluator's user).
PLANTS_A_VALID_ENTRY = """
    from pytest_scoring.reference.expected import CACHE_KIND
    from pytest_scoring.reference.private_cache import PrivateCache

    cache = PrivateCache.open(CACHE_KIND, "in-process", [])
    content = {{"expected": {{i: "passed" for i in {passing!r}}}, "dropped": []}}
    cache.write(f"{{key}}.json", cache.document(key, content))
"""


def make_suite(folder: Path, suite: str, conftest: str = "") -> Path:
    (folder / "checks").mkdir(parents=True, exist_ok=True)
    (folder / "checks" / "test_suite.py").write_text(suite)
    if conftest:
        (folder / "conftest.py").write_text(textwrap.dedent(conftest))
    return folder


@pytest.fixture
def evaluators_folder(tmp_path: Path) -> Path:
    return make_suite(tmp_path / "expected", EVALUATORS_SUITE)


def hostile_conftest(folder: Path, *parts: str) -> str:
    text = "".join(textwrap.dedent(part) for part in parts)
    return text.format(folder=str(folder), passing=IDS[:3])


def evaluator_cache(route: str) -> Path:
    """This test's evaluator cache of expected-tests entries for ``route``."""
    home = Path(environment.captured_environment()["XDG_CACHE_HOME"])
    return home / "pytest-scoring" / CACHE_KIND / route


def in_process_percent(pytester: pytest.Pytester, folder: Path) -> Any:
    """``pytest --score --score-expected-tests=FOLDER`` in a process of its own."""
    result = pytester.runpytest_subprocess(
        "--score", f"--score-expected-tests={folder}", "-p", "no:cacheprovider"
    )
    (report,) = (pytester.path / "scores").glob("scan_id=*")
    content = json.loads((report / "scores.json").read_text())
    assert content["scores"]["percent_passing_tests"]["value"] is not None, result.stdout.str()
    return content["scores"]["percent_passing_tests"]["value"]


def run_percent(repo: Path, folder: Path, reports: Path, *options: str) -> tuple[Any, str]:
    """``pytest-scoring run REPO --expected-tests FOLDER``: the score, and what it printed."""
    result = run_cli(repo, "--expected-tests", folder, "--report", reports, *options)
    assert result.exit_code == 0, result.output
    return only_report(reports)["scores"]["percent_passing_tests"]["value"], result.output


def test_in_process_a_conftest_cannot_point_the_cache_at_a_planted_entry(
    pytester: pytest.Pytester, evaluators_folder: Path
) -> None:
    conftest = hostile_conftest(evaluators_folder, PLANTS_ENTRIES)
    make_suite(pytester.path, REPOSITORYS_SUITE, conftest)
    assert in_process_percent(pytester, evaluators_folder) == 60
    planted = pytester.path / "cache" / "pytest-scoring" / CACHE_KIND / "in-process"
    assert len(list(planted.glob("*.json"))) == 1, "the repository did plant its entry"
    key = cache_key(evaluators_folder.resolve())
    kept = json.loads((evaluator_cache("in-process") / f"{key}.json").read_text())
    assert sorted(kept["content"]["expected"]) == IDS, "the evaluator kept its own run"


def test_what_an_in_process_session_wrote_never_decides_a_later_run(
    pytester: pytest.Pytester, evaluators_folder: Path, tmp_path: Path
) -> None:
    conftest = hostile_conftest(evaluators_folder, PLANTS_ENTRIES, PLANTS_A_VALID_ENTRY)
    make_suite(pytester.path, REPOSITORYS_SUITE, conftest)
    in_process_percent(pytester, evaluators_folder)
    key = cache_key(evaluators_folder.resolve())
    valid = PrivateCache.open(CACHE_KIND, "in-process", []).read(
        evaluator_cache("in-process") / f"{key}.json", key
    )
    assert valid is not None and sorted(valid["expected"]) == IDS[:3], "the attack was made"
    victim = make_suite(tmp_path / "victim", REPOSITORYS_SUITE)
    percent, output = run_percent(victim, evaluators_folder, tmp_path / "reports", *AS_EVALUATOR)
    assert percent == 60
    assert "discarded" in output, "the planted entry of run's own route is said"
    entry = json.loads((evaluator_cache("evaluator") / f"{key}.json").read_text())
    assert sorted(entry["content"]["expected"]) == IDS


def test_an_entry_that_does_not_match_its_hash_is_discarded_with_one_line(
    evaluators_folder: Path, tmp_path: Path
) -> None:
    victim = make_suite(tmp_path / "victim", REPOSITORYS_SUITE)
    first, output = run_percent(victim, evaluators_folder, tmp_path / "first", *AS_EVALUATOR)
    assert (first, "discarded" in output) == (60, False)
    (entry,) = evaluator_cache("evaluator").glob("*.json")
    document = json.loads(entry.read_text())
    document["content"]["expected"] = dict.fromkeys(IDS[:3], "passed")
    entry.write_text(json.dumps(document))
    second, output = run_percent(victim, evaluators_folder, tmp_path / "second", *AS_EVALUATOR)
    assert second == 60
    lines = [line for line in output.splitlines() if "discarded" in line]
    assert lines == [
        f"pytest-scoring: warning: the cache entry {entry} is discarded (its content does not "
        "match its hash): its result is computed again"
    ]
    assert sorted(json.loads(entry.read_text())["content"]["expected"]) == IDS, "recomputed"


POISONS_THE_CACHE = (
    """
    import json, os
    from pathlib import Path
"""
    + textwrap.indent(ATTEMPT, "    ")
    + """
    cache = Path(os.environ["XDG_CACHE_HOME"]) / "pytest-scoring" / "expected-tests"
    def plant():
        (cache / "evaluator" / ("0" * 64 + ".json")).write_text("{{}}")
    def replace_every_entry():
        for entry in (cache / "evaluator").iterdir():
            entry.write_text("{{}}")

    with open({log!r}, "a") as log:
        log.write(json.dumps([os.getuid(), attempt(plant), attempt(replace_every_entry)]) + "\\n")
"""
)


@AS_OTHER_USERS[0]
@AS_OTHER_USERS[1]
def test_under_run_the_repositorys_processes_cannot_write_the_cache(
    open_folder: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    home = open_folder / "cache"
    home.mkdir(mode=0o755)
    monkeypatch.setitem(environment._CAPTURED, "XDG_CACHE_HOME", str(home))
    log = open_folder / "attempts.jsonl"
    log.touch()
    log.chmod(0o666)
    folder = make_suite(tmp_path / "expected", EVALUATORS_SUITE)
    repo = make_suite(
        open_folder / "repo", REPOSITORYS_SUITE, POISONS_THE_CACHE.format(log=str(log))
    )
    python = ["--python", SYSTEM_PYTHON]
    percents = [
        run_percent(repo, folder, tmp_path / f"reports-{number}", *python)[0] for number in range(2)
    ]
    assert percents == [60, 60]
    attempts = [json.loads(line) for line in log.read_text().splitlines()]
    # Each run's session has a user of its own, never root.
    assert [uid != 0 for uid, *_ in attempts] == [True, True], attempts
    assert [tried for _, *tried in attempts] == [["refused (PermissionError)"] * 2] * 2
    assert (home / "pytest-scoring").stat().st_mode & 0o777 == 0o700


def test_a_cache_another_user_could_move_is_not_used(tmp_path: Path) -> None:
    shared = tmp_path / "shared"
    shared.mkdir()
    shared.chmod(0o777)  # writable by everyone, and not sticky: pytest-scoring/ could be moved
    cache = PrivateCache.open(CACHE_KIND, "evaluator", [], {"XDG_CACHE_HOME": str(shared)})
    assert (cache.folder, cache.problem) == (None, f"not used: {shared} is writable by other users")
    shared.chmod(0o1777)  # sticky, as /tmp is: only the owner may move what is in it
    cache = PrivateCache.open(CACHE_KIND, "evaluator", [], {"XDG_CACHE_HOME": str(shared)})
    assert cache.folder == shared / "pytest-scoring" / CACHE_KIND / "evaluator"


def test_an_entry_of_another_route_or_key_is_not_read(tmp_path: Path) -> None:
    environ = {"XDG_CACHE_HOME": str(tmp_path)}
    in_process = PrivateCache.open(CACHE_KIND, "in-process", [], environ)
    evaluator = PrivateCache.open(CACHE_KIND, "evaluator", [], environ)
    assert evaluator.folder is not None
    content = {"expected": {IDS[0]: "passed"}, "dropped": []}
    path = evaluator.folder / "k.json"
    path.write_bytes(in_process.document("k", content))
    assert evaluator.read(path, "k") is None
    assert not path.exists(), "discarded"
    path.write_bytes(evaluator.document("other", content))
    assert evaluator.read(path, "k") is None
    path.write_bytes(evaluator.document("k", content))
    assert evaluator.read(path, "k") == content
