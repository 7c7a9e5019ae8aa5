"""The report's page in headless Chromium, side by side with pytest-html's page of the same
session (issue 29): how large each page is, and how long the browser needs to open it beyond
an empty page.

Two cases:

* one session of ``--tests`` tests (default 20,000; 5 % fail with a message, 1 % skip), run
  once with ``--score --html``: both pages describe the same session;
* a batch of ``--repositories`` repositories of ``--per-repository`` tests (default 200 by 50):
  a real batch of two repositories scored by ``pytest-scoring run``, its samples repeated to
  200 under other names and ids, against pytest-html's page of one session of as many tests.

Times are the best of ``--rounds`` loads of the page (navigation to the load event, then one
forced layout), minus the same for an empty page. Needs Debian's chromium and
chromium-driver, selenium and pytest-html (``pip install -e . --group bench --group test``).

    python bench/bench_page.py [--tests 20000] [--repositories 200] [--per-repository 50]
"""

from __future__ import annotations

import argparse
import copy
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from pytest_scoring.core.encoding import encode_json
from pytest_scoring.report.html import render_page

CHROMIUM = "/usr/bin/chromium"
CHROMEDRIVER = "/usr/bin/chromedriver"
EMPTY = "<!DOCTYPE html><html><head><meta charset='utf-8'><title>empty</title></head></html>"


def suite(tests: int) -> str:
    """A test module of ``tests`` tests: 5 % fail with an assertion message, 1 % skip."""
    return (
        "import pytest\n\n"
        f"@pytest.mark.parametrize('n', range({tests}))\n"
        "def test_case(n):\n"
        "    if n % 100 == 7:\n"
        "        pytest.skip('no GPU here')\n"
        "    assert n % 20 != 3, f'value {n} is not what the spec says'\n"
    )


def run_session(folder: Path, tests: int) -> tuple[Path, Path]:
    """Run the suite once with ``--score --html``; the two pages."""
    folder.mkdir(parents=True)
    (folder / "test_suite.py").write_text(suite(tests))
    command = [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "--score"]
    command += ["--html=report.html", "--self-contained-html"]
    subprocess.run(command, cwd=folder, stdout=subprocess.DEVNULL, check=False)
    (ours,) = (folder / "scores").glob("scan_id=*/index.html")
    return ours, folder / "report.html"


def batch_page(folder: Path, repositories: int, per_repository: int) -> Path:
    """A real batch of two repositories, its samples repeated to ``repositories``."""
    for name in ("agent-a", "agent-b"):
        (folder / "outputs" / name).mkdir(parents=True)
        (folder / "outputs" / name / "test_suite.py").write_text(suite(per_repository))
    report_root = folder / "batch"
    repositories_run = [str(path) for path in sorted((folder / "outputs").iterdir())]
    options = ["--report", str(report_root), "--user", "root", "--strict", "none"]
    subprocess.run(
        [sys.executable, "-m", "pytest_scoring", "run", *repositories_run, *options],
        stdout=subprocess.DEVNULL,
        check=False,
    )
    (scores,) = report_root.glob("scan_id=*/scores.json")
    content: dict[str, Any] = json.loads(scores.read_text())
    real = content["samples"]
    samples = []
    for number in range(repositories):
        sample = copy.deepcopy(real[number % len(real)])
        sample["id"] = f"sample{number:018d}"
        sample["repository"] = str(folder / "outputs" / f"agent-{number:03d}")
        samples.append(sample)
    content["samples"] = samples
    page = scores.parent / "index-200.html"
    page.write_text(render_page({"scores.json": encode_json(content)}), encoding="utf-8")
    return page


def browser() -> Any:
    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service

    os.environ["SE_OFFLINE"] = "true"
    options = webdriver.ChromeOptions()
    options.binary_location = CHROMIUM
    for argument in ("--headless=new", "--no-sandbox", "--disable-gpu", "--window-size=1400,1000"):
        options.add_argument(argument)
    return webdriver.Chrome(service=Service(executable_path=CHROMEDRIVER), options=options)


def open_time(driver: Any, page: Path, rounds: int) -> float:
    """Best of ``rounds``: navigation to the load event, then a forced layout, in seconds."""
    best = float("inf")
    for _ in range(rounds):
        driver.get("about:blank")
        started = time.perf_counter()
        driver.get(page.absolute().as_uri())
        driver.execute_script("return document.documentElement.getBoundingClientRect().height")
        best = min(best, time.perf_counter() - started)
    return best


def compare(driver: Any, label: str, ours: Path, theirs: Path, empty: float, rounds: int) -> None:
    mine, html = open_time(driver, ours, rounds) - empty, open_time(driver, theirs, rounds) - empty
    print(f"{label}:")
    for name, path, seconds in (("pytest-scoring", ours, mine), ("pytest-html", theirs, html)):
        size = path.stat().st_size / 1e6
        print(f"  {name:15} {size:6.2f} MB  {seconds:7.3f} s beyond an empty page")
    print(f"  ratio: {mine / html:.3f} (pytest-scoring / pytest-html)")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--tests", type=int, default=20_000)
    parser.add_argument("--repositories", type=int, default=200)
    parser.add_argument("--per-repository", type=int, default=50)
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="bench-page-") as work:
        root = Path(work)
        empty_page = root / "empty.html"
        empty_page.write_text(EMPTY)
        ours, theirs = run_session(root / "session", args.tests)
        batch = batch_page(root, args.repositories, args.per_repository)
        _, same_size = run_session(root / "batch-session", args.repositories * args.per_repository)
        driver = browser()
        try:
            empty = open_time(driver, empty_page, args.rounds)
            print(f"empty page: {empty:.3f} s")
            compare(
                driver, f"one session of {args.tests:,} tests", ours, theirs, empty, args.rounds
            )
            total = args.repositories * args.per_repository
            label = (
                f"a batch of {args.repositories} repositories of {args.per_repository} tests "
                f"(pytest-html: one session of {total:,})"
            )
            compare(driver, label, batch, same_size, empty, args.rounds)
        finally:
            driver.quit()


if __name__ == "__main__":
    main()
