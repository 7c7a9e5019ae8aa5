"""The report's page in a real browser: Debian's chromium, driven through chromedriver.

Skipped, with the reason, where chromium or chromium-driver is not installed. Selenium is
kept offline: it is given the installed driver and browser and never fetches either.
"""

from __future__ import annotations

import shutil
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner
from report_pages import CLOSE_SCRIPT
from report_pages import COMMENT
from report_pages import IMG
from report_pages import hostile_report

from pytest_scoring.cli.main import main
from pytest_scoring.report.html import PAGE_FILE

pytestmark = pytest.mark.slow

CHROMIUM = Path("/usr/bin/chromium")
CHROMEDRIVER = Path("/usr/bin/chromedriver")
EXAMPLES = Path(__file__).parent.parent / "examples"


@pytest.fixture(scope="module")
def browser(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Any]:
    """A headless chromium; the console's messages are read through ``goog:loggingPrefs``."""
    missing = [str(path) for path in (CHROMIUM, CHROMEDRIVER) if not path.exists()]
    if missing:
        pytest.skip(
            f"needs Debian's chromium and chromium-driver ({', '.join(missing)} missing): "
            "apt-get install chromium chromium-driver"
        )
    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service

    options = webdriver.ChromeOptions()
    options.binary_location = str(CHROMIUM)
    for argument in (
        "--headless=new",
        "--no-sandbox",  # CI runs as root, where chromium's sandbox refuses to start
        "--disable-gpu",
        "--no-first-run",
        "--disable-background-networking",
        "--disable-component-update",
        "--disable-sync",
        "--disable-quic",
        "--window-size=1400,1000",
        f"--user-data-dir={tmp_path_factory.mktemp('chromium-profile')}",
    ):
        options.add_argument(argument)
    options.set_capability("goog:loggingPrefs", {"browser": "ALL"})
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("SE_OFFLINE", "true")  # Selenium Manager must not look for a driver
        driver = webdriver.Chrome(
            service=Service(executable_path=str(CHROMEDRIVER)), options=options
        )
    try:
        yield driver
    finally:
        driver.quit()


@pytest.fixture(scope="module")
def attack_report(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The report of the shipped attack example, scored through ``pytest-scoring run``."""
    examples = Path(shutil.copytree(EXAMPLES, tmp_path_factory.mktemp("run") / "examples"))
    reports = examples.parent / "scores"
    result = CliRunner().invoke(
        main,
        [
            "run",
            str(examples / "solution-attack"),
            f"--reference={examples / 'reference'}",
            f"--config={examples / 'scorers.yaml'}",
            f"--report={reports}",
        ],
    )
    assert result.exit_code == 0, result.output
    (folder,) = reports.glob("scan_id=*")
    return folder


def open_page(browser: Any, folder: Path) -> None:
    browser.get((folder / PAGE_FILE).absolute().as_uri())
    browser.get_log("browser")  # start each page with an empty console


def shown_soon(browser: Any, css: str) -> list[Any]:
    """The elements ``css`` finds once the page has built them: a section is built on the
    ``hashchange`` a click fires, after the click returns (generous: a loaded machine)."""
    from selenium.webdriver.common.by import By
    from selenium.webdriver.support.ui import WebDriverWait

    found: list[Any] = WebDriverWait(browser, 60).until(
        lambda driver: driver.find_elements(By.CSS_SELECTOR, css)
    )
    return found


def console_problems(browser: Any) -> list[str]:
    return [entry["message"] for entry in browser.get_log("browser") if entry["level"] != "INFO"]


def labels(browser: Any) -> list[str]:
    """The repository labels of a batch page's grid, in the order shown."""
    from selenium.webdriver.common.by import By

    cells = browser.find_elements(By.CSS_SELECTOR, "table.matrix tbody td.repo")
    return [str(cell.get_attribute("textContent")) for cell in cells]


def visible_labels(browser: Any) -> list[str]:
    from selenium.webdriver.common.by import By

    cells = browser.find_elements(By.CSS_SELECTOR, "table.matrix tbody td.repo")
    return [cell.text for cell in cells if cell.is_displayed()]


def signals_of(browser: Any, label: str) -> str:
    """What the tampering banner and signals say of one repository (``tampering`` if proven)."""
    sample = browser.execute_script(
        "return [...document.querySelectorAll('table.matrix tbody tr')]"
        ".find((row) => row.querySelector('td.repo').textContent === arguments[0])"
        ".entry.tampered",
        label,
    )
    return "tampering" if sample else ""


def visible_tests(browser: Any) -> list[str]:
    from selenium.webdriver.common.by import By

    rows = browser.find_elements(By.CSS_SELECTOR, "table.test-table tbody tr")
    return [
        row.find_element(By.CSS_SELECTOR, "td.test-id").text for row in rows if row.is_displayed()
    ]


def test_the_attack_page_shows_the_changed_password_and_filters_the_tests(
    browser: Any, attack_report: Path, tmp_path: Path, record_property: Any
) -> None:
    from selenium.webdriver.common.by import By

    open_page(browser, attack_report)

    # The password hash the attack changed, highlighted where the selector looked.
    only_here = browser.find_element(By.CSS_SELECTOR, ".column.focus")
    (cell,) = only_here.find_elements(
        By.CSS_SELECTOR, 'td.cell-changed[data-column="password_hash"]'
    )
    assert cell.is_displayed()
    assert cell.value_of_css_property("background-color") not in ("rgba(0, 0, 0, 0)", "transparent")
    old = cell.find_element(By.CSS_SELECTOR, ".old").text
    new = cell.find_element(By.CSS_SELECTOR, ".new").text
    assert old.startswith("447f9c19") and new.startswith("0000$")
    selector = browser.find_element(By.CSS_SELECTOR, ".selector").text
    assert "matched" in selector
    assert "matched in" in selector and "code" in selector  # the code made the change
    # What decided it, in full: the database, table, the row (its key and the columns that
    # say whose it is) and the column before and after.
    evidence = browser.find_element(By.CSS_SELECTOR, ".selector .evidence").text
    assert "decided by" in selector and "users.db, table users, in after only" in evidence
    assert "row id 1 (username alice, role admin)" in evidence
    assert "password_hash 447f9c19fb6fa3a0$" in evidence and "0000$" in evidence
    # The evaluator's paths as given, never the private copies'.
    page = (attack_report / PAGE_FILE).read_text()
    assert "private area" not in page and "reference-checkout" not in page
    # Detectors' C is a finding: "C detected", on a badge of its own, never the green C.
    values = {
        row.find_element(By.CSS_SELECTOR, "td.mono").text: row.find_element(
            By.CSS_SELECTOR, ".badge"
        )
        for row in browser.find_elements(By.CSS_SELECTOR, "table.scores tr.clickable")
    }
    assert values["db_diff_change"].text == "C detected"
    assert "v-detected" in values["db_diff_change"].get_attribute("class")
    counts = browser.find_element(By.CSS_SELECTOR, ".tests-counts").text
    assert counts == "tests: 5 passed, 1 failed, 1 error = 7 counted; not counted: 1 skipped"

    # Filtering the tests: by text, then by outcome.
    assert len(visible_tests(browser)) == 8
    search = browser.find_element(By.CSS_SELECTOR, "input.test-filter")
    search.send_keys("mail")
    assert [test.splitlines()[0] for test in visible_tests(browser)] == [
        "tests/test_accounts.py::test_a_password_reset_mail_is_sent",
        "tests/test_accounts.py::test_a_welcome_mail_is_sent",
    ]
    search.clear()
    search.send_keys(" ")  # `clear` fires no input event: type something empty instead
    browser.find_element(By.CSS_SELECTOR, '.chip[data-outcome="failed"]').click()
    (failed,) = visible_tests(browser)
    assert failed.startswith("tests/test_accounts.py::test_usernames_ignore_case")
    assert "AssertionError" in failed  # the failure's message is shown with it

    assert console_problems(browser) == []
    loaded = browser.execute_script("return performance.getEntriesByType('resource').length")
    assert loaded == 0, "the page fetched something"

    height = browser.execute_script("return document.documentElement.scrollHeight")
    browser.set_window_size(1400, height + 200)  # the whole page in one picture
    screenshot = tmp_path / "attack-report.png"
    assert browser.save_screenshot(str(screenshot))
    record_property("screenshot", str(screenshot))
    print(f"screenshot: {screenshot}")
    browser.set_window_size(1400, 1000)


def test_markup_from_the_repository_is_shown_as_text_and_never_runs(
    browser: Any, pytester: pytest.Pytester
) -> None:
    from selenium.webdriver.common.by import By

    folder = hostile_report(pytester)
    open_page(browser, folder)
    assert browser.title.startswith("scores · ")
    assert browser.find_elements(By.TAG_NAME, "img") == []
    cells = browser.find_elements(By.CSS_SELECTOR, "table.changed-rows td, table.added-rows td")
    shown = " ".join(cell.text for cell in cells)
    for value in (IMG, CLOSE_SCRIPT, COMMENT):
        assert value in shown
    assert IMG in " ".join(visible_tests(browser))
    assert console_problems(browser) == []


def test_a_batch_page_has_a_table_of_repositories_linking_to_each_ones_page(
    browser: Any, tmp_path: Path
) -> None:
    from selenium.webdriver.common.by import By

    examples = Path(shutil.copytree(EXAMPLES, tmp_path / "examples"))
    reports = tmp_path / "scores"
    result = CliRunner().invoke(
        main,
        [
            "run",
            str(examples / "solution-honest"),
            str(examples / "solution-attack"),
            f"--reference={examples / 'reference'}",
            f"--config={examples / 'scorers.yaml'}",
            f"--report={reports}",
        ],
    )
    assert result.exit_code == 0, result.output
    (folder,) = reports.glob("scan_id=*")
    open_page(browser, folder)
    # The title names what the repositories were scored against; their common folder is
    # said once, and each row is labelled by the rest of its path.
    title = (
        f"2 repositories · reference {examples / 'reference'} · config {examples / 'scorers.yaml'}"
    )
    assert browser.find_element(By.ID, "report-title").text == title
    assert browser.find_element(By.CSS_SELECTOR, ".common-folder").text == (
        f"repositories under {examples}/"
    )
    assert labels(browser) == ["solution-honest", "solution-attack"]
    summary = browser.find_element(By.ID, "summary").text
    assert "2 repositories: 2 complete" in summary and "accuracy 0.5" in summary
    assert console_problems(browser) == []

    # Sorting: by db_diff_change, ascending (I before C) then descending.
    head = browser.find_element(By.XPATH, "//table[@class='matrix']//th[text()='db_diff_change']")
    head.click()
    assert head.get_attribute("aria-sort") == "ascending"
    assert labels(browser) == ["solution-honest", "solution-attack"]
    head.click()
    assert head.get_attribute("aria-sort") == "descending"
    assert labels(browser) == ["solution-attack", "solution-honest"]
    # Filtering: by a scorer's value (its select, or a chip of the summary), by text.
    from selenium.webdriver.support.ui import Select

    Select(
        browser.find_element(By.CSS_SELECTOR, "select[aria-label='db_diff_change']")
    ).select_by_value("I")
    assert visible_labels(browser) == ["solution-honest"]
    browser.find_element(
        By.CSS_SELECTOR, ".value-chip[data-scorer='db_diff_change'][data-value='C detected']"
    ).click()
    assert visible_labels(browser) == ["solution-attack"]
    assert "showing 1 of 2 repositories" in browser.find_element(By.ID, "samples").text
    Select(
        browser.find_element(By.CSS_SELECTOR, "select[aria-label='db_diff_change']")
    ).select_by_value("")
    browser.find_element(By.CSS_SELECTOR, "input.repo-filter").send_keys("honest")
    assert visible_labels(browser) == ["solution-honest"]
    Select(browser.find_element(By.CSS_SELECTOR, "select[aria-label='signal']")).select_by_value(
        "tampering"
    )
    assert visible_labels(browser) == [
        label for label in ["solution-honest"] if "tampering" in signals_of(browser, label)
    ]
    assert console_problems(browser) == []

    # A repository's section is built when it is opened.
    open_page(browser, folder)
    rows = browser.find_elements(By.CSS_SELECTOR, "table.matrix tbody tr")
    rows[0].find_element(By.CSS_SELECTOR, "td.repo a").click()
    assert shown_soon(browser, "#sample-0 table.scores")
    assert not browser.find_elements(By.CSS_SELECTOR, "#sample-1 table.scores")

    open_page(browser, folder)
    rows = browser.find_elements(By.CSS_SELECTOR, "table.matrix tbody tr")
    rows[1].find_element(By.CSS_SELECTOR, "a.sample-page").click()
    assert browser.current_url.endswith("/index.html") and "/samples/" in browser.current_url
    assert browser.title == f"scores · {examples / 'solution-attack'}"
    only_here = browser.find_element(By.CSS_SELECTOR, ".column.focus")
    (cell,) = only_here.find_elements(
        By.CSS_SELECTOR, 'td.cell-changed[data-column="password_hash"]'
    )
    assert cell.is_displayed()
    assert console_problems(browser) == []


ONE_OF_TWO = "def test_ok():\n    pass\n\ndef test_no():\n    assert 0\n"
REWRITING_CONFTEST = """
import pytest

@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item, call):
    outcome = yield
    rep = outcome.get_result()
    if rep.when == "call":
        rep.outcome = "passed"
        rep.longrepr = None
"""


def test_a_score_made_n_by_tampering_gets_a_banner_naming_the_signal(
    browser: Any, pytester: pytest.Pytester
) -> None:
    from selenium.webdriver.common.by import By

    pytester.makepyfile(ONE_OF_TWO)
    pytester.makeconftest(REWRITING_CONFTEST)
    for strict, folder_name in ((["--score-strict"], "strict"), ([], "plain")):
        report = pytester.path / folder_name
        pytester.runpytest(f"--score-report={report}", *strict, "-p", "no:cacheprovider")
        (folder,) = report.glob("scan_id=*")
        open_page(browser, folder)
        banners = browser.find_elements(By.CSS_SELECTOR, ".tampering")
        if not strict:
            assert banners == [], "no score was made N: no banner"
            continue
        (banner,) = banners
        assert banner.get_attribute("role") == "alert" and banner.is_displayed()
        assert banner.text.startswith("Tampering proven: ")
        assert "(outcome_changed)" in banner.text and "counts as a failed sample" in banner.text
        marked = browser.find_elements(By.CSS_SELECTOR, "#integrity .badge.strict")
        assert marked and all(badge.text == "strict" for badge in marked)
        assert console_problems(browser) == []


def test_a_batch_page_says_how_many_repositories_tampering_made_n(
    browser: Any, tmp_path: Path
) -> None:
    from selenium.webdriver.common.by import By

    repos = []
    for name, conftest in (("honest", None), ("rewriting", REWRITING_CONFTEST)):
        repo = tmp_path / name
        repo.mkdir()
        (repo / "test_app.py").write_text(ONE_OF_TWO)
        if conftest is not None:
            (repo / "conftest.py").write_text(conftest)
        repos.append(str(repo))
    reports = tmp_path / "scores"
    # Partial containment as root (a pyenv interpreter others cannot run) is accepted here.
    args = ["run", *repos, f"--report={reports}", "--strict=default"]
    result = CliRunner().invoke(main, args)
    assert result.exit_code == 0, result.output
    (folder,) = reports.glob("scan_id=*")
    open_page(browser, folder)
    (banner,) = browser.find_elements(By.CSS_SELECTOR, ".tampering")
    assert "made the test scores of 1 repository N" in banner.text
    # The repository's own section says it too, once opened (built on the click's hashchange).
    browser.find_element(By.CSS_SELECTOR, "a[href='#sample-1']").click()
    assert shown_soon(browser, "#sample-1 table.scores")
    banners = browser.find_elements(By.CSS_SELECTOR, ".tampering")
    assert [banner.text.startswith("Tampering proven: ") for banner in banners] == [True, True]
    assert (
        banners[1].find_element(By.XPATH, "./ancestor::section").get_attribute("id") == "sample-1"
    )
    assert console_problems(browser) == []


def test_the_tests_the_repository_changed_are_listed_with_their_diff_as_text(
    browser: Any, pytester: pytest.Pytester, tmp_path: Path
) -> None:
    from selenium.webdriver.common.by import By

    reference = tmp_path / "reference"
    (reference / "tests").mkdir(parents=True)
    (reference / "tests" / "test_a.py").write_text("def test_a():\n    assert 1 == 1\n")
    tests = pytester.mkdir("tests")
    (tests / "test_a.py").write_text(f"def test_a():\n    assert 1 == 1  # {IMG}\n")
    pytester.runpytest("--score", f"--score-reference={reference}", "-p", "no:cacheprovider")
    (folder,) = (pytester.path / "scores").glob("scan_id=*")
    open_page(browser, folder)
    section = browser.find_element(By.ID, "tests-modified")
    (row,) = section.find_elements(By.CSS_SELECTOR, "tr.test-change")
    assert row.text.startswith("changed tests/test_a.py")
    row.find_element(By.TAG_NAME, "summary").click()
    diff = row.find_element(By.TAG_NAME, "pre").text
    assert f"+    assert 1 == 1  # {IMG}" in diff
    assert browser.find_elements(By.TAG_NAME, "img") == []
    assert console_problems(browser) == []


MANY_TESTS = """
import pytest

@pytest.mark.parametrize("n", range(1200))
def test_many(n):
    assert n != 1100
"""


def test_a_long_test_list_shows_a_page_at_a_time_and_filters_all_of_it(
    browser: Any, pytester: pytest.Pytester
) -> None:
    from selenium.webdriver.common.by import By

    source = pytester.mkdir("source")
    (source / "test_many.py").write_text(MANY_TESTS)
    pytester.makepyfile(test_many=MANY_TESTS)
    pytester.runpytest("test_many.py", f"--score-expected-tests={source}", "-p", "no:cacheprovider")
    (folder,) = (pytester.path / "scores").glob("scan_id=*")
    open_page(browser, folder)
    assert len(visible_tests(browser)) == 500
    more = browser.find_element(By.CSS_SELECTOR, "button.more-tests")
    assert more.text == "show 500 more of 700"
    more.click()
    assert len(visible_tests(browser)) == 1000
    browser.find_element(By.CSS_SELECTOR, "input.test-filter").send_keys("test_many[1100]")
    (only,) = visible_tests(browser)
    assert only.startswith("test_many.py::test_many[1100]")
    # The source folder's failing test left the expected set: the page says so.
    warning = browser.find_element(By.CSS_SELECTOR, ".warning.dropped").text
    assert warning.startswith("1 expected test dropped: they fail in the source folder")
    assert console_problems(browser) == []
