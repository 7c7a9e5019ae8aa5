"""Sphinx configuration of the pytest-scoring docs (MyST Markdown pages, furo theme).

Build: ``sphinx-build -W --keep-going docs docs/_build/html``. No intersphinx: CI has no network.
"""

from __future__ import annotations

from importlib.metadata import version as _version

project = "pytest-scoring"
author = "the pytest-scoring authors"
copyright = "the pytest-scoring authors"
release = _version("pytest-scoring")
version = release

extensions = ["myst_parser", "sphinx.ext.autodoc"]
source_suffix = {".md": "markdown"}
exclude_patterns = ["_build", "README.md"]
myst_heading_anchors = 3
myst_enable_extensions = ["colon_fence"]

autodoc_member_order = "bysource"
autodoc_typehints = "description"
autodoc_typehints_format = "short"

html_theme = "furo"
html_title = "pytest-scoring"
