"""Every process the evaluator starts, and how it is contained (docs/architecture.md).

One mechanism starts them all, the repository's pytest under ``pytest-scoring run``, the
reference rerun and ``sandbox_state`` commands alike: :mod:`.children` prepares what the child
needs (user, folders, environment, limits, the launch kit), :mod:`.supervisor` starts the
supervisor program :mod:`pytest_scoring.kit.supervise` that runs and contains the child, and
:mod:`.stream` reads the probe's lines (:mod:`pytest_scoring.kit.probe`) that the child's
pytest writes. :mod:`pytest_scoring.kit.launch` is the script that starts pytest in the child.
"""
