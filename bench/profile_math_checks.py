"""Where a math check's time goes, in one process (no pool, no gRPC): the figures behind the
notes on the first pass in ``docs/benchmarks.md``.

Checks Math-Verify 0.9.0's 272 public cases once each with ``verify_math`` after the same
warm-up a math worker gets (``warm_up``, grammar priming over the whole corpus, the benchmark's
warm-up inputs), timing the parse, the grammar (ANTLR) calls and the equivalence. Then, with
``--embed``, the CPU seconds of the first-step labels of the cases' distinct first steps on
one thread (``StepEmbedder.moves``, certd's own MiniLM), per step; a 32-word-piece step cut
instead of 64 (not used: another κ version; the labels it changes are counted); where
sentence-transformers is installed, its ``encode`` in batches of 16 (what certd ran before)
and an int8 dynamically quantised copy of it (not used: it moves the embeddings; the labels it
would change are counted). Where the CPU has native bfloat16, also the bfloat16 screen
(``math.embed_screen``): its time and the labels it changes (must be 0).

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
    import torch

    from certd.domains.math.first_step import first_step_text
    from certd.kappa.embedder import SCREEN_MARGIN, StepEmbedder, bf16_native, model_dir
    from certd.kappa.minilm import MiniLM

    cases = load_cases()
    steps = sorted({s for c in cases if (s := first_step_text(c.pred)) is not None})
    torch.set_num_threads(1)
    emb = StepEmbedder.load(threads=1, screen="off")

    def labels_by(e: StepEmbedder) -> tuple[float, list[str]]:
        """CPU seconds of ``moves`` over the steps (best of 3, cache cleared), and the labels."""
        seconds, out = [], []
        for _ in range(3):
            e._cache.clear()
            t0 = time.process_time()
            out = e.moves(steps)
            seconds.append(time.process_time() - t0)
        return min(seconds), out

    exact_s, labels = labels_by(emb)
    tokens = [len(ids) for ids in emb._model.token_ids(steps)]
    out: dict[str, Any] = {
        "distinct_first_steps": len(steps),
        "word_pieces": sum(tokens),
        "torch_threads": 1,
        "cpu_s_moves_float32": round(exact_s, 3),
        "cpu_ms_per_step": round(1000 * exact_s / len(steps), 2),
        "bf16_native": bf16_native(),
    }
    # A 32-word-piece cut (another κ version, not used): what it would save and change.
    short = StepEmbedder(MiniLM.load(model_dir(), max_tokens=32), emb.model_sha256)
    short_s, short_labels = labels_by(short)
    out["cpu_s_cut_32_tokens"] = round(short_s, 3)
    out["cut_32_tokens_labels_changed"] = sum(
        a != b for a, b in zip(labels, short_labels, strict=True)
    )
    out.update(_reference(steps, labels, emb))
    if not out["bf16_native"]:
        return out
    screened = StepEmbedder(emb._model, emb.model_sha256, screen=True)
    screen_s, screen_labels = labels_by(screened)
    out["bf16"] = {
        "cpu_s_moves_screened": round(screen_s, 3),
        "screen_margin": SCREEN_MARGIN,
        "steps_decided_in_float32": screened.exact // 3,
        "labels_changed_by_screen": sum(a != b for a, b in zip(labels, screen_labels, strict=True)),
    }
    return out


def _reference(steps: list[str], labels: list[str], emb: Any) -> dict[str, Any]:
    """sentence-transformers (what certd used before ``minilm``) on the same steps, where
    installed: its CPU time in batches of 16, and an int8 dynamically quantised copy (not used:
    it moves the embeddings; the labels it would change are counted)."""
    try:
        from sentence_transformers import SentenceTransformer
    except ImportError:
        return {"sentence_transformers": "not installed"}
    import numpy as np
    import torch

    from certd.domains.math.first_step import MAX_SEQ_TOKENS
    from certd.kappa.embedder import model_dir

    model = SentenceTransformer(str(model_dir()), device="cpu", local_files_only=True)
    model.max_seq_length = MAX_SEQ_TOKENS
    by_length = sorted(steps, key=len, reverse=True)

    def best(m: Any) -> tuple[float, Any]:
        got, seconds = None, []
        for _ in range(3):
            t0 = time.process_time()
            got = m.encode(by_length, batch_size=16, normalize_embeddings=True)
            seconds.append(time.process_time() - t0)
        return min(seconds), np.asarray(got, dtype=np.float64)

    s16, v16 = best(model)
    q = torch.ao.quantization.quantize_dynamic(model, {torch.nn.Linear}, dtype=torch.qint8)
    s8, v8 = best(q)
    mine = {s: lab for s, lab in zip(steps, labels, strict=True)}
    ref = [emb._nearest(list(v)) for v in v16]
    return {
        "sentence_transformers_cpu_s_batch_16": round(s16, 3),
        "sentence_transformers_labels_changed": sum(
            mine[s] != lab for s, lab in zip(by_length, ref, strict=True)
        ),
        "int8_cpu_s_batch_16": round(s8, 3),
        "int8_median_cosine_to_float": round(float(np.median((v16 * v8).sum(axis=1))), 4),
        "int8_labels_changed": sum(
            a != emb._nearest(list(v)) for a, v in zip(ref, v8, strict=True)
        ),
    }


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
