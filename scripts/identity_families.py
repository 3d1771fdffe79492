"""How removing identity operations moves Countdown's feasible-family counts (issue 30).

Counts, on the experiment's held-out tasks (``small_countdown_puzzles(256, seed=6000)``, the
tasks ``forkgate experiment`` evaluates on) and on its training tasks' first 256, the
feasible families ``certd families countdown`` lists and how many of them can be certified
together, with the identity rule (``reduce_identities``, what certd does now) and without it
(each commuted/re-associated form its own solution, as before issue 30).

Run: ``.venv/bin/python scripts/identity_families.py`` (about a minute; prints one JSON object).
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from certd.domains import countdown as cd
from certd.domains.countdown import enumeration
from forkgate.puzzles import small_countdown_puzzles

HELD_OUT_TASKS = 6000  # client/jobs/experiment/seeds.py
TRAIN_TASKS = 5000


@contextmanager
def without_identity_rule() -> Iterator[None]:
    """The enumerator as it was before issue 30: every normal form is its own solution."""
    saved = enumeration.reduce_identities
    enumeration.reduce_identities = lambda form: form
    try:
        yield
    finally:
        enumeration.reduce_identities = saved


def counts(tasks: list[dict[str, Any]]) -> dict[str, Any]:
    """Families and certifiable families per task, summed, with and without the rule."""
    before, after, cert_before, cert_after, changed, labels = [], [], [], [], 0, 0
    for t in tasks:
        task = cd.CountdownTask(numbers=tuple(t["numbers"]), target=t["target"])
        now = cd.enumerate_families(task)
        with without_identity_rule():
            old = cd.enumerate_families(task)
        labels += len(now.labels)
        before.append(len(old.families))
        after.append(len(now.families))
        cert_before.append(old.certifiable)
        cert_after.append(now.certifiable)
        changed += len(old.families) != len(now.families)
    n = len(tasks)
    return {
        "tasks": n,
        "labels": labels,
        "families_before": sum(before),
        "families_after": sum(after),
        "mean_families_before": round(sum(before) / n, 3),
        "mean_families_after": round(sum(after) / n, 3),
        "certifiable_before": sum(cert_before),
        "certifiable_after": sum(cert_after),
        "tasks_whose_family_count_moved": changed,
        "largest_drop": max(b - a for b, a in zip(before, after, strict=True)),
    }


def main() -> None:
    held = small_countdown_puzzles(256, seed=HELD_OUT_TASKS)
    train = small_countdown_puzzles(256, seed=TRAIN_TASKS)
    print(json.dumps({"held_out": counts(held), "train_first_256": counts(train)}, indent=1))


if __name__ == "__main__":
    main()
