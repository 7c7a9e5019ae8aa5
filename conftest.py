from __future__ import annotations

import shutil
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest

from pytest_scoring.process import environment

pytest_plugins = ["pytester"]


@pytest.fixture(autouse=True)
def private_cache(
    tmp_path_factory: pytest.TempPathFactory, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Each test its own cache folder: no test reuses (or leaves) another's baseline run.

    pytest-scoring reads the cache's place from the environment it captured when it loaded,
    before this runs, so the captured copy is changed too.
    """
    folder = str(tmp_path_factory.mktemp("cache"))
    monkeypatch.setenv("XDG_CACHE_HOME", folder)
    monkeypatch.setitem(environment._CAPTURED, "XDG_CACHE_HOME", folder)


@pytest.fixture
def open_folder() -> Iterator[Path]:
    """A folder other users may pass through and read (as a checkout under /srv would be):
    a test's own temporary folder is closed to them."""
    yield from _folder_for_every_user("pytest-scoring-test-", 0o755)


@pytest.fixture
def drop() -> Iterator[Path]:
    """A folder every user may write: where the runs of a test's repositories, each as a user
    of its own under ``run`` as root, meet and leave what they found."""
    yield from _folder_for_every_user("pytest-scoring-drop-", 0o777)


def _folder_for_every_user(prefix: str, mode: int) -> Iterator[Path]:
    folder = Path(tempfile.mkdtemp(prefix=prefix))
    folder.chmod(mode)
    yield folder
    shutil.rmtree(folder, ignore_errors=True)


@pytest.fixture(scope="session")
def postgres() -> Iterator[object]:
    """A throwaway PostgreSQL cluster of the session's own (tests/postgres_cluster.py);
    the tests that use it are skipped, with the reason, where PostgreSQL is not installed."""
    from postgres_cluster import running_cluster

    with running_cluster() as cluster:
        if isinstance(cluster, str):
            pytest.skip(cluster)
        yield cluster
