"""Scores and reports as terminal tables and lines (``show``, ``list``, the session summary)."""

from __future__ import annotations

from collections.abc import Mapping
from collections.abc import Sequence
from typing import Any
from typing import Final
from typing import NamedTuple

from pytest_scoring.core.score import is_detection
from pytest_scoring.core.score import is_tampering
from pytest_scoring.core.signals import Signal
from pytest_scoring.core.signals import signal_count
from pytest_scoring.text import plural
from pytest_scoring.text import report_tests_text
from pytest_scoring.text import value_text

#: How many characters of an explanation ``show`` prints, wrapped in its column (a verdict's
#: sentence is about 200; longer texts are error messages).
EXPLANATION_WIDTH: Final = 600
#: How many characters of a signal's example detail a terminal line shows.
DETAIL_WIDTH: Final = 100


def shorten(text: str, width: int = EXPLANATION_WIDTH) -> str:
    """One line of at most ``width`` characters, ending in ``…`` when cut."""
    line = " ".join(text.split())
    return line if len(line) <= width else line[: width - 1] + "…"


def shown_value(score: Mapping[str, Any]) -> str:
    """A score's value as the views show it: a detector's ``"C"`` reads ``C detected``, never
    as a success (docs/report.md)."""
    value = value_text(score.get("value"))
    return f"{value} detected" if is_detection(score) else value


def score_line(name: str, score: Mapping[str, Any], explained: bool = True) -> str:
    """``name: value  (explanation)``: one score as the session summary and ``junit`` print it.

    :param explained: add the explanation (left out under ``pytest -q``).
    """
    line = f"{name}: {shown_value(score)}"
    explanation = score.get("explanation")
    return f"{line}  ({explanation})" if explained and explanation else line


def format_metrics(metrics: dict[str, Any]) -> str:
    """``mean=71.43, stderr=0`` from one scorer's metrics (``show``, the Markdown summary)."""
    return ", ".join(f"{name}={value_text(value)}" for name, value in metrics.items())


def score_table(content: dict[str, Any]) -> Any:
    """A rich table of a ``scores.json``: scorer, value, explanation, metrics."""
    from rich.table import Column
    from rich.table import Table
    from rich.text import Text

    explanation = Column("explanation", overflow="fold", ratio=1)
    table = Table("scorer", "value", explanation, "metrics", title="scores")
    metrics = content.get("metrics") or {}
    for name, score in (content.get("scores") or {}).items():
        table.add_row(
            name,
            shown_value(score),
            # Wrapped, never cut; the scored repository's text, never read as rich markup.
            Text(_printable(shorten(str(score.get("explanation") or ""), EXPLANATION_WIDTH))),
            format_metrics(metrics.get(name) or {}),
        )
    return table


def metrics_table(content: dict[str, Any]) -> Any:
    """A rich table of a batch's metrics: each scorer's, over all its repositories."""
    from rich.table import Table

    samples = content.get("samples") or []
    title = f"metrics over {plural(len(samples), 'repository', 'repositories')}"
    table = Table("scorer", "metrics", title=title)
    for name, metrics in (content.get("metrics") or {}).items():
        table.add_row(name, format_metrics(metrics))
    return table


def samples_table(content: dict[str, Any]) -> Any:
    """A rich table of a batch's repositories by scorers, with whether each completed."""
    from rich.table import Table

    samples = content.get("samples") or []
    names = list(dict.fromkeys(name for sample in samples for name in sample.get("scores") or {}))
    table = Table(title="repositories")
    table.add_column("repository", overflow="fold")
    for name in names:
        table.add_column(name)
    table.add_column("complete")
    for sample in samples:
        scores = sample.get("scores") or {}
        values = [shown_value(scores[name]) if name in scores else "" for name in names]
        table.add_row(
            str(sample.get("repository") or ""), *values, _yes_no(bool(sample.get("complete")))
        )
    return table


def samples_line(content: dict[str, Any]) -> str:
    """``repositories: 50 (2 did not complete, 3 kept from an earlier run)``."""
    samples = content.get("samples") or []
    unfinished = sum(1 for sample in samples if not sample.get("complete"))
    kept = sum(1 for sample in samples if sample.get("kept_from"))
    notes = [f"{unfinished} did not complete"] if unfinished else []
    notes += [f"{kept} kept from an earlier run"] if kept else []
    return f"repositories: {len(samples)}" + (f" ({', '.join(notes)})" if notes else "")


#: How many flaky tests the terminal names (the report lists them all).
FLAKY_SHOWN: Final = 3


def flaky_line(tests: object) -> str | None:
    """``flaky: 2 tests (tests/test_a.py::test_x failed, passed; …)`` after reruns, or None."""
    flaky = tests.get("flaky") if isinstance(tests, dict) else None
    if not isinstance(flaky, dict) or not flaky:
        return None
    shown = [
        f"{nodeid} {', '.join(map(str, attempts)) if isinstance(attempts, list) else ''}"
        for nodeid, attempts in list(flaky.items())[:FLAKY_SHOWN]
    ]
    more = f"; {len(flaky) - FLAKY_SHOWN} more" if len(flaky) > FLAKY_SHOWN else ""
    return f"flaky: {plural(len(flaky), 'test')} ({'; '.join(shown)}{more})"


def counts_line(content: Mapping[str, Any]) -> str:
    """``tests: 3 passed, 1 failed, 2 errors = 6 counted; not counted: 1 skipped`` from a
    ``scores.json``, in the one wording of :func:`~pytest_scoring.text.tests_text`."""
    tests = content.get("tests")
    return f"tests: {report_tests_text(tests if isinstance(tests, dict) else {})}"


#: Test ids a line about dropped expected tests names.
DROPPED_NAMED: Final = 3


def dropped_line(tests: object) -> str | None:
    """``2 expected tests dropped: they fail in the source folder (…)``, when a folder-derived
    expected set (``tests.expected_tests.dropped``) left tests out; else None."""
    source = tests.get("expected_tests") if isinstance(tests, Mapping) else None
    dropped = source.get("dropped") if isinstance(source, Mapping) else None
    if not isinstance(dropped, list) or not dropped:
        return None
    named = ", ".join(_printable(str(nodeid)) for nodeid in dropped[:DROPPED_NAMED])
    more = ", …" if len(dropped) > DROPPED_NAMED else ""
    count = plural(len(dropped), "expected test")
    return f"{count} dropped: they fail in the source folder ({named}{more})"


class KindSummary(NamedTuple):
    """What the views show of one kind of integrity signal that occurred."""

    kind: str
    #: How many signals (those a report's cap left out included).
    total: int
    #: The first signal's detail and file.
    detail: str
    file: str | None
    #: It made test scores ``"N"`` (``metadata.strict_kinds`` of a tampering score).
    strict: bool


def kind_summaries(
    signals: Sequence[Any], scores: Sequence[Mapping[str, Any]]
) -> list[KindSummary]:
    """Each kind of ``signals`` once, in the order first seen; ``scores`` tell which kinds
    were strict. Entries that are not signals (a damaged report) are skipped."""
    strict: set[str] = set()
    for score in scores:
        if isinstance(score, dict) and is_tampering(score):
            kinds = score["metadata"].get("strict_kinds")
            strict.update(str(kind) for kind in kinds if isinstance(kinds, list))
    found: dict[str, KindSummary] = {}
    for signal in signals:
        if not _is_signal(signal):
            continue
        kind, count = signal["kind"], signal_count(signal)
        if kind in found:
            found[kind] = found[kind]._replace(total=found[kind].total + count)
        else:
            detail, file = signal["detail"], signal["file"]
            found[kind] = KindSummary(kind, count, detail, file, kind in strict)
    return list(found.values())


def _is_signal(item: object) -> bool:
    return (
        isinstance(item, dict)
        and isinstance(item.get("kind"), str)
        and isinstance(item.get("detail"), str)
        and isinstance(item.get("file"), str | None)
    )


def _printable(text: str) -> str:
    """Text from the scored repository, safe on a terminal: no escape or control codes."""
    return "".join(char if char.isprintable() else "?" for char in text)


def signal_lines(signals: Sequence[Any], scores: Mapping[str, Any]) -> list[str]:
    """One line per kind of integrity signal: ``integrity outcome_changed: 2 signals,
    strict (the test scores are N); e.g. …`` (``run``, ``show``, the session summary)."""
    lines = []
    for summary in kind_summaries(signals, list(scores.values())):
        status = "strict (the test scores are N)" if summary.strict else "information"
        where = f" ({summary.file})" if summary.file else ""
        example = shorten(_printable(summary.detail + where), DETAIL_WIDTH)
        count = plural(summary.total, "signal")
        lines.append(f"integrity {summary.kind}: {count}, {status}; e.g. {example}")
    return lines


def integrity_line(signals: Sequence[Any]) -> str:
    """``integrity: 3 signals (outcome_changed, outcome_hook)``: after ``complete:``."""
    summaries = kind_summaries(signals, [])
    count = sum(summary.total for summary in summaries)
    kinds = f" ({', '.join(summary.kind for summary in summaries)})" if summaries else ""
    return f"integrity: {plural(count, 'signal')}{kinds}"


def batch_signals(content: Mapping[str, Any]) -> tuple[list[Signal], dict[str, Any]]:
    """A batch's signals and scores, every repository's together (keyed by repository and
    scorer), for :func:`signal_lines` and :func:`integrity_line`."""
    signals: list[Signal] = []
    scores: dict[str, Any] = {}
    for number, sample in enumerate(content.get("samples") or []):
        if not isinstance(sample, dict):
            continue
        found = sample.get("integrity")
        signals += found if isinstance(found, list) else []
        for name, score in (sample.get("scores") or {}).items():
            scores[f"{number}/{name}"] = score
    return signals, scores


def reports_table(infos: Sequence[Any]) -> Any:
    """A rich table of reports (:class:`~pytest_scoring.report.reader.ReportInfo`), as given."""
    from rich.table import Table

    table = Table(title="reports")
    table.add_column("id", no_wrap=True, min_width=22)
    for heading in ("created", "repository", "complete", "scores"):
        table.add_column(heading, overflow="fold")  # wrapped, never cut: scripts read it
    for info in infos:
        if info.samples is None:
            repository = info.repository
            values = "\n".join(f"{name}={value_text(v)}" for name, v in info.values.items())
        else:  # a batch: its size, and each scorer's metrics over its repositories
            repository = plural(info.samples, "repository", "repositories")
            values = "\n".join(f"{name}: {format_metrics(m)}" for name, m in info.metrics.items())
        table.add_row(info.scan_id, info.created[:19], repository, _yes_no(info.complete), values)
    return table


def _yes_no(flag: bool) -> str:
    return "yes" if flag else "no"


def fail_under_line(
    percent: float,
    threshold: float,
    flag: str,
    complete: bool = True,
    samples: int | None = None,
    tampered: bool = False,
) -> str:
    """Why the exit status is 1: ``FAIL: 50% of tests pass, below --fail-under=75`` (and
    that the session did not complete, which no pass rate makes up for).

    :param samples: for a batch, how many repositories ``percent`` is the mean over.
    :param tampered: proven tampering counted as 0 % (docs/scoring.md#integrity).
    """
    why = "" if complete else " (the session did not complete)"
    why += " (proven tampering counts as 0%)" if tampered else ""
    over = "" if samples is None else f" on average over {samples} repositories"
    below = f"below {flag}={value_text(threshold)}"
    return f"FAIL: {value_text(percent)}% of tests pass{over}, {below}{why}"
