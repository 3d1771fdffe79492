"""certd's own MiniLM (plain torch) against sentence-transformers, on the real packaged model.

The κ math.first-step.v1 version did not change when certd stopped loading the model with
sentence-transformers; that holds only while the vectors are the same (within 1e-6) and every
label is the same. sentence-transformers is the reference here only (the ``dev`` extra).
"""

from __future__ import annotations

import sys
from types import ModuleType
from typing import TYPE_CHECKING

import numpy as np
import pytest

from certd.domains.math.first_step import MAX_SEQ_TOKENS, MOVES, first_step_text
from certd.kappa.embedder import BATCH, StepEmbedder, model_dir
from certd.kappa.math_corpus import math_corpus

if TYPE_CHECKING:
    from certd.kappa.minilm import MiniLM

_EXTRA = [
    "",
    "x",
    "Naïve résumé: Ünïcödé accents are stripped, 中文 characters split.",
    "We write " + " + ".join(f"a_{{{i}}} x^{{{i}}}" for i in range(80)) + " = 0.",  # > 64 pieces
    "Substitute t = x + 1.\tThen\n the equation is   t^2 = 4.",
    "Let's   think: $\\frac{1}{2} + \\sqrt{3}$ — is it ≥ 1?",
]


def _corpus() -> list[str]:
    """Exemplars, odd inputs, and the first steps of a generated math corpus."""
    rows = math_corpus(problems_per_family=16, solutions=6, seed=11)
    steps = {s for r in rows if (s := first_step_text(r.response)) is not None}
    return [*(ex for _, examples in MOVES for ex in examples), *_EXTRA, *sorted(steps)]


@pytest.fixture(scope="module")
def st() -> ModuleType:
    """sentence-transformers, the reference: imported here, not when the module is collected
    (it costs scikit-learn, SciPy and most of transformers)."""
    return pytest.importorskip(
        "sentence_transformers", reason="the reference encoder (forkgate[dev]) is not installed"
    )


@pytest.fixture(scope="module")
def both(st: ModuleType) -> tuple[MiniLM, object]:
    from certd.kappa.minilm import MiniLM

    ours = MiniLM.load(model_dir(), max_tokens=MAX_SEQ_TOKENS)
    ref = st.SentenceTransformer(str(model_dir()), device="cpu", local_files_only=True)
    ref.max_seq_length = MAX_SEQ_TOKENS
    return ours, ref


def test_the_reference_is_not_what_certd_imports(st: ModuleType) -> None:
    StepEmbedder.load(screen="off")
    # The st fixture imported sentence-transformers; certd's code never does.
    import certd.kappa.embedder as embedder
    import certd.kappa.minilm as minilm

    for module in (embedder, minilm):
        assert "sentence_transformers" not in module.__dict__
    assert "sentence_transformers" in sys.modules  # the reference, loaded by the fixture only


def test_same_word_pieces_as_the_reference(both: tuple[MiniLM, object]) -> None:
    ours, ref = both
    texts = _corpus()
    features = ref.preprocess(texts)  # type: ignore[attr-defined]
    for i, ids in enumerate(ours.token_ids(texts)):
        n = int(features["attention_mask"][i].sum())
        assert ids == features["input_ids"][i][:n].tolist(), texts[i]
        assert len(ids) <= MAX_SEQ_TOKENS


def test_same_vectors_and_labels_as_the_reference(both: tuple[MiniLM, object]) -> None:
    ours, ref = both
    texts = _corpus()
    assert len(texts) > 200
    want = np.asarray(
        ref.encode(texts, batch_size=16, normalize_embeddings=True),  # type: ignore[attr-defined]
        dtype=np.float64,
    )
    emb = StepEmbedder(ours, "0" * 64)
    got = np.asarray(emb._encode(texts), dtype=np.float64)
    assert np.abs(got - want).max() < 1e-6
    assert np.allclose(np.linalg.norm(got, axis=1), 1.0, atol=1e-6)
    assert [emb._nearest(list(v)) for v in got] == [emb._nearest(list(v)) for v in want]


def test_a_vector_does_not_depend_on_its_batch(both: tuple[MiniLM, object]) -> None:
    ours, _ = both
    short = "Factor the expression."
    others = [_EXTRA[3], "Let u = x^2, substituting a new variable.", "x"]
    alone = ours.encode_ids(ours.token_ids([short]))[0]
    ids = ours.token_ids([*others, short])
    assert len(ids[0]) == MAX_SEQ_TOKENS > len(ids[-1])  # the batch's longest is far longer
    batched = ours.encode_ids(ids)[-1]
    assert np.abs(alone - batched).max() < 1e-6


def test_batches_of_more_than_batch_sentences_keep_order(both: tuple[MiniLM, object]) -> None:
    ours, _ = both
    texts = _corpus()[: 3 * BATCH + 5]
    emb = StepEmbedder(ours, "0" * 64)
    got = emb._encode(texts)
    for i in (0, BATCH, 2 * BATCH + 1, len(texts) - 1):
        alone = ours.encode_ids(ours.token_ids([texts[i]]))[0]
        assert np.abs(np.asarray(got[i]) - alone).max() < 1e-6
