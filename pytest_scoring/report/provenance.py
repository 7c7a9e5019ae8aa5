"""What produced a report: the tool, the options, and hashes of the inputs (docs/report.md).

Every ``scores.json`` carries a ``provenance`` object, so that a score can be traced to what it
was computed from: two reports with the same provenance came from the same inputs, settings
and tool, and a report can be checked against the files it names. The hashes are SHA-256 of a
file's bytes, or of a folder's manifest (every path, its kind and each file's own hash).

Only what the evaluator gives is hashed here (the configuration, the selector, the expected
tests, the reference checkout): these are small or are read anyway. The scored repository's
own content is hashed by ``pytest-scoring run``, which copies it anyway; a session scored in
process is the repository itself and cannot vouch for its own content.
"""

from __future__ import annotations

import platform
from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING
from typing import Any

from pytest_scoring.core.encoding import json_digest
from pytest_scoring.process.environment import evaluator_pytest_version

if TYPE_CHECKING:
    from collections.abc import Sequence

    from pytest_scoring.core.settings import ScoringSettings
    from pytest_scoring.core.settings import ServerDatabase


def path_digest(path: Path) -> str:
    """SHA-256 of a file's content, or of a folder's manifest (``"missing"`` when absent)."""
    # Loaded only when the evaluator names a file to hash (configuration, reference…).
    from pytest_scoring.fs.guard import file_digest
    from pytest_scoring.fs.guard import tree_digest

    return tree_digest(path) if path.is_dir() else file_digest(path)


def settings_json(settings: ScoringSettings) -> dict[str, Any]:
    """The options that decide the scores, as JSON (where output goes is left out)."""
    return {
        "db_diff": settings.db_diff,
        "selector": settings.selector,
        "reference": _text(settings.reference),
        "config": _text(settings.config_file),
        "config_entry": settings.config_entry,
        "test_patterns": list(settings.test_patterns),
        "db_patterns": list(settings.db_patterns),
        "db_exclude": [str(folder) for folder in settings.db_exclude],
        "path_map": {sandbox: str(local) for sandbox, local in settings.path_map.items()},
        "selector_timeout": settings.selector_timeout,
        "fail_under": settings.fail_under,
        "deterministic": settings.deterministic,
        "db_reset": settings.db_reset,
        "value_cap": settings.value_cap,
        "selection": list(settings.selection),
        "expected_tests": _text(settings.expected_source),
        "strict": sorted(settings.strict.kinds),
    }


def input_digests(settings: ScoringSettings, known: Mapping[Path, str]) -> dict[str, str]:
    """Hashes of the inputs the evaluator named: only those given appear.

    :param known: digests already taken (``run``'s fingerprint of the reference copy), used
        rather than reading the files again.
    """
    named = {
        "config": settings.config_file,
        "expected_tests": settings.expected_source,
        "reference": settings.reference,
    }
    digests = {
        name: known.get(path) or path_digest(path)
        for name, path in named.items()
        if path is not None
    }
    if settings.selector is not None:
        digests["selector"] = json_digest(settings.selector)
    return digests


def provenance(route: str, options: Mapping[str, Any], inputs: Mapping[str, str]) -> dict[str, Any]:
    """The ``provenance`` object of ``scores.json``.

    :param route: how the outcomes were gathered: ``plugin``, ``run`` or ``junit``.
    :param options: the options that decide the scores, as JSON.
    :param inputs: SHA-256 of each input, by name.
    """
    from pytest_scoring.core.version import __version__

    return {
        "tool": "pytest-scoring",
        "version": __version__,
        "route": route,
        "python": platform.python_version(),
        # Taken when pytest-scoring loaded: in process, before any conftest.py could set it.
        "pytest": evaluator_pytest_version(),
        "options": dict(options),
        "inputs": dict(sorted(inputs.items())),
    }


def session_provenance(
    settings: ScoringSettings,
    known: Mapping[Path, str] | None = None,
    started: Mapping[str, Mapping[str, str]] | None = None,
) -> dict[str, Any]:
    """The provenance of a scored session: its settings and the inputs they name (``run``
    adds the repository's own hash, see :mod:`pytest_scoring.cli.runner`), and its server
    databases (:func:`server_databases`).

    :param known: digests already taken, by path (see :func:`input_digests`).
    :param started: what identifies each server database's start snapshot, by name.
    """
    route = "plugin" if settings.repository is None else "run"
    made = provenance(route, settings_json(settings), input_digests(settings, known or {}))
    if settings.databases:
        made["databases"] = server_databases(settings.databases, started or {})
    return made


def server_databases(
    databases: Sequence[ServerDatabase], started: Mapping[str, Mapping[str, str]]
) -> list[dict[str, Any]]:
    """Each server database (a SQLite file is an input of the repository's own hash): its
    name, its URL without a password, the server's version, and what identifies its state
    at session start cheaply (docs/databases.md#postgresql); the last two are null without
    a start snapshot."""
    from pytest_scoring.db.servers import public_url

    return [
        {
            "name": database.name,
            "url": public_url(database.url),
            "server_version": started.get(database.name, {}).get("server_version"),
            "start_state": started.get(database.name, {}).get("state"),
        }
        for database in databases
    ]


def _text(path: Path | None) -> str | None:
    return None if path is None else str(path)
