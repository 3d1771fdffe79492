"""The embedded Countdown policy: a small character-level transformer shipped with forkgate.

Example::

    from forkgate.jobs.policy import Policy
    policy = Policy.load()
    [group] = policy.sample(["25 5 4 3>83|"], n=8, max_tokens=80, seed=0)

Importing this package imports torch; ``import forkgate`` never does (use
``forkgate.jobs.embedded.EmbeddedSampler``, which loads it on first use).
"""

from .format import CharTokenizer, compact_prompt, solution_text
from .model import PolicyConfig, TinyGPT
from .policy import DEFAULT_WEIGHTS, Policy

__all__ = [
    "CharTokenizer",
    "DEFAULT_WEIGHTS",
    "Policy",
    "PolicyConfig",
    "TinyGPT",
    "compact_prompt",
    "solution_text",
]
