"""The score table as Markdown: `--score-markdown`, GitHub's step summary, `show --markdown`."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from click.testing import CliRunner
from markdown_it import MarkdownIt
from report_pages import hostile_report
from runs import TAMPERING_ONLY

from pytest_scoring.cli.main import main

SUMMARY_ENV = "GITHUB_STEP_SUMMARY"
PASS_AND_FAIL = "def test_ok():\n    pass\n\ndef test_broken():\n    assert 1 == 2\n"


def rendered(markdown: str) -> str:
    """The HTML GitHub-flavoured Markdown (CommonMark with tables) makes of ``markdown``."""
    return MarkdownIt("commonmark").enable("table").render(markdown)


def table_rows(html: str) -> list[list[str]]:
    """The text of each body row's cells."""
    body = html.split("<tbody>", 1)[1].split("</tbody>", 1)[0]
    return [
        [re.sub(r"<[^>]+>", "", cell) for cell in re.findall(r"<td>(.*?)</td>", row, re.S)]
        for row in re.findall(r"<tr>(.*?)</tr>", body, re.S)
    ]


def test_score_markdown_writes_the_score_table(pytester: pytest.Pytester) -> None:
    pytester.makepyfile(PASS_AND_FAIL)
    pytester.runpytest("--score-markdown=out/summary.md").assert_outcomes(passed=1, failed=1)
    html = rendered((pytester.path / "out" / "summary.md").read_text())
    rows = table_rows(html)
    assert [row[:2] for row in rows] == [
        ["all_tests_pass", "❌ I"],
        ["percent_passing_tests", "50"],
        ["percent_failing_tests", "50"],
    ]
    assert rows[1][3] == "mean=50, stderr=0, accuracy_at_100=0"
    assert "tests: 1 passed, 1 failed = 2 counted" in html
    assert "<code>test_score_markdown_writes_the_score_table.py::test_broken</code>" in html
    assert "assert 1 == 2" in html


def test_the_ini_setting_writes_it_relative_to_the_root(
    pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch
) -> None:
    pytester.makeini("[pytest]\nscore_markdown = summary.md\n")
    pytester.makepyfile(PASS_AND_FAIL)
    monkeypatch.chdir(pytester.mkdir("sub"))
    pytester.runpytest(str(pytester.path))
    assert "percent_passing_tests" in (pytester.path / "summary.md").read_text()
    assert not (pytester.path / "sub" / "summary.md").exists()


def test_github_step_summary_gets_one_table_per_session_appended(
    pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    summary = tmp_path / "step_summary.md"
    summary.write_text("earlier step\n")
    monkeypatch.setenv(SUMMARY_ENV, str(summary))
    pytester.makepyfile(PASS_AND_FAIL)
    pytester.runpytest("--score")
    pytester.runpytest("--score")
    text = summary.read_text()
    assert text.startswith("earlier step\n")
    assert text.count("| `percent_passing_tests` | 50 |") == 2


def test_an_unwritable_summary_is_said_and_the_report_is_still_written(
    pytester: pytest.Pytester,
) -> None:
    pytester.makepyfile("def test_ok(): pass")
    (pytester.path / "taken").write_text("a file, not a folder")
    result = pytester.runpytest("--score-markdown=taken/summary.md")
    assert result.ret == 0
    result.stdout.fnmatch_lines(
        [
            "score summary NOT written: cannot write the score summary to "
            f"{pytester.path}/taken/summary.md: {pytester.path}/taken is a file, not a folder"
        ]
    )
    assert list((pytester.path / "scores").glob("scan_id=*/scores.json"))


def test_text_from_the_repository_cannot_add_links_images_markup_or_cells(
    pytester: pytest.Pytester,
) -> None:
    report = hostile_report(pytester)
    result = CliRunner().invoke(main, ["show", "--markdown", str(report)])
    assert result.exit_code == 0, result.output
    html = rendered(result.output)
    assert "<img" not in html
    assert "<a " not in html
    assert "<script" not in html
    assert all(len(row) == 4 for row in table_rows(html))
    assert "&lt;img src=x onerror=" in html  # shown as text


def test_run_and_junit_write_the_summary_in_the_evaluators_process(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    summary = tmp_path / "step_summary.md"
    monkeypatch.setenv(SUMMARY_ENV, str(summary))
    repo = tmp_path / "repo"
    repo.mkdir()
    # The scored repository never learns where the summary file is.
    (repo / "test_env.py").write_text(
        f"import os\n\ndef test_no_summary_file():\n    assert {SUMMARY_ENV!r} not in os.environ\n"
    )
    args = ["run", str(repo), "--report", str(tmp_path / "out"), TAMPERING_ONLY]
    result = CliRunner().invoke(main, args)
    assert result.exit_code == 0, result.output
    assert summary.read_text().count("### Scores:") == 1
    assert "| `all_tests_pass` | ✅ C |" in summary.read_text()
    xml = tmp_path / "junit.xml"
    xml.write_text('<testsuite><testcase name="a"/><testcase name="b"/></testsuite>')
    result = CliRunner().invoke(main, ["junit", str(xml), "--report", str(tmp_path / "out")])
    assert result.exit_code == 0, result.output
    assert summary.read_text().count("### Scores:") == 2


def test_a_detectors_c_reads_detected_never_a_green_tick(pytester: pytest.Pytester) -> None:
    (pytester.path / "src").mkdir()
    (pytester.path / "src" / "app.py").write_text("password = 'hunter2'\n")
    pytester.makepyfile("def test_ok(): pass")
    pytester.makefile(
        ".yaml",
        scores="scorers:\n"
        "  - type: all_tests_pass\n"
        "  - {type: file_contents, name: leaks, folder_path: src, search_string: hunter2}\n",
    )
    pytester.runpytest("--score-config=scores.yaml", "--score-markdown=summary.md")
    rows = table_rows(rendered((pytester.path / "summary.md").read_text()))
    assert [row[:2] for row in rows] == [["all_tests_pass", "✅ C"], ["leaks", "🚨 C detected"]]
