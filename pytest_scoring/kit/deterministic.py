"""``--score-deterministic``: salt and token generators that give the same values in every run.

PYTEST_DONT_REWRITE (pytest never rewrites or warns about this module, whatever the
repository's ``filterwarnings`` says).

An application that hashes a password with a random salt writes a different stored value each
run, so the solution's run and the reference rerun would differ where nothing really changed.
While the session runs, ``bcrypt.gensalt`` (when bcrypt is installed) returns one fixed salt,
and ``secrets.token_bytes`` / ``token_hex`` / ``token_urlsafe`` draw from a generator seeded with
the current test's id, reseeded before each test: the n-th token of a test is the same in both
runs whatever the test order or the xdist worker. ``os.urandom`` (and so ``uuid.uuid4``) stays
real. Everything is restored when the session ends.

This module needs only the standard library and pytest and keeps to Python 3.8 syntax: under
``pytest-scoring run`` it is copied beside the launcher and loaded with ``-p`` in the child,
whichever interpreter runs the tests (docs/reference.md).
"""

from __future__ import annotations

import base64
import random
import secrets
from collections.abc import Callable
from typing import Any
from typing import Final

import pytest

PLUGIN_NAME: Final = "scoring-deterministic"
#: 22 characters of bcrypt's base64 alphabet; the last one carries 2 bits, so it is one of ``.Oeu``.
FIXED_BCRYPT_SALT: Final = b"pytestscoringfixedsalu"
#: Seed for tokens drawn outside any test (session fixtures, import time).
SESSION_SEED: Final = "pytest-scoring"
#: ``secrets.DEFAULT_ENTROPY``: bytes drawn when the caller gives no size.
DEFAULT_ENTROPY: Final = 32


def fixed_gensalt(rounds: int = 12, prefix: bytes = b"2b") -> bytes:
    """``bcrypt.gensalt`` with the caller's cost and prefix but always the same salt."""
    return b"$" + prefix + b"$" + b"%02d" % rounds + b"$" + FIXED_BCRYPT_SALT


class DeterministicGenerators:
    """Patches the generators while registered; reseeds them before each test."""

    def __init__(self) -> None:
        self._random = random.Random(SESSION_SEED)
        self._saved: list[tuple[Any, str, Callable[..., Any]]] = []

    def token_bytes(self, nbytes: int | None = None) -> bytes:
        size = DEFAULT_ENTROPY if nbytes is None else nbytes
        # What ``Random.randbytes`` (Python 3.9+) computes, written out for Python 3.8.
        return self._random.getrandbits(size * 8).to_bytes(size, "little") if size else b""

    def token_hex(self, nbytes: int | None = None) -> str:
        return self.token_bytes(nbytes).hex()

    def token_urlsafe(self, nbytes: int | None = None) -> str:
        return base64.urlsafe_b64encode(self.token_bytes(nbytes)).rstrip(b"=").decode("ascii")

    def reseed(self, seed: str) -> None:
        """Start the token sequence afresh (per test, so order and workers do not matter)."""
        self._random.seed(f"{SESSION_SEED}:{seed}")

    def install(self) -> None:
        """Replace the generators; :meth:`restore` puts the originals back."""
        self._patch(secrets, "token_bytes", self.token_bytes)
        self._patch(secrets, "token_hex", self.token_hex)
        self._patch(secrets, "token_urlsafe", self.token_urlsafe)
        try:
            import bcrypt
        except ImportError:  # bcrypt is optional: nothing to patch without it
            return
        self._patch(bcrypt, "gensalt", fixed_gensalt)

    def _patch(self, module: Any, name: str, replacement: Callable[..., Any]) -> None:
        self._saved.append((module, name, getattr(module, name)))
        setattr(module, name, replacement)

    def restore(self) -> None:
        while self._saved:
            module, name, original = self._saved.pop()
            setattr(module, name, original)

    # tryfirst: reseed before the test's fixtures run, since they may draw tokens too.
    @pytest.hookimpl(tryfirst=True)
    def pytest_runtest_setup(self, item: pytest.Item) -> None:
        self.reseed(item.nodeid)


def pytest_configure(config: pytest.Config) -> None:
    """Loaded by name with ``-p`` (in a child of ``pytest-scoring run``): patch at once."""
    install_deterministic(config)


def install_deterministic(config: pytest.Config) -> None:
    """Patch the generators for this pytest process until ``config`` is cleaned up."""
    generators = DeterministicGenerators()
    generators.install()
    config.pluginmanager.register(generators, PLUGIN_NAME)

    def uninstall() -> None:
        generators.restore()
        config.pluginmanager.unregister(name=PLUGIN_NAME)

    config.add_cleanup(uninstall)
