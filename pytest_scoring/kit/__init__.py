"""The kit: everything that runs inside a child pytest or a sandbox, and nothing else.

Each module of this folder (but this file) is copied as a plain file, named
``_pytest_scoring_<module>.py``, into a folder that only the evaluator can write, and runs
there under whatever interpreter the repository's tests use (``run --python``, an Inspect
sandbox): the launcher, the probe, the integrity watch, the deterministic plugin and the
sandbox helper. So every module here keeps three rules, which ``tests/test_kit.py`` checks:
it needs only the standard library and pytest (7.0 or newer), it keeps to Python 3.8 syntax,
and it imports nothing of ``pytest_scoring``. The rest of the package may import it.

The kit's folder goes on the test process's ``sys.path``, since pytest-xdist's workers load
the integrity watch and the deterministic plugin by name (``-p``). The modules that write the
probe's stream (:data:`PRIVATE`) go in a folder of their own inside it, which is never on
``sys.path``: no test can import them by name.
"""

from __future__ import annotations

from pathlib import Path
from typing import Final

FOLDER = Path(__file__).resolve().parent
#: What each module's name gets in front of it when copied (the copies import each other so).
PREFIX = "_pytest_scoring_"
#: The modules the launcher loads by path, never importable by name: their sub-folder.
PRIVATE: Final = frozenset({"launch", "channel", "probe"})
PRIVATE_FOLDER: Final = "private"
#: The launcher, relative to the copied kit's folder.
LAUNCHER: Final = f"{PRIVATE_FOLDER}/{PREFIX}launch.py"


def kit_files() -> dict[str, Path]:
    """Every file of the kit, by the path (relative to the copied kit's folder) it is copied
    to."""
    return {
        _copied_as(path.stem): path
        for path in sorted(FOLDER.glob("*.py"))
        if path.name != "__init__.py"
    }


def _copied_as(module: str) -> str:
    name = PREFIX + module + ".py"
    return f"{PRIVATE_FOLDER}/{name}" if module in PRIVATE else name
