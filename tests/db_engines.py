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


#: Engine name → a maker of a place in a new folder of the test's.
PLACES: dict[str, Callable[[Path], Place]] = {"sqlite": SqlitePlace}
