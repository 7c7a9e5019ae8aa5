"""Integrity signals: what a scored repository did that can shape its own test outcomes.

The kinds, and what each route can see, are in docs/scoring.md#integrity. Every signal is
``{"kind", "detail", "file"}``; ``file`` is relative to the repository root, or None. The kit
(:mod:`pytest_scoring.kit.integrity`) finds most of them inside the test process; the
evaluator names, caps and judges them here.
"""

from __future__ import annotations

from collections.abc import Iterable
from collections.abc import Mapping
from collections.abc import Sequence
from typing import Final
from typing import TypedDict

KINDS = (
    "outcome_hook",
    "outcome_changed",
    "patched",
    "plugin_disabled",
    "selection",
    "early_end",
    "containment",
    "tests_modified",
    "tripwire",
    "stream_forged",
    "exit_mismatch",
    "id_collision",
    "junit_conflict",
    "interpreter_modified",
)
#: Kinds that only inform: they never make a score ``N``, whatever ``--strict`` says.
INFORMATION: Final = frozenset({"outcome_hook", "selection", "tests_modified"})
#: The kinds ``--score-strict`` (``run --strict``) acts on when given no list. ``containment``
#: (``run`` only: the repository's processes ran as the evaluator's user, or outside a
#: subreaper) is among them: a strict evaluator wants every process contained.
STRICT_DEFAULT = frozenset(
    {"outcome_changed", "patched", "plugin_disabled", "early_end", "containment"}
)
#: Most signals of one kind a report keeps; one more signal says how many were left out.
SIGNALS_PER_KIND = 20


class Signal(TypedDict):
    """One integrity signal."""

    kind: str
    detail: str
    file: str | None


def make_signal(kind: str, detail: str, file: str | None = None) -> Signal:
    return {"kind": kind, "detail": detail, "file": file}


def parse_strict(text: str | None) -> frozenset[str]:
    """The kinds ``--score-strict[=KIND,…|all|default]`` names; empty text means the default
    kinds, None means none.

    :raises ValueError: naming a kind that does not exist.
    """
    if text is None:
        return frozenset()
    names = [name.strip() for name in text.split(",") if name.strip()]
    if not names or names == ["default"]:
        return STRICT_DEFAULT
    if names == ["all"]:
        return frozenset(KINDS)
    unknown = [name for name in names if name not in KINDS]
    if unknown:
        raise ValueError(
            f"{unknown[0]!r} is not a signal kind (one of {', '.join(KINDS)}, all or default)"
        )
    return frozenset(names)


def early_end_signal(not_run: Sequence[str], reason: str, file: str | None = None) -> Signal | None:
    """``early_end`` when tests did not run or something ended the session; else None."""
    parts = [reason] if reason else []
    if not_run:
        parts.append(f"{len(not_run)} collected test(s) did not run")
    return make_signal("early_end", "; ".join(parts), file) if parts else None


def collision_signals(collided: Mapping[str, int]) -> list[Signal]:
    """``id_collision``: one per test id pytest collected for several different tests (their
    ids written alike), which count as one test with the worst outcome any of them had."""
    return [
        make_signal(
            "id_collision",
            f"pytest collected {times} different tests with the id {nodeid}: they count as "
            "one, with the worst outcome any of them had",
            nodeid.split("::")[0],
        )
        for nodeid, times in collided.items()
    ]


def dedupe(signals: Iterable[Signal]) -> list[Signal]:
    """The signals in first-seen order, each once."""
    seen = set()
    unique = []
    for signal in signals:
        key = (signal["kind"], signal["detail"], signal["file"])
        if key not in seen:
            seen.add(key)
            unique.append(signal)
    return unique


def cap_signals(signals: Iterable[Signal]) -> list[Signal]:
    """Each signal once, at most :data:`SIGNALS_PER_KIND` per kind (a hostile suite could
    change thousands of outcomes; one line saying how many is enough)."""
    kept: list[Signal] = []
    left_out: dict[str, int] = {}
    for signal in dedupe(signals):
        kind = signal["kind"]
        if sum(1 for other in kept if other["kind"] == kind) < SIGNALS_PER_KIND:
            kept.append(signal)
        else:
            left_out[kind] = left_out.get(kind, 0) + 1
    for kind, count in left_out.items():
        kept.append(make_signal(kind, f"{count} more {kind} signal(s) left out"))
    return kept
