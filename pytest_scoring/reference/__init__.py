"""The reference rerun: a private copy of the reference checkout and the pytest run in it."""
