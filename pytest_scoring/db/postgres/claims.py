"""Databases an evaluator is still using, told from those a killed evaluator left behind.

A database of ours (a session's snapshot, a run's clone) is *claimed* while it lives: an
admin session whose ``application_name`` is the database's name stays open until the
database is dropped. An evaluator that was killed leaves its databases unclaimed (the
server ends its sessions with it), and :func:`sweep` drops exactly those. An advisory lock
makes a database's creation and its claim one step, so a sweep never takes another
evaluator's database for a leftover. Only sessions of the admin role, or of a superuser,
claim: the application cannot keep a leftover alive by naming its own connection after it.
"""

from __future__ import annotations

from collections.abc import Callable
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any
from typing import Final
from typing import TypeVar

import psycopg
from psycopg import sql

from pytest_scoring.db.postgres import admin

#: The advisory lock held while a database is made and claimed, or while leftovers are swept.
CLAIM_LOCK: Final = 0x7079_7363_6C6E  # "pyscln"

_Made = TypeVar("_Made")


@contextmanager
def _locked(session: psycopg.Connection[Any]) -> Iterator[None]:
    session.execute("SELECT pg_advisory_lock(%s)", (CLAIM_LOCK,))
    yield
    session.execute("SELECT pg_advisory_unlock(%s)", (CLAIM_LOCK,))


def claimed(
    admin_url: str, make: Callable[[], _Made], name: Callable[[_Made], str]
) -> tuple[_Made, psycopg.Connection[Any]]:
    """``make()`` a database and claim it (``name`` tells its name) in one locked step.

    :returns: what ``make`` returned, and the session claiming it: close it once the
        database is dropped.
    """
    session = admin.connect(admin_url)
    try:
        with _locked(session):
            made = make()
            session.execute(sql.SQL("SET application_name = {}").format(sql.Literal(name(made))))
    except BaseException:
        session.close()
        raise
    return made, session


def locked(admin_url: str, step: Callable[[], _Made]) -> _Made:
    """``step()`` while no database of ours is made or swept on this server."""
    with admin.connect(admin_url) as session, _locked(session):
        return step()


def sweep(admin_url: str, prefix: str) -> list[str]:
    """Drop the databases named ``prefix…`` that no live evaluator claims (and the role of
    ours owning one, a clone's): a killed evaluator left them behind.

    Only databases owned by the admin role or by a role of ours are considered (as
    :func:`~pytest_scoring.db.postgres.admin.sweep` does).

    :returns: the databases dropped.
    """
    if not prefix.startswith(admin.PREFIX):
        raise ValueError(f"{prefix!r}: a sweep drops only names starting with {admin.PREFIX!r}")
    dropped = []
    with admin.connect(admin_url) as session, _locked(session):
        leftovers = session.execute(
            "SELECT d.datname, r.rolname, r.rolname = current_user FROM pg_database d "
            "JOIN pg_roles r ON r.oid = d.datdba WHERE d.datname LIKE %(prefix)s "
            "AND (r.rolname = current_user OR r.rolname LIKE %(ours)s) AND d.datname NOT IN "
            "(SELECT a.application_name FROM pg_stat_activity a JOIN pg_roles c "
            "ON c.oid = a.usesysid WHERE c.rolname = current_user OR c.rolsuper)",
            {"prefix": _like(prefix), "ours": _like(admin.PREFIX)},
        ).fetchall()
        for name, owner, admins in leftovers:
            admin.drop(admin_url, name, None if admins else owner)
            dropped.append(name)
    return dropped


def _like(prefix: str) -> str:
    """A ``LIKE`` pattern for the names starting with ``prefix``."""
    return prefix.replace("\\", "\\\\").replace("_", "\\_").replace("%", "\\%") + "%"
