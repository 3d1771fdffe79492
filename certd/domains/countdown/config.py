"""The Countdown domain's config section (``CertdConfig.countdown``; ``DomainSpec.config_section``).

Example:
    >>> CountdownConfig().verify_workers, CountdownConfig(max_numbers=6).max_numbers
    (2, 6)

It lives with its domain; ``certd.config`` assembles the sections into ``CertdConfig`` and
``docs/config-schema.md`` describes every key.
"""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict, Field

__all__ = ["CountdownConfig"]


class CountdownConfig(BaseModel):
    """Countdown verification limits and reward shaping."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    max_response_chars: int = Field(65_536, ge=1)
    max_expression_chars: int = Field(1_024, ge=1)
    max_depth: int = Field(64, ge=1, description="parenthesis nesting")
    max_literal_digits: int = Field(9, ge=1)
    max_numbers: int = Field(8, ge=1, le=8)
    max_tokens: int = Field(512, ge=1)
    max_enumerate_numbers: int = Field(6, ge=1, le=7)
    max_enumerate_solutions: int = Field(200_000, ge=1)
    verify_workers: int = Field(2, ge=0, description="worker processes for large batches")
    verify_pool_min_batch: int = Field(256, ge=1, description="smaller batches run in process")
    reward_correct: float = 1.0
    reward_wrong_answer: float = 0.1
    reward_invalid: float = 0.0
