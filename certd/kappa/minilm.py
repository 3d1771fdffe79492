"""all-MiniLM-L6-v2 sentence embeddings in plain torch: no sentence-transformers, no transformers.

Example::

    model = MiniLM.load(model_dir(), max_tokens=64)
    vectors = model.encode(["Factor the expression.", "Substitute t = x + 1."])
    vectors.shape                      # (2, 384), float32, each row of unit length

The model is BERT (6 layers, hidden size 384, 12 heads, GELU, LayerNorm ε 1e-12) followed by
mean pooling over the tokens and L2 normalisation, the three modules the package's
``modules.json`` names. This module reads the package's ``tokenizer.json`` with the Rust
``tokenizers`` library (the same normaliser, WordPiece model and ``[CLS] … [SEP]`` template
transformers would build from it), truncates to ``max_tokens`` word pieces counting the two
special tokens (sentence-transformers' ``max_seq_length``), and reads ``model.safetensors``
into plain tensors. Importing it costs ``torch`` and ``tokenizers`` only; sentence-transformers
imports scikit-learn, SciPy and most of transformers, about three quarters of the model's
load time (``docs/benchmarks.md``).

**Packed batches.** The token-wise layers (embeddings, the six linear maps of each layer,
LayerNorm, GELU) run on the real tokens of a batch stacked into one ``(tokens, 384)`` matrix:
no padding. Only attention pads, per batch, to its longest sentence, with a key mask. So no
work is spent on padding positions in the linear layers (the bulk of the arithmetic), and a
sentence's vector does not depend on how long its batch neighbours are.

``tests/integration/test_math_first_step.py`` checks the vectors against
sentence-transformers' ``encode`` (within 1e-6 on every exemplar and a set of steps) and that
every label is the same, where sentence-transformers is installed.
"""

from __future__ import annotations

import json
import math
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np
import torch
import torch.nn.functional as F
from safetensors.torch import load_file
from tokenizers import Tokenizer

from certd.errors import ConfigError

__all__ = ["MiniLM"]

_EPS = 1e-12  # config.json layer_norm_eps


class MiniLM:
    """A BERT sentence encoder with mean pooling, from a sentence-transformers model folder.

    Args:
        tokenizer: the folder's ``tokenizer.json``, truncation set, padding off.
        weights: the folder's ``model.safetensors`` tensors.
        config: the folder's ``config.json``.
    """

    def __init__(self, tokenizer: Tokenizer, weights: dict[str, Any], config: dict[str, Any]):
        self.tokenizer = tokenizer
        self.hidden = int(config["hidden_size"])
        self.heads = int(config["num_attention_heads"])
        self.layers = int(config["num_hidden_layers"])
        w = weights
        self.word = w["embeddings.word_embeddings.weight"]
        self.position = w["embeddings.position_embeddings.weight"]
        self.token_type = w["embeddings.token_type_embeddings.weight"][0]
        self.embed_norm = (w["embeddings.LayerNorm.weight"], w["embeddings.LayerNorm.bias"])
        self.blocks = []
        for i in range(self.layers):
            p = f"encoder.layer.{i}."
            qkv_w = torch.cat(
                [w[p + f"attention.self.{n}.weight"] for n in ("query", "key", "value")]
            )
            qkv_b = torch.cat(
                [w[p + f"attention.self.{n}.bias"] for n in ("query", "key", "value")]
            )
            self.blocks.append(
                {
                    "qkv": (qkv_w, qkv_b),
                    "out": (
                        w[p + "attention.output.dense.weight"],
                        w[p + "attention.output.dense.bias"],
                    ),
                    "norm1": (
                        w[p + "attention.output.LayerNorm.weight"],
                        w[p + "attention.output.LayerNorm.bias"],
                    ),
                    "up": (w[p + "intermediate.dense.weight"], w[p + "intermediate.dense.bias"]),
                    "down": (w[p + "output.dense.weight"], w[p + "output.dense.bias"]),
                    "norm2": (w[p + "output.LayerNorm.weight"], w[p + "output.LayerNorm.bias"]),
                }
            )

    @classmethod
    def load(cls, folder: Path, *, max_tokens: int) -> MiniLM:
        """Read the tokenizer, config and weights of a sentence-transformers BERT folder.

        Args:
            folder: the model folder (``model.safetensors``, ``tokenizer.json``, ``config.json``).
            max_tokens: word pieces kept per sentence, ``[CLS]`` and ``[SEP]`` included.

        Raises:
            ConfigError: a file is missing or is not a BERT mean-pooling model.

        Returns:
            The encoder.
        """
        try:
            config = json.loads((folder / "config.json").read_text(encoding="utf-8"))
            pooling = json.loads((folder / "1_Pooling" / "config.json").read_text(encoding="utf-8"))
            tokenizer = Tokenizer.from_file(str(folder / "tokenizer.json"))
            weights = load_file(str(folder / "model.safetensors"))
        except (OSError, ValueError, RuntimeError) as e:
            raise ConfigError(f"cannot read the embedding model in {folder}: {e}") from e
        if config.get("model_type") != "bert" or not pooling.get("pooling_mode_mean_tokens"):
            raise ConfigError(f"{folder} is not a BERT model with mean pooling")
        tokenizer.no_padding()
        tokenizer.enable_truncation(max_length=max_tokens)
        return cls(tokenizer, weights, config)

    def token_ids(self, texts: Sequence[str]) -> list[list[int]]:
        """Word-piece ids of each text, ``[CLS]`` and ``[SEP]`` included, truncated."""
        return [e.ids for e in self.tokenizer.encode_batch(list(texts))]

    @torch.inference_mode()
    def encode_ids(self, ids: Sequence[Sequence[int]]) -> np.ndarray:
        """Unit-length float32 embeddings of tokenised sentences, one row each, in order.

        Args:
            ids: each sentence's token ids (``token_ids``), none empty.

        Returns:
            An array of shape ``(len(ids), hidden)``.
        """
        lengths = torch.tensor([len(s) for s in ids])
        flat = torch.tensor([t for s in ids for t in s])
        positions = torch.cat([torch.arange(n) for n in lengths.tolist()])
        x = self.word[flat] + self.position[positions] + self.token_type
        x = F.layer_norm(x, (self.hidden,), *self.embed_norm, eps=_EPS)
        # Where each real token sits in the padded (batch, longest, …) layout of attention.
        longest = int(lengths.max())
        starts = torch.arange(len(ids)) * longest
        slots = torch.repeat_interleave(starts, lengths) + positions
        keys = (torch.arange(longest)[None, :] < lengths[:, None])[:, None, None, :]
        for block in self.blocks:
            x = self._layer(x, block, slots, keys, len(ids), longest)
        segment = torch.repeat_interleave(torch.arange(len(ids)), lengths)
        sums = torch.zeros(len(ids), self.hidden).index_add_(0, segment, x)
        pooled = sums / lengths[:, None].to(x.dtype)
        return F.normalize(pooled, p=2.0, dim=1).numpy()

    def _layer(
        self,
        x: torch.Tensor,
        block: dict[str, tuple[torch.Tensor, torch.Tensor]],
        slots: torch.Tensor,
        keys: torch.Tensor,
        batch: int,
        longest: int,
    ) -> torch.Tensor:
        """One encoder layer on packed tokens (attention on the padded layout)."""
        qkv = F.linear(x, *block["qkv"])
        padded = qkv.new_zeros(batch * longest, qkv.shape[1])
        padded[slots] = qkv
        head = self.hidden // self.heads
        q, k, v = padded.view(batch, longest, 3, self.heads, head).permute(2, 0, 3, 1, 4)
        ctx = F.scaled_dot_product_attention(q, k, v, attn_mask=keys, scale=1.0 / math.sqrt(head))
        ctx = ctx.transpose(1, 2).reshape(batch * longest, self.hidden)[slots]
        x = F.layer_norm(
            F.linear(ctx, *block["out"]) + x, (self.hidden,), *block["norm1"], eps=_EPS
        )
        h = F.gelu(F.linear(x, *block["up"]))
        return F.layer_norm(
            F.linear(h, *block["down"]) + x, (self.hidden,), *block["norm2"], eps=_EPS
        )
