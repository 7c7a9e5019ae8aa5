"""Clones of server databases for the other runs of ``db_diff_change`` (the reference's, the
baseline's): each run gets its own copy of the session's starting state, reached by a login
role of its own, and the copy is dropped afterwards (docs/databases.md#postgresql).

A clone is *claimed* while it lives (:mod:`~pytest_scoring.db.postgres.claims`): an
evaluator that was killed leaves its clones unclaimed, and :func:`sweep_clones` drops exactly
those.
"""

from __future__ import annotations

from collections.abc import Mapping
from collections.abc import Sequence
from dataclasses import dataclass
from dataclasses import field
from typing import Any
from typing import Final

import psycopg

from pytest_scoring.core.settings import ServerDatabase
from pytest_scoring.db.postgres import admin
from pytest_scoring.db.postgres import claims
from pytest_scoring.db.postgres.engine import PgSnapshot
from pytest_scoring.db.postgres.engine import PostgresEngine
from pytest_scoring.errors import DatabaseError

#: What every clone's name starts with (:func:`~pytest_scoring.db.postgres.admin.clone`).
CLONE_PREFIX: Final = f"{admin.PREFIX}clone_"


@dataclass
class Claimed:
    """One clone and the admin session that claims it."""

    engine: PostgresEngine
    database: str
    clone: admin.Clone
    session: psycopg.Connection[Any]


@dataclass
class RunClones:
    """The clones of one run (the reference's, the baseline's), by database name."""

    source: str
    #: Database name → the variable through which a run receives its URL.
    variables: Mapping[str, str]
    claimed: dict[str, Claimed] = field(default_factory=dict)
    #: Each engine, and why a database of it has no clone (its start snapshot failed).
    engines: list[tuple[PostgresEngine, dict[str, str]]] = field(default_factory=list)

    def urls(self) -> dict[str, str]:
        """The variables through which the run receives its clones' URLs."""
        return {self.variables[name]: claim.clone.url for name, claim in self.claimed.items()}

    def finals(self) -> list[tuple[PostgresEngine, PgSnapshot]]:
        """Each engine's state of the clones after the run, read in place, once what is still
        connected to them has been ended (the run's processes are gone)."""
        found = {
            id(engine): (engine, PgSnapshot(self.source, errors=dict(errors), closed=False))
            for engine, errors in self.engines
        }
        for name, claim in self.claimed.items():
            engine, state = found.setdefault(
                id(claim.engine), (claim.engine, PgSnapshot(self.source, closed=False))
            )
            try:
                state.terminated[name] = admin.terminate(engine.admin_url, claim.clone.name)
            except (psycopg.Error, DatabaseError) as error:
                state.errors[name] = f"cannot end what is connected to it: {_line(error)}"
                continue
            state.states[name] = claim.clone.name
        return list(found.values())

    def drop(self) -> None:
        """Drop every clone and its role, then end their claims (also after a failure)."""
        for claim in self.claimed.values():
            try:
                admin.drop(claim.engine.admin_url, claim.clone.name, claim.clone.role)
            except (psycopg.Error, DatabaseError):
                pass  # left unclaimed: the next sweep drops it
            finally:
                claim.session.close()
        self.claimed.clear()


def clone_states(
    states: Sequence[tuple[Any, Any]], databases: Sequence[ServerDatabase], source: str
) -> RunClones:
    """A claimed clone of every database the start snapshots hold.

    :param databases: the evaluator's server databases (for the variable each is given in).
    :raises DatabaseError: when one cannot be made (those made are dropped).
    """
    clones = RunClones(source, {database.name: database.env for database in databases})
    try:
        for engine, start in states:
            assert isinstance(engine, PostgresEngine) and isinstance(start, PgSnapshot)
            sweep_clones(engine.admin_url)  # what an evaluator that was killed left
            why = {name: f"no start snapshot: {error}" for name, error in start.errors.items()}
            clones.engines.append((engine, why))
            for name, snapshot in start.states.items():
                clones.claimed[name] = _claimed_clone(engine, name, snapshot)
    except (psycopg.Error, DatabaseError) as error:
        clones.drop()
        raise DatabaseError(f"cannot clone the databases for {source}: {_line(error)}") from None
    return clones


def _claimed_clone(engine: PostgresEngine, name: str, snapshot: str) -> Claimed:
    source = admin.Snapshot(snapshot, engine._database(name), [])
    made, session = claims.claimed(
        engine.admin_url,
        "clone",
        lambda claim: admin.clone(engine.admin_url, engine.databases[name], source, claim),
    )
    return Claimed(engine, source.source, made, session)


def sweep_clones(admin_url: str) -> list[str]:
    """Drop the clones (and their roles) no live evaluator claims: an evaluator that was
    killed left them behind.

    :returns: the clones dropped.
    """
    return claims.sweep(admin_url, CLONE_PREFIX)


def _line(error: BaseException) -> str:
    return (str(error).strip().splitlines() or [type(error).__name__])[0]
