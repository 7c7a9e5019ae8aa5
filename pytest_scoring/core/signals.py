"""Integrity signals: what a scored repository did that can shape its own test outcomes.

The kinds, and what each route can see, are in docs/scoring.md#integrity. Every signal is
``{"kind", "detail", "file"}``; ``file`` is relative to the repository root, or None. The kit
(:mod:`pytest_scoring.kit.integrity`) finds most of them inside the test process; the
evaluator names, caps and judges them here.
"""

from __future__ import annotations

import site
import sys
from collections.abc import Iterable
from collections.abc import Mapping
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Final
from typing import TypedDict
from typing import final

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
#: ``--strict default``: the kinds that prove tampering, strict by default under ``run``,
#: ``junit`` and the Inspect scorers (in process the default is none). ``containment`` is
#: not among them: it is strict by default only where the repository's processes ran as root.
STRICT_DEFAULT: Final = frozenset(
    {
        "outcome_changed",
        "patched",
        "plugin_disabled",
        "early_end",
        "tripwire",
        "stream_forged",
        "exit_mismatch",
        "id_collision",
        "junit_conflict",
        "interpreter_modified",
    }
)
#: ``--strict all``: every kind that can be strict.
STRICT_ALL: Final = frozenset(KINDS) - INFORMATION
#: Most signals of one kind a report keeps; one more signal says how many were left out.
SIGNALS_PER_KIND = 20


class Signal(TypedDict):
    """One integrity signal."""

    kind: str
    detail: str
    file: str | None


def make_signal(kind: str, detail: str, file: str | None = None) -> Signal:
    return {"kind": kind, "detail": detail, "file": file}


@final
@dataclass(frozen=True, slots=True)
class StrictKinds:
    """What ``--strict`` chose: the signal kinds that make the three test scores ``"N"``."""

    #: Kinds that are strict whatever the run.
    kinds: frozenset[str] = frozenset()
    #: ``containment`` is strict too when the repository's processes ran as root (partial
    #: containment as root): what applies under ``run`` when the evaluator names no kinds.
    containment_as_root: bool = False

    def for_run(self, as_root: bool) -> StrictKinds:
        """The choice for a run whose repository's processes ran as root or not."""
        kinds = self.kinds | {"containment"} if self.containment_as_root and as_root else self.kinds
        return StrictKinds(kinds)


#: No kind is strict: in process unless ``--score-strict`` is given, or ``--strict none``.
NO_STRICT: Final = StrictKinds()
#: The choice when the evaluator names none under ``run``, ``junit`` and the Inspect scorers:
#: the default set, and ``containment`` where the repository's processes ran as root.
DEFAULT_STRICT: Final = StrictKinds(STRICT_DEFAULT, containment_as_root=True)
#: The names ``--strict`` takes besides the kinds.
_STRICT_WORDS: Final = ("none", "default", "all")


def parse_strict(text: str) -> StrictKinds:
    """The kinds ``--strict`` names: ``none``, ``default`` (:data:`STRICT_DEFAULT`), ``all``,
    kinds, or a comma list of them (their union). Empty text (a bare ``--strict``) means
    ``default,containment``.

    :raises ValueError: naming a word that is not a kind, or a kind that only informs.
    """
    names = [name.strip() for name in text.split(",") if name.strip()] or ["default", "containment"]
    kinds: set[str] = set()
    for name in names:
        if name == "default":
            kinds |= STRICT_DEFAULT
        elif name == "all":
            kinds |= STRICT_ALL
        elif name in INFORMATION:
            raise ValueError(f"{name!r} only informs: it never makes a score N")
        elif name in KINDS:
            kinds.add(name)
        elif name != "none":
            choices = ", ".join([*_STRICT_WORDS, *sorted(STRICT_ALL)])
            raise ValueError(f"{name!r} is not a signal kind (one of {choices})")
    return StrictKinds(frozenset(kinds))


def file_under(file: str | None, paths: Iterable[str]) -> bool:
    """``file`` (relative to the repository root) is one of ``paths`` or inside one of them."""
    if file is None:
        return False
    return any(file == path or file.startswith(path.rstrip("/") + "/") for path in paths)


@final
@dataclass(frozen=True, slots=True)
class EvaluatorSide:
    """What in a session was the evaluator's own: a signal about it informs and never makes
    a score ``"N"`` (a repository is not blamed for the evaluator's files, interpreter or stop).
    """

    #: Files and folders relative to the repository root (POSIX) that the evaluator brought:
    #: its test files (``--tests-from``), its interpreter's environment inside the repository.
    paths: frozenset[str] = frozenset()
    #: Signals the evaluator caused itself: its deadline, its Ctrl-C, its own ``-x``.
    caused: tuple[Signal, ...] = ()

    def owns(self, signal: Signal) -> bool:
        return signal in self.caused or file_under(signal["file"], self.paths)


def interpreter_paths(root: Path) -> frozenset[str]:
    """The running interpreter's environment (``sys.prefix``, its site-packages) where it lies
    inside ``root``, relative to it: ``tox`` and a ``.venv`` of the repository put pytest's own
    files there, and what they do is the evaluator's."""
    folders = {sys.prefix, sys.exec_prefix, sys.base_prefix, *site.getsitepackages()}
    if site.ENABLE_USER_SITE and site.USER_SITE:
        folders.add(site.USER_SITE)
    root = root.resolve()
    inside = set()
    for folder in folders:
        try:
            inside.add(Path(folder).resolve().relative_to(root).as_posix())
        except (ValueError, OSError):
            continue
    # The repository's root itself is never the evaluator's (an interpreter installed at it).
    return frozenset(path for path in inside if path != ".")


def left_out(signal: Signal) -> int:
    """How many signals a summary entry of :func:`cap_signals` stands for; 0 for a signal."""
    head = signal["detail"].split(" ", 1)[0]
    if not (head.isdigit() and signal["file"] is None):
        return 0
    return int(head) if signal["detail"] == _left_out_detail(int(head), signal["kind"]) else 0


def signal_count(signal: Signal) -> int:
    """How many signals one entry of a report's list stands for."""
    return left_out(signal) or 1


def _left_out_detail(count: int, kind: str) -> str:
    return f"{count} more {kind} signal(s) left out"


def tampering_kinds(
    signals: Iterable[Signal], strict: frozenset[str], side: EvaluatorSide | None = None
) -> list[str]:
    """The kinds, sorted, of the signals that prove tampering: of a strict kind, not one that
    only informs, not the evaluator's (a summary of left-out signals counts unless a kept
    signal of its kind is the evaluator's: :func:`cap_signals` keeps the repository's first).
    """
    side = side or EvaluatorSide()
    signals = list(signals)
    owned = {signal["kind"] for signal in signals if side.owns(signal)}
    found = set()
    for signal in signals:
        kind = signal["kind"]
        if kind not in strict or kind in INFORMATION or side.owns(signal):
            continue
        if not (left_out(signal) and kind in owned):
            found.add(kind)
    return sorted(found)


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


def cap_signals(signals: Iterable[Signal], side: EvaluatorSide | None = None) -> list[Signal]:
    """Each signal once, at most :data:`SIGNALS_PER_KIND` per kind (a hostile suite could
    change thousands of outcomes; one line saying how many is enough).

    :param side: what was the evaluator's: its signals are kept after the repository's, so
        that a summary of left-out signals holds the evaluator's only once one is kept.
    """
    kept: list[Signal] = []
    left_out: dict[str, int] = {}
    unique = dedupe(signals)
    if side is not None:
        unique.sort(key=side.owns)  # stable: the repository's first, each in its order
    for signal in unique:
        kind = signal["kind"]
        if sum(1 for other in kept if other["kind"] == kind) < SIGNALS_PER_KIND:
            kept.append(signal)
        else:
            left_out[kind] = left_out.get(kind, 0) + 1
    for kind, count in left_out.items():
        kept.append(make_signal(kind, _left_out_detail(count, kind)))
    return kept
