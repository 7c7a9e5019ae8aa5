"""Tests work on the database of $DATABASE_URL; each starts by removing the accounts tests make."""

from __future__ import annotations

import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).parent.parent))

import app  # noqa: E402


@pytest.fixture
def conn() -> Iterator[app.psycopg.Connection]:
    connection = app.connect()
    # Accounts made by earlier runs go first, so every run ends with the same rows.
    connection.execute(r"DELETE FROM users WHERE username LIKE 'test\_%'")
    connection.commit()
    yield connection
    connection.close()


@pytest.fixture
def mail_server() -> None:
    raise ConnectionRefusedError("no mail server in the test environment")
