"""Databases an evaluator is still using, told from those a killed evaluator left behind.

A database of ours (a session's snapshot, a run's clone) is *claimed* while it lives: an
admin session whose ``application_name`` is the database's name stays open until the
database is dropped. An evaluator that was killed leaves its databases unclaimed (the
server ends its sessions with it), and :func:`sweep` drops exactly those. The claim is made
before the database, so a sweep never takes another evaluator's database for a leftover (no
lock orders them: the application's role could take any advisory lock on the admin's
database and hold it from a backend left running). Only sessions of the admin role, or of a
superuser, claim: the application cannot keep a leftover alive by naming its own connection
after it.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any
from typing import TypeVar

import psycopg
from psycopg import sql

from pytest_scoring.db.postgres import admin
from pytest_scoring.errors import DatabaseError

_Made = TypeVar("_Made")


def claimed(
    admin_url: str, kind: str, make: Callable[[str], _Made]
) -> tuple[_Made, psycopg.Connection[Any]]:
    """Claim a new name of ``kind``, then ``make(name)`` the database of that name.

    :returns: what ``make`` returned, and the session claiming it: close it once the
        database is dropped.
    """
    name = admin.new_name(kind)
    session = admin.connect(admin_url)
    try:
        session.execute(sql.SQL("SET application_name = {}").format(sql.Literal(name)))
        return make(name), session
    except BaseException:
        session.close()
        raise


def sweep(admin_url: str, prefix: str) -> list[str]:
    """Drop the databases named ``prefix…`` that no live evaluator claims (and the role of
    ours owning one, a clone's): a killed evaluator left them behind.

    Only databases owned by the admin role or by a role of ours are considered: one the
    application made under such a name is not dropped.

    :returns: the databases dropped.
    """
    if not prefix.startswith(admin.PREFIX):
        raise ValueError(f"{prefix!r}: a sweep drops only names starting with {admin.PREFIX!r}")
    with admin.connect(admin_url) as session:
        leftovers = session.execute(
            "SELECT d.datname, r.rolname, r.rolname = current_user FROM pg_database d "
            "JOIN pg_roles r ON r.oid = d.datdba WHERE d.datname LIKE %(prefix)s "
            "AND (r.rolname = current_user OR r.rolname LIKE %(ours)s) AND d.datname NOT IN "
            "(SELECT a.application_name FROM pg_stat_activity a JOIN pg_roles c "
            "ON c.oid = a.usesysid WHERE c.rolname = current_user OR c.rolsuper)",
            {"prefix": _like(prefix), "ours": _like(admin.PREFIX)},
        ).fetchall()
    dropped = []
    for name, owner, admins in leftovers:
        try:
            admin.drop(admin_url, name, None if admins else owner)
        except (psycopg.Error, DatabaseError):
            continue  # another evaluator's sweep dropped it meanwhile
        dropped.append(name)
    return dropped


def _like(prefix: str) -> str:
    """A ``LIKE`` pattern for the names starting with ``prefix``."""
    return prefix.replace("\\", "\\\\").replace("_", "\\_").replace("%", "\\%") + "%"
