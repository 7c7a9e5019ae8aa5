"""PostgreSQL's engine under ``pytest-scoring run``: what is still connected to a database is
ended before its finish state is read, and recorded (docs/databases.md#postgresql).

The children are gone by then, so what is left is theirs: a pool's idle connection, or a
``DO … pg_sleep … UPDATE`` whose client died and that would otherwise still change the data.
"""

from __future__ import annotations

from collections.abc import Sequence

import psycopg

from pytest_scoring.db.postgres import admin
from pytest_scoring.db.postgres.engine import PgSnapshot
from pytest_scoring.db.postgres.engine import PostgresEngine
from pytest_scoring.errors import DatabaseError


class EndingEngine(PostgresEngine):
    """:class:`PostgresEngine` whose finish state is read once nothing else is connected."""

    def _end_backends(self, database: str) -> list[admin.Terminated]:
        return admin.terminate(self.admin_url, database)

    def read_final(self, names: Sequence[str], source: str) -> PgSnapshot:
        ended: dict[str, list[admin.Terminated]] = {}
        failed: dict[str, str] = {}
        for name, database in self.current_names(names).items():
            try:
                ended[name] = self._end_backends(database)
            except (psycopg.Error, DatabaseError) as error:
                failed[name] = admin.first_line(error)
        state = super().read_final(names, source)
        state.terminated = ended
        for name, why in failed.items():
            state.states.pop(name, None)
            state.errors[name] = f"cannot end what is connected to it: {why}"
        return state
