"""The report folder: what it holds, writing it, Inspect Scout files, reading it back, JUnit."""
