"""The embedded Countdown policy: load the shipped weights, sample, score sequences.

Example::

    policy = Policy.load()                      # the weights shipped with the package
    [group] = policy.sample(["25 5 4 3>83|"], n=4, max_tokens=64, seed=0)
    group[0].text     # '<think>25-5=20, 20*4=80, 80+3=83</think><answer>(25-5)*4+3</answer>'

Weights are a safetensors file next to a JSON file with the architecture, the training
configuration, the data seed and the evaluation measured when they were made
(``scripts/train_policy.py`` writes both). Sampling runs on CPU with a KV cache: one prefill
of ``n`` copies of the prompt, then one token a step, with temperature and nucleus (top-p)
sampling from a seeded generator, and the first generated token's top-k log-probabilities
(of the untempered distribution, as vLLM and OpenAI report them). Responses open with
``<think>`` (forced, as in every training example), so the first generated token is the
first digit of the entry: the decision the κ family records.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import torch

from ...samplers import Sample, SamplerError
from .format import THINK, CharTokenizer, compact_prompt, prompt_task
from .model import PolicyConfig, TinyGPT

__all__ = ["DEFAULT_WEIGHTS", "Policy"]

DEFAULT_WEIGHTS = Path(__file__).parent / "weights" / "countdown-tiny.safetensors"


@dataclass
class Policy:
    """A ``TinyGPT`` with its tokenizer and metadata.

    Attributes:
        model: the network (in eval mode for sampling).
        tokenizer: the character tokenizer.
        meta: what the JSON next to the weights says (config, training, data seed, eval).
    """

    model: TinyGPT
    tokenizer: CharTokenizer = field(default_factory=CharTokenizer)
    meta: dict[str, Any] = field(default_factory=dict)

    @classmethod
    def new(cls, cfg: PolicyConfig | None = None, *, seed: int = 0) -> Policy:
        """A freshly initialised policy (seeded)."""
        tok = CharTokenizer()
        torch.manual_seed(seed)
        return cls(TinyGPT(cfg or PolicyConfig(vocab_size=tok.vocab_size)), tok)

    @classmethod
    def load(cls, path: Path | None = None) -> Policy:
        """Load weights (default: the shipped ones) and their JSON metadata.

        Raises:
            SamplerError: the files are missing or do not match the architecture.
        """
        from safetensors.torch import load_file

        path = path or DEFAULT_WEIGHTS
        meta_path = path.with_suffix(".json")
        try:
            meta = json.loads(meta_path.read_text(encoding="utf-8"))
            cfg = PolicyConfig(**meta["config"])
            model = TinyGPT(cfg)
            model.load_state_dict(load_file(str(path)))
        except (OSError, KeyError, TypeError, ValueError, RuntimeError) as e:
            raise SamplerError(f"cannot load the embedded policy from {path}: {e}") from e
        model.eval()
        return cls(model, CharTokenizer(), meta)

    def save(self, path: Path, meta: dict[str, Any]) -> None:
        """Write the weights (safetensors) and ``meta`` plus the config (JSON next to them)."""
        from safetensors.torch import save_file

        path.parent.mkdir(parents=True, exist_ok=True)
        state = {k: v.contiguous() for k, v in self.model.state_dict().items()}
        save_file(state, str(path))
        self.meta = {"config": self.model.cfg.to_dict(), **meta}
        path.with_suffix(".json").write_text(json.dumps(self.meta, indent=1) + "\n")

    def prompt_ids(self, prompt: str) -> list[int]:
        """``<bos>`` and the compact prompt of a Countdown prompt (compact or TinyZero)."""
        return [self.tokenizer.bos, *self.tokenizer.encode(compact_prompt(prompt_task(prompt)))]

    @torch.no_grad()
    def sample(
        self,
        prompts: Sequence[str],
        n: int,
        max_tokens: int,
        temperature: float = 1.0,
        top_p: float = 1.0,
        seed: int | None = None,
        prefix: str | None = None,
        top_k_logprobs: int = 5,
    ) -> list[list[Sample]]:
        """n samples per prompt (see ``Sampler.sample``).

        Raises:
            SamplerError: a prompt is not a Countdown prompt, or a prefix has characters
                outside the vocabulary.
        """
        gen = torch.Generator().manual_seed(seed if seed is not None else 0)
        # Every response the policy was trained on opens with <think>: start there, so the
        # first generated token is the entry decision (and its log-probabilities say so).
        head = prefix or THINK
        out: list[list[Sample]] = []
        for prompt in prompts:
            try:
                ids = self.prompt_ids(prompt) + self.tokenizer.encode(head)
            except ValueError as e:
                raise SamplerError(str(e)) from e
            rows, first, finished = self.generate(
                ids, n, max_tokens, temperature, top_p, gen, top_k_logprobs
            )
            out.append(
                [
                    Sample(
                        head + self.tokenizer.decode(r),
                        tuple(r),
                        first[i],
                        "stop" if finished[i] else "length",
                    )
                    for i, r in enumerate(rows)
                ]
            )
        return out

    @torch.no_grad()
    def generate(
        self,
        ids: list[int],
        n: int,
        max_tokens: int,
        temperature: float,
        top_p: float,
        gen: torch.Generator,
        top_k_logprobs: int = 5,
    ) -> tuple[list[list[int]], list[dict[str, float] | None], list[bool]]:
        """Continue one token sequence n times.

        Returns:
            The generated ids per row (without ``<eos>``), the first token's top-k
            log-probabilities per row (None when none was generated), and whether each row
            ended with ``<eos>``.
        """
        model = self.model
        was_training = model.training
        model.eval()
        eos = self.tokenizer.eos
        budget = min(max_tokens, model.cfg.block_size - len(ids))
        rows: list[list[int]] = [[] for _ in range(n)]
        done = torch.zeros(n, dtype=torch.bool)
        first: list[dict[str, float] | None] = [None] * n
        if budget <= 0 or n <= 0:
            return rows, first, [False] * n
        logits, cache = model(torch.tensor([ids] * n))
        last = logits[:, -1, :]
        for step in range(budget):
            logp = torch.log_softmax(last.float(), dim=-1)
            if step == 0 and top_k_logprobs:
                top = torch.topk(logp, k=min(top_k_logprobs, logp.shape[-1]), dim=-1)
                itos = self.tokenizer.itos
                first = [
                    {itos[t]: float(v) for t, v in zip(ti, tv, strict=True)}
                    for ti, tv in zip(top.indices.tolist(), top.values.tolist(), strict=True)
                ]
            nxt = _draw(last, temperature, top_p, gen)
            for i in range(n):
                if not done[i]:
                    if int(nxt[i]) == eos:
                        done[i] = True
                    else:
                        rows[i].append(int(nxt[i]))
            if bool(done.all()) or step == budget - 1:
                break
            logits, cache = model(nxt.view(n, 1), cache)
            last = logits[:, -1, :]
        model.train(was_training)
        return rows, first, done.tolist()


def _draw(
    logits: torch.Tensor, temperature: float, top_p: float, gen: torch.Generator
) -> torch.Tensor:
    """One token per row: greedy at temperature 0, else tempered nucleus sampling."""
    if temperature <= 0:
        return logits.argmax(dim=-1)
    probs = torch.softmax(logits.float() / temperature, dim=-1)
    if top_p < 1.0:
        sorted_p, order = probs.sort(dim=-1, descending=True)
        keep = sorted_p.cumsum(dim=-1) - sorted_p < top_p  # always keeps the top token
        sorted_p = sorted_p * keep
        probs = torch.zeros_like(probs).scatter_(1, order, sorted_p)
    return torch.multinomial(probs, 1, generator=gen).view(-1)
