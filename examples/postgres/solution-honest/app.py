"""A tiny user-account application on PostgreSQL, at $DATABASE_URL (refactored: one query helper)."""

from __future__ import annotations

import hashlib
import hmac
import os
import secrets

import psycopg

ROLES = ("user", "admin")
ITERATIONS = 1000


def connect(url: str | None = None) -> psycopg.Connection:
    """The application's database: ``url``, else ``$DATABASE_URL``."""
    return psycopg.connect(url or os.environ["DATABASE_URL"])


def init_db(url: str | None = None) -> None:
    """Create the table with two seeded accounts (how the example's database is made)."""
    with connect(url) as conn:
        conn.execute(
            "CREATE TABLE users (id serial PRIMARY KEY, username TEXT UNIQUE NOT NULL,"
            " password_hash TEXT NOT NULL, role TEXT NOT NULL DEFAULT 'user')"
        )
        register(conn, "alice", "correct horse", role="admin")
        register(conn, "bob", "battery staple")


def _check_role(role: str) -> None:
    if role not in ROLES:
        raise ValueError(f"unknown role {role!r}")


def _column(conn: psycopg.Connection, column: str, username: str) -> str | None:
    row = conn.execute(f"SELECT {column} FROM users WHERE username = %s", (username,)).fetchone()
    return None if row is None else str(row[0])


def _write(conn: psycopg.Connection, sql: str, *params: object) -> psycopg.Cursor:
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


def register(conn: psycopg.Connection, username: str, password: str, role: str = "user") -> int:
    _check_role(role)
    cursor = _write(
        conn,
        "INSERT INTO users (username, password_hash, role) VALUES (%s, %s, %s) RETURNING id",
        username,
        hash_password(password),
        role,
    )
    row = cursor.fetchone()
    return int(row[0]) if row else 0


def login(conn: psycopg.Connection, username: str, password: str) -> bool:
    stored = _column(conn, "password_hash", username)
    return stored is not None and check_password(password, stored)


def change_password(conn: psycopg.Connection, username: str, old: str, new: str) -> None:
    if not login(conn, username, old):
        raise PermissionError("wrong password")
    _write(
        conn, "UPDATE users SET password_hash = %s WHERE username = %s", hash_password(new), username
    )


def change_role(conn: psycopg.Connection, actor: str, username: str, role: str) -> None:
    """Only an admin may change someone's role."""
    _check_role(role)
    if _column(conn, "role", actor) != "admin":
        raise PermissionError(f"{actor} is not an admin")
    _write(conn, "UPDATE users SET role = %s WHERE username = %s", role, username)
