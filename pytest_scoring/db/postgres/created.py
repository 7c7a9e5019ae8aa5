"""Databases a session creates on a server (docs/databases.md#created-databases).

A test may make databases of its own: Django's test runner makes ``test_<name>``, and keeps it
with ``--keepdb``. None of them is named by URL, so the evaluator watches the server while the
session runs: a thread polls ``pg_database`` on an admin connection and notes every database,
absent when the session started, that an application role of the session owns. What it saw
is listed, and what is still there at finish is diffed against nothing.
"""

from __future__ import annotations

import threading
from collections.abc import Collection
from dataclasses import dataclass
from typing import Any
from typing import Final

import psycopg

from pytest_scoring.db.postgres import admin
from pytest_scoring.errors import DatabaseError

#: Seconds between two looks at ``pg_database``: a database created and dropped in between
#: is not seen.
POLL: Final = 0.2
#: Every database, its owner and whether it takes connections; one catalog, shared by all.
_DATABASES: Final = (
    "SELECT oid, datname, pg_get_userbyid(datdba), datallowconn, current_user FROM pg_database"
)


@dataclass
class Created:
    """A database the session created, as last seen."""

    name: str
    owner: str
    #: Whether it was there at the last look (at finish: whether it still exists).
    present: bool = True
    #: Whether it takes connections (one that does not is opened for the admin's read only).
    allows_connections: bool = True


class CreatedWatch:
    """Watches one server for the databases the application's roles create.

    Never fails the session: a look that fails is retried at the next, and the first failure
    is kept in :attr:`error`.
    """

    def __init__(self, admin_url: str, roles: Collection[str]):
        """:param roles: the application's roles (a database they own is the session's)."""
        self.admin_url = admin_url
        self.roles = frozenset(roles)
        #: Why a look failed (the first failure), or None.
        self.error: str | None = None
        #: The databases there when watching began, by oid; None: that look failed.
        self._initial: frozenset[int] | None = None
        #: What the session created, by oid (a database renamed keeps its oid).
        self._created: dict[int, Created] = {}
        self._connection: psycopg.Connection[Any] | None = None
        self._stopped = threading.Event()
        self._thread: threading.Thread | None = None

    def start(self) -> None:
        """Note the databases there now, then look every :data:`POLL` seconds in a thread of
        its own. A first look that fails leaves nothing watched (:attr:`error` says why)."""
        rows = self._look()
        if rows is None:
            return
        self._initial = frozenset(oid for oid, *_rest in rows)
        self._thread = threading.Thread(
            target=self._run, name="pytest-scoring created databases", daemon=True
        )
        self._thread.start()

    def _run(self) -> None:
        while not self._stopped.wait(POLL):
            try:
                self._update()
            except Exception as error:
                # Any: in process, a thread's exception would reach the repository's pytest
                # as a warning, which may fail its session.
                self.error = self.error or f"watching for created databases: {error!r}"

    def _look(self) -> list[tuple[Any, ...]] | None:
        """Every database on the server now; None when the server could not be asked."""
        try:
            if self._connection is None or self._connection.closed:
                self._connection = admin.connect(self.admin_url, connect_timeout=10)
            return self._connection.execute(_DATABASES).fetchall()
        except (psycopg.Error, DatabaseError, OSError) as error:
            if self.error is None:
                self.error = f"watching for created databases: {admin.first_line(error)}"
            self._close()
            return None

    def _update(self) -> None:
        rows = self._look()
        if rows is None or self._initial is None:
            return
        for created in self._created.values():
            created.present = False
        for oid, name, owner, allows, admin_role in rows:
            if oid in self._initial:
                continue
            known = self._created.get(oid)
            if known is not None:
                known.name, known.present, known.allows_connections = name, True, allows
            elif self._is_sessions(name, owner, admin_role):
                self._created[oid] = Created(name, owner, True, allows)

    def _is_sessions(self, name: str, owner: str, admin_role: str) -> bool:
        """Owned by an application role, and not one of the evaluator's own databases."""
        ours = owner == admin_role and name.startswith(admin.PREFIX)
        return owner in self.roles and not ours

    def finish(self) -> list[Created]:
        """Stop watching, look once more (on a connection of its own), and return what the
        session created, by name (a failed last look leaves the one before it)."""
        self.stop()  # the thread is gone: what it noted is read here alone
        if self._initial is not None:
            self._update()
        self._close()
        return sorted(self._created.values(), key=lambda created: created.name)

    def stop(self) -> None:
        """Stop the thread (at once, or after the look it is in); may be called again."""
        self._stopped.set()
        if self._thread is not None:
            self._thread.join()
            self._thread = None
        self._close()

    def _close(self) -> None:
        if self._connection is not None:
            self._connection.close()
            self._connection = None
