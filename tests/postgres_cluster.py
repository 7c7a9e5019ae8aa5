"""A throwaway PostgreSQL cluster of the tests' own (issue 31): never a shared or system one.

``initdb --auth=scram-sha-256`` in a temporary folder, a Unix socket in that folder and no TCP
(``listen_addresses=''``), run as an unprivileged user (``pg_ctl`` refuses root: as root the
cluster runs as ``nobody``, in a folder it owns), stopped and removed afterwards.
"""

from __future__ import annotations

import glob
import itertools
import os
import secrets
import shutil
import subprocess
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any
from typing import Final
from urllib.parse import quote

#: The cluster's superuser: the evaluator's admin role.
ADMIN: Final = "scoring_admin"
#: Numbers the application roles and databases a test makes.
_NAMES: Final = itertools.count()


def binaries() -> Path | None:
    """The newest installed PostgreSQL's program folder (Debian's layout), else PATH's."""
    found = sorted(
        glob.glob("/usr/lib/postgresql/*/bin/initdb"), key=lambda p: int(Path(p).parent.parent.name)
    )
    if found:
        return Path(found[-1]).parent
    initdb = shutil.which("initdb")
    return Path(initdb).parent if initdb and shutil.which("pg_ctl") else None


def url(user: str, password: str | None, database: str, socket_dir: Path) -> str:
    """A libpq URL reaching ``database`` through the cluster's socket folder."""
    secret = f":{quote(password, safe='')}" if password is not None else ""
    return (
        f"postgresql://{quote(user, safe='')}{secret}@/{quote(database, safe='')}?host={socket_dir}"
    )


def query(url: str, statement: str, *params: Any) -> list[tuple[Any, ...]]:
    """``statement`` on its own autocommit connection; its rows, if it returns any."""
    import psycopg

    with psycopg.connect(url, autocommit=True) as connection:
        cursor = connection.execute(statement, params or None)  # type: ignore[arg-type]
        return cursor.fetchall() if cursor.description else []


class Cluster:
    """A running cluster: its admin URL, and application roles and databases made on demand."""

    def __init__(self, bindir: Path, folder: Path):
        self.bindir, self.folder = bindir, folder
        self.data, self.socket_dir = folder / "data", folder / "socket"
        self.password = secrets.token_urlsafe(16)
        self._ids = (65534, 65534) if os.geteuid() == 0 else None

    def _run(self, *command: str) -> None:
        user = (
            {"user": self._ids[0], "group": self._ids[1], "extra_groups": []} if self._ids else {}
        )
        env = {"PATH": "/usr/bin:/bin", "LC_ALL": "C.UTF-8", "HOME": str(self.folder)}
        subprocess.run(
            [str(self.bindir / command[0]), *command[1:]],
            check=True,
            capture_output=True,
            env=env,
            cwd=self.folder,
            **user,  # type: ignore[arg-type]
        )

    def start(self) -> None:
        self.folder.chmod(0o755)
        self.socket_dir.mkdir()
        pwfile = self.folder / "pwfile"
        pwfile.write_text(self.password + "\n")
        if self._ids:
            for path in (self.folder, self.socket_dir, pwfile):
                os.chown(path, *self._ids)
        self._run(
            "initdb", "-D", str(self.data), "-U", ADMIN, "--auth=scram-sha-256",
            f"--pwfile={pwfile}", "-E", "UTF8", "--locale=C", "--no-instructions",
        )  # fmt: skip
        pwfile.unlink()
        settings = (
            f"unix_socket_directories = '{self.socket_dir}'\nlisten_addresses = ''\n"
            "fsync = off\nfull_page_writes = off\nmax_prepared_transactions = 10\n"
        )
        with (self.data / "postgresql.conf").open("a") as conf:
            conf.write(settings)
        self._run("pg_ctl", "start", "-w", "-D", str(self.data), "-l", str(self.folder / "log"))

    def stop(self) -> None:
        if (self.data / "postmaster.pid").exists():
            self._run("pg_ctl", "stop", "-w", "-m", "immediate", "-D", str(self.data))

    @property
    def admin_url(self) -> str:
        """The superuser, with its password, on the ``postgres`` database."""
        return url(ADMIN, self.password, "postgres", self.socket_dir)

    def url(self, user: str, password: str | None, database: str) -> str:
        return url(user, password, database, self.socket_dir)

    def application(self, setup: str = "") -> str:
        """A new LOGIN role (no superuser) owning a new database; ``setup`` run in it as that
        role. :returns: the role's URL on its database."""
        import psycopg

        number = next(_NAMES)
        role, database, password = f"app_{number}", f"appdb_{number}", secrets.token_hex(8)
        with psycopg.connect(self.admin_url, autocommit=True) as admin:
            admin.execute(f"CREATE ROLE {role} LOGIN PASSWORD '{password}'")
            admin.execute(f"CREATE DATABASE {database} OWNER {role}")
        app_url = self.url(role, password, database)
        if setup:
            with psycopg.connect(app_url, autocommit=True) as app:
                app.execute(setup)  # type: ignore[arg-type]
        return app_url


@contextmanager
def running_cluster() -> Iterator[Cluster | str]:
    """A started cluster, stopped and removed on exit; or why there can be none."""
    bindir = binaries()
    if bindir is None:
        yield "PostgreSQL's initdb and pg_ctl are missing (Debian: apt-get install postgresql)"
        return
    cluster = Cluster(bindir, Path(tempfile.mkdtemp(prefix="pytest-scoring-pg-")))
    try:
        cluster.start()
        yield cluster
    finally:
        cluster.stop()
        shutil.rmtree(cluster.folder, ignore_errors=True)
