"""The kit: everything that runs inside a child pytest or a sandbox, and nothing else.

Each module of this folder (but this file) is copied as a plain file, named
``_pytest_scoring_<module>.py``, into a folder that only the evaluator can write, and runs
there under whatever interpreter the repository's tests use (``run --python``, an Inspect
sandbox): the launcher, the probe, the integrity watch, the deterministic plugin and the
sandbox helper. So every module here keeps three rules, which ``tests/test_kit.py`` checks:
it needs only the standard library and pytest (7.0 or newer), it keeps to Python 3.8 syntax,
and it imports nothing of ``pytest_scoring``. The rest of the package may import it.
"""

from __future__ import annotations

from pathlib import Path

FOLDER = Path(__file__).resolve().parent
#: What each module's name gets in front of it when copied (the copies import each other so).
PREFIX = "_pytest_scoring_"


def kit_files() -> dict[str, Path]:
    """Every file of the kit, by the name it is copied under."""
    return {
        PREFIX + path.name: path
        for path in sorted(FOLDER.glob("*.py"))
        if path.name != "__init__.py"
    }
