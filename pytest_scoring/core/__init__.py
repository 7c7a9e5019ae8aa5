"""The vocabulary every floor speaks: settings, signals, outcomes, scores, metrics.

Nothing here imports anything of pytest-scoring but :mod:`pytest_scoring.errors` and
:mod:`pytest_scoring.text`, nor pytest: the evaluator, the plugin, the batch and the Inspect
scorers all build on it (docs/architecture.md#floors).
"""
