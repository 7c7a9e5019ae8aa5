"""Read a diff and a selector from JSON files for ``pytest-scoring match`` (docs/cli.md).

The diff file is a diff (``{"comparisons": …}``, as ``diff.json`` or ``pytest-scoring diff
--json`` writes it) or a diff-of-diffs (``{"after_only": …}``, as ``diff_of_diffs.json``),
of which the ``after_only`` part is matched — what ``db_diff_change`` looks at. ``-`` reads
standard input (for one of the two files).
"""

from __future__ import annotations

import json
import sys
from collections.abc import Mapping
from pathlib import Path
from typing import Any
from typing import Final

from pytest_scoring.errors import ScoringError
from pytest_scoring.errors import SelectorError
from pytest_scoring.selector.language import Selector
from pytest_scoring.selector.language import parse_selector

STDIN: Final = "-"


def _label(source: str) -> str:
    return "<stdin>" if source == STDIN else source


def read_json(source: str) -> Any:
    """Parse the JSON in file ``source`` (``-``: standard input).

    :raises ScoringError: naming the file when it cannot be read or parsed.
    """
    try:
        text = sys.stdin.read() if source == STDIN else Path(source).read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as error:
        reason = getattr(error, "strerror", None) or str(error)
        raise ScoringError(f"{_label(source)}: cannot read: {reason}") from None
    try:
        return json.loads(text)
    except json.JSONDecodeError as error:
        raise ScoringError(
            f"{_label(source)}: not valid JSON ({error.msg} at line {error.lineno}, "
            f"column {error.colno})"
        ) from None


def diff_to_match(document: Any, source: str) -> Mapping[str, Any]:
    """The diff to match in a parsed diff file: itself, or the ``after_only`` part.

    :raises ScoringError: naming the file and key when the shape is not a diff.
    """
    label = _label(source)
    if isinstance(document, dict) and "after_only" in document:
        document, label = document["after_only"], f"{label}: after_only"
    if not isinstance(document, dict) or "comparisons" not in document:
        raise ScoringError(
            f'{label}: expected a diff {{"comparisons": …}} or a diff-of-diffs {{"after_only": …}}'
        )
    comparisons = document["comparisons"]
    if not isinstance(comparisons, dict):
        raise ScoringError(f"{label}: comparisons: expected an object of databases")
    for key, entry in comparisons.items():
        if not isinstance(entry, dict):
            raise ScoringError(f"{label}: comparisons.{key}: expected an object")
    return document


def selector_from_file(source: str) -> Selector:
    """The selector in file ``source``, validated.

    :raises SelectorError: naming the file and the path inside the selector.
    """
    document = read_json(source)
    try:
        return parse_selector(document)
    except SelectorError as error:
        raise SelectorError(f"{_label(source)}: {error}") from None


def match_files(diff_file: str, selector_file: str) -> bool:
    """Whether the selector in ``selector_file`` matches the diff in ``diff_file``."""
    if diff_file == STDIN and selector_file == STDIN:
        raise ScoringError("only one of DIFF_FILE and SELECTOR_FILE can be '-' (standard input)")
    selector = selector_from_file(selector_file)
    return selector.matches(diff_to_match(read_json(diff_file), diff_file))
