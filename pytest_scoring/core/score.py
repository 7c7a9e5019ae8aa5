"""Scores shaped like Inspect AI's ``Score``, and helpers every scorer shares."""

from __future__ import annotations

import base64
import binascii
import hashlib
import math
from collections.abc import Mapping
from typing import Any
from typing import Final
from typing import TypedDict

from pytest_scoring.text import plural

CORRECT: Final = "C"
INCORRECT: Final = "I"
PARTIAL: Final = "P"
NOANSWER: Final = "N"

#: ``metadata.unscored`` of a ``"N"``: why it has no value. ``tampering``: an integrity
#: signal of a strict kind proved that the repository shaped its own outcomes.
UNSCORED_KEY: Final = "unscored"
TAMPERING: Final = "tampering"
#: ... ``repository``: what the scored code caused (a timeout, a crash, an INTERNALERROR,
#: pytest unable to start on its configuration, no test, a diff no selector could read).
REPOSITORY: Final = "repository"
#: ... ``infrastructure``: the evaluator's own failure (a scorer that crashed, a reference
#: rerun that did not run, the evaluator's files changed, an interrupt). The only kind the
#: ``scored`` denominator leaves out (docs/scoring.md#two-denominators).
INFRASTRUCTURE: Final = "infrastructure"
#: Every value of ``metadata.unscored``.
UNSCORED_KINDS: Final = (TAMPERING, REPOSITORY, INFRASTRUCTURE)
#: ``metadata.detects``: the scorer is a detector, its ``"C"`` a finding (docs/configuration.md).
DETECTS_KEY: Final = "detects"
#: ``metadata.counted_as`` of a ``"N"``: the value it counts as in every metric (a tampering
#: ``"N"`` counts as a failed sample: ``"I"``, 0 % passing, 100 % failing).
COUNTED_AS_KEY: Final = "counted_as"

#: How many items a list in score metadata keeps (failing test ids, command output lines…).
METADATA_LIST_CAP: Final = 100
#: How many characters a text in score metadata keeps (stdout, stderr…).
METADATA_TEXT_CAP: Final = 10_000

#: The longest text or BLOB, in bytes, that report files and diffs in score metadata keep
#: whole (``--score-value-cap``); a longer one is replaced by :func:`cap_value`'s stub.
DEFAULT_VALUE_CAP: Final = 10_000
#: The largest data file a report holds (``diff.json``, ``reference_diff.json``,
#: ``diff_of_diffs.json``): 64 MiB. The database scorers cut examples to fit under it; a
#: file that still would not fit is written as one ``{"$truncated": …}`` stub.
REPORT_FILE_CAP: Final = 64 * 1024 * 1024

Value = str | int | float | bool


class Score(TypedDict, total=False):
    """Inspect AI's ``Score`` with exactly its defined keys (``value`` is required)."""

    value: Value
    answer: str | None
    explanation: str | None
    metadata: dict[str, Any]


def make_score(
    value: Value,
    scorer: str,
    explanation: str | None = None,
    answer: str | None = None,
    metadata: dict[str, Any] | None = None,
) -> Score:
    """Build a score whose metadata names the scorer that made it.

    :param value: ``"C"``, ``"I"``, ``"N"``, ``"P"`` or a number.
    :param scorer: the scorer's type name, stored as ``metadata.scorer``.
    """
    return {
        "value": value,
        "answer": answer,
        "explanation": explanation,
        "metadata": {"scorer": scorer, **(metadata or {})},
    }


def error_score(
    scorer: str, error: BaseException | str, unscored: str = INFRASTRUCTURE, **metadata: Any
) -> Score:
    """A ``"N"`` (no answer) score for a scorer that could not decide.

    :param unscored: what caused it (``metadata.unscored``): by default the evaluator's side.
    """
    message = error if isinstance(error, str) else f"{type(error).__name__}: {error}"
    return make_score(
        NOANSWER,
        scorer,
        explanation=f"{scorer} could not score: {message}",
        metadata={"error": message, UNSCORED_KEY: unscored, **metadata},
    )


def with_unscored(score: Score) -> Score:
    """``score``, a ``"N"`` given ``metadata.unscored`` when its scorer (a plugin's) gave
    none: not knowing the cause, the evaluator's side."""
    metadata = score.get("metadata")
    if score.get("value") != NOANSWER:
        return score
    metadata = metadata if isinstance(metadata, dict) else {}
    if metadata.get(UNSCORED_KEY) in UNSCORED_KINDS:
        return score
    return {**score, "metadata": {**metadata, UNSCORED_KEY: INFRASTRUCTURE}}


def counted_value(score: Score) -> Value:
    """What a score counts as in the metrics: its value, or for a ``"N"`` whose metadata says
    what it counts as (``counted_as``), that."""
    value = score.get("value")
    if value == NOANSWER:
        counted = (score.get("metadata") or {}).get(COUNTED_AS_KEY)
        if isinstance(counted, str | int | float | bool):
            return counted
    return value if isinstance(value, str | int | float | bool) else NOANSWER


def is_detection(score: Mapping[str, Any]) -> bool:
    """The score is a detector's ``"C"`` (``metadata.detects``): a finding, not a success."""
    metadata = score.get("metadata")
    return (
        score.get("value") == "C"
        and isinstance(metadata, dict)
        and metadata.get(DETECTS_KEY) is True
    )


def is_tampering(score: Mapping[str, Any]) -> bool:
    """The score is a ``"N"`` because tampering was proven (``metadata.unscored``)."""
    metadata = score.get("metadata")
    return isinstance(metadata, dict) and metadata.get(UNSCORED_KEY) == TAMPERING


def bool_value(condition: bool) -> str:
    """``"C"`` when the condition holds, else ``"I"``."""
    return CORRECT if condition else INCORRECT


def value_to_float(value: object) -> float:
    """Map a score value to a number the way Inspect AI's ``value_to_float`` does."""
    if isinstance(value, bool):
        return float(value)
    if isinstance(value, int | float):
        return float(value)
    if isinstance(value, str):
        return _string_to_float(value)
    return 0.0


def _string_to_float(value: str) -> float:
    named = {CORRECT: 1.0, INCORRECT: 0.0, PARTIAL: 0.5, NOANSWER: 0.0}
    if value in named:
        return named[value]
    lowered = value.lower()
    if lowered in ("yes", "true"):
        return 1.0
    if lowered in ("no", "false"):
        return 0.0
    try:
        number = float(value)
    except ValueError:
        return 0.0
    return number if math.isfinite(number) else 0.0


def cap_list(items: list[Any], limit: int = METADATA_LIST_CAP) -> list[Any]:
    """The first ``limit`` items; callers store the full count beside the list."""
    return items[:limit]


def cap_text(text: str, limit: int = METADATA_TEXT_CAP) -> str:
    """The text cut to ``limit`` characters, saying how much was cut."""
    if len(text) <= limit:
        return text
    return f"{text[:limit]}\n… [{plural(len(text) - limit, 'more character')} cut]"


def _stub(data: bytes, head: Any) -> dict[str, Any]:
    return {"$truncated": len(data), "sha256": hashlib.sha256(data).hexdigest(), "head": head}


def is_blob_value(value: Any) -> bool:
    """Whether ``value`` is a BLOB as JSON: ``{"$blob": base64}``."""
    return isinstance(value, dict) and list(value) == ["$blob"] and isinstance(value["$blob"], str)


def cap_value(value: Any, cap: int = DEFAULT_VALUE_CAP) -> Any:
    """A text or ``{"$blob": …}`` value over ``cap`` bytes as a stub; anything else as it is.

    The stub ``{"$truncated": bytes, "sha256": hex, "head": …}`` keeps the full size, a hash
    of the full value (to compare it with a value seen elsewhere) and its first ``cap``
    bytes: text for a text, ``{"$blob": base64}`` for a BLOB (docs/report.md).
    """
    if isinstance(value, str):
        if len(value) * 4 <= cap:  # at most 4 bytes per character: no need to encode
            return value
        data = value.encode("utf-8", "surrogatepass")
        if len(data) <= cap:
            return value
        return _stub(data, data[:cap].decode("utf-8", "ignore"))
    if is_blob_value(value):
        encoded = value["$blob"]
        if len(encoded) <= cap:  # base64 is longer than its bytes
            return value
        try:
            data = base64.b64decode(encoded, validate=True)
        except binascii.Error:
            return cap_value(encoded, cap)
        if len(data) <= cap:
            return value
        return _stub(data, {"$blob": base64.b64encode(data[:cap]).decode("ascii")})
    return value


def cap_values(item: Any, cap: int = DEFAULT_VALUE_CAP) -> Any:
    """``item`` (a JSON document) with every text and BLOB over ``cap`` bytes stubbed."""
    capped = cap_value(item, cap)
    if capped is not item or is_blob_value(item):
        return capped  # a stub, or a BLOB kept whole (its base64 is longer than its bytes)
    if isinstance(item, list):
        return [cap_values(element, cap) for element in item]
    if isinstance(item, dict):
        return {key: cap_values(value, cap) for key, value in item.items()}
    return item
