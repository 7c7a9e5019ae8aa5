"""PostgreSQL as a database engine of the seam (:class:`~pytest_scoring.db.engine.DatabaseEngine`).

One engine is bound to a server through the evaluator's admin URL and to the databases the
evaluator names, each by its ``name`` (the key of its diff entry) and its application URL.
Snapshots are closed databases on the server (:mod:`~pytest_scoring.db.postgres.admin`); the
state after the session is read in place, under ``REPEATABLE READ``.
"""

from __future__ import annotations

import contextlib
import json
from collections.abc import Collection
from collections.abc import Iterable
from collections.abc import Iterator
from collections.abc import Mapping
from collections.abc import Sequence
from dataclasses import dataclass
from dataclasses import field
from pathlib import Path
from typing import TYPE_CHECKING
from typing import Any
from typing import Final
from typing import TypedDict

import psycopg
from psycopg import sql
from psycopg.conninfo import conninfo_to_dict

from pytest_scoring.db.diff import DEFAULT_MAX_ROWS
from pytest_scoring.db.diff_types import DatabaseEntryJSON
from pytest_scoring.db.diff_types import RowJSON
from pytest_scoring.db.diff_types import RowKind
from pytest_scoring.db.diff_types import empty_planes
from pytest_scoring.db.engine import CreatedJSON
from pytest_scoring.db.engine import DatabaseWatch
from pytest_scoring.db.engine import RowSink
from pytest_scoring.db.postgres import admin
from pytest_scoring.db.postgres import claims
from pytest_scoring.db.postgres.catalog import state_digest
from pytest_scoring.db.postgres.catalog import tables
from pytest_scoring.db.postgres.created import Created
from pytest_scoring.db.postgres.created import CreatedWatch
from pytest_scoring.db.postgres.diff import ENGINE
from pytest_scoring.db.postgres.diff import Side
from pytest_scoring.db.postgres.diff import diff_databases
from pytest_scoring.db.postgres.diff import row_stream
from pytest_scoring.db.postgres.values import as_text
from pytest_scoring.db.postgres.values import diff_values
from pytest_scoring.db.postgres.values import select_list
from pytest_scoring.db.row_sql import json_value
from pytest_scoring.errors import DatabaseError

if TYPE_CHECKING:
    from pytest_scoring.core.budget import TimeBudget

#: The file in a ``--score-db-reset`` store naming each database's kept snapshot.
_KEPT: Final = "postgresql.json"


class StartState(TypedDict):
    """What identifies a snapshot's state in the report's provenance (not its name: a new
    one each time)."""

    server_version: str
    #: :func:`~pytest_scoring.db.postgres.catalog.state_digest` of the snapshot.
    state: str


@dataclass
class PgSnapshot:
    """One side of a diff: per database name, the server database holding its state."""

    source: str
    #: Database name → the server database read for it.
    states: dict[str, str] = field(default_factory=dict)
    errors: dict[str, str] = field(default_factory=dict)
    #: Whether the states are snapshots of ours (closed; dropped by ``release``).
    closed: bool = True
    #: Database name → the backends and prepared transactions ended to take it.
    terminated: dict[str, list[admin.Terminated]] = field(default_factory=dict)
    #: Databases that refuse connections: opened for the admin's read only, as snapshots are.
    refusing: set[str] = field(default_factory=set)
    #: Database name → what identifies the snapshot's state (snapshots of ours only).
    described: dict[str, StartState] = field(default_factory=dict)

    @property
    def files(self) -> Mapping[str, Path]:
        return {}

    def names(self) -> set[str]:
        return {*self.states, *self.errors}

    def side(self, name: str) -> Side:
        return Side(self.states.get(name), self.closed or name in self.refusing)


class PostgresEngine:
    """The databases of one server the evaluator names, diffed as SQLite files are."""

    name = ENGINE

    def __init__(self, admin_url: str, databases: Mapping[str, str]):
        """
        :param admin_url: the evaluator's own URL (superuser), never given to the tests.
        :param databases: name (the diff's key) → the application's URL of that database.
        """
        self.admin_url = admin_url
        self.databases = dict(databases)
        #: Snapshot → the admin session claiming it while it lives (db/postgres/claims.py).
        self._claims: dict[str, psycopg.Connection[Any]] = {}
        #: Name → the oid of the database its start snapshot copied: the one read at finish,
        #: under whatever name it has then (a database renamed away keeps its oid).
        self._followed: dict[str, int] = {}

    def _database(self, name: str) -> str:
        return admin.database_of(self.databases[name])

    def _end_backends(self, database: str) -> list[admin.Terminated]:
        """What is ended on ``database`` before its finish state is read: nothing here (in
        process the state is read in place under ``REPEATABLE READ``)."""
        return []

    def watch(self) -> CreatedWatch:
        """Watch the server for the databases the application's roles create."""
        roles = {conninfo_to_dict(url).get("user") for url in self.databases.values()}
        watch = CreatedWatch(self.admin_url, {str(role) for role in roles if role})
        watch.start()
        return watch

    def read_created(
        self, state: PgSnapshot, watch: DatabaseWatch, reserved: Collection[str]
    ) -> list[CreatedJSON]:
        """Stop ``watch``; each database it saw that is still there joins ``state``, read in
        place (after its backends are ended, under ``run``), under its name, or its name with
        `` (created)`` added until no database of this session has that key."""
        assert isinstance(watch, CreatedWatch)
        # A named database made again under its name is read under its key already; a copy
        # renamed in beside the one followed by its oid is a database of its own.
        named = {database: key for key, database in state.states.items() if key in self.databases}
        taken = {*reserved, *self.databases}
        listed: list[CreatedJSON] = []
        for created in watch.finish():
            entry = CreatedJSON(
                name=created.name, owner=created.owner, present_at_finish=created.present
            )
            listed.append(entry)
            if not created.present:
                continue
            key = named.get(created.name)
            if key is None:
                key = created.name
                while key in taken:
                    key += " (created)"
                taken.add(key)
                self._add_created(state, key, created)
            if key != created.name:
                entry["key"] = key
        return listed

    def _add_created(self, state: PgSnapshot, key: str, created: Created) -> None:
        try:
            ended = self._end_backends(created.name)
        except (psycopg.Error, DatabaseError) as error:
            state.errors[key] = f"cannot end what is connected to it: {admin.first_line(error)}"
            return
        state.states[key] = created.name
        if ended:
            state.terminated[key] = ended
        if not created.allows_connections:
            state.refusing.add(key)

    def find(self) -> list[str]:
        with admin.connect(self.admin_url) as connection:
            present = {row[0] for row in connection.execute("SELECT datname FROM pg_database")}
        return sorted(name for name in self.databases if self._database(name) in present)

    def snapshot(self, names: Sequence[str], folder: Path, source: str) -> PgSnapshot:
        """A claimed snapshot of each database, once the unclaimed ones a killed evaluator
        left on this server are dropped."""
        taken = PgSnapshot(source)
        if names:
            with contextlib.suppress(psycopg.Error, DatabaseError):  # the next one sweeps
                claims.sweep(self.admin_url, admin.SNAPSHOT_PREFIX)
        for name in names:
            try:
                self._follow(name)
                copy = self._claimed_snapshot(self._database(name))
            except (psycopg.Error, DatabaseError) as error:
                taken.errors[name] = str(error).strip().splitlines()[0]
                continue
            taken.states[name], taken.terminated[name] = copy.name, copy.terminated
            with contextlib.suppress(psycopg.Error, DatabaseError):  # the provenance says null
                taken.described[name] = self._described(copy.name)
        return taken

    def _follow(self, name: str) -> None:
        """Note which database ``name`` is now, by oid (see :meth:`current_names`)."""
        with admin.connect(self.admin_url) as connection:
            found = connection.execute(
                "SELECT oid FROM pg_database WHERE datname = %s", (self._database(name),)
            ).fetchone()
        if found is not None:
            self._followed[name] = int(found[0])

    def current_names(self, names: Sequence[str]) -> dict[str, str]:
        """Each database's name on the server now, by the diff's name; one dropped meanwhile
        is absent. A database is followed by the oid its start snapshot copied: renamed away
        (and perhaps a copy of its start renamed in), it is still the one read. Once that
        database is gone, the one of its name is (dropped and made again, or restored)."""
        with admin.connect(self.admin_url) as connection:
            catalog = dict(connection.execute("SELECT oid, datname FROM pg_database").fetchall())
        present = set(catalog.values())
        found = {}
        for name in names:
            if name not in self.databases:
                continue
            followed = self._followed.get(name)
            if followed in catalog:
                found[name] = catalog[followed]
            elif self._database(name) in present:
                found[name] = self._database(name)
        return found

    def _claimed_snapshot(self, database: str) -> admin.Snapshot:
        copy, claim = claims.claimed(
            self.admin_url, "snap", lambda name: admin.snapshot(self.admin_url, database, name=name)
        )
        self._claims[copy.name] = claim
        return copy

    def _described(self, snapshot: str) -> StartState:
        with admin.opened(self.admin_url, snapshot) as connection:
            version = connection.execute("SHOW server_version").fetchone()
            return StartState(
                server_version=str(version[0]) if version else "", state=state_digest(connection)
            )

    def read_final(self, names: Sequence[str], source: str) -> PgSnapshot:
        """The databases as they are, read in place; one dropped meanwhile is absent."""
        return PgSnapshot(source, self.current_names(names), closed=False)

    def diff(
        self,
        before: PgSnapshot,
        after: PgSnapshot,
        max_rows: int | None = DEFAULT_MAX_ROWS,
        sink: RowSink | None = None,
    ) -> dict[str, DatabaseEntryJSON]:
        entries = {}
        for name in sorted(before.names() | after.names()):
            label = self._database(name) if name in self.databases else after.states.get(name)
            label = label or name
            unreadable = [
                side
                for side, state in (("before", before), ("after", after))
                if name in state.errors
            ]
            if not unreadable:
                entries[name] = diff_databases(
                    self.admin_url, before.side(name), after.side(name), name, max_rows, sink, label
                )
                if not after.closed and after.states.get(name, label) != label:
                    entries[name]["info"]["path_after"] = after.states[name]  # renamed meanwhile
                continue
            entries[name] = {
                "comparisons": empty_planes(),
                "info": {
                    "engine": ENGINE,
                    "path_before": label,
                    "path_after": label,
                    "exists_before": name in before.names(),
                    "exists_after": name in after.names(),
                    "unreadable": unreadable,
                },
                "error": "; ".join(
                    f"{side}: {(before if side == 'before' else after).errors[name]}"
                    for side in unreadable
                ),
            }
        return entries

    def rows(
        self,
        before: PgSnapshot,
        after: PgSnapshot,
        database: str,
        table: str,
        kind: RowKind,
        budget: TimeBudget | None = None,
    ) -> Iterable[RowJSON]:
        return _Rows(
            self.admin_url, before.side(database), after.side(database), table, kind, budget
        )

    def read_row(
        self,
        state: PgSnapshot,
        database: str,
        table: str,
        key: Mapping[str, Any],
        leave_out: Collection[str] = (),
    ) -> dict[str, Any] | None:
        side = state.side(database)
        if side.database is None:
            return None
        try:
            if side.closed:
                with admin.opened(self.admin_url, side.database) as connection:
                    return _read_row(connection, table, key, leave_out)
            with admin.connect(self.admin_url, side.database) as connection:
                return _read_row(connection, table, key, leave_out)
        except (psycopg.Error, DatabaseError):
            return None

    def reset(self, names: Sequence[str], store: Path, base: Path | None) -> list[str]:
        """Restore each kept database from its kept snapshot (kept on the server, named in
        ``store``), and keep a snapshot of each of ``names`` not kept yet."""
        path = store / _KEPT
        kept = self._kept(path)
        restored = []
        for name, snapshot_name in sorted(kept.items()):
            if name in self.databases:
                database = self._database(name)
                owner = conninfo_to_dict(self.databases[name]).get("user")
                kept_state = admin.Snapshot(snapshot_name, database, [])
                admin.reset(self.admin_url, database, kept_state, str(owner) if owner else None)
                restored.append(name)
        for name in names:
            if name not in kept:
                kept[name] = admin.snapshot(self.admin_url, self._database(name), "keep").name
        _write_kept(path, kept)
        return restored

    def _kept(self, path: Path) -> dict[str, str]:
        """The kept snapshots a reset store names, by database name, each still on the server.

        An older pytest-scoring kept them under the session's prefix, which sweeps drop: they
        are renamed to the kept prefix (unless a sweep dropped one first: then it is gone).

        :raises DatabaseError: in one line, when a kept snapshot is gone.
        """
        kept: dict[str, str] = json.loads(path.read_text()) if path.is_file() else {}
        older = {name: kept_as for name, kept_as in kept.items()
                 if kept_as.startswith(admin.SNAPSHOT_PREFIX)}  # fmt: skip
        for name, kept_as in older.items():
            kept[name] = self._renamed(kept_as)
        if older:
            _write_kept(path, kept)
        for name, kept_as in sorted(kept.items()):
            if name in self.databases and not admin.exists(self.admin_url, kept_as):
                raise DatabaseError(
                    f"{path}: the kept state of {name} ({kept_as}) is gone from the server; "
                    f"remove {path.parent} to keep the current state instead"
                )
        return kept

    def _renamed(self, snapshot: str) -> str:
        """``snapshot`` under a kept name, when it is still there."""
        if not admin.exists(self.admin_url, snapshot):
            return snapshot
        name = admin.new_name("keep")
        admin.rename(self.admin_url, snapshot, name)
        return name

    def release(self, snapshot: PgSnapshot) -> None:
        if snapshot.closed:
            for name in snapshot.states.values():
                try:
                    admin.drop(self.admin_url, name)
                finally:
                    if (claim := self._claims.pop(name, None)) is not None:
                        claim.close()


def _write_kept(path: Path, kept: Mapping[str, str]) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.unlink(missing_ok=True)
    path.write_text(json.dumps(kept))


class _Rows:
    """A re-iterable row list: each iteration reads both sides afresh."""

    def __init__(
        self,
        admin_url: str,
        before: Side,
        after: Side,
        table: str,
        kind: str,
        budget: TimeBudget | None,
    ):
        self.args = (admin_url, before, after, table, kind, budget)

    def __iter__(self) -> Iterator[RowJSON]:
        return row_stream(*self.args)


def _read_row(
    connection: psycopg.Connection[Any],
    table: str,
    key: Mapping[str, Any],
    leave_out: Collection[str],
) -> dict[str, Any] | None:
    found = tables(connection).get(table)
    if found is None or not key or not set(key) <= set(found.column_names()):
        return None
    wanted = [
        (name, kind, oid)
        for name, kind, oid in zip(found.column_names(), found.kinds, found.oids, strict=True)
        if name not in leave_out and name not in key
    ]
    if not wanted:
        return {}
    select = select_list([(name, kind) for name, kind, _oid in wanted])
    where = sql.SQL(" AND ").join(
        # The output function's text, never a cast: the application may own the key's type.
        sql.SQL("format('%s', {}) = {}").format(sql.Identifier(name), sql.Literal(str(value)))
        for name, value in key.items()
    )
    query = sql.SQL("SELECT {} FROM ONLY {}.{} WHERE {} LIMIT 1").format(
        select, sql.Identifier(found.schema), sql.Identifier(found.relname), where
    )
    kinds = [kind for _name, kind, _oid in wanted]
    with connection.cursor() as cursor:
        as_text(cursor, kinds, [oid for *_rest, oid in wanted])
        row = cursor.execute(query).fetchone()
    if row is None:
        return None
    values = diff_values(row, kinds)
    return {name: json_value(value) for (name, *_), value in zip(wanted, values, strict=True)}
