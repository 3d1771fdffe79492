"""Adapters to RL trainers: ``forkgate.adapters.trl`` and ``forkgate.adapters.verl``.

Example::

    from forkgate.adapters.trl import CertdReward, StratifiedGRPOTrainer   # needs the trl extra
    from forkgate.adapters.verl import compute_score                      # needs the verl extra

Each submodule imports its framework when it is imported; this package imports nothing, so
``import forkgate`` stays light.
"""
