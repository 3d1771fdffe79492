"""The embedded policy (``forkgate.jobs.policy``) as a sampler; torch loads on first use.

Example:
    >>> sampler = EmbeddedSampler()
    >>> [group] = sampler.sample(["25 5 4 3>83|"], n=2, max_tokens=16, seed=0)
    >>> len(group)
    2
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from ..samplers import Sample, SamplerError

if TYPE_CHECKING:
    from .policy.policy import Policy

__all__ = ["EmbeddedSampler"]


@dataclass
class EmbeddedSampler:
    """The embedded Countdown policy shipped with the package (CPU, no download).

    It reads Countdown prompts (the TinyZero prompt or the compact ``"25 5 4 3>83|"``) and
    writes ``<think>steps</think><answer>expr</answer>``. torch and the weights load on first
    use (well under a second).

    Args:
        weights: a safetensors file with its JSON next to it (default: the shipped policy).
        top_k_logprobs: how many first-token log-probabilities to report.
        policy: an already loaded ``forkgate.jobs.policy.Policy`` (e.g. one being trained).
        threads: torch intra-op threads, set when the policy loads (None leaves torch's
            setting). One is the default: the model is too small to gain from more, and on a
            busy machine oversubscribed threads spin (sampling ran 20x slower with 2 threads
            on a loaded 2-core machine).
    """

    weights: str | None = None
    top_k_logprobs: int = 5
    policy: Policy | None = None
    threads: int | None = 1

    def load(self) -> Policy:
        """The policy (loaded once).

        Raises:
            SamplerError: the weights cannot be loaded, or torch is not installed.
        """
        if self.policy is None:
            try:
                import torch

                from .policy.policy import Policy
            except ImportError as e:
                raise SamplerError(
                    "the embedded sampler needs torch: pip install 'forkgate[train]'"
                ) from e
            if self.threads is not None:
                torch.set_num_threads(self.threads)
            self.policy = Policy.load(Path(self.weights) if self.weights else None)
        return self.policy

    def sample(
        self,
        prompts: Sequence[str],
        n: int,
        max_tokens: int,
        temperature: float = 1.0,
        top_p: float = 1.0,
        seed: int | None = None,
        prefix: str | None = None,
    ) -> list[list[Sample]]:
        """n samples per prompt from the embedded policy."""
        return self.load().sample(
            prompts, n, max_tokens, temperature, top_p, seed, prefix, self.top_k_logprobs
        )
