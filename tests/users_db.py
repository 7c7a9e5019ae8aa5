"""The users database that hostile-repository tests attack: alice and bob, hash ``h0``."""

from __future__ import annotations

import contextlib
import sqlite3
from pathlib import Path


def make_users_db(path: Path) -> Path:
    """A users table with alice and bob, at ``path``."""
    path.parent.mkdir(parents=True, exist_ok=True)
    path.unlink(missing_ok=True)
    with contextlib.closing(sqlite3.connect(path)) as db:
        db.execute("CREATE TABLE users (id INTEGER PRIMARY KEY, name TEXT, password_hash TEXT)")
        db.executemany(
            "INSERT INTO users (name, password_hash) VALUES (?, 'h0')", [("alice",), ("bob",)]
        )
        db.commit()
    return path


def alice_hash(path: Path) -> str:
    """The truth, from the database file itself."""
    with contextlib.closing(sqlite3.connect(path)) as db:
        (value,) = db.execute("SELECT password_hash FROM users WHERE name = 'alice'").fetchone()
    return str(value)
