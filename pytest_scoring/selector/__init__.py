"""The selector language: which database changes a scorer looks for."""
