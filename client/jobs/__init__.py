"""The jobs: what the ``forkgate`` CLI runs on top of the library, imported only by the CLI.

Example::

    forkgate run                              # forkgate.jobs.run: the main job (``make run``)
    forkgate experiment countdown             # forkgate.jobs.experiment: the issue-18 experiment

``forkgate`` itself is the library a trainer imports (the gRPC client, the ratchet, the
advantages, metrics, samplers and adapters) and stays light: it never imports this package
(an import-linter contract and ``tests/unit/test_light_import.py`` check it). Here live the
jobs and what only they need: ``run`` and its ``report``, ``experiment``, ``guard_demo`` with
the ``scripted`` model it trains and the ``support_report``, ``kappa_calibrate`` and its
report, the embedded RL policy network ``policy`` (torch) with its sampler ``embedded``, and
``cli_jobs`` (the CLI verbs that start them). The reports draw with matplotlib (the ``train``
extra).
"""
