"""Databases: find them, snapshot them consistently, diff two snapshots, diff two diffs."""
