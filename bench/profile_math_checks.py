"""Where a math check's time goes, in one process (no pool, no gRPC): the figures behind the
notes on the first pass in ``docs/benchmarks.md``.

Checks Math-Verify 0.9.0's 272 public cases once each with ``verify_math`` after the same
warm-up a math worker gets (``warm_up``, grammar priming over the whole corpus, the benchmark's
warm-up inputs), timing the parse, the grammar (ANTLR) calls and the equivalence. Then, with
``--embed``, times the first-step embedding of the cases' distinct first steps: batches of 16
(what certd does) against 64, and an int8 dynamically quantised copy of the model (not used:
it moves the embeddings; the labels it would change are counted), and a 32-word-piece step cut
instead of 64 (not used either: another κ version; the labels it changes are counted).
Where the CPU has native bfloat16, also the bfloat16 screen certd uses (``StepEmbedder``,
``math.embed_screen``): its time against float32 alone, the steps it leaves to float32, the
labels it changes (must be 0), and how far bfloat16 moves a cosine over every sentence of
the cases that could be a step.

Run: ``.venv/bin/python bench/profile_math_checks.py [--no-fast] [--embed]`` (prints JSON).
``--no-fast`` turns the fast reader off, so every answer outside the integer/fraction
shortcut goes to the grammar (the state before ``fastlatex``).
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tests" / "conformance"))

from bench_math import _warm_inputs  # noqa: E402
from mathverify_cases import load_cases  # noqa: E402

import certd.domains.math.parse as parse  # noqa: E402
import certd.domains.math.verify as verify  # noqa: E402
from certd.domains.math import MathTask, verify_math  # noqa: E402
from certd.domains.math.warmup import prime_corpus, warm_up  # noqa: E402


def _timed(module: Any, name: str, totals: dict[str, float], counts: dict[str, int]) -> None:
    inner = getattr(module, name)

    def wrapper(*args: Any, **kwargs: Any) -> Any:
        t0 = time.perf_counter()
        try:
            return inner(*args, **kwargs)
        finally:
            totals[name] = totals.get(name, 0.0) + time.perf_counter() - t0
            counts[name] = counts.get(name, 0) + 1

    setattr(module, name, wrapper)


def checks(fast: bool) -> dict[str, Any]:
    cases = load_cases()
    if not fast:
        parse.read_fast = lambda *a, **k: None  # type: ignore[assignment]
    warm_up()
    for text in prime_corpus():
        parse.prime_grammar(text)
    for gold, response, digits in _warm_inputs():
        verify_math(MathTask(gold=gold, precision_digits=digits), response)
    totals: dict[str, float] = {}
    counts: dict[str, int] = {}
    _timed(parse, "_parse", totals, counts)
    _timed(parse, "_latex", totals, counts)
    _timed(verify, "equivalent", totals, counts)
    t0 = time.perf_counter()
    for c in cases:
        verify_math(MathTask(gold=c.gold, precision_digits=max(1, c.precision)), c.pred)
    return {
        "fast_reader": fast,
        "cases": len(cases),
        "seconds_all_checks": round(time.perf_counter() - t0, 3),
        "seconds_parsing": round(totals.get("_parse", 0.0), 3),
        "grammar_calls": counts.get("_latex", 0),
        "seconds_in_grammar": round(totals.get("_latex", 0.0), 3),
        "seconds_equivalence": round(totals.get("equivalent", 0.0), 3),
    }


def _sentences(cases: list[Any]) -> list[str]:
    """Every sentence of the cases' predictions that could be a step, and the move exemplars."""
    from certd.domains.math.first_step import _SPLIT, MOVES

    out = {s.strip()[:300] for c in cases for s in _SPLIT.split(c.pred) if len(s.strip()) >= 10}
    out.update(ex for _, examples in MOVES for ex in examples)
    return sorted(out)


def embedding() -> dict[str, Any]:
    import numpy as np
    import torch

    from certd.authority.embedder import SCREEN_MARGIN, StepEmbedder, bf16_native
    from certd.domains.math.first_step import MAX_SEQ_TOKENS, first_step_text

    cases = load_cases()
    steps = sorted({s for c in cases if (s := first_step_text(c.pred)) is not None})
    emb = StepEmbedder.load(threads=1, screen="off")
    model = emb._model

    def best(m: Any, batch: int, texts: list[str] = steps) -> tuple[float, Any]:
        out, seconds = None, []
        for _ in range(3):
            t0 = time.perf_counter()
            out = m.encode(texts, batch_size=batch, normalize_embeddings=True)
            seconds.append(time.perf_counter() - t0)
        return min(seconds), np.asarray(out, dtype=np.float64)

    def labels_by(e: StepEmbedder) -> tuple[float, list[str]]:
        seconds, out = [], []
        for _ in range(3):
            e._cache.clear()
            t0 = time.perf_counter()
            out = e.moves(steps)
            seconds.append(time.perf_counter() - t0)
        return min(seconds), out

    s16, v16 = best(model, 16)
    s64, _ = best(model, 64)
    q = torch.ao.quantization.quantize_dynamic(model, {torch.nn.Linear}, dtype=torch.qint8)
    s8, v8 = best(q, 16)
    labels = [emb._nearest(list(v)) for v in v16]
    labels_q = [emb._nearest(list(v)) for v in v8]
    model.max_seq_length = 32  # a shorter step cut (another κ version): what it saves, changes
    s32, v32 = best(model, 16)
    model.max_seq_length = MAX_SEQ_TOKENS
    labels_32 = [emb._nearest(list(v)) for v in v32]
    out: dict[str, Any] = {
        "distinct_first_steps": len(steps),
        "torch_threads": 1,
        "seconds_batch_16": round(s16, 3),
        "seconds_batch_64": round(s64, 3),
        "seconds_int8_batch_16": round(s8, 3),
        "int8_median_cosine_to_float": round(float(np.median((v16 * v8).sum(axis=1))), 4),
        "int8_labels_changed": sum(a != b for a, b in zip(labels, labels_q, strict=True)),
        "seconds_cut_32_tokens_batch_16": round(s32, 3),
        "cut_32_tokens_labels_changed": sum(a != b for a, b in zip(labels, labels_32, strict=True)),
        "bf16_native": bf16_native(),
    }
    if not out["bf16_native"]:
        return out
    with torch.autocast("cpu", dtype=torch.bfloat16):
        sb, _ = best(model, 16)
    exact_s, exact_labels = labels_by(emb)
    screened = StepEmbedder(model, emb.model_sha256, screen=True)
    screen_s, screen_labels = labels_by(screened)
    # How far bfloat16 moves a cosine to a move exemplar, over a wider set of sentences.
    corpus = _sentences(cases)
    unit = emb._matrix / emb._norms[:, None]
    _, c32 = best(model, 16, corpus)
    with torch.autocast("cpu", dtype=torch.bfloat16):
        _, cb = best(model, 16, corpus)
    deviation = np.abs(c32 @ unit.T - cb @ unit.T)
    out["bf16"] = {
        "seconds_encode_batch_16": round(sb, 3),
        "seconds_moves_float32": round(exact_s, 3),
        "seconds_moves_screened": round(screen_s, 3),
        "screen_margin": SCREEN_MARGIN,
        "steps_decided_in_float32": screened.exact // 3,
        "labels_changed_by_screen": sum(
            a != b for a, b in zip(exact_labels, screen_labels, strict=True)
        ),
        "sentences_for_deviation": len(corpus),
        "max_cosine_deviation": round(float(deviation.max()), 5),
        "median_cosine_deviation": round(float(np.median(deviation)), 5),
    }
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--no-fast", action="store_true", help="turn the fast reader off")
    ap.add_argument("--embed", action="store_true", help="also time the first-step embedding")
    args = ap.parse_args()
    out = {"checks": checks(not args.no_fast)}
    if args.embed:
        out["embedding"] = embedding()
    print(json.dumps(out, indent=1))


if __name__ == "__main__":
    main()
