"""What the evaluator does with its own, more privileged URL (``--score-db-admin-url``).

Snapshots, resets and clones are whole databases copied by the server
(``CREATE DATABASE … TEMPLATE … STRATEGY FILE_COPY``), owned by the admin role and closed to
everyone else in the same admin session that creates them: ``ALLOW_CONNECTIONS false`` in the
``CREATE DATABASE`` itself, then ``REVOKE ALL … FROM PUBLIC``. The tables inside keep their
owners, so connection rights are what keep the application's role out (docs/databases.md).
"""

from __future__ import annotations

import contextlib
import secrets
import tempfile
import time
from collections.abc import Iterator
from typing import Any
from typing import Final
from typing import NamedTuple
from typing import TypedDict
from typing import final

import psycopg
from psycopg import sql
from psycopg.conninfo import conninfo_to_dict
from psycopg.conninfo import make_conninfo

from pytest_scoring.db.postgres.values import connection_options
from pytest_scoring.errors import DatabaseError

#: Every database and role the evaluator makes starts with this; a sweep drops what is left.
PREFIX: Final = "pytest_scoring_"
#: A session's snapshots: claimed while they live, swept once unclaimed (db/postgres/claims.py).
SNAPSHOT_PREFIX: Final = f"{PREFIX}snap_"
#: ``--score-db-reset``'s kept snapshots: kept across runs on purpose, never swept.
KEEP_PREFIX: Final = f"{PREFIX}keep_"
#: The predefined roles whose members read, write or signal beyond their own objects.
WIDE_ROLES: Final = ("pg_read_all_data", "pg_write_all_data", "pg_signal_backend")
#: Milliseconds ``pg_terminate_backend`` waits for a backend to be gone.
_TERMINATE_WAIT: Final = 5000
#: Rounds of terminating before a copy gives up (a pool may reconnect in between).
_ROUNDS: Final = 5
#: Characters of a terminated backend's query kept in the record.
_QUERY_CHARS: Final = 500


class Terminated(TypedDict):
    """A backend the evaluator ended, or a prepared transaction it rolled back."""

    #: ``backend`` or ``prepared``.
    kind: str
    pid: int | None
    user: str | None
    application_name: str | None
    state: str | None
    #: The backend's last query (``gid`` of a prepared transaction), cut to 500 characters.
    query: str | None


def connect(url: str, database: str | None = None, **options: Any) -> psycopg.Connection[Any]:
    """An autocommit connection from ``url`` (to ``database`` instead of the URL's, if given).

    The URL carries the admin's password, so no password file is read. The session starts
    with the pinned settings (:data:`~pytest_scoring.db.postgres.values.PINNED`): no
    statement of ours runs under the application's ``search_path``.
    """
    extra: dict[str, Any] = {"options": connection_options(server_version(url)), **options}
    if database is not None:
        extra["dbname"] = database
    return _open(url, extra)


def _open(url: str, extra: dict[str, Any]) -> psycopg.Connection[Any]:
    try:
        return psycopg.connect(make_conninfo(url, **extra), autocommit=True)
    except psycopg.Error as error:
        raise DatabaseError(f"{redacted(url)}: {first_line(error)}") from None


#: Each admin URL's server version, asked once.
_VERSIONS: dict[str, int] = {}


def server_version(url: str) -> int:
    """The version number of the server ``url`` reaches (which settings it has to pin)."""
    if url not in _VERSIONS:
        with _open(url, {"options": connection_options()}) as connection:
            _VERSIONS[url] = connection.info.server_version
    return _VERSIONS[url]


def redacted(url: str) -> str:
    """``url`` without its password (for messages and records)."""
    params = conninfo_to_dict(url)
    params.pop("password", None)
    return make_conninfo("", **params)


def first_line(error: BaseException) -> str:
    """An error's first line, for one-line messages."""
    return (str(error).strip().splitlines() or [type(error).__name__])[0]


def new_name(kind: str) -> str:
    """A fresh database or role name of ours: ``pytest_scoring_<kind>_<random>``."""
    return f"{PREFIX}{kind}_{secrets.token_hex(6)}"


def database_of(url: str) -> str:
    """The database a URL names (libpq's default: the user's name)."""
    params = conninfo_to_dict(url)
    name = params.get("dbname") or params.get("user")
    if not name:
        raise DatabaseError(f"{redacted(url)}: names no database")
    return str(name)


def refusals(admin_url: str, app_url: str) -> list[str]:
    """Why the application's role must not be trusted with scored data; empty when it may.

    Refused: a superuser, ``CREATEROLE`` or ``BYPASSRLS``; a member of the admin role or of
    :data:`WIDE_ROLES`; and an admin role that can be logged into without its password
    (``trust`` in ``pg_hba.conf``, or a login that succeeds with no password at all).
    """
    app = conninfo_to_dict(app_url).get("user")
    with connect(admin_url) as admin:
        admin_role = admin.execute("SELECT current_user").fetchone()
        row = admin.execute(
            "SELECT rolsuper, rolcreaterole, rolbypassrls FROM pg_roles WHERE rolname = %s",
            (app,),
        ).fetchone()
        if row is None:
            return [f"role {app!r} does not exist"]
        reasons = [
            f"role {app!r} {why}"
            for flag, why in zip(
                row, ("is a superuser", "has CREATEROLE", "has BYPASSRLS"), strict=True
            )
            if flag
        ]
        for role in (admin_role[0] if admin_role else "", *WIDE_ROLES):
            member = admin.execute("SELECT pg_has_role(%s, %s, 'MEMBER')", (app, role)).fetchone()
            if member and member[0] and not row[0]:
                reasons.append(f"role {app!r} is a member of {role!r}")
        reasons.extend(_trusted_rules(admin, admin_role[0] if admin_role else ""))
    return reasons + _passwordless(admin_url, app_url)


def _trusted_rules(admin: psycopg.Connection[Any], role: str) -> list[str]:
    """``pg_hba.conf`` lines that let anyone log in as ``role`` without a password."""
    rows = admin.execute(
        "SELECT line_number, type FROM pg_hba_file_rules WHERE auth_method = 'trust' "
        "AND (user_name && ARRAY['all', %s]) AND error IS NULL",
        (role,),
    ).fetchall()
    return [f"pg_hba.conf line {line} lets {kind} logins as {role!r} in without a password"
            for line, kind in rows]  # fmt: skip


def _passwordless(admin_url: str, app_url: str) -> list[str]:
    """Whether the admin role logs in, where the application connects, with no password."""
    admin = conninfo_to_dict(admin_url)
    if not _logs_in({**conninfo_to_dict(app_url), "user": admin.get("user"), "password": ""}):
        return []
    return [f"the admin role {admin.get('user')!r} logs in without a password where the "
            "application connects"]  # fmt: skip


def uncontrolled(admin_url: str, app_url: str) -> str | None:
    """Why ``app_url`` does not show that its role controls its database on the admin's
    server, or None when it does: the role owns the database and logs in there with the
    password the URL gives (no password file, no ``PGPASSWORD``). A database that does not
    exist yet is the URL's to make.
    """
    params = conninfo_to_dict(app_url)
    user, database = params.get("user"), database_of(app_url)
    with connect(admin_url) as admin:
        row = admin.execute(
            "SELECT pg_get_userbyid(datdba) FROM pg_database WHERE datname = %s", (database,)
        ).fetchone()
    if row is None:
        return None
    if row[0] != user:
        return f"database {database} belongs to role {row[0]!r}, not to {user!r}"
    login = {
        **conninfo_to_dict(admin_url),
        "user": user,
        "password": params.get("password") or "",
        "dbname": database,
    }
    if not _logs_in(login):
        return f"role {user!r} does not log in to {database} with the password its URL gives"
    return None


def _logs_in(params: dict[str, Any]) -> bool:
    """Whether a login with exactly ``params`` succeeds: no password file helps it, nor
    ``PGPASSWORD`` (libpq reads it only when no password is given, and one always is)."""
    with tempfile.TemporaryDirectory() as nothing:  # no password file: none is read
        try:
            conninfo = make_conninfo("", **params, passfile=f"{nothing}/none", connect_timeout=10)
            with psycopg.connect(conninfo):
                return True
        except psycopg.OperationalError:
            return False


def _backends(admin: psycopg.Connection[Any], database: str) -> list[tuple[Any, ...]]:
    """Every backend on ``database`` but ours and autovacuum's (which the server's own
    ``CREATE DATABASE`` and ``DROP DATABASE`` stop, and which changes no row)."""
    return admin.execute(
        "SELECT pid, usename, application_name, state, left(query, %s) FROM pg_stat_activity "
        "WHERE datname = %s AND pid <> pg_backend_pid() AND backend_type <> 'autovacuum worker'",
        (_QUERY_CHARS, database),
    ).fetchall()


def terminate(
    admin_url: str, database: str, session: psycopg.Connection[Any] | None = None
) -> list[Terminated]:
    """End every backend connected to ``database`` and roll back its prepared transactions.

    A pool's idle connection blocks a template copy, and a ``DO … pg_sleep … UPDATE`` keeps
    running after its client died: both are ended, and recorded, before any snapshot.

    :param session: the admin connection to use (default: a new one).
    """
    if session is None:
        with connect(admin_url) as own:
            return terminate(admin_url, database, own)
    done: list[Terminated] = []
    for _ in range(_ROUNDS):
        done.extend(_terminate_round(admin_url, session, database))
        if not _backends(session, database):
            break
    return done


def _terminate_round(
    admin_url: str, admin: psycopg.Connection[Any], database: str
) -> list[Terminated]:
    done: list[Terminated] = []
    for pid, user, application, state, query in _backends(admin, database):
        admin.execute("SELECT pg_terminate_backend(%s, %s)", (pid, _TERMINATE_WAIT))
        done.append(Terminated(kind="backend", pid=pid, user=user,
                               application_name=application, state=state, query=query))  # fmt: skip
    prepared = admin.execute(
        "SELECT gid, owner FROM pg_prepared_xacts WHERE database = %s", (database,)
    ).fetchall()
    if prepared:
        with connect(admin_url, database) as inside:
            for gid, owner in prepared:
                inside.execute(sql.SQL("ROLLBACK PREPARED {}").format(sql.Literal(gid)))
                done.append(Terminated(kind="prepared", pid=None, user=owner,
                                       application_name=None, state=None, query=gid))  # fmt: skip
    return done


def _copy(
    admin: psycopg.Connection[Any], admin_url: str, source: str, target: str, owner: str | None
) -> list[Terminated]:
    """``CREATE DATABASE target TEMPLATE source`` closed to everyone, then REVOKE (one session).

    :returns: what had to be terminated on ``source`` first.
    """
    done: list[Terminated] = []
    statement = sql.SQL(
        "CREATE DATABASE {} TEMPLATE {} STRATEGY FILE_COPY ALLOW_CONNECTIONS false"
    ).format(sql.Identifier(target), sql.Identifier(source))
    if owner is not None:
        statement += sql.SQL(" OWNER {}").format(sql.Identifier(owner))
    for attempt in range(_ROUNDS):
        done.extend(terminate(admin_url, source, admin))
        try:
            admin.execute(statement)
            break
        except psycopg.errors.ObjectInUse:
            if attempt == _ROUNDS - 1:
                raise
            time.sleep(0.2)
    admin.execute(sql.SQL("REVOKE ALL ON DATABASE {} FROM PUBLIC").format(sql.Identifier(target)))
    return done


@final
class Snapshot(NamedTuple):
    """A closed copy of one database, and what was ended to take it."""

    #: The copy's database name (``pytest_scoring_snap_…``, ``pytest_scoring_keep_…``).
    name: str
    #: The database it copies.
    source: str
    terminated: list[Terminated]


def snapshot(
    admin_url: str, database: str, kind: str = "snap", name: str | None = None
) -> Snapshot:
    """A consistent copy of ``database`` no other role can read, change or drop.

    :param kind: ``snap`` (a session's, dropped after it) or ``keep`` (``--score-db-reset``'s).
    :param name: the copy's name (default: a new one of ``kind``).
    """
    name = new_name(kind) if name is None else name
    with connect(admin_url) as admin:
        done = _copy(admin, admin_url, database, name, owner=None)
    return Snapshot(name, database, done)


def exists(admin_url: str, database: str) -> bool:
    """Whether the server has ``database``."""
    with connect(admin_url) as admin:
        found = admin.execute("SELECT 1 FROM pg_database WHERE datname = %s", (database,))
        return found.fetchone() is not None


def rename(admin_url: str, old: str, new: str) -> None:
    """``ALTER DATABASE old RENAME TO new`` (a closed snapshot of ours: nobody is connected)."""
    with connect(admin_url) as admin:
        admin.execute(
            sql.SQL("ALTER DATABASE {} RENAME TO {}").format(
                sql.Identifier(old), sql.Identifier(new)
            )
        )


def reset(
    admin_url: str, database: str, source: Snapshot, owner: str | None = None
) -> list[Terminated]:
    """Put ``database`` back to ``source``'s state: dropped and copied again from it.

    The database keeps its owner, its privileges and whether it accepts connections; what
    hangs on the database object itself beyond those (per-database settings, comments) is
    not kept.

    :param owner: the owner of a database that no longer exists (default: the admin role).
    """
    with connect(admin_url) as admin:
        row = admin.execute(
            "SELECT pg_get_userbyid(datdba), datacl::text[], datallowconn FROM pg_database "
            "WHERE datname = %s",
            (database,),
        ).fetchone()
        done = terminate(admin_url, database, admin)
        admin.execute(
            sql.SQL("DROP DATABASE IF EXISTS {} WITH (FORCE)").format(sql.Identifier(database))
        )
        statement = sql.SQL("CREATE DATABASE {} TEMPLATE {} STRATEGY FILE_COPY").format(
            sql.Identifier(database), sql.Identifier(source.name)
        )
        owner = row[0] if row is not None else owner
        if owner is not None:
            statement += sql.SQL(" OWNER {}").format(sql.Identifier(owner))
        admin.execute(statement)
        if row is not None:
            _restore_access(admin, database, row[1], row[2])
    return done


def _restore_access(
    admin: psycopg.Connection[Any], database: str, acl: list[str] | None, allow: bool
) -> None:
    """The privileges and connection switch a database had before it was copied again."""
    if acl is not None:
        admin.execute(
            "UPDATE pg_database SET datacl = %s::aclitem[] WHERE datname = %s", (acl, database)
        )
    admin.execute(
        sql.SQL("ALTER DATABASE {} ALLOW_CONNECTIONS {}").format(
            sql.Identifier(database), sql.SQL("true" if allow else "false")
        )
    )


@final
class Clone(NamedTuple):
    """A database copied for one run, reached by a login role of its own."""

    name: str
    role: str
    #: The URL the run gets: the clone's role, password and database.
    url: str


def clone(admin_url: str, app_url: str, source: Snapshot, name: str | None = None) -> Clone:
    """A copy of ``source`` for one run (the reference's, the baseline's), with its own role.

    The role gets CONNECT on this clone only and owns what the application's role owned in
    it (``REASSIGN OWNED``); the databases the application's role owns elsewhere keep it.

    :param name: the clone's name (default: a new one).
    """
    app = str(conninfo_to_dict(app_url).get("user"))
    name = new_name("clone") if name is None else name
    role, password = new_name("role"), secrets.token_urlsafe(24)
    with connect(admin_url) as admin:
        admin.execute(
            sql.SQL("CREATE ROLE {} LOGIN PASSWORD {}").format(
                sql.Identifier(role), sql.Literal(password)
            )
        )
        _copy(admin, admin_url, source.name, name, owner=role)
        owned = admin.execute(
            "SELECT datname FROM pg_database d JOIN pg_roles r ON r.oid = d.datdba "
            "WHERE r.rolname = %s",
            (app,),
        ).fetchall()
        _reassign(admin, admin_url, name, app, role)
        for (database,) in owned:  # REASSIGN OWNED moves shared objects too: put them back
            admin.execute(
                sql.SQL("ALTER DATABASE {} OWNER TO {}").format(
                    sql.Identifier(database), sql.Identifier(app)
                )
            )
    url = make_conninfo(app_url, user=role, password=password, dbname=name)
    return Clone(name, role, url)


def _reassign(
    admin: psycopg.Connection[Any], admin_url: str, name: str, app: str, role: str
) -> None:
    """Open the clone (its role alone may connect) and give it the application's objects."""
    admin.execute(sql.SQL("ALTER DATABASE {} ALLOW_CONNECTIONS true").format(sql.Identifier(name)))
    with connect(admin_url, name) as inside:
        inside.execute(
            sql.SQL("REASSIGN OWNED BY {} TO {}").format(sql.Identifier(app), sql.Identifier(role))
        )


def drop(admin_url: str, name: str, role: str | None = None) -> None:
    """Drop a snapshot or a clone (and the clone's role), whoever is still connected."""
    with connect(admin_url) as admin:
        admin.execute(
            sql.SQL("DROP DATABASE IF EXISTS {} WITH (FORCE)").format(sql.Identifier(name))
        )
        if role is not None:
            admin.execute(sql.SQL("DROP ROLE IF EXISTS {}").format(sql.Identifier(role)))


@contextlib.contextmanager
def opened(admin_url: str, name: str) -> Iterator[psycopg.Connection[Any]]:
    """The admin's connection to a closed snapshot: opened for that one connection only.

    ``ALLOW_CONNECTIONS false`` keeps out even the admin role; it is set back as soon as the
    connection exists (a connection, once made, stays), and PUBLIC has no CONNECT meanwhile.
    """
    with connect(admin_url) as admin:
        ident = sql.Identifier(name)
        admin.execute(sql.SQL("ALTER DATABASE {} ALLOW_CONNECTIONS true").format(ident))
        try:
            inside = connect(admin_url, name)
        finally:
            admin.execute(sql.SQL("ALTER DATABASE {} ALLOW_CONNECTIONS false").format(ident))
    with inside:
        yield inside
