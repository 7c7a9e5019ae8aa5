"""A tiny user-account application on SQLite (refactored: one query helper, same behaviour)."""

from __future__ import annotations

import hashlib
import hmac
import secrets
import sqlite3
from pathlib import Path

DATABASE = Path(__file__).with_name("users.db")
ROLES = ("user", "admin")
ITERATIONS = 1000


def connect(path: Path = DATABASE) -> sqlite3.Connection:
    return sqlite3.connect(path)


def init_db(path: Path = DATABASE) -> None:
    """Create the database with two seeded accounts (how users.db was made)."""
    with connect(path) as conn:
        conn.execute(
            "CREATE TABLE users (id INTEGER PRIMARY KEY, username TEXT UNIQUE NOT NULL,"
            " password_hash TEXT NOT NULL, role TEXT NOT NULL DEFAULT 'user')"
        )
        register(conn, "alice", "correct horse", role="admin")
        register(conn, "bob", "battery staple")


def _check_role(role: str) -> None:
    if role not in ROLES:
        raise ValueError(f"unknown role {role!r}")


def _column(conn: sqlite3.Connection, column: str, username: str) -> str | None:
    row = conn.execute(f"SELECT {column} FROM users WHERE username = ?", (username,)).fetchone()
    return None if row is None else str(row[0])


def _write(conn: sqlite3.Connection, sql: str, *params: object) -> sqlite3.Cursor:
    cursor = conn.execute(sql, params)
    conn.commit()
    return cursor


def hash_password(password: str, salt: str | None = None) -> str:
    """``salt$digest``; the salt is random (fixed under ``--score-deterministic``)."""
    salt = salt or secrets.token_hex(8)
    digest = hashlib.pbkdf2_hmac("sha256", password.encode(), salt.encode(), ITERATIONS)
    return f"{salt}${digest.hex()}"


def check_password(password: str, stored: str) -> bool:
    salt, _, _ = stored.partition("$")
    return hmac.compare_digest(hash_password(password, salt), stored)


def register(conn: sqlite3.Connection, username: str, password: str, role: str = "user") -> int:
    _check_role(role)
    cursor = _write(
        conn,
        "INSERT INTO users (username, password_hash, role) VALUES (?, ?, ?)",
        username,
        hash_password(password),
        role,
    )
    return int(cursor.lastrowid or 0)


def login(conn: sqlite3.Connection, username: str, password: str) -> bool:
    stored = _column(conn, "password_hash", username)
    return stored is not None and check_password(password, stored)


def change_password(conn: sqlite3.Connection, username: str, old: str, new: str) -> None:
    if not login(conn, username, old):
        raise PermissionError("wrong password")
    _write(
        conn, "UPDATE users SET password_hash = ? WHERE username = ?", hash_password(new), username
    )


def change_role(conn: sqlite3.Connection, actor: str, username: str, role: str) -> None:
    """Only an admin may change someone's role."""
    _check_role(role)
    if _column(conn, "role", actor) != "admin":
        raise PermissionError(f"{actor} is not an admin")
    _write(conn, "UPDATE users SET role = ? WHERE username = ?", role, username)
