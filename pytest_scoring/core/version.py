"""The release: one literal, which pyproject.toml and every report read."""

from __future__ import annotations

__version__ = "0.1.0"
