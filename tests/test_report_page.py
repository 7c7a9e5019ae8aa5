"""The report's page (index.html): self-contained, built from the report's own JSON, and
`show --html` / `--open`. The page in a real browser: test_page_in_browser.py."""

from __future__ import annotations

import base64
import hashlib
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from click.testing import CliRunner
from report_pages import CLOSE_SCRIPT
from report_pages import COMMENT
from report_pages import IMG
from report_pages import embedded_files
from report_pages import hostile_report
from report_pages import parse_page

from pytest_scoring.cli.main import main
from pytest_scoring.report.html import PAGE_FILE
from pytest_scoring.report.html import render_page


def report_files(folder: Path) -> dict[str, object]:
    return {
        path.name: json.loads(path.read_text())
        for path in folder.glob("*.json")
        if not path.name.startswith("_")
    }


@pytest.fixture
def hostile(pytester: pytest.Pytester) -> Path:
    return hostile_report(pytester)


def test_every_report_folder_has_a_page_embedding_its_json_files(hostile: Path) -> None:
    files = embedded_files(hostile / PAGE_FILE)
    assert list(files) == ["scores.json", "diff.json"]
    assert files == report_files(hostile)


def test_markup_written_by_the_repository_stays_inside_the_json_blocks(hostile: Path) -> None:
    page = parse_page(hostile / PAGE_FILE)
    # An HTML parser finds exactly our elements: the values opened no tag and closed no script.
    assert len(page.scripts) == 3
    assert [tag for tag, _ in page.tags].count("img") == 0
    table = embedded_files(hostile / PAGE_FILE)["diff.json"]["comparisons"]["app.db"]
    data = table["comparisons"]["data"]["tables"]["users"]
    new_values = {row["changes"]["name"]["new_value"] for row in data["rows_changed"]}
    assert new_values == {IMG, CLOSE_SCRIPT}
    assert data["rows_added"] == [{"id": 3, "name": COMMENT}]
    text = (hostile / PAGE_FILE).read_text()
    assert CLOSE_SCRIPT not in text
    assert COMMENT not in text


def test_the_page_loads_nothing_and_runs_only_its_own_script(hostile: Path) -> None:
    page = parse_page(hostile / PAGE_FILE)
    linked = [(tag, attrs) for tag, attrs in page.tags if {"src", "href"} & set(attrs)]
    assert linked == []
    assert "link" not in [tag for tag, _ in page.tags]
    (policy,) = [
        attrs["content"]
        for tag, attrs in page.tags
        if tag == "meta" and attrs.get("http-equiv") == "Content-Security-Policy"
    ]
    assert policy is not None
    assert "default-src 'none'" in policy
    (script,) = [text for attrs, text in page.scripts if "type" not in attrs]
    digest = base64.b64encode(hashlib.sha256(script.encode()).digest()).decode()
    assert f"script-src 'sha256-{digest}'" in policy


def test_a_value_python_writes_as_nan_is_embedded_as_written() -> None:
    page = render_page({"scores.json": '{"scores": {"s": {"value": NaN}}}'})
    assert '{"scores": {"s": {"value": NaN}}}' in page  # the page's script reads NaN as text


def run(*args: str | Path) -> tuple[int, str]:
    result = CliRunner().invoke(main, [*map(str, args)])
    return result.exit_code, result.output


def test_show_html_prints_the_page_path_and_writes_a_missing_page(hostile: Path) -> None:
    (hostile / PAGE_FILE).unlink()
    status, output = run("show", "--html", hostile.parent)
    assert status == 0, output
    assert output == f"{(hostile / PAGE_FILE).absolute()}\n"
    assert embedded_files(hostile / PAGE_FILE) == report_files(hostile)


def test_show_html_names_a_damaged_report_file(hostile: Path) -> None:
    (hostile / "diff.json").write_text("{not json")
    status, output = run("show", "--html", hostile)
    assert status == 2
    assert output.strip() == (
        f"pytest-scoring: error: {hostile / 'diff.json'}: not valid JSON "
        "(Expecting property name enclosed in double quotes at line 1)"
    )


def test_show_open_hands_the_page_to_the_web_browser(hostile: Path, tmp_path: Path) -> None:
    opened = tmp_path / "opened.txt"
    browser = tmp_path / "browser"
    browser.write_text(f'#!/bin/sh\necho "$1" > {opened}\n')
    browser.chmod(0o755)
    subprocess.run(
        [sys.executable, "-m", "pytest_scoring", "show", "--open", str(hostile)],
        env={**os.environ, "BROWSER": str(browser)},
        check=True,
        capture_output=True,
    )
    assert opened.read_text().strip() == (hostile / PAGE_FILE).absolute().as_uri()
