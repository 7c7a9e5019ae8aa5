"""The score table as Markdown, for the summary pages of CI runs (docs/report.md).

GitHub Actions shows the file named by ``GITHUB_STEP_SUMMARY`` on the run's page; GitLab
users keep the ``--score-markdown`` file as an artifact. Test ids, messages and explanations
come from the scored repository, so every piece of text is escaped: it shows as itself and
cannot add links, images, HTML or table cells.
"""

from __future__ import annotations

import os
import re
from collections.abc import Mapping
from pathlib import Path
from typing import Any
from typing import Final

from pytest_scoring.core.score import is_detection
from pytest_scoring.errors import ReportError
from pytest_scoring.report import GITHUB_SUMMARY_ENV
from pytest_scoring.report.html import PAGE_FILE
from pytest_scoring.report.terminal import KindSummary
from pytest_scoring.report.terminal import batch_signals
from pytest_scoring.report.terminal import counts_line
from pytest_scoring.report.terminal import dropped_line
from pytest_scoring.report.terminal import format_metrics
from pytest_scoring.report.terminal import kind_summaries
from pytest_scoring.report.terminal import shorten
from pytest_scoring.text import plural
from pytest_scoring.text import value_text

#: Tests listed below the table (failed and erroring first); the others are counted.
LISTED_TESTS: Final = 10
#: Characters of an explanation or message kept in one table cell or list line.
CELL_WIDTH: Final = 200
_VALUE_MARKS: Final = {"C": "✅ C", "I": "❌ I", "N": "⚠️ N", "P": "◐ P"}
#: A detector's ``"C"``: a finding (an attack happened), never a success.
_DETECTED: Final = "🚨 C detected"
#: What can start markup inside a line: emphasis, code, links and images, HTML, entities, cells.
_MARKUP: Final = re.compile(r"[\\`*_~\[\]<>&|]")
_LISTED_OUTCOMES: Final = ("failed", "error")


def escape(text: object, width: int = CELL_WIDTH) -> str:
    """Text shown as itself: one line, shortened, every character that could start markup
    backslash-escaped (CommonMark allows that for any ASCII punctuation), so no cell, tag,
    link, image or code span can begin. A bare web address may still show as a link, as
    GitHub does with any text; what it shows is the address itself.
    """
    return _MARKUP.sub(lambda match: "\\" + match.group(0), shorten(str(text), width))


def code(text: object, cell: bool = False) -> str:
    """Text as a code span, fenced by more backticks than it holds in a row.

    :param cell: the span stands in a table cell, where a ``|`` ends the cell even inside
        code unless escaped (tables read ``\\|`` as ``|`` there).
    """
    line = " ".join(str(text).split())
    if cell:
        line = line.replace("|", "\\|")
    longest = max((len(run) for run in re.findall(r"`+", line)), default=0)
    fence = "`" * (longest + 1)
    pad = " " if line.startswith("`") or line.endswith("`") else ""
    return f"{fence}{pad}{line}{pad}{fence}"


def _value(score: Mapping[str, Any]) -> str:
    value = score.get("value")
    if is_detection(score):
        return _DETECTED
    if isinstance(value, str) and value in _VALUE_MARKS:
        return _VALUE_MARKS[value]
    return escape(value_text(value))


def _row(cells: list[str]) -> str:
    return "| " + " | ".join(cells) + " |"


def _scores_table(content: Mapping[str, Any]) -> list[str]:
    metrics = content.get("metrics") or {}
    lines = [_row(["scorer", "value", "explanation", "metrics"]), _row(["---"] * 4)]
    for name, score in (content.get("scores") or {}).items():
        explanation = escape(score.get("explanation") or "")
        measured = escape(format_metrics(metrics.get(name) or {}))
        lines.append(_row([code(name, cell=True), _value(score), explanation, measured]))
    return lines


def _samples_table(samples: list[Any]) -> list[str]:
    """A table of repositories by scorers, for a report of several scored repositories."""
    names = list(dict.fromkeys(name for sample in samples for name in (sample.get("scores") or {})))
    lines = [
        _row(["repository", *(code(name, cell=True) for name in names)]),
        _row(["---"] * (len(names) + 1)),
    ]
    for sample in samples:
        scores = sample.get("scores") or {}
        values = [_value(scores[name]) if name in scores else "—" for name in names]
        lines.append(
            _row([code(sample.get("repository") or sample.get("id") or "?", cell=True), *values])
        )
    return lines


def _metrics_table(content: Mapping[str, Any]) -> list[str]:
    """A batch's metrics: each scorer's, over all its repositories."""
    lines = [_row(["scorer", "metrics"]), _row(["---"] * 2)]
    for name, metrics in (content.get("metrics") or {}).items():
        lines.append(_row([code(name, cell=True), escape(format_metrics(metrics or {}))]))
    return lines


def _failing_tests(content: Mapping[str, Any]) -> list[str]:
    records = (content.get("tests") or {}).get("tests") or []
    failing = [record for record in records if record.get("outcome") in _LISTED_OUTCOMES]
    if not failing:
        return []
    lines = ["", f"Failed or erroring tests ({len(failing)}):", ""]
    for record in failing[:LISTED_TESTS]:
        message = str(record.get("message") or "").strip().splitlines()
        reason = f" — {escape(message[0])}" if message else ""
        lines.append(f"- {record['outcome']}: {code(record.get('nodeid', ''))}{reason}")
    if len(failing) > LISTED_TESTS:
        lines.append(f"- … and {len(failing) - LISTED_TESTS} more")
    return lines


def _tests_modified(content: Mapping[str, Any]) -> list[str]:
    """What the repository changed in its tests relative to the reference (a test score's
    metadata): information, shown as a list of files."""
    scores = [score for score in (content.get("scores") or {}).values() if isinstance(score, dict)]
    metadata = next(
        (
            score["metadata"]
            for score in scores
            if isinstance(score.get("metadata"), dict) and score["metadata"].get("tests_modified")
        ),
        None,
    )
    if metadata is None or not isinstance(metadata["tests_modified"], list):
        return []
    changes, count = metadata["tests_modified"], metadata.get("tests_modified_count")
    count = count if isinstance(count, int) else len(changes)
    lines = ["", f"Tests changed relative to the reference ({count}, information only):", ""]
    for change in changes[:LISTED_TESTS]:
        change = change if isinstance(change, dict) else {"file": change}
        what = f" ({escape(change['what'])})" if change.get("what") else ""
        lines.append(
            f"- {escape(change.get('change') or '?')}: {code(change.get('file', ''))}{what}"
        )
    if count > LISTED_TESTS:
        lines.append(f"- … and {count - LISTED_TESTS} more")
    return lines


def _signals(content: Mapping[str, Any]) -> tuple[list[Any], list[Any]]:
    """The report's integrity signals and scores (a batch's: every repository's)."""
    if isinstance(content.get("samples"), list):
        signals, by_sample = batch_signals(content)
        return signals, list(by_sample.values())
    found, scores = content.get("integrity"), content.get("scores")
    return (
        found if isinstance(found, list) else [],
        list(scores.values()) if isinstance(scores, dict) else [],
    )


def _tampering(summaries: list[KindSummary]) -> list[str]:
    """The line saying that proven tampering made test scores ``"N"``, counted as failed."""
    strict = [summary.kind for summary in summaries if summary.strict]
    if not strict:
        return []
    kinds = ", ".join(code(kind) for kind in strict)
    return [
        "",
        f"⛔ **Tampering**: integrity signal {kinds} made the test scores N; "
        "each counts as a failed sample in the metrics.",
    ]


def _integrity(content: Mapping[str, Any]) -> list[str]:
    signals, scores = _signals(content)
    summaries = kind_summaries(signals, scores)
    if not summaries:
        return []
    kinds = ", ".join(
        f"{escape(summary.kind)} ({summary.total}, {'strict' if summary.strict else 'information'})"
        for summary in summaries
    )
    count = sum(summary.total for summary in summaries)
    lines = [*_tampering(summaries), "", f"⚠️ Integrity signals ({count}): {kinds}", ""]
    for signal in signals[:LISTED_TESTS]:
        signal = signal if isinstance(signal, dict) else {"detail": signal}
        where = f" ({code(signal['file'])})" if signal.get("file") else ""
        kind, detail = escape(signal.get("kind") or "?"), escape(signal.get("detail") or "")
        lines.append(f"- **{kind}**: {detail}{where}")
    if len(signals) > LISTED_TESTS:
        lines.append(f"- … and {len(signals) - LISTED_TESTS} more")
    return lines


def score_markdown(content: Mapping[str, Any], report_folder: Path | None = None) -> str:
    """The Markdown summary of a ``scores.json``: the score table, the test counts, the
    failing tests, integrity signals and where the report is."""
    repository = content.get("repository") or content.get("scan_id") or "report"
    samples = content.get("samples")
    if isinstance(samples, list) and all(isinstance(sample, dict) for sample in samples):
        what = plural(len(samples), "repository", "repositories")
        lines = [f"### Scores: {what} ({code(repository)})", ""]
        lines += [*_samples_table(samples), "", *_metrics_table(content)]
    else:
        lines = [f"### Scores: {code(repository)}", ""]
        lines += _scores_table(content)
        lines += ["", escape(counts_line(content))]
        dropped = dropped_line(content.get("tests"))
        lines += ["", f"⚠️ {escape(dropped)}"] if dropped else []
    if not content.get("complete", True):
        lines += ["", "**Incomplete**: the session was interrupted or a scorer crashed."]
    lines += _failing_tests(content) + _integrity(content) + _tests_modified(content)
    if report_folder is not None:
        lines += ["", f"Report: {code(report_folder)} (open {code(PAGE_FILE)} in it)"]
    return "\n".join(lines) + "\n"


def publish_markdown(
    text: str, markdown_file: Path | None, environ: Mapping[str, str] = os.environ
) -> None:
    """Write ``text`` to ``markdown_file`` (when given, creating its folder) and append it to
    GitHub's step summary (when ``GITHUB_STEP_SUMMARY`` is set).

    :raises ReportError: naming the file that cannot be written.
    """
    targets: list[tuple[Path, str]] = []
    if markdown_file is not None:
        targets.append((markdown_file, "w"))
    if environ.get(GITHUB_SUMMARY_ENV):
        targets.append((Path(environ[GITHUB_SUMMARY_ENV]), "a"))
    problems = []
    for path, mode in targets:
        try:
            path.parent.mkdir(parents=True, exist_ok=True)
            with path.open(mode, encoding="utf-8") as stream:
                stream.write(text if mode == "w" else f"{text}\n")
        except OSError as error:
            problems.append(f"cannot write the score summary to {path}: {_why(path, error)}")
    if problems:
        raise ReportError("; ".join(problems))


def _why(path: Path, error: OSError) -> str:
    """Why ``path`` cannot be written: a file where a folder of its path should be is named
    (the system says only "File exists" or "Not a directory")."""
    blocking = next((parent for parent in path.parents if parent.is_file()), None)
    if blocking is not None:
        return f"{blocking} is a file, not a folder"
    return str(error.strerror or error)
