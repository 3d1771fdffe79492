"""Samplers: one interface over callables, the embedded policy, OpenAI servers, transformers, vLLM.

Example:
    >>> s = CallableSampler(lambda prompt, rng: f"<answer>{rng.randint(1, 9)}</answer>")
    >>> [len(group) for group in s.sample(["p1", "p2"], n=3, max_tokens=16, seed=0)]
    [3, 3]

``sample(prompts, n, max_tokens, temperature, top_p, seed, prefix=None)`` returns, per prompt,
n ``Sample`` objects with the text, the token ids and the first generated token's top-k
log-probabilities when the backend gives them. ``prefix`` forces an entry: generation
continues after ``prompt + prefix`` and the returned text starts with the prefix (the
intervention that lets a policy complete an entry family it no longer initiates).
"""

from __future__ import annotations

import json
import random
import urllib.error
import urllib.request
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol

from .errors import ForkgateError, SetupError

__all__ = [
    "CallableSampler",
    "OpenAICompletionsSampler",
    "Sample",
    "Sampler",
    "SamplerError",
    "SamplerSetupError",
    "TransformersSampler",
    "VLLMSampler",
]


class SamplerError(ForkgateError):
    """A sampler backend failed or answered something unusable."""


class SamplerSetupError(SamplerError, SetupError):
    """A sampler this install cannot run (its extra is not installed): usage, exit 2."""


@dataclass(frozen=True, slots=True)
class Sample:
    """One generated response.

    Attributes:
        text: the response (starting with the forced prefix, when one was given).
        token_ids: the generated token ids, when the backend reports them.
        first_token_logprobs: the first generated token's top-k ``{token: logprob}``.
        finish_reason: why generation stopped (``stop``, ``length``, …) when known.
    """

    text: str
    token_ids: tuple[int, ...] = ()
    first_token_logprobs: dict[str, float] | None = None
    finish_reason: str = ""


class Sampler(Protocol):
    """What the fork-tree builder needs from a policy."""

    def sample(
        self,
        prompts: Sequence[str],
        n: int,
        max_tokens: int,
        temperature: float = 1.0,
        top_p: float = 1.0,
        seed: int | None = None,
        prefix: str | None = None,
    ) -> list[list[Sample]]:
        """n samples per prompt, in prompt order."""
        ...


@dataclass
class CallableSampler:
    """A plain Python function as a policy: ``fn(prompt, rng) -> text``.

    With a prefix, ``fn`` sees ``prompt + prefix`` and its text is appended to the prefix.
    """

    fn: Callable[[str, random.Random], str]

    def sample(
        self,
        prompts: Sequence[str],
        n: int,
        max_tokens: int,
        temperature: float = 1.0,
        top_p: float = 1.0,
        seed: int | None = None,
        prefix: str | None = None,
    ) -> list[list[Sample]]:
        """n samples per prompt from the function (seeded per call)."""
        rng = random.Random(seed)
        head = prefix or ""
        return [[Sample(head + self.fn(p + head, rng)) for _ in range(n)] for p in prompts]


@dataclass
class OpenAICompletionsSampler:
    """Any OpenAI-compatible ``/v1/completions`` server (``vllm serve``, SGLang, …).

    Args:
        base_url: e.g. ``http://127.0.0.1:8000``.
        model: the served model name.
        logprobs: top-k log-probabilities to request per token (0 for none).
        timeout_s: HTTP timeout per request.
        api_key: sent as a bearer token when set.
    """

    base_url: str
    model: str
    logprobs: int = 5
    timeout_s: float = 120.0
    api_key: str | None = None
    extra: dict[str, Any] = field(default_factory=dict)

    def _post(self, body: dict[str, Any]) -> dict[str, Any]:
        req = urllib.request.Request(
            self.base_url.rstrip("/") + "/v1/completions",
            data=json.dumps(body).encode(),
            headers={"Content-Type": "application/json"}
            | ({"Authorization": f"Bearer {self.api_key}"} if self.api_key else {}),
        )
        try:
            with urllib.request.urlopen(req, timeout=self.timeout_s) as resp:
                doc = json.loads(resp.read())
        except urllib.error.HTTPError as e:
            raise SamplerError(f"{req.full_url}: HTTP {e.code}: {e.read()[:300]!r}") from e
        except (urllib.error.URLError, TimeoutError, ConnectionError) as e:
            raise SamplerError(f"{req.full_url}: unreachable: {e}") from e
        except ValueError as e:
            raise SamplerError(f"{req.full_url}: not JSON: {e}") from e
        if not isinstance(doc, dict) or not isinstance(doc.get("choices"), list):
            raise SamplerError(f"{req.full_url}: expected an object with choices")
        return doc

    def sample(
        self,
        prompts: Sequence[str],
        n: int,
        max_tokens: int,
        temperature: float = 1.0,
        top_p: float = 1.0,
        seed: int | None = None,
        prefix: str | None = None,
    ) -> list[list[Sample]]:
        """n samples per prompt; the server's choices are grouped by their prompt."""
        head = prefix or ""
        body: dict[str, Any] = {
            "model": self.model,
            "prompt": [p + head for p in prompts],
            "n": n,
            "max_tokens": max_tokens,
            "temperature": temperature,
            "top_p": top_p,
            **self.extra,
        }
        if seed is not None:
            body["seed"] = seed
        if self.logprobs:
            body["logprobs"] = self.logprobs
        choices = self._post(body)["choices"]
        if len(choices) != len(prompts) * n:
            raise SamplerError(f"expected {len(prompts) * n} choices, got {len(choices)}")
        out: list[list[Sample]] = [[] for _ in prompts]
        for pos, choice in enumerate(sorted(choices, key=lambda c: int(c.get("index", 0)))):
            out[pos // n].append(
                Sample(
                    text=head + str(choice.get("text", "")),
                    first_token_logprobs=_first_top_logprobs(choice.get("logprobs")),
                    finish_reason=str(choice.get("finish_reason") or ""),
                )
            )
        return out


def _first_top_logprobs(logprobs: Any) -> dict[str, float] | None:
    if not isinstance(logprobs, dict):
        return None
    top = logprobs.get("top_logprobs")
    if isinstance(top, list) and top and isinstance(top[0], dict):
        return {str(k): float(v) for k, v in top[0].items()}
    return None


@dataclass
class TransformersSampler:
    """A Hugging Face ``transformers`` causal LM on CPU or GPU.

    Args:
        model: a ``PreTrainedModel`` with ``generate``.
        tokenizer: its tokenizer.
        top_k_logprobs: how many first-token log-probabilities to report.
    """

    model: Any
    tokenizer: Any
    top_k_logprobs: int = 5

    def sample(
        self,
        prompts: Sequence[str],
        n: int,
        max_tokens: int,
        temperature: float = 1.0,
        top_p: float = 1.0,
        seed: int | None = None,
        prefix: str | None = None,
    ) -> list[list[Sample]]:
        """n samples per prompt with ``model.generate`` (sampling, scores kept)."""
        import torch

        if seed is not None:
            torch.manual_seed(seed)
        head = prefix or ""
        out: list[list[Sample]] = []
        for prompt in prompts:
            enc = self.tokenizer(prompt + head, return_tensors="pt").to(self.model.device)
            with torch.no_grad():
                gen = self.model.generate(
                    **enc,
                    do_sample=temperature > 0,
                    temperature=max(temperature, 1e-5),
                    top_p=top_p,
                    max_new_tokens=max_tokens,
                    num_return_sequences=n,
                    output_scores=True,
                    return_dict_in_generate=True,
                    pad_token_id=self.tokenizer.pad_token_id or self.tokenizer.eos_token_id,
                )
            start = enc["input_ids"].shape[1]
            first = torch.log_softmax(gen.scores[0].float(), dim=-1)
            top = torch.topk(first, k=min(self.top_k_logprobs, first.shape[-1]), dim=-1)
            group = []
            for row in range(n):
                ids = tuple(int(t) for t in gen.sequences[row, start:].tolist())
                text = self.tokenizer.decode(list(ids), skip_special_tokens=True)
                logprobs = {
                    self.tokenizer.decode([int(t)]): float(v)
                    for t, v in zip(
                        top.indices[row].tolist(), top.values[row].tolist(), strict=True
                    )
                }
                group.append(Sample(head + text, ids, logprobs))
            out.append(group)
        return out


@dataclass
class VLLMSampler:
    """vLLM offline inference (``vllm.LLM.generate`` with ``n`` and ``logprobs``).

    Needs the ``vllm`` extra and a GPU; vLLM is imported on first use.

    Args:
        model: a model name or path for ``vllm.LLM``.
        logprobs: top-k log-probabilities per generated token.
        llm_kwargs: passed to ``vllm.LLM``.
    """

    model: str
    logprobs: int = 5
    llm_kwargs: dict[str, Any] = field(default_factory=dict)
    _llm: Any = field(default=None, init=False, repr=False)

    def sample(
        self,
        prompts: Sequence[str],
        n: int,
        max_tokens: int,
        temperature: float = 1.0,
        top_p: float = 1.0,
        seed: int | None = None,
        prefix: str | None = None,
    ) -> list[list[Sample]]:
        """n samples per prompt from one ``LLM.generate`` call."""
        try:
            import vllm
        except ImportError as e:
            raise SamplerSetupError(
                "the vllm sampler needs `pip install forkgate[vllm]` and a GPU"
            ) from e
        if self._llm is None:
            self._llm = vllm.LLM(model=self.model, **self.llm_kwargs)
        params = vllm.SamplingParams(
            n=n,
            max_tokens=max_tokens,
            temperature=temperature,
            top_p=top_p,
            seed=seed,
            logprobs=self.logprobs or None,
        )
        head = prefix or ""
        results = self._llm.generate([p + head for p in prompts], params)
        out = []
        for result in results:
            group = []
            for comp in result.outputs:
                first = None
                if comp.logprobs:
                    first = {
                        str(lp.decoded_token): float(lp.logprob) for lp in comp.logprobs[0].values()
                    }
                group.append(
                    Sample(
                        head + comp.text,
                        tuple(comp.token_ids),
                        first,
                        str(comp.finish_reason or ""),
                    )
                )
            out.append(group)
        return out
