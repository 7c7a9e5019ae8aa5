"""The report's page: a self-contained ``index.html`` built from the report's own JSON
(docs/report.md).

The page is a fixed template (inline CSS and script, nothing fetched, so it works from
``file://`` and offline) into which the report's JSON files are pasted as
``<script type="application/json">`` blocks. The template's script builds every element with
``textContent``: values a scored repository wrote (cells, test ids, messages) are shown as
text and never run. Building the page is string pasting of JSON text already encoded for the
report files, so a session pays almost nothing for it.
"""

from __future__ import annotations

import base64
import hashlib
import json
import re
from collections.abc import Mapping
from functools import cache
from html import escape
from importlib.resources import files
from pathlib import Path
from typing import Final

from pytest_scoring.errors import ReportError

#: The page's file name in a report folder.
PAGE_FILE: Final = "index.html"
#: The report file every page has; the others are embedded after it, by name.
SCORES_FILE: Final = "scores.json"
_DATA_MARK: Final = "<!-- report data -->"
_SCRIPT_HASH_MARK: Final = "SCRIPT_SHA256"
_SCRIPT: Final = re.compile(r"<script>(.*?)</script>", re.DOTALL)


@cache
def _template() -> str:
    """The template with its Content-Security-Policy allowing exactly its own script.

    The policy names the script by hash: even a value that somehow became markup could
    neither run a script nor load anything.
    """
    text = files(__package__).joinpath("templates", PAGE_FILE).read_text(encoding="utf-8")
    match = _SCRIPT.search(text)
    if match is None:
        raise ReportError(f"the page template {PAGE_FILE} has no script")
    digest = hashlib.sha256(match.group(1).encode("utf-8")).digest()
    return text.replace(_SCRIPT_HASH_MARK, base64.b64encode(digest).decode("ascii"), 1)


def embed_json(text: str) -> str:
    """JSON text made safe inside a ``<script>`` element.

    In JSON a ``<`` can only stand inside a string, where ``\\u003c`` means the same
    character; writing every one that way leaves no ``</script>`` or ``<!--`` for a value to
    close the element or confuse the parser with.
    """
    return text.replace("<", "\\u003c")


def render_page(report_files: Mapping[str, str]) -> str:
    """The page for a report, given its JSON files' text by file name."""
    blocks = "".join(
        f'<script type="application/json" class="report-file" data-file="{escape(name)}">'
        f"{embed_json(text)}</script>\n"
        for name, text in report_files.items()
    )
    return _template().replace(_DATA_MARK, blocks, 1)


def write_page(folder: Path, report_files: Mapping[str, str]) -> Path:
    """Write ``folder/index.html`` for the given JSON files' text; return its path."""
    path = folder / PAGE_FILE
    path.write_text(render_page(report_files), encoding="utf-8")
    return path


def report_json_files(folder: Path) -> dict[str, str]:
    """The text of a report folder's JSON files, ``scores.json`` first, then by name.

    Inspect Scout's own files (``_scan.json``, ``_summary.json``) are left out: the page
    shows what ``scores.json`` and the scorers' files say.

    :raises ReportError: naming a file that is unreadable or not JSON.
    """
    names = sorted(path.name for path in folder.glob("*.json") if not path.name.startswith("_"))
    if SCORES_FILE not in names:
        raise ReportError(f"{folder / SCORES_FILE}: missing, so this folder holds no report")
    names.remove(SCORES_FILE)
    texts = {}
    for name in (SCORES_FILE, *names):
        path = folder / name
        try:
            text = path.read_text(encoding="utf-8")
            json.loads(text)
        except OSError as error:
            raise ReportError(f"{path}: cannot read ({error.strerror})") from None
        except UnicodeDecodeError as error:
            raise ReportError(f"{path}: not UTF-8 text ({error.reason})") from None
        except json.JSONDecodeError as error:
            raise ReportError(
                f"{path}: not valid JSON ({error.msg} at line {error.lineno})"
            ) from None
        texts[name] = text
    return texts


def rebuild_page(folder: Path) -> Path:
    """Write a report folder's page anew from its JSON files (reports of older versions too).

    :raises ReportError: when a file cannot be read or the page cannot be written.
    """
    report_files = report_json_files(folder)
    try:
        return write_page(folder, report_files)
    except OSError as error:
        raise ReportError(f"cannot write {folder / PAGE_FILE}: {error.strerror}") from None
