"""What a repository's scores depend on, as hashes: stable transcript ids and resume keys.

A batch (``pytest-scoring run REPO REPO …``, docs/cli.md#many-repositories) names each
repository's transcript after the repository's path and content, so the same input always
gets the same id, and keeps a repository scored by an earlier run of the batch only when
nothing its scores depend on changed: its content, the evaluator's options (with the content
of every file they name), the reference checkout, and the version of pytest-scoring.
"""

from __future__ import annotations

import base64
import hashlib
import json
from collections.abc import Iterable
from collections.abc import Mapping
from pathlib import Path
from typing import Any
from typing import Final
from typing import TypedDict

from pytest_scoring.core.version import __version__
from pytest_scoring.report.provenance import path_digest

#: ``--score-*`` options that say where things go, not how anything is scored.
OUTPUT_OPTIONS: Final = frozenset({"score_report", "score_markdown", "score_reference"})


class SampleInputs(TypedDict):
    """The hashes a repository's scores in a batch depend on (``inputs`` of a sample)."""

    #: The repository's content (:func:`~pytest_scoring.fs.guard.tree_digest`).
    repository: str
    #: The evaluator's options and the files they name (:func:`options_digest`).
    options: str
    #: The reference checkout's content, or None without one.
    reference: str | None


def _sha256(text: str) -> str:
    return hashlib.sha256(text.encode("utf-8", "surrogateescape")).hexdigest()


def transcript_id(repository: Path, content: str) -> str:
    """The transcript id of a repository in a batch: 22 url-safe characters derived from its
    resolved path and its content hash, like a scan id in form."""
    digest = hashlib.sha256(f"{repository}\0{content}".encode("utf-8", "surrogateescape"))
    return base64.urlsafe_b64encode(digest.digest()).decode("ascii")[:22]


def options_digest(options: Mapping[str, Any], files: Iterable[Path]) -> str:
    """SHA-256 of what a batch's options say, the content of the files they name and the
    tool's version: one changed setting, configuration line or plugin rescores everything.

    :param options: the options as JSON-able values; the :data:`OUTPUT_OPTIONS` are left out.
    :param files: files and folders the options name (configuration, selector, plugins…).
    """
    described = {
        "pytest_scoring": __version__,
        "options": {key: value for key, value in options.items() if key not in OUTPUT_OPTIONS},
        "files": {str(path): path_digest(path) for path in sorted(set(files))},
    }
    return _sha256(json.dumps(described, sort_keys=True, default=str))


def batch_key(options: str, reference: str | None) -> str:
    """What a batch's report folder is found by when the batch runs again."""
    return _sha256(f"{options}\0{reference}")[:32]
