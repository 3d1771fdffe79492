"""Samplers against real backends: a local HTTP server, a tiny transformers model, callables."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any, ClassVar

import pytest
from http_helpers import JsonHandler, serve_http

from forkgate.samplers import (
    CallableSampler,
    OpenAICompletionsSampler,
    SamplerError,
    TransformersSampler,
    VLLMSampler,
)


class _Completions(JsonHandler):
    """A minimal OpenAI-compatible /v1/completions: echoes what it was asked, in its format."""

    requests: ClassVar[list[dict[str, Any]]] = []

    def do_POST(self) -> None:
        body = self.body()
        type(self).requests.append(body)
        if self.path != "/v1/completions" or body.get("model") != "tiny":
            self.send_error(404, "no such model")
            return
        choices = []
        for p, prompt in enumerate(body["prompt"]):
            for j in range(body["n"]):
                choices.append(
                    {
                        "index": p * body["n"] + j,
                        "text": f"[{prompt}|{j}|{body.get('seed')}]",
                        "finish_reason": "stop",
                        "logprobs": {
                            "tokens": ["x"],
                            "token_logprobs": [-0.1],
                            "top_logprobs": [{"x": -0.1, "y": -2.5}],
                        },
                    }
                )
        choices.reverse()  # servers may answer in any order; index says where each goes
        self.reply({"choices": choices})


@pytest.fixture()
def completions_url() -> Iterator[str]:
    with serve_http(_Completions) as url:
        yield url


def test_openai_sampler_groups_choices_and_forces_prefixes(completions_url: str) -> None:
    s = OpenAICompletionsSampler(completions_url, "tiny", logprobs=2)
    out = s.sample(["a", "b"], n=3, max_tokens=8, temperature=0.7, seed=5, prefix="(25-")
    assert [[x.text for x in g] for g in out] == [
        [f"(25-[a(25-|{j}|5]" for j in range(3)],
        [f"(25-[b(25-|{j}|5]" for j in range(3)],
    ]
    assert out[0][0].first_token_logprobs == {"x": -0.1, "y": -2.5}
    sent = _Completions.requests[-1]
    assert (sent["n"], sent["max_tokens"], sent["logprobs"], sent["temperature"]) == (3, 8, 2, 0.7)
    with pytest.raises(SamplerError, match="404"):
        OpenAICompletionsSampler(completions_url, "other").sample(["a"], n=1, max_tokens=1)


def test_openai_sampler_unreachable_is_typed() -> None:
    with pytest.raises(SamplerError, match="unreachable"):
        OpenAICompletionsSampler("http://127.0.0.1:9", "tiny", timeout_s=2).sample(
            ["a"], n=1, max_tokens=1
        )


def test_transformers_sampler_with_a_tiny_model_built_here() -> None:
    # No download: a character tokenizer and a one-layer GPT-2 built from a config.
    torch = pytest.importorskip("torch", reason="the train extra (torch) is installed by make")
    from tokenizers import Regex, Tokenizer, decoders, models, pre_tokenizers
    from transformers import GPT2Config, GPT2LMHeadModel, PreTrainedTokenizerFast

    vocab = {"[PAD]": 0, "[EOS]": 1, "[UNK]": 2}
    for ch in "0123456789+-*/()<>=answerthink ":
        vocab.setdefault(ch, len(vocab))
    tok = Tokenizer(models.WordLevel(vocab, unk_token="[UNK]"))
    tok.pre_tokenizer = pre_tokenizers.Split(Regex("."), behavior="isolated")
    tok.decoder = decoders.Fuse()
    tokenizer = PreTrainedTokenizerFast(
        tokenizer_object=tok, pad_token="[PAD]", eos_token="[EOS]", unk_token="[UNK]"
    )
    torch.manual_seed(0)
    model = GPT2LMHeadModel(
        GPT2Config(
            vocab_size=len(vocab),
            n_positions=64,
            n_embd=16,
            n_layer=1,
            n_head=2,
            eos_token_id=1,
            pad_token_id=0,
        )
    )
    s = TransformersSampler(model, tokenizer, top_k_logprobs=4)
    out = s.sample(["25+", "3*"], n=3, max_tokens=6, seed=1, prefix="(")
    assert [len(g) for g in out] == [3, 3]
    for group in out:
        for sample in group:
            assert sample.text.startswith("(")
            assert 1 <= len(sample.token_ids) <= 6
            assert sample.first_token_logprobs is not None
            assert len(sample.first_token_logprobs) == 4
            assert all(v <= 0 for v in sample.first_token_logprobs.values())
    again = s.sample(["25+", "3*"], n=3, max_tokens=6, seed=1, prefix="(")
    assert [[x.text for x in g] for g in again] == [[x.text for x in g] for g in out]


def test_callable_sampler_is_seeded() -> None:
    s = CallableSampler(lambda prompt, rng: f"{prompt}:{rng.randint(0, 10**6)}")
    a = s.sample(["p"], n=4, max_tokens=1, seed=3, prefix=">")
    assert a == s.sample(["p"], n=4, max_tokens=1, seed=3, prefix=">")
    assert all(x.text.startswith(">p>:") for x in a[0])


def test_vllm_sampler_needs_the_extra() -> None:
    # vLLM needs a GPU and is never installed in CI: here only its error path can run.
    try:
        import vllm  # noqa: F401
    except ImportError:
        with pytest.raises(SamplerError, match="vllm"):
            VLLMSampler("any").sample(["a"], n=1, max_tokens=1)
    else:
        pytest.skip("vllm is installed: its GPU path is checked on a lent device, not here")
