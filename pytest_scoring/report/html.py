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
