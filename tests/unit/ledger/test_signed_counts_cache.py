"""The signed feasible counts are computed once per (task, κ) and never shared between tasks:
a generator of tasks that differ only in their target, their rules or the order of their
numbers, read through a small cache (evictions, hits, misses in a shuffled order), and a
CertifyBatch whose new tasks are counted in the verify pool's workers signs exactly the counts
of an in-process count (also when the pool is gone)."""

from __future__ import annotations

import json
import random
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from test_certify_batch_records import CFG, KAPPA, ORIGIN

from certd.authority.checker import Checkers
from certd.authority.counting import PREFETCH_MIN, SignedCounts
from certd.authority.feasibility import Authority, CertifyRequest
from certd.authority.results import CheckedTask
from certd.authority.verifypool import VerifyPool
from certd.domains import countdown as cd
from certd.ledger.log import Ledger
from certd.ledger.store.sqlite import SQLiteStore
from certd.service.convert import checked_task
from certd.signing.dsse import Envelope
from certd.signing.keys import SigningKey
from forkgate._base import certify_request


def _variants(rng: random.Random) -> Iterator[tuple[tuple[int, ...], int, bool]]:
    """A random task, then the same numbers with another target, other rules, shuffled."""
    numbers = tuple(rng.randint(1, 12) for _ in range(rng.choice((3, 4))))
    target = rng.randint(1, 60)
    at_most_once = rng.random() < 0.5
    yield numbers, target, at_most_once
    yield numbers, target + 1, at_most_once
    yield numbers, target, not at_most_once
    yield tuple(rng.sample(numbers, len(numbers))), target, at_most_once


def _request(numbers: tuple[int, ...], target: int, at_most_once: bool) -> CertifyRequest | None:
    """A certifiable request for the task (its first family), or None when it has none."""
    rules = cd.CountdownRules(exactly_once=not at_most_once)
    found = cd.enumerate_families(cd.CountdownTask(numbers, target, rules=rules))
    if not found.families:
        return None
    lw = found.labels[found.families[0][0]]
    wire = {"domain": "countdown", "task": {"numbers": list(numbers), "target": target}}
    pb = certify_request(wire, f"{lw.operand},{lw.operator}", lw.witness)
    pb.task.countdown.rules.at_most_once = at_most_once
    return CertifyRequest(checked_task(pb.task, CFG, "task"), KAPPA, pb.label.value, pb.witness)


def _requests(n: int, seed: int) -> list[CertifyRequest]:
    """``n`` certifiable requests of distinct tasks, close variants of each other."""
    rng, out, seen = random.Random(seed), list[CertifyRequest](), set[str]()
    while len(out) < n:
        for numbers, target, at_most_once in _variants(rng):
            r = _request(numbers, target, at_most_once)
            if r is not None and r.task.digest not in seen and len(out) < n:
                seen.add(r.task.digest)
                out.append(r)
    return out


def _reference(task: CheckedTask) -> dict[str, Any]:
    """The task's counts from its enumeration, computed afresh."""
    found = cd.enumerate_families(task.value)
    labels = len({lw.label for lw in found.labels})
    return {"complete": found.complete, "families": len(found.families), "labels": labels}


def _as_dict(counts: Any) -> dict[str, Any]:
    return {"complete": counts.complete, "families": counts.families, "labels": counts.labels}


def test_a_small_cache_gives_each_task_its_own_counts() -> None:
    tasks = [r.task for r in _requests(60, seed=3)]
    want = {t.digest: _reference(t) for t in tasks}
    # The generator's variants differ in their counts, so a key missing the target, the rules
    # or the κ would hand one task another's counts.
    assert len({json.dumps(v, sort_keys=True) for v in want.values()}) > 10
    counts = SignedCounts(Checkers(CFG), size=7)
    order = tasks + random.Random(5).sample(tasks, len(tasks)) + tasks[::-1]
    for task in order:  # misses, hits and evictions interleaved
        got = counts.get(task, KAPPA)
        assert got is not None
        assert _as_dict(got) == want[task.digest], task.value


@pytest.fixture
def authority(tmp_path: Path) -> Iterator[tuple[Authority, VerifyPool]]:
    key = SigningKey.generate(ORIGIN)
    ledger = Ledger(SQLiteStore(tmp_path / "ledger.db", synchronous="FULL"), key, ORIGIN)
    checkers = Checkers(CFG)
    pool = VerifyPool(checkers.for_domain("countdown"), workers=1, min_batch=256)
    authority = Authority(checkers, ledger, key)
    authority.count_in(pool)
    yield authority, pool
    pool.close()
    ledger.close()


def _signed_feasible(envelope: bytes) -> Any:
    return json.loads(Envelope.from_json(envelope).payload)["predicate"]["feasible"]


def test_counts_from_the_pool_workers_are_the_in_process_counts(
    authority: tuple[Authority, VerifyPool],
) -> None:
    auth, pool = authority
    checkers = Checkers(CFG)
    counts = SignedCounts(checkers)
    counts.use_pool(pool)
    tasks = [r.task for r in _requests(2 * PREFETCH_MIN, seed=13)]
    with counts.prefetch([(t, KAPPA) for t in tasks]):
        # One worker runs its calls in order: once this one is back, every chunk is done.
        assert pool.count_families([]) is not None
        pool.count_families([]).result()  # type: ignore[union-attr]
        got = {t.digest: counts.get(t, KAPPA) for t in tasks}
    assert counts.from_workers == len(tasks)
    for t in tasks:
        assert _as_dict(got[t.digest]) == _reference(t), t.value
    # A CertifyBatch signs the same counts with the workers racing it, and without workers.
    first, second = _requests(2 * PREFETCH_MIN, seed=11), _requests(PREFETCH_MIN + 3, seed=12)
    outcomes = auth.certify_batch(first)
    pool.close()  # no workers left: the next batch counts in process
    outcomes += auth.certify_batch(second)
    for request, outcome in zip(first + second, outcomes, strict=True):
        assert outcome.certificate is not None, outcome.refusal
        signed = _signed_feasible(outcome.certificate.value.envelope)
        assert signed == _reference(request.task), request.task.value
