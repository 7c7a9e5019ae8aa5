"""Read a diff and a selector from JSON files for ``pytest-scoring match`` (docs/cli.md).

The diff file is a diff (``{"comparisons": …}``, as ``diff.json`` or ``pytest-scoring diff
--json`` writes it) or a diff-of-diffs (``{"after_only": …}``, as ``diff_of_diffs.json``),
of which the ``after_only`` part, with ``from_tests`` when there is one, is matched — what
``db_diff_change`` looks at. ``-`` reads
standard input (for one of the two files). A diff file is read up to :data:`MAX_DIFF_BYTES`,
a selector file up to the configuration limit; a SQLite database given as the diff file is
named as such, with the command that makes a diff of it. A named file must be a regular
file: a device or a FIFO is refused without blocking.
"""

from __future__ import annotations

from typing import Any
from typing import Final

from pytest_scoring.db.diff_of_diffs import scored_part
from pytest_scoring.db.diff_types import DiffJSON
from pytest_scoring.documents import STDIN
from pytest_scoring.documents import decode
from pytest_scoring.documents import label
from pytest_scoring.documents import parse_json
from pytest_scoring.documents import read_bytes
from pytest_scoring.documents import read_document
from pytest_scoring.errors import ScoringError
from pytest_scoring.errors import SelectorError
from pytest_scoring.selector.language import Selector
from pytest_scoring.selector.language import Verdict
from pytest_scoring.selector.language import parse_selector

#: Largest diff file ``match`` reads, in bytes (report files are far smaller).
MAX_DIFF_BYTES: Final = 256 * 1024 * 1024
#: How every SQLite database file starts.
SQLITE_HEADER: Final = b"SQLite format 3\x00"


def read_diff_file(source: str) -> Any:
    """Parse the JSON diff in file ``source`` (``-``: standard input).

    :raises ScoringError: naming the file when it is a database, unreadable or not JSON.
    """
    data = read_bytes(source, MAX_DIFF_BYTES, regular_only=True)
    if data.startswith(SQLITE_HEADER):
        raise ScoringError(
            f"{label(source)}: a SQLite database, not a diff; make a diff with "
            f"'pytest-scoring diff --json BEFORE.db AFTER.db > diff.json'"
        )
    return parse_json(decode(data, source), source)


def diff_to_match(document: Any, source: str) -> DiffJSON:
    """The diff to match in a parsed diff file: itself, or what ``db_diff_change``'s selector
    sees of a diff-of-diffs (``after_only``, with ``from_tests`` when the file has it).

    :raises ScoringError: naming the file and key when the shape is not a diff.
    """
    where = label(source)
    if isinstance(document, dict) and "after_only" in document:
        parts = [part for part in ("after_only", "from_tests") if part in document]
        for part in parts:
            _check_diff(document[part], f"{where}: {part}")
        return scored_part(document)
    _check_diff(document, where)
    diff: DiffJSON = document  # the rest is read defensively (Selector.evaluate)
    return diff


def _check_diff(document: Any, where: str) -> None:
    """:raises ScoringError: naming the file and key when ``document`` is not a diff."""
    if not isinstance(document, dict) or "comparisons" not in document:
        raise ScoringError(
            f'{where}: expected a diff {{"comparisons": …}} or a diff-of-diffs {{"after_only": …}}'
        )
    comparisons = document["comparisons"]
    if not isinstance(comparisons, dict):
        raise ScoringError(f"{where}: comparisons: expected an object of databases")
    for key, entry in comparisons.items():
        if not isinstance(entry, dict):
            raise ScoringError(f"{where}: comparisons.{key}: expected an object")


def selector_from_file(source: str) -> Selector:
    """The selector in file ``source``, validated.

    :raises SelectorError: naming the file and the path inside the selector.
    """
    document = parse_json(read_document(source, regular_only=True), source)
    try:
        return parse_selector(document)
    except SelectorError as error:
        raise SelectorError(f"{label(source)}: {error}") from None


def match_files(diff_file: str, selector_file: str) -> Verdict:
    """Whether the selector in ``selector_file`` matches the diff in ``diff_file``, and the
    warnings of that evaluation."""
    if diff_file == STDIN and selector_file == STDIN:
        raise ScoringError("only one of DIFF_FILE and SELECTOR_FILE can be '-' (standard input)")
    selector = selector_from_file(selector_file)
    return selector.evaluate(diff_to_match(read_diff_file(diff_file), diff_file))
