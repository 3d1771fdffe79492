"""The embedded policy: its text format, the KV cache, sampling options, the shipped weights."""

from __future__ import annotations

import time
from fractions import Fraction
from pathlib import Path

import pytest
import torch

from certd.domains.countdown import CountdownTask, initiated_entry, verify_countdown
from forkgate.jobs.embedded import EmbeddedSampler
from forkgate.jobs.policy.format import (
    CharTokenizer,
    compact_prompt,
    first_step_label,
    parse,
    prompt_task,
    solution_text,
    steps,
)
from forkgate.jobs.policy.model import PolicyConfig, TinyGPT
from forkgate.jobs.policy.policy import DEFAULT_WEIGHTS, Policy
from forkgate.jobs.policy.train import batch, example, sft_step
from forkgate.samplers import SamplerError

TASK = {"numbers": [25, 5, 4, 3], "target": 83}


@pytest.fixture(autouse=True)
def _one_thread() -> None:
    torch.set_num_threads(1)  # as EmbeddedSampler does: more threads spin on a busy machine


def test_solution_text_is_the_issue_format_and_the_verifier_agrees() -> None:
    text = solution_text("(25-5)*4+3")
    assert text == "<think>25-5=20, 20*4=80, 80+3=83</think><answer>(25-5)*4+3</answer>"
    v = verify_countdown(CountdownTask(numbers=(25, 5, 4, 3), target=83), text)
    assert v.status.name == "CORRECT"
    assert v.family is not None and v.family.label == "25,-"
    # The reasoning's first step initiates the answer's family.
    entry = initiated_entry(text)
    assert entry is not None and entry.label == "25,-"
    assert first_step_label("(25-5)*4+3") == "25,-"


def test_first_step_label_refuses_an_entry_the_reasoning_does_not_start_with() -> None:
    assert first_step_label("3+4*(25-5)") is None  # the first step is 25-5, not 3+…
    assert first_step_label("7") is None


def test_parse_precedence_and_fractions() -> None:
    assert parse("2+3*4").value == 14
    assert parse("(2+3)*4").value == 20
    assert parse("8/(3-8/3)").value == 24
    assert steps(parse("8/3")) == ["8/3=8/3"]
    assert parse("10-4-3").value == Fraction(3)
    for bad in ("2+", "(2+3", "2 3", "4/(2-2)", "2**3"):
        with pytest.raises(ValueError):
            parse(bad)


def test_tokenizer_roundtrip_and_unknown_characters() -> None:
    tok = CharTokenizer()
    text = "<think>12*3=36</think><answer>12*3</answer>"
    ids = tok.encode(text)
    assert len(ids) == len("12*3=36") + len("12*3") + 4
    assert tok.decode(ids) == text
    with pytest.raises(ValueError, match="vocabulary"):
        tok.encode("<answer>x</answer>")


def test_prompts_compact_and_tinyzero_read_the_same_task() -> None:
    from forkgate.forktree import countdown_prompt

    assert prompt_task(compact_prompt(TASK)) == TASK
    assert prompt_task(countdown_prompt(TASK)) == TASK
    with pytest.raises(ValueError):
        prompt_task("what is 2+2?")


def test_kv_cache_gives_the_same_logits_as_a_full_forward() -> None:
    torch.manual_seed(0)
    model = TinyGPT(PolicyConfig(vocab_size=28, d_model=32, n_layer=2, n_head=4)).eval()
    ids = torch.randint(0, 28, (3, 12))
    full, _ = model(ids)
    part, cache = model(ids[:, :7])
    step, cache = model(ids[:, 7:8], cache)
    rest, _ = model(ids[:, 8:], cache)
    stitched = torch.cat([part, step, rest], dim=1)
    assert torch.allclose(full, stitched, atol=1e-5)
    with pytest.raises(ValueError, match="block_size"):
        model(torch.zeros((1, 97), dtype=torch.long))


def test_batch_masks_only_response_tokens() -> None:
    ids, mask = batch([([1, 5], [6, 7, 2]), ([1, 5, 5, 5], [6, 2])])
    assert ids.tolist() == [[1, 5, 6, 7, 2, 0], [1, 5, 5, 5, 6, 2]]
    assert mask.tolist() == [
        [False, True, True, True, False],
        [False, False, False, True, True],
    ]


def test_sft_learns_one_example() -> None:
    p = Policy.new(PolicyConfig(vocab_size=28, d_model=32, n_layer=1, n_head=2), seed=1)
    ex = example(p, TASK, "(25-5)*4+3")
    opt = torch.optim.AdamW(p.model.parameters(), lr=3e-3)
    first = sft_step(p, [ex], opt)
    for _ in range(150):
        last = sft_step(p, [ex], opt)
    assert last < first / 5
    [group] = p.sample([compact_prompt(TASK)], n=2, max_tokens=60, temperature=0)
    assert group[0].text == solution_text("(25-5)*4+3")
    assert group[0].finish_reason == "stop"


@pytest.fixture(scope="module")
def shipped() -> Policy:
    return Policy.load()


def test_shipped_weights_load_fast_with_their_provenance() -> None:
    started = time.perf_counter()
    policy = Policy.load()
    assert time.perf_counter() - started < 5  # generous on a loaded machine; ~0.1 s idle
    meta = policy.meta
    assert DEFAULT_WEIGHTS.stat().st_size < 8_000_000
    assert meta["data_seed"] == 20261202
    assert meta["config"]["vocab_size"] == policy.tokenizer.vocab_size
    assert meta["training"]["steps"] > 0
    assert meta["eval"]["pass@1"] > 0.1


def test_sampling_is_seeded_and_reports_first_token_logprobs(shipped: Policy) -> None:
    prompt = compact_prompt({"numbers": [3, 7, 9], "target": 30})
    a = shipped.sample([prompt], n=6, max_tokens=80, seed=3)
    b = shipped.sample([prompt], n=6, max_tokens=80, seed=3)
    c = shipped.sample([prompt], n=6, max_tokens=80, seed=4)
    assert [s.text for s in a[0]] == [s.text for s in b[0]]
    assert [s.text for s in a[0]] != [s.text for s in c[0]]
    for s in a[0]:
        assert s.text.startswith("<think>")
        assert s.first_token_logprobs is not None and len(s.first_token_logprobs) == 5
        assert max(s.first_token_logprobs.values()) <= 0
    greedy = shipped.sample([prompt, prompt], n=3, max_tokens=80, temperature=0)
    assert len(greedy) == 2 and len({s.text for g in greedy for s in g}) == 1


def test_top_p_near_zero_is_greedy(shipped: Policy) -> None:
    prompt = compact_prompt({"numbers": [4, 6, 2, 8], "target": 40})
    [nucleus] = shipped.sample([prompt], n=4, max_tokens=80, top_p=1e-6, seed=1)
    [greedy] = shipped.sample([prompt], n=1, max_tokens=80, temperature=0)
    assert {s.text for s in nucleus} == {greedy[0].text}


def test_a_forced_prefix_starts_every_sample(shipped: Policy) -> None:
    [group] = shipped.sample([compact_prompt(TASK)], n=4, max_tokens=80, prefix="<think>4*", seed=0)
    assert all(s.text.startswith("<think>4*") for s in group)
    with pytest.raises(SamplerError):
        shipped.sample(["not a countdown prompt"], n=1, max_tokens=8)


def test_shipped_policy_solves_puzzles_in_several_families() -> None:
    from forkgate.puzzles import small_countdown_puzzles

    sampler = EmbeddedSampler()
    solved = multi = 0
    puzzles = small_countdown_puzzles(20, seed=99)
    sampler.load()
    assert torch.get_num_threads() == 1
    for n, task in enumerate(puzzles):
        [group] = sampler.sample([compact_prompt(task)], n=16, max_tokens=80, seed=n)
        ct = CountdownTask(numbers=tuple(task["numbers"]), target=task["target"])
        fams = set()
        for s in group:
            v = verify_countdown(ct, s.text)
            if v.status.name == "CORRECT" and v.family is not None:
                fams.add(v.family.label)
        solved += bool(fams)
        multi += len(fams) >= 2
    assert solved >= 8, f"solved {solved} of 20"
    assert multi >= 3, f"{multi} of 20 solved in two or more families"


def test_missing_weights_raise_a_sampler_error(tmp_path: Path) -> None:
    with pytest.raises(SamplerError, match="cannot load"):
        Policy.load(tmp_path / "nothing.safetensors")
