"""A scored repository that writes markup everywhere it can, and reading a page's embedded JSON."""

from __future__ import annotations

import contextlib
import json
import sqlite3
from html.parser import HTMLParser
from pathlib import Path
from typing import Any

import pytest

#: Values a hostile repository writes into its database, test ids and failure messages.
IMG = "<img src=x onerror=\"document.title='pwned'\">"
CLOSE_SCRIPT = "</script><script>document.title='pwned'</script>"
COMMENT = "<!--<script>"
HOSTILE_TEST = f"""
import sqlite3

import pytest


@pytest.mark.parametrize("value", [1], ids=[{IMG!r} + " | [link](https://example.invalid)"])
def test_writes_markup(value):
    with sqlite3.connect("app.db") as db:
        db.execute("UPDATE users SET name = ? WHERE id = 1", ({IMG!r},))
        db.execute("UPDATE users SET name = ? WHERE id = 2", ({CLOSE_SCRIPT!r},))
        db.execute("INSERT INTO users VALUES (3, ?)", ({COMMENT!r},))
    db.close()
    assert False, {CLOSE_SCRIPT!r} + " ![x](https://example.invalid/x.png)"
"""


def hostile_report(pytester: pytest.Pytester) -> Path:
    """Score a repository whose test writes markup into its database, its id and its
    failure message; return the report folder."""
    with contextlib.closing(sqlite3.connect(pytester.path / "app.db")) as db:
        db.execute("CREATE TABLE users (id INTEGER PRIMARY KEY, name TEXT)")
        db.executemany("INSERT INTO users VALUES (?, ?)", [(1, "ann"), (2, "bob")])
        db.commit()
    pytester.makepyfile(test_hostile=HOSTILE_TEST)
    pytester.runpytest("--score-db-diff", "-p", "no:cacheprovider")
    (folder,) = (pytester.path / "scores").glob("scan_id=*")
    return folder


class _PageParser(HTMLParser):
    """Collects what an HTML parser sees: script elements (attributes, text) and every tag."""

    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.scripts: list[tuple[dict[str, str | None], str]] = []
        self.tags: list[tuple[str, dict[str, str | None]]] = []
        self._script: dict[str, str | None] | None = None

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        self.tags.append((tag, dict(attrs)))
        if tag == "script":
            self._script = dict(attrs)
            self.scripts.append((self._script, ""))

    def handle_data(self, data: str) -> None:
        if self._script is not None:
            attrs, text = self.scripts[-1]
            self.scripts[-1] = (attrs, text + data)

    def handle_endtag(self, tag: str) -> None:
        if tag == "script":
            self._script = None


def parse_page(path: Path) -> _PageParser:
    parser = _PageParser()
    parser.feed(path.read_text(encoding="utf-8"))
    parser.close()
    return parser


def embedded_files(path: Path) -> dict[str, Any]:
    """The JSON files a page embeds, by name, as an HTML parser splits the page."""
    return {
        str(attrs["data-file"]): json.loads(text)
        for attrs, text in parse_page(path).scripts
        if attrs.get("type") == "application/json"
    }
