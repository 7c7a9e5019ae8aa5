"""The report folder: what it holds, writing it, Inspect Scout files, reading it back, JUnit."""

from __future__ import annotations

from typing import Final

#: The variable GitHub Actions sets to the file it shows on the run's page (kept here: every
#: session checks it, and only one that finds it loads the summary's code).
GITHUB_SUMMARY_ENV: Final = "GITHUB_STEP_SUMMARY"
