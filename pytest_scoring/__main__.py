from __future__ import annotations

from pytest_scoring.cli import main

main()
