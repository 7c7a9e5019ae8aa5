from __future__ import annotations

from pytest_scoring.cli.main import main

main()
