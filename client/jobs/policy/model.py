"""A compact decoder-only transformer (character tokens) with a KV cache for sampling.

Example:
    >>> import torch
    >>> model = TinyGPT(PolicyConfig(vocab_size=28, d_model=32, n_layer=1, n_head=2))
    >>> logits, cache = model(torch.tensor([[1, 5, 6]]))
    >>> tuple(logits.shape), len(cache)
    ((1, 3, 28), 1)

Pre-norm blocks (LayerNorm → causal self-attention → LayerNorm → GELU MLP), learned absolute
positions, tied input and output embeddings. ``forward(ids, cache)`` returns the logits and the
updated per-layer (keys, values), so generation feeds one token a step.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Any

import torch
import torch.nn.functional as F
from torch import nn

__all__ = ["KVCache", "PolicyConfig", "TinyGPT"]

KVCache = list[tuple[torch.Tensor, torch.Tensor]]


@dataclass(frozen=True, slots=True)
class PolicyConfig:
    """The architecture.

    Attributes:
        vocab_size: token ids.
        block_size: the longest sequence (prompt and response) in tokens.
        d_model: the residual width.
        n_layer: transformer blocks.
        n_head: attention heads (``d_model`` must divide by it).
    """

    vocab_size: int
    block_size: int = 96
    d_model: int = 128
    n_layer: int = 4
    n_head: int = 4

    def to_dict(self) -> dict[str, Any]:
        """The fields as a JSON-able dict."""
        return asdict(self)


class _Attention(nn.Module):
    def __init__(self, cfg: PolicyConfig) -> None:
        super().__init__()
        if cfg.d_model % cfg.n_head:
            raise ValueError(f"d_model {cfg.d_model} does not divide by n_head {cfg.n_head}")
        self.n_head = cfg.n_head
        self.qkv = nn.Linear(cfg.d_model, 3 * cfg.d_model)
        self.proj = nn.Linear(cfg.d_model, cfg.d_model)

    def forward(
        self, x: torch.Tensor, past: tuple[torch.Tensor, torch.Tensor] | None
    ) -> tuple[torch.Tensor, tuple[torch.Tensor, torch.Tensor]]:
        b, t, c = x.shape
        q, k, v = self.qkv(x).split(c, dim=2)
        q, k, v = (z.view(b, t, self.n_head, c // self.n_head).transpose(1, 2) for z in (q, k, v))
        if past is not None:
            k = torch.cat([past[0], k], dim=2)
            v = torch.cat([past[1], v], dim=2)
        if past is None:
            y = F.scaled_dot_product_attention(q, k, v, is_causal=True)
        elif t == 1:
            y = F.scaled_dot_product_attention(q, k, v)
        else:  # several new tokens after a cache: mask the future among them
            total = k.shape[2]
            mask = torch.ones(t, total, dtype=torch.bool).tril(diagonal=total - t)
            y = F.scaled_dot_product_attention(q, k, v, attn_mask=mask)
        return self.proj(y.transpose(1, 2).reshape(b, t, c)), (k, v)


class _Block(nn.Module):
    def __init__(self, cfg: PolicyConfig) -> None:
        super().__init__()
        self.ln1 = nn.LayerNorm(cfg.d_model)
        self.attn = _Attention(cfg)
        self.ln2 = nn.LayerNorm(cfg.d_model)
        self.mlp = nn.Sequential(
            nn.Linear(cfg.d_model, 4 * cfg.d_model),
            nn.GELU(),
            nn.Linear(4 * cfg.d_model, cfg.d_model),
        )

    def forward(
        self, x: torch.Tensor, past: tuple[torch.Tensor, torch.Tensor] | None
    ) -> tuple[torch.Tensor, tuple[torch.Tensor, torch.Tensor]]:
        a, kv = self.attn(self.ln1(x), past)
        x = x + a
        return x + self.mlp(self.ln2(x)), kv


class TinyGPT(nn.Module):
    """The policy network.

    Args:
        cfg: the architecture.
    """

    def __init__(self, cfg: PolicyConfig) -> None:
        super().__init__()
        self.cfg = cfg
        self.tok = nn.Embedding(cfg.vocab_size, cfg.d_model)
        self.pos = nn.Embedding(cfg.block_size, cfg.d_model)
        self.blocks = nn.ModuleList(_Block(cfg) for _ in range(cfg.n_layer))
        self.ln_f = nn.LayerNorm(cfg.d_model)
        self.apply(self._init)

    @staticmethod
    def _init(m: nn.Module) -> None:
        if isinstance(m, nn.Linear | nn.Embedding):
            nn.init.normal_(m.weight, std=0.02)
        if isinstance(m, nn.Linear) and m.bias is not None:
            nn.init.zeros_(m.bias)

    def forward(
        self, ids: torch.Tensor, cache: KVCache | None = None
    ) -> tuple[torch.Tensor, KVCache]:
        """Logits [B, T, V] for token ids [B, T] following ``cache``, and the new cache.

        Raises:
            ValueError: the sequence would pass ``block_size``.
        """
        start = cache[0][0].shape[2] if cache else 0
        t = ids.shape[1]
        if start + t > self.cfg.block_size:
            raise ValueError(
                f"sequence of {start + t} tokens, over block_size={self.cfg.block_size}"
            )
        pos = torch.arange(start, start + t, device=ids.device)
        x = self.tok(ids) + self.pos(pos)
        new: KVCache = []
        for i, block in enumerate(self.blocks):
            x, kv = block(x, cache[i] if cache else None)
            new.append(kv)
        logits = self.ln_f(x) @ self.tok.weight.T
        return logits, new

    def num_params(self) -> int:
        """Parameter count."""
        return sum(p.numel() for p in self.parameters())
