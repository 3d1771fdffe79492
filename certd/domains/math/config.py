"""The math domain's config section (``CertdConfig.math``; ``DomainSpec.config_section``).

Example:
    >>> MathConfig().enabled, MathConfig(workers=4).workers
    (True, 4)

It lives with its domain; ``certd.config`` assembles the sections into ``CertdConfig`` and
``docs/config-schema.md`` describes every key.
"""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict, Field

__all__ = ["MathConfig"]


class MathConfig(BaseModel):
    """Math checking: the worker pool, caps, extraction, rewards and κ first-step."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    enabled: bool = Field(True, description="serve the math domain")
    workers: int = Field(2, ge=1, description="worker processes of the math pool")
    deadline_s: float = Field(2.0, gt=0.0, le=600.0, description="per check, in a worker")
    memory_bytes: int = Field(1 << 30, ge=0, description="RLIMIT_AS of each worker; 0: none")
    warm_start: bool = Field(
        True,
        description="start the pool and load the embedding model in the background at server "
        "start; the health service certd.v1.Verifier/math is NOT_SERVING until both are ready",
    )
    ready_wait_s: float = Field(
        20.0,
        ge=0.0,
        description="how long a math request arriving during warm-up waits for it before "
        "failing with UNAVAILABLE and the warm-up stage",
    )
    prime_grammar: bool = Field(
        True, description="workers fill the LaTeX grammar's prediction cache when idle"
    )
    worker_nice: int = Field(
        5, ge=0, le=19, description="niceness added to each ready worker (serving goes first)"
    )
    max_response_chars: int = Field(1_048_576, ge=1)
    max_gold_chars: int = Field(4_096, ge=1)
    max_answer_chars: int = Field(1_024, ge=1)
    max_brace_depth: int = Field(32, ge=1)
    max_fracs: int = Field(32, ge=1)
    max_tree_nodes: int = Field(2_000, ge=1)
    max_integer_digits: int = Field(2_000, ge=1, le=4_000)
    max_power_digits: int = Field(10_000, ge=1)
    extract_priority: tuple[str, ...] = ("boxed", "phrase", "display", "inline", "plain")
    boxed: str = Field("last", pattern="^(last|first)$")
    first_step: bool = Field(True, description="label math.first-step.v1 (needs the model)")
    embed_threads: int = Field(1, ge=1, description="torch threads for first-step embeddings")
    embed_screen: str = Field(
        "auto",
        pattern="^(auto|on|off)$",
        description="screen first-step embeddings in bfloat16 (auto: where the CPU has it "
        "natively); float32 decides every close call, so labels do not change",
    )
    reward_correct: float = 1.0
    reward_wrong_answer: float = 0.0
    reward_unparsed: float = 0.0
