"""``db_change``: what the test session did to the repository's databases (docs/databases.md).

The session's databases (:class:`~pytest_scoring.db.session.SessionDatabases`: the start
snapshot, the finish state, their diff) are a resource every database scorer shares.
"""

from __future__ import annotations

from collections.abc import Collection
from collections.abc import Mapping
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING
from typing import Any
from typing import Final

from pytest_scoring.core.metrics import Metric
from pytest_scoring.core.metrics import accuracy
from pytest_scoring.core.metrics import stderr
from pytest_scoring.core.score import METADATA_LIST_CAP
from pytest_scoring.core.score import REPORT_FILE_CAP
from pytest_scoring.core.score import REPOSITORY
from pytest_scoring.core.score import Score
from pytest_scoring.core.score import bool_value
from pytest_scoring.core.score import error_score
from pytest_scoring.core.score import make_score
from pytest_scoring.core.settings import ScoringSettings
from pytest_scoring.db.diff import DEFAULT_MAX_ROWS
from pytest_scoring.db.diff_shape import cap_diff
from pytest_scoring.db.diff_shape import fit_diff
from pytest_scoring.db.diff_shape import has_changes
from pytest_scoring.db.diff_shape import lost_databases
from pytest_scoring.db.diff_types import DiffJSON
from pytest_scoring.db.engine import DatabaseEngine
from pytest_scoring.db.servers import server_engines
from pytest_scoring.db.session import SessionDatabases
from pytest_scoring.db.session import sqlite_engine
from pytest_scoring.db.sqlite_engine import file_row_reader
from pytest_scoring.errors import ConfigError
from pytest_scoring.errors import DatabaseError
from pytest_scoring.scorers.base import ScoringContext
from pytest_scoring.scorers.evidence import SENTENCE_WIDTH
from pytest_scoring.scorers.evidence import Evidence
from pytest_scoring.scorers.evidence import Matcher
from pytest_scoring.scorers.evidence import find_evidence
from pytest_scoring.scorers.evidence import mentioned_names
from pytest_scoring.scorers.inputs import DatabaseInputs
from pytest_scoring.scorers.scorer_type import InspectForm
from pytest_scoring.scorers.scorer_type import ScorerType
from pytest_scoring.text import plural

if TYPE_CHECKING:
    from pytest_scoring.core.budget import TimeBudget
    from pytest_scoring.selector.language import Selector

SCORER_TYPE: Final = "db_change"
_COUNTS: Final = ("added", "removed", "changed")
METRICS: Final = (accuracy, stderr)


def diff_summary(diff: DiffJSON) -> dict[str, int]:
    """Totals over a diff: databases, unreadable ones, changed tables and rows."""
    summary = dict.fromkeys(
        ("databases", "database_errors", "tables_changed", "schema_changes"), 0
    ) | {f"rows_{kind}": 0 for kind in _COUNTS}
    for entry in diff["comparisons"].values():
        summary["databases"] += 1
        summary["database_errors"] += "error" in entry
        planes = entry["comparisons"]
        for table in planes["data"]["tables"].values():
            summary["tables_changed"] += table["status"] != "unchanged"
            for kind in _COUNTS:
                summary[f"rows_{kind}"] += table["counts"][kind]
        schema_tables = planes["schema"]["tables"].values()
        summary["schema_changes"] += sum(t["status"] != "unchanged" for t in schema_tables)
    return summary


def session_databases(context: ScoringContext) -> SessionDatabases:
    """The context's shared :class:`SessionDatabases`, created on first use."""
    databases = context.inputs.databases
    if databases is None:
        if context.settings is None:
            raise DatabaseError("database scoring needs the session's settings")
        databases = context.inputs.databases = SessionDatabases(
            context.settings, context.guard, session_engines(context.settings)
        )
    if not isinstance(databases, SessionDatabases):
        raise DatabaseError("the session's databases come from a report's evidence here")
    return databases


def session_engines(settings: ScoringSettings) -> list[DatabaseEngine[Any]]:
    """The engines of a session: SQLite under the repository, then each server's databases."""
    servers = server_engines(settings.databases, settings.end_backends_at_finish)
    return [sqlite_engine(settings), *servers]


class StoredDatabases:
    """The session's diff as a report's evidence kept it (``pytest-scoring rescore``)."""

    def __init__(
        self,
        settings: ScoringSettings,
        full_diff: DiffJSON | None,
        problem: str | None,
        finals: Mapping[str, Path],
    ):
        """:param full_diff: the diff with every changed row; None when it was not kept.
        :param problem: why it cannot be used, when it cannot.
        :param finals: the kept final databases, by path in the diff (``--evidence all``).
        """
        self.settings = settings
        self._full = full_diff
        self._problem = problem
        self._finals = dict(finals)
        self._read_row = file_row_reader(self._finals)

    def problem(self) -> str | None:
        return self._problem if self._full is None else None

    def diff(self, shared: bool = True) -> DiffJSON:
        assert self._full is not None, "problem() first"
        return self._full

    def complete(self, diff: DiffJSON, budget: TimeBudget) -> DiffJSON:
        return diff

    def unsearched(self) -> list[str]:
        return []

    def read_row(
        self, database: str, table: str, key: Mapping[str, Any], leave_out: Collection[str]
    ) -> dict[str, Any] | None:
        return self._read_row(database, table, key, leave_out)

    def ended(self) -> dict[str, dict[str, list[Any]]]:
        return {}

    def created(self) -> dict[str, Any] | None:
        return None


def database_inputs(context: ScoringContext) -> DatabaseInputs:
    """The context's database inputs: kept evidence when re-scoring, else the live session's."""
    stored = context.inputs.databases
    return stored if stored is not None else session_databases(context)


class DbChangeScorer:
    """``db_change``: whether the session changed the databases as the selector describes."""

    def __init__(
        self,
        selector: Selector | None,
        interim_score: bool = False,
        selector_timeout: float | None = None,
    ):
        self.name = SCORER_TYPE
        self.type = SCORER_TYPE
        self.metrics: Sequence[Metric] = METRICS
        #: Its ``"C"`` means the change happened: a finding, not a success.
        self.detects = True
        self.selector = selector
        self.interim_score = interim_score
        #: Seconds the selector may take; ``None``: the session's ``--score-selector-timeout``.
        self.selector_timeout = selector_timeout

    def prepare(self, context: ScoringContext) -> None:
        """Take the start snapshot (shared by every database scorer of the session), before
        any code of the repository can change a database."""
        session_databases(context).start()

    def score(self, context: ScoringContext) -> Score:
        databases = database_inputs(context)
        problem = databases.problem()
        if problem is not None:
            return error_score(self.type, problem)
        diff = databases.diff(shared=not self.interim_score)
        value_cap = databases.settings.value_cap
        context.report_files["diff.json"] = fit_diff(
            diff, DEFAULT_MAX_ROWS, value_cap, REPORT_FILE_CAP
        )
        summary = diff_summary(diff)
        metadata: dict[str, Any] = {
            "selector": self.selector.source if self.selector else None,
            "counts": summary,
            "unsearched_folders": databases.unsearched(),
            "errors": {
                relpath: entry["error"]
                for relpath, entry in diff["comparisons"].items()
                if "error" in entry
            },
            "diff": cap_diff(diff, METADATA_LIST_CAP, value_cap),
        }
        ended = databases.ended()
        if ended:
            metadata["ended"] = ended
        created = databases.created()
        if created is not None:
            metadata["databases"] = created
        selector = self.selector
        if selector is None:
            matched, warnings, seen = has_changes(diff), [], diff
            matches: Matcher | None = None
        else:
            # Loaded only with a selector (parsing it loaded the rest of the language).
            from pytest_scoring.core.budget import SelectorTimeout
            from pytest_scoring.core.budget import budget_for

            budget = budget_for(self.selector_timeout, session_selector_timeout(context))
            seen = databases.complete(diff, budget)
            try:
                verdict = selector.evaluate(seen, budget)
            except SelectorTimeout as error:
                return error_score(self.type, str(error), REPOSITORY, **metadata)
            matched, warnings = verdict.matched, list(verdict.warnings)

            def matches(narrowed: DiffJSON) -> bool:
                return selector.evaluate(narrowed, budget).matched

        lost = lost_databases(diff)
        if not matched and lost:
            return error_score(
                self.type,
                f"cannot tell what the session did: {'; '.join(lost.values())}",
                REPOSITORY,
                lost_databases=lost,
                counts=summary,
            )
        evidence = find_evidence(
            seen,
            matches if matched else None,
            databases.read_row,
            mentioned_names(metadata["selector"]),
        )
        if evidence is not None:
            metadata["evidence"] = evidence.to_json(value_cap)
        return make_score(
            bool_value(matched),
            self.type,
            explanation=self._explain(matched, summary, evidence),
            metadata={**metadata, "selector_warnings": warnings},
        )

    def _explain(self, matched: bool, summary: dict[str, int], evidence: Evidence | None) -> str:
        """``the session changed the databases: users.db, table users, row id=1 (username
        'admin'): role 'user' → 'admin' (1 database, 1 row changed)``: counts that are 0 are
        left out."""
        if self.selector is None:
            what = "changed the databases" if matched else "changed no database"
        else:
            what = "made a change the selector matches" if matched else "made no matching change"
        rows = [
            f"{plural(summary[f'rows_{kind}'], 'row')} {kind}"
            for kind in _COUNTS
            if summary[f"rows_{kind}"]
        ]
        unreadable = summary["database_errors"]
        errors = [f"{plural(unreadable, 'database')} unreadable"] if unreadable else []
        totals = f" ({', '.join([plural(summary['databases'], 'database'), *rows, *errors])})"
        if evidence is None:
            return f"the session {what}{totals}"
        lead = f"the session {what}: " if matched else f"the session {what}; it changed "
        return lead + evidence.phrase(SENTENCE_WIDTH - len(lead) - len(totals)) + totals


def session_selector_timeout(context: ScoringContext) -> float | None:
    """The session's ``--score-selector-timeout`` (``None`` outside a session)."""
    return context.settings.selector_timeout if context.settings is not None else None


def checked_selector(selector: Any, selector_timeout: float | None) -> Selector | None:
    """A database scorer's selector, parsed, after checking its ``selector_timeout``.

    :raises ConfigError: for a ``selector_timeout`` that is not a positive number of seconds.
    :raises SelectorError: for an invalid selector, naming its path.
    """
    if selector is None and selector_timeout is None:
        return None
    # Loaded only now: a session without a selector never needs the selector language.
    from pytest_scoring.core.budget import is_positive_seconds
    from pytest_scoring.selector.language import Selector
    from pytest_scoring.selector.language import parse_selector

    if selector_timeout is not None and not is_positive_seconds(selector_timeout):
        raise ConfigError(
            f"selector_timeout: {selector_timeout!r} is not a positive number of seconds"
        )
    if isinstance(selector, Selector) or selector is None:
        return selector
    last = _LAST_PARSED[0]
    if last is not None and last[0] is selector:
        return last[1]
    parsed = parse_selector(selector)
    _LAST_PARSED[0] = (selector, parsed)
    return parsed


#: The last selector parsed and what it gave. Every entry of a configuration that leaves out
#: ``selector`` gets the same ``--score-selector`` object (and YAML aliases share one): parsed
#: once, 20,000 such entries cost one parse of a large selector, not 20,000 (issue 32). Kept by
#: identity: the JSON objects read from a file are never changed after parsing.
_LAST_PARSED: list[tuple[object, Selector] | None] = [None]


def db_change_scorer(
    selector: Any = None, interim_score: bool = False, selector_timeout: float | None = None
) -> DbChangeScorer:
    """Score what the test session did to the databases.

    :param selector: a selector (a JSON object, see docs/selectors.md) the session diff must match;
        ``None`` scores ``"C"`` when any table changed in data or schema.
    :param interim_score: compute a fresh diff and leave nothing for other scorers.
    :param selector_timeout: seconds the selector may take before the score is ``"N"``;
        ``None``: ``--score-selector-timeout`` (default 60).
    :raises SelectorError: for an invalid selector, naming its path, before any test runs.
    """
    return DbChangeScorer(
        checked_selector(selector, selector_timeout), interim_score, selector_timeout
    )


TYPE: Final = ScorerType(
    SCORER_TYPE,
    db_change_scorer,
    METRICS,
    detects=True,
    from_evidence=True,
    inspect=InspectForm(
        "db_change_scorer",
        positional=("selector", "interim_score"),
        keyword=("repo_path", "evidence"),
        docs={
            "evidence": "what the sample's store keeps for scoring again without the sandbox: "
            '``"none"``, ``"diffs"`` (the diff with every changed row) or ``"all"`` (the final '
            "databases too; docs/inspect.md#inspect-rescoring)."
        },
        note="Before: the diff ``diff_databases`` stored, else ``snapshot:[first]`` or the "
        "sample's ``reference_repo_dir``; after: the repository once its tests ran.",
        reads="the store's `db_diff`, or `snapshot:[first]` / `reference_repo_dir` and the "
        "tests' run",
    ),
)
