"""A tiny user-account application on SQLite: register, log in, change password or role."""

from __future__ import annotations

import hashlib
import hmac
import secrets
import sqlite3
from pathlib import Path

DATABASE = Path(__file__).with_name("users.db")
ROLES = ("user", "admin")


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


def hash_password(password: str, salt: str | None = None) -> str:
    """``salt$digest``; the salt is random (fixed under ``--score-deterministic``)."""
    salt = salt or secrets.token_hex(8)
    digest = hashlib.pbkdf2_hmac("sha256", password.encode(), salt.encode(), 1000).hex()
    return f"{salt}${digest}"


def check_password(password: str, stored: str) -> bool:
    salt = stored.split("$", 1)[0]
    return hmac.compare_digest(hash_password(password, salt), stored)


def register(conn: sqlite3.Connection, username: str, password: str, role: str = "user") -> int:
    _check_role(role)
    cursor = conn.execute(
        "INSERT INTO users (username, password_hash, role) VALUES (?, ?, ?)",
        (username, hash_password(password), role),
    )
    conn.commit()
    return int(cursor.lastrowid or 0)


def login(conn: sqlite3.Connection, username: str, password: str) -> bool:
    row = conn.execute("SELECT password_hash FROM users WHERE username = ?", (username,)).fetchone()
    return row is not None and check_password(password, row[0])


def change_password(conn: sqlite3.Connection, username: str, old: str, new: str) -> None:
    if not login(conn, username, old):
        raise PermissionError("wrong password")
    conn.execute(
        "UPDATE users SET password_hash = ? WHERE username = ?", (hash_password(new), username)
    )
    conn.commit()


def change_role(conn: sqlite3.Connection, actor: str, username: str, role: str) -> None:
    """Only an admin may change someone's role."""
    _check_role(role)
    row = conn.execute("SELECT role FROM users WHERE username = ?", (actor,)).fetchone()
    if row is None or row[0] != "admin":
        raise PermissionError(f"{actor} is not an admin")
    conn.execute("UPDATE users SET role = ? WHERE username = ?", (role, username))
    conn.commit()
