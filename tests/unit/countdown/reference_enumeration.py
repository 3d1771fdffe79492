"""The Countdown enumerator before issue 31's speed-up, kept verbatim as the reference the fast
one is compared with (tests/unit/countdown/test_countdown_fast_enumeration.py). Not used by
certd."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

from reference_search import Search, TruncatedError

from certd.domains.countdown.canonical import (
    Canon,
    canon_labels,
    reduce_identities,
    render_carrying,
)
from certd.domains.countdown.expr import render
from certd.domains.countdown.task import CountdownTask
from certd.errors import InvalidInputError

__all__ = ["Enumeration", "LabelWitness", "enumerate_families", "group_solutions"]


@dataclass(frozen=True, slots=True)
class LabelWitness:
    """One feasible first-op label and a solution that carries it.

    Attributes:
        operand: the leftmost literal.
        operator: its parent's operator (``+ - * /``), ``""`` when the solution is one literal.
        witness: an expression that verifies CORRECT on the task and carries this label.
    """

    operand: int
    operator: str
    witness: str

    @property
    def label(self) -> str:
        """The κ label string, ``"operand,operator"``."""
        return f"{self.operand},{self.operator}"

    @property
    def fields(self) -> dict[str, str]:
        """The κ label's fields, ``{"operand": …, "operator": …}``."""
        return {"operand": str(self.operand), "operator": self.operator}


@dataclass(frozen=True, slots=True)
class Enumeration:
    """Every feasible label of a task and how the labels group into families.

    Attributes:
        labels: the feasible labels, sorted by operand then operator (``"" + - * /``).
        families: label indexes grouped by the pseudo-fork rule; each tuple and the outer
            tuple sorted.
        complete: False when a cap cut the family computation short (labels are still exact).
        solutions: the distinct canonical solutions, sorted (empty when not complete).
        certifiable: the most families that can be certified together, each with a solution
            of its own (a maximum matching of families to solutions; the gate refuses a
            solution certified before under another label). Equals ``len(families)`` unless
            families overlap in solutions; 0 when not complete.
    """

    labels: tuple[LabelWitness, ...]
    families: tuple[tuple[int, ...], ...]
    complete: bool
    solutions: tuple[str, ...] = ()
    certifiable: int = 0


def enumerate_families(task: CountdownTask, *, max_solutions: int = 200_000) -> Enumeration:
    """Enumerate a task's feasible first-op labels, with witnesses, and its entry families.

    Args:
        task: the task; its rules decide whether solutions use every number exactly once or
            any nonempty subset at most once.
        max_solutions: the most distinct canonical solutions to list for the family
            computation before giving up on it.

    Raises:
        InvalidInputError: when ``max_solutions`` is not a positive int
            (field ``countdown.max_solutions``).

    Returns:
        The enumeration.
    """
    if type(max_solutions) is not int or max_solutions < 1:
        raise InvalidInputError(
            f"max_solutions must be an int >= 1, got {max_solutions!r}",
            field="countdown.max_solutions",
        )
    search = Search(task.numbers)
    target = task.target
    masks = _masks(search, task)
    bits = 0
    witness_mask: dict[int, int] = {}
    for mask in masks:
        if mask & (mask - 1) == 0:
            p = mask.bit_length() - 1
            found = search.bit[p][0] if task.numbers[p] == target else 0
        else:
            found = search.labels(mask, target) if search.reach(mask, target) else 0
        new = found & ~bits
        while new:
            low = new & -new
            witness_mask[low] = mask
            new ^= low
        bits |= found
    order = sorted(witness_mask)
    labels = tuple(_label_witness(search, witness_mask[b], target, b) for b in order)
    index = {search.label_of_bit[b]: i for i, b in enumerate(order)}
    try:
        raw: dict[str, Canon] = {}
        for mask in masks:
            raw.update(search.trees(mask, target, max_solutions))
            if len(raw) > max_solutions:
                raise TruncatedError
    except TruncatedError:
        singletons = tuple((i,) for i in range(len(labels)))
        return Enumeration(labels=labels, families=singletons, complete=False)
    solutions = group_solutions(raw.values())
    families = _families(solutions, index)
    witnessed, certifiable = _distinct_witnesses(labels, families, solutions)
    return Enumeration(
        labels=witnessed,
        families=families,
        complete=True,
        solutions=tuple(sorted(solutions)),
        certifiable=certifiable,
    )


def _masks(search: Search, task: CountdownTask) -> list[int]:
    """The position sets a solution may use: all numbers, or one set per distinct sub-multiset."""
    if task.rules.exactly_once:
        return [search.full]
    seen: set[tuple[int, ...]] = set()
    out: list[int] = []
    for mask in range(1, search.full + 1):
        key = tuple(sorted(task.numbers[p] for p in search.positions(mask)))
        if key not in seen:
            seen.add(key)
            out.append(mask)
    return out


def _label_witness(search: Search, mask: int, target: int, bit: int) -> LabelWitness:
    operand, operator = search.label_of_bit[bit]
    witness = render(search.witness(mask, target, bit))
    return LabelWitness(operand=operand, operator=operator, witness=witness)


def group_solutions(forms: Iterable[Canon]) -> dict[str, list[Canon]]:
    """The solutions keyed by their canonical form (identities removed), each with its
    commuted/re-associated forms that still carry identity operations (``5*1+3*4`` beside
    ``5+3*4``): a label is reached by a solution when one of those forms carries it."""
    out: dict[str, list[Canon]] = {}
    for form in forms:
        out.setdefault(reduce_identities(form).text, []).append(form)
    return out


def _families(
    solutions: dict[str, list[Canon]], index: dict[tuple[int, str], int]
) -> tuple[tuple[int, ...], ...]:
    """Group label indexes whose sets of canonical solutions are equal."""
    reached: list[set[str]] = [set() for _ in index]
    for text, forms in solutions.items():
        for label in set().union(*(canon_labels(f) for f in forms)):
            i = index.get(label)
            if i is not None:
                reached[i].add(text)
    groups: dict[frozenset[str], list[int]] = {}
    alone: list[tuple[int, ...]] = []
    for i, texts in enumerate(reached):
        if texts:
            groups.setdefault(frozenset(texts), []).append(i)
        else:  # unreachable when the listing is complete; never merge on no evidence
            alone.append((i,))
    return tuple(sorted([tuple(g) for g in groups.values()] + alone))


def _distinct_witnesses(
    labels: tuple[LabelWitness, ...],
    families: tuple[tuple[int, ...], ...],
    solutions: dict[str, list[Canon]],
) -> tuple[tuple[LabelWitness, ...], int]:
    """Re-pick witnesses so that different families are witnessed by different solutions.

    Two families may share a canonical solution (their solution sets differ but overlap); the
    certification gate refuses a second label certified with the same solution. A maximum
    bipartite matching of families to solutions (Kuhn's augmenting paths) gives each family a
    representative of its own where one exists; every label of the family is then witnessed by
    a rendering of that representative. Families left unmatched keep their search witness.

    Returns:
        The labels with their witnesses, and the size of the matching.
    """
    carried: dict[int, list[str]] = {f: [] for f in range(len(families))}
    family_of = {i: f for f, members in enumerate(families) for i in members}
    keys = [(lw.operand, lw.operator) for lw in labels]
    for text, forms in sorted(solutions.items()):
        carried_labels = set().union(*(canon_labels(f) for f in forms))
        reached = {family_of[i] for i, k in enumerate(keys) if k in carried_labels}
        for f in reached:
            carried[f].append(text)
    owner: dict[str, int] = {}

    def augment(f: int, seen: set[str]) -> bool:
        for text in carried[f]:
            if text in seen:
                continue
            seen.add(text)
            if text not in owner or augment(owner[text], seen):
                owner[text] = f
                return True
        return False

    for f in sorted(carried, key=lambda f: len(carried[f])):
        augment(f, set())
    chosen = {f: text for text, f in owner.items()}
    out = list(labels)
    for f, members in enumerate(families):
        if f not in chosen:
            continue
        for i in members:
            witness = next(
                (
                    w
                    for form in solutions[chosen[f]]
                    if (w := render_carrying(form, keys[i])) is not None
                ),
                None,
            )
            if witness is not None:
                out[i] = LabelWitness(labels[i].operand, labels[i].operator, witness)
    return tuple(out), len(chosen)
