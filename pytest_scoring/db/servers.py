"""Server databases named by URL (``--score-db-url``, the configuration's ``databases:``):
checked when given, then the engines that score them (docs/databases.md#postgresql).

psycopg (the ``postgres`` extra) is imported only when a server database is named.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from collections.abc import Sequence
from typing import TYPE_CHECKING
from typing import Any
from typing import Final
from urllib.parse import unquote
from urllib.parse import urlsplit
from urllib.parse import urlunsplit

from pytest_scoring.core.settings import DEFAULT_DB_ENV
from pytest_scoring.core.settings import ServerDatabase
from pytest_scoring.errors import DatabaseError
from pytest_scoring.errors import OptionError

if TYPE_CHECKING:
    from pytest_scoring.db.postgres.engine import PostgresEngine

#: The URL schemes libpq takes.
SCHEMES: Final = ("postgresql://", "postgres://")
#: ``${NAME}``: a variable of the evaluator's environment.
_REFERENCE: Final = re.compile(r"\$\{([^}]*)\}")
#: A variable's name, as POSIX shells accept it.
_NAME: Final = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
#: What to install when psycopg is missing.
EXTRA: Final = "pip install 'pytest-scoring[postgres]'"
#: Query parameters of a URL that hold a secret.
_SECRET_PARAMETERS: Final = frozenset({"password", "sslpassword"})


def expand(text: str, environ: Mapping[str, str], what: str) -> str:
    """``text`` with each ``${NAME}`` replaced by the evaluator's variable NAME.

    :raises OptionError: naming ``what`` for a variable that is not set.
    """

    def value(match: re.Match[str]) -> str:
        name = match.group(1)
        if not _NAME.fullmatch(name):
            raise OptionError(f"{what}: ${{{name}}} is not a variable name")
        if name not in environ:
            raise OptionError(f"{what}: ${{{name}}} is not set in the evaluator's environment")
        return environ[name]

    return _REFERENCE.sub(value, text)


def expand_from_repository(text: str, environ: Mapping[str, str], what: str, url: bool) -> str:
    """``text`` from the scored repository's files, with its one ``${NAME}`` (in a URL only,
    and only as the whole URL) replaced by the evaluator's variable, which must hold a
    ``postgresql://`` URL: the repository cannot make the evaluator put another variable's
    value into a name, a report or a message. Messages name the variable, never its value.

    :param url: whether ``text`` is a URL (elsewhere no ``${NAME}`` is expanded).
    :raises OptionError: naming ``what`` and the variable.
    """
    if "${" not in text:
        return text
    match = _REFERENCE.fullmatch(text)
    if not url or match is None:
        raise OptionError(f"{what}: the scored repository may give ${{NAME}} only as a whole URL")
    value = expand(text, environ, what)
    if not value.startswith(SCHEMES):
        raise OptionError(f"{what}: {text} does not hold a postgresql:// URL")
    return value


def server_database(
    url: str,
    admin_url: str | None,
    what: str,
    name: str | None = None,
    env: str | None = None,
    named_by: str | None = None,
) -> ServerDatabase:
    """One server database, checked: a ``postgresql://`` URL, an admin URL, a variable name.

    :param what: the option or configuration key that named it, for messages.
    :param named_by: the scored repository's setting, when it named the database.
    :raises OptionError: for bad input, in one line naming ``what``.
    """
    for label, text in (("url", url), ("admin_url", admin_url)):
        if text is not None and not text.startswith(SCHEMES):
            shown = "the admin URL" if label == "admin_url" else repr(text)
            raise OptionError(f"{what}: {shown} is not a postgresql:// URL")
    if admin_url is None:
        raise OptionError(
            f"{what}: the evaluator's own URL is missing (--score-db-admin-url=URL, or the "
            "entry's admin_url in the evaluator's configuration)"
        )
    variable = DEFAULT_DB_ENV if env is None else env
    if not _NAME.fullmatch(variable):
        raise OptionError(f"{what}: env: {variable!r} is not a variable name")
    try:
        from pytest_scoring.db.postgres.admin import database_of
    except ImportError:
        raise OptionError(f"{what}: PostgreSQL needs psycopg: {EXTRA}") from None
    try:
        database = database_of(url)
    except DatabaseError as error:
        raise OptionError(f"{what}: {error}") from None
    if name is not None and not name.strip():
        raise OptionError(f"{what}: name: an empty name")
    return ServerDatabase(name or database, url, admin_url, variable, named_by)


def check_names(databases: Sequence[ServerDatabase]) -> None:
    """No two server databases named alike (one diff entry would hide the other), nor
    received through one variable (a run would get one of the two URLs).

    :raises OptionError: naming the name.
    """
    seen: set[str] = set()
    variables: dict[str, str] = {}
    for database in databases:
        if database.name in seen:
            raise OptionError(
                f"two databases are named {database.name!r}; give one a name of its own"
            )
        seen.add(database.name)
        other = variables.setdefault(database.env, database.name)
        if other != database.name:
            raise OptionError(
                f"databases {other!r} and {database.name!r} both receive their URL in "
                f"{database.env}; give one an env of its own"
            )


def check_repository_databases(databases: Sequence[ServerDatabase], reset: bool) -> None:
    """The databases the scored repository names (docs/security.md): never reset
    (``--score-db-reset`` drops and restores only the evaluator's), and each its own, owned by
    the role its URL names, which logs in with the URL's password. The evaluator's admin URL
    reaches every database of the server: the repository must not choose one it does not
    control.

    :raises OptionError: naming the setting, the database and the reason.
    """
    named = [database for database in databases if database.named_by]
    if reset and named:
        raise OptionError(
            f"{named[0].named_by}: --score-db-reset never resets database {named[0].name}, "
            "which the scored repository names; name it with --score-db-url"
        )
    for database in named:
        _check_controlled(database)


def _check_controlled(database: ServerDatabase) -> None:
    from pytest_scoring.db.postgres.admin import uncontrolled

    try:
        why = uncontrolled(database.admin_url, database.url)
    except server_errors() as error:
        line = (str(error).strip().splitlines() or [type(error).__name__])[0]
        raise OptionError(
            f"{database.named_by}: cannot check database {database.name}: {line}"
        ) from None
    if why is not None:
        raise OptionError(
            f"{database.named_by}: {why}, and the scored repository names it; name it with "
            "--score-db-url"
        )


def server_engines(
    databases: Sequence[ServerDatabase], end_backends_at_finish: bool = False
) -> list[PostgresEngine]:
    """One engine per admin URL, with the databases it reaches.

    :param end_backends_at_finish: end every backend on a database before its finish state is
        read (``run``, once the children are gone), recording what was ended.
    """
    if not databases:
        return []
    from pytest_scoring.db.ending_engine import EndingEngine
    from pytest_scoring.db.postgres.engine import PostgresEngine

    kind = EndingEngine if end_backends_at_finish else PostgresEngine
    by_admin: dict[str, dict[str, str]] = {}
    for database in databases:
        by_admin.setdefault(database.admin_url, {})[database.name] = database.url
    return [kind(admin_url, named) for admin_url, named in by_admin.items()]


def terminated(state: object) -> dict[str, list[Any]]:
    """What was ended, by database, to take ``state`` (empty for an engine that ends
    nothing, such as SQLite's)."""
    found = getattr(state, "terminated", None)
    return {name: list(ended) for name, ended in (found or {}).items() if ended}


def described(state: object) -> dict[str, Any]:
    """What identifies each database's state in ``state``, by name (empty for an engine that
    says nothing, such as SQLite's: its files are hashed elsewhere)."""
    return dict(getattr(state, "described", None) or {})


def public_url(url: str) -> str:
    """``url`` as given, without its password, in the user part or in query parameters
    (for the report's provenance)."""
    parts = urlsplit(url)
    user, at, hosts = parts.netloc.rpartition("@")
    netloc = f"{user.partition(':')[0]}{at}{hosts}"
    query = "&".join(
        item
        for item in parts.query.split("&")
        if item and unquote(item.partition("=")[0]).strip() not in _SECRET_PARAMETERS
    )
    return urlunsplit(parts._replace(netloc=netloc, query=query))


def server_errors() -> tuple[type[Exception], ...]:
    """What a database operation may raise: ``OSError`` (files), :class:`DatabaseError`,
    and a server driver's own errors when the driver is installed."""
    try:
        import psycopg
    except ImportError:
        return (OSError, DatabaseError)
    return (OSError, DatabaseError, psycopg.Error)


def role_refusals(databases: Sequence[ServerDatabase]) -> dict[str, list[str]]:
    """Why each database's application role must not be trusted, by name (only those with
    reasons): a superuser, ``CREATEROLE``, a member of the admin role…

    :raises DatabaseError: when the server cannot be asked.
    """
    from pytest_scoring.db.postgres.admin import refusals

    found = {database.name: refusals(database.admin_url, database.url) for database in databases}
    return {name: reasons for name, reasons in found.items() if reasons}
