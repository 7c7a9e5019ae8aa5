"""Places with real databases, one per engine, for the shared engine tests (test_db_engines.py).

A place gives the engine under test and the means an application would use to create, change
and drop its databases there. Add an engine by writing its place and adding it to
:data:`PLACES` (docs/architecture.md, How to add a database engine).
"""

from __future__ import annotations

import contextlib
import sqlite3
from collections.abc import Callable
from pathlib import Path
from typing import Any
from typing import Protocol

import pytest

from pytest_scoring.db.engine import DatabaseEngine
from pytest_scoring.db.sqlite_engine import SqliteEngine


class Place(Protocol):
    """Where an engine's databases live in a test, and how the application changes them."""

    engine: DatabaseEngine[Any]

    def name(self, base: str) -> str:
        """The name a database made as ``base`` has in the engine's diff."""
        ...

    def execute(self, name: str, *statements: str) -> None:
        """Run portable SQL statements in one committed transaction, creating the database
        when it does not exist."""
        ...

    def drop(self, name: str) -> None:
        """Remove the database."""
        ...


class SqlitePlace:
    """SQLite files in a folder."""

    def __init__(self, root: Path):
        self.root = root
        self.engine: DatabaseEngine[Any] = SqliteEngine(root, ["*.db"])

    def name(self, base: str) -> str:
        return f"data/{base}.db"

    def execute(self, name: str, *statements: str) -> None:
        path = self.root / name
        path.parent.mkdir(parents=True, exist_ok=True)
        with contextlib.closing(sqlite3.connect(path)) as connection, connection:
            for statement in statements:
                connection.execute(statement)

    def drop(self, name: str) -> None:
        (self.root / name).unlink()


class PostgresPlace:
    """Databases of the session's throwaway PostgreSQL cluster (tests/postgres_cluster.py),
    owned by an application role of the place's own; the engine knows each by its URL."""

    def __init__(self, root: Path, request: pytest.FixtureRequest):
        import psycopg

        from pytest_scoring.db.postgres import admin
        from pytest_scoring.db.postgres.engine import PostgresEngine

        self.cluster = request.getfixturevalue("postgres")
        self.role, self.password = admin.new_name("app"), "app-password"
        self._connect = psycopg.connect
        self._run_admin(f"CREATE ROLE {self.role} LOGIN PASSWORD '{self.password}'")
        self.engine: DatabaseEngine[Any] = PostgresEngine(self.cluster.admin_url, {})
        self._databases: dict[str, str] = {}
        request.addfinalizer(self._release)

    def _release(self) -> None:
        """Drop the snapshots a test left (each claimed by an open admin session)."""
        from pytest_scoring.db.postgres.engine import PgSnapshot

        left = list(self.engine._claims)  # type: ignore[attr-defined]
        self.engine.release(PgSnapshot("test end", {name: name for name in left}))

    def _run_admin(self, statement: str) -> None:
        with self._connect(self.cluster.admin_url, autocommit=True) as connection:
            connection.execute(statement)  # type: ignore[arg-type]

    def name(self, base: str) -> str:
        return base

    def execute(self, name: str, *statements: str) -> None:
        from pytest_scoring.db.postgres import admin

        if name not in self._databases:
            self._databases[name] = admin.new_name(f"db_{name}")
            self.engine.databases[name] = self.cluster.url(  # type: ignore[attr-defined]
                self.role, self.password, self._databases[name]
            )
        database = self._databases[name]
        with self._connect(self.cluster.admin_url, autocommit=True) as connection:
            exists = connection.execute(
                "SELECT 1 FROM pg_database WHERE datname = %s", (database,)
            ).fetchone()
        if not exists:
            self._run_admin(f"CREATE DATABASE {database} OWNER {self.role}")
        url = self.cluster.url(self.role, self.password, database)
        with self._connect(url) as connection:
            for statement in statements:
                connection.execute(statement)  # type: ignore[arg-type]

    def drop(self, name: str) -> None:
        self._run_admin(f"DROP DATABASE {self._databases[name]} WITH (FORCE)")


#: Engine name → a maker of a place in a new folder of the test's (``request`` gives a
#: server's engine the fixtures it needs).
PLACES: dict[str, Callable[[Path, pytest.FixtureRequest], Place]] = {
    "sqlite": lambda root, _request: SqlitePlace(root),
    "postgresql": PostgresPlace,
}
