"""The evaluator: scoring one repository, in process or from outside (docs/architecture.md).

:mod:`.scoring` is the core both routes share, free of pytest: start the scorers, fold in test
outcomes, score, write the report, add JUnit properties, summarise. The plugin's session feeds
it pytest's reports; ``pytest-scoring run`` feeds it the probe's stream from a contained child,
with :mod:`.options` (its command line), :mod:`.hooks` (scorer types and session hooks from the
evaluator's side only) and :mod:`.area` (the private area, the copies, the children's user).
"""
