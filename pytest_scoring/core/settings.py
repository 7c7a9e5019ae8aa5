"""The settings record: what the evaluator asked for, once options, ini and defaults are merged.

:func:`pytest_scoring.evaluation.settings.resolve_settings` builds it from pytest's options or
``run``'s command line; every floor above reads it.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass
from dataclasses import field
from pathlib import Path
from typing import Any
from typing import Final
from typing import Literal

from pytest_scoring.core.determinism import DEFAULT_FLAKY
from pytest_scoring.core.determinism import FlakyRule
from pytest_scoring.core.score import DEFAULT_VALUE_CAP
from pytest_scoring.core.signals import NO_STRICT
from pytest_scoring.core.signals import StrictKinds

DEFAULT_DB_PATTERNS: Final = ("*.db", "*.sqlite", "*.sqlite3")
DEFAULT_TEST_PATTERNS: Final = ("tests/**/*.py", "tests/**/*.js", "tests/**/*.ts")
DEFAULT_REPORT_ROOT: Final = "scores"
#: The settings that choose what is measured (scorers, selector, databases, reference, report,
#: gate); :attr:`ScoringSettings.explicit` names those given as command-line options.
STEERING_SETTINGS: Final = (
    "score_config",
    "score_selector",
    "score_reference",
    "score_test_patterns",
    "score_db_patterns",
    "score_db_exclude",
    "score_report",
    "score_markdown",
    "score_fail_under",
    "score_path_maps",
    "score_selector_timeout",
    "score_expected_tests",
    "score_strict",
    "score_value_cap",
)
#: ``--evidence`` / ``--score-evidence`` levels: what a report keeps for re-scoring.
EVIDENCE_LEVELS: Final = ("none", "diffs", "all")
#: Folder under the report root keeping the first-seen databases for ``--score-db-reset``,
#: one store per scored repository.
RESET_STORE: Final = ".db-reset"
#: The name of a session's snapshot copies under the report root (in process) begins so.
SNAPSHOTS_PREFIX: Final = ".db-snapshots-"
#: The part of the evaluator's caches a session reads and writes (docs/security.md): under
#: ``pytest --score`` the scored repository's code shares the evaluator's process and user and
#: can write whatever it writes (``in-process``); ``run``, ``junit`` and the Inspect scorers
#: never run it there (``evaluator``), and never read what an in-process session wrote.
CacheRoute = Literal["in-process", "evaluator"]
#: The variable through which a run receives its server database's URL, unless named.
DEFAULT_DB_ENV: Final = "DATABASE_URL"


@dataclass(frozen=True)
class ServerDatabase:
    """A database on a server (PostgreSQL), named by URL (docs/databases.md#postgresql)."""

    #: The key of its diff entry (default: the database's own name).
    name: str
    #: The application's URL: what its tests connect with.
    url: str
    #: The evaluator's own URL on that server (``--score-db-admin-url``), never given to a run.
    admin_url: str
    #: The variable through which a run (the session, the reference's) receives its URL.
    env: str = DEFAULT_DB_ENV
    #: The scored repository's setting that named it (``score_db_urls (ini)``…), None when
    #: the evaluator did: such a database gets a ``selection`` signal and is never reset.
    named_by: str | None = None


@dataclass
class ScoringSettings:
    """What the evaluator asked for, after options, ini settings and defaults are merged."""

    root: Path
    enabled: bool = False
    db_diff: bool = False
    selector: dict[str, Any] | None = None
    reference: Path | None = None
    test_patterns: list[str] = field(default_factory=lambda: list(DEFAULT_TEST_PATTERNS))
    db_patterns: list[str] = field(default_factory=lambda: list(DEFAULT_DB_PATTERNS))
    config_file: Path | None = None
    #: ``FILE#NAME``: the fixture of a fixtures file whose ``scorer:`` block is loaded.
    config_entry: str | None = None
    #: Sandbox path prefixes (``/repo``) and the local folders they stand for.
    path_map: dict[str, Path] = field(default_factory=dict)
    #: Seconds each scorer's selector may take (``None``: the default, 60).
    selector_timeout: float | None = None
    #: Settings given as command-line options (not ini, not defaults).
    explicit: frozenset[str] = frozenset()
    #: Lines for the session header: configuration read but not used (a fixture's sandbox).
    notes: list[str] = field(default_factory=list)
    report_root: Path = Path(DEFAULT_REPORT_ROOT)
    #: Where the score table is written as Markdown (``--score-markdown``).
    markdown: Path | None = None
    fail_under: float | None = None
    deterministic: bool = False
    db_reset: bool = False
    #: ``--score-db-reset`` on the evaluator's command line: only then are server databases
    #: reset (the repository's ini setting resets its own files only; docs/security.md).
    db_reset_servers: bool = False
    #: Folders the evaluator leaves out of discovery and the reference copy (absolute).
    db_exclude: list[Path] = field(default_factory=list)
    #: The longest text or BLOB (bytes) report data files and diffs in metadata keep whole.
    value_cap: int = DEFAULT_VALUE_CAP
    #: This session's ``-k``/``-m`` arguments: the reference rerun selects the same tests.
    selection: list[str] = field(default_factory=list)
    #: ``--score-expected-tests``: the SOURCE of the expected set (docs/scoring.md).
    expected_source: Path | None = None
    #: ``--score-strict``: the integrity signal kinds that make the test scores ``N``.
    strict: StrictKinds = NO_STRICT
    #: Settings of the repository's ini file that only the evaluator's command line may give,
    #: by name, with the value found: ignored, each an integrity signal (docs/scoring.md).
    ignored_ini: dict[str, str] = field(default_factory=dict)
    #: The scored repository as the evaluator named it, when ``root`` is a private copy of it
    #: (``pytest-scoring run``).
    repository: Path | None = None
    #: Where snapshots go (default: under the report root; ``run``: its private area).
    scratch: Path | None = None
    #: ``run --tests-from PATH``: the evaluator's tests, put into the copy before any test
    #: runs (under ``run``, the private copy of PATH; docs/security.md).
    tests_from: Path | None = None
    #: ``--score-verify-tests=PATH``: the tree's tests must be PATH's (in process only).
    verify_tests: Path | None = None
    #: The part of the evaluator's caches this session uses (default: the one ``run`` never
    #: reads; ``run`` sets its own).
    cache_route: CacheRoute = "in-process"
    #: ``--score-evidence``: what the report keeps for ``pytest-scoring rescore``
    #: (``none``, ``diffs`` or ``all``; docs/report.md#re-scoring).
    evidence: str = "diffs"
    #: The configuration's ``env:`` table: variables ``run``'s children get over the pinned
    #: environment (``--env`` wins over it).
    environment: dict[str, str] = field(default_factory=dict)
    #: ``--retries``/``--score-retries``: how many times a test that did not pass runs again.
    retries: int = 0
    #: ``--flaky``/``--score-flaky``: how a test whose attempts differ counts.
    flaky: FlakyRule = DEFAULT_FLAKY
    #: ``--score-db-url`` and the configuration's ``databases:``: the server databases scored
    #: beside the repository's SQLite files.
    databases: list[ServerDatabase] = field(default_factory=list)
    #: ``--score-db-admin-url``, for the configuration's entries that give no ``admin_url``.
    db_admin_url: str | None = None
    #: Whether every backend on a server database is ended before its finish state is read
    #: (``run``: the children are gone by then; in process the state is read in place).
    end_backends_at_finish: bool = False

    def scored_places(self) -> list[Path]:
        """The repository, its copy, the reference and the report root: folders a scored
        session can write, where the evaluator keeps no cache."""
        places = (self.root, self.repository, self.reference, self.report_root)
        return [place for place in places if place is not None]

    def tests_from_is_reference(self) -> bool:
        """``--tests-from`` names the reference itself: the reference rerun (PATH's tests on
        the reference's code) is the baseline, which runs once."""
        if self.tests_from is None or self.reference is None:
            return False
        return self.tests_from.resolve() == self.reference.resolve()

    def reset_store(self) -> Path:
        """The ``--score-db-reset`` store of this repository: under the report root, keyed by
        the repository's resolved path, so that no two repositories ever share one."""
        repository = (self.repository or self.root).resolve()
        key = hashlib.sha256(str(repository).encode("utf-8", "surrogateescape")).hexdigest()
        return self.report_root / RESET_STORE / f"{repository.name or 'root'}-{key[:16]}"

    def scratch_folder(self) -> Path:
        """Where the evaluator's working files (snapshot copies) go."""
        return self.report_root if self.scratch is None else self.scratch

    def excluded_folders(self, tree: Path | None = None) -> list[Path]:
        """The folders no walk of ``tree`` enters: the report root and the evaluator's
        exclusions, at the same place relative to ``tree`` as they have in the repository.

        :param tree: the repository (default) or a copy laid out like it.
        """
        root = self.root.resolve()
        tree = root if tree is None else tree
        folders = []
        for folder in (self.report_root, *self.db_exclude):
            resolved = folder.resolve()
            if resolved.is_relative_to(root):
                folders.append(tree / resolved.relative_to(root))
        return folders
