"""The ``pytest-scoring`` command line and the backend of ``pytest-scoring run``."""
