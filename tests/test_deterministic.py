"""``--score-deterministic``: salts and tokens repeat across runs, and only during the session."""

from __future__ import annotations

import secrets

import bcrypt
import pytest

from pytest_scoring.kit.deterministic import DeterministicGenerators
from pytest_scoring.kit.deterministic import fixed_gensalt

WRITES_TOKENS = """
    import secrets
    from pathlib import Path

    import bcrypt

    def record(request, name):
        hashed = bcrypt.hashpw(b"hunter2", bcrypt.gensalt(4)).decode()
        tokens = [secrets.token_hex(8), secrets.token_urlsafe(), secrets.token_bytes().hex()]
        Path(request.config.rootpath, name).write_text(" ".join([*tokens, hashed]))

    def test_first(request):
        record(request, "first.txt")

    def test_second(request):
        record(request, "second.txt")
"""


def run_and_read(pytester: pytest.Pytester, *args: str) -> tuple[str, str]:
    pytester.runpytest(*args).assert_outcomes(passed=2)
    return (pytester.path / "first.txt").read_text(), (pytester.path / "second.txt").read_text()


def test_the_fixed_salt_is_a_salt_bcrypt_accepts_with_the_callers_cost() -> None:
    salt = fixed_gensalt(rounds=4)
    assert salt.startswith(b"$2b$04$")
    assert bcrypt.checkpw(b"pw", bcrypt.hashpw(b"pw", salt))


def test_each_test_gets_the_same_tokens_whatever_ran_before_it() -> None:
    generators = DeterministicGenerators()
    generators.reseed("tests/test_a.py::test_one")
    first = generators.token_hex(8)
    generators.token_bytes(100)
    generators.reseed("tests/test_a.py::test_one")
    assert generators.token_hex(8) == first
    generators.reseed("tests/test_a.py::test_two")
    assert generators.token_hex(8) != first


def test_hashes_and_tokens_repeat_from_run_to_run(pytester: pytest.Pytester) -> None:
    pytester.makepyfile(WRITES_TOKENS)
    first_run = run_and_read(pytester, "--score-deterministic", "-p", "no:xdist")
    assert run_and_read(pytester, "--score-deterministic", "-p", "no:xdist") == first_run
    assert first_run[0] != first_run[1], "two tests must not share their tokens"


@pytest.mark.slow
def test_xdist_workers_draw_the_same_values_as_a_single_process(pytester: pytest.Pytester) -> None:
    pytester.makepyfile(WRITES_TOKENS)
    single = run_and_read(pytester, "--score-deterministic", "-p", "no:xdist")
    assert run_and_read(pytester, "--score-deterministic", "-n", "2") == single


def test_without_the_option_salts_stay_random(pytester: pytest.Pytester) -> None:
    pytester.makepyfile(WRITES_TOKENS)
    assert run_and_read(pytester) != run_and_read(pytester)


def test_the_real_generators_are_back_after_the_session(pytester: pytest.Pytester) -> None:
    originals = (secrets.token_hex, secrets.token_bytes, secrets.token_urlsafe, bcrypt.gensalt)
    pytester.makepyfile(WRITES_TOKENS)
    run_and_read(pytester, "--score-deterministic")
    assert (secrets.token_hex, secrets.token_bytes, secrets.token_urlsafe, bcrypt.gensalt) == (
        originals
    )
