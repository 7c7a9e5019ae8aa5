"""One hierarchy for the errors users can cause.

The CLI turns any :class:`ScoringError` into a one-line message and exit status 2; the
plugin turns those raised while reading options or configuration into ``pytest.UsageError``.
"""

from __future__ import annotations


class ScoringError(Exception):
    """A problem with the user's input: the message names what is wrong and where."""


class OptionError(ScoringError):
    """A command-line option or ini setting has a value that cannot work."""


class ConfigError(ScoringError):
    """The scorer configuration file is malformed (names the file and key path)."""


class SelectorError(ScoringError):
    """A database selector is malformed (names the path inside the selector)."""


class FormulaError(ScoringError):
    """A composite formula uses something outside the allowed language."""


class DatabaseError(ScoringError):
    """A database file cannot be read, snapshotted or diffed."""


class ReportError(ScoringError):
    """A report cannot be written or read."""


class JUnitError(ScoringError):
    """A JUnit XML file is missing, empty or malformed."""
