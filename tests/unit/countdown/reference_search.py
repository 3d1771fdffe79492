"""The Countdown search before issue 31's speed-up, kept verbatim as the reference the fast one
is compared with (tests/unit/countdown/test_countdown_fast_enumeration.py). Not used by
certd."""

from __future__ import annotations

import enum
from collections.abc import Callable, Iterator
from functools import partial

from certd.domains.countdown.canonical import Canon, combine, leaf
from certd.domains.countdown.expr import BinOp, Expr, Num
from certd.domains.countdown.rational import Rat, add, div, mul, sub

__all__ = ["Decomp", "Free", "Operand", "Search", "TruncatedError"]

OPS = ("", "+", "-", "*", "/")
"""Label operators in sort order; ``""`` is a bare literal."""


class Free(enum.Enum):
    """A free operand: any value (``ANY``) or any nonzero value (``NONZERO``)."""

    ANY = 1
    NONZERO = 2


WORK_PER_SOLUTION = 4
"""Combine steps allowed per solution of the cap before the enumeration gives up."""

Operand = Rat | Free
Decomp = tuple[int, Operand, int, Operand, str]


_SMALL = {1: 1, 2: 1, 3: 1, 4: 2, 5: 3, 6: 4, 7: 4, 8: 5}
"""Largest materialised set per task size, tuned on 6-, 7- and 8-number puzzles."""


class TruncatedError(Exception):
    """The canonical-solution enumeration hit its cap (internal; never escapes the package)."""


class Search:
    """Memoised exact search over the expressions on ``numbers`` (internal)."""

    def __init__(self, numbers: tuple[int, ...], *, small: int | None = None) -> None:
        n = len(numbers)
        self.numbers = numbers
        self.full = (1 << n) - 1
        # Every split of a set of at most n positions has a side of at most n // 2 positions.
        chosen = _SMALL.get(n, n - 3) if small is None else small
        self.small = max(1, n // 2, chosen)
        distinct = sorted(set(numbers))
        index = {x: i for i, x in enumerate(distinct)}
        # bit[p][k]: the label bit of (numbers[p], OPS[k]); equal values share bits.
        self.bit = [[1 << (index[x] * len(OPS) + k) for k in range(len(OPS))] for x in numbers]
        self.label_of_bit = {
            1 << (i * len(OPS) + k): (x, op)
            for i, x in enumerate(distinct)
            for k, op in enumerate(OPS)
        }
        size = 1 << n
        self._splits: list[list[tuple[int, int]] | None] = [None] * size
        self._reach: list[dict[Rat, bool]] = [{} for _ in range(size)]
        self._decomp: list[dict[Rat, list[Decomp]]] = [{} for _ in range(size)]
        self._labels: list[dict[Rat, int]] = [{} for _ in range(size)]
        self._trees: list[dict[Rat, dict[str, Canon]]] = [{} for _ in range(size)]
        self._all_trees: dict[tuple[int, bool], dict[str, Canon]] = {}
        self._any_bits: dict[int, int] = {}
        self.vals: list[set[Rat] | None] = [None] * size
        for i, x in enumerate(numbers):
            self.vals[1 << i] = {x}
        for mask in range(1, size):
            if 2 <= mask.bit_count() <= self.small:
                self.vals[mask] = self._materialise(mask)
        self.combines = 0

    # -- structure -------------------------------------------------------------------------

    def splits(self, mask: int) -> list[tuple[int, int]]:
        """Unordered splits ``(S, T)`` of ``mask`` into two nonempty parts, ``S < T``."""
        cached = self._splits[mask]
        if cached is None:
            cached = []
            sub = (mask - 1) & mask
            while sub:
                other = mask ^ sub
                if sub < other:
                    cached.append((sub, other))
                sub = (sub - 1) & mask
            self._splits[mask] = cached
        return cached

    def positions(self, mask: int) -> list[int]:
        """Positions in ``mask``, ascending."""
        return [i for i in range(len(self.numbers)) if mask >> i & 1]

    def _materialise(self, mask: int) -> set[Rat]:
        out: set[Rat] = set()
        add_value = out.add
        vals = self.vals
        for s, t in self.splits(mask):
            left, right = vals[s], vals[t]
            assert left is not None and right is not None
            for a in left:
                for b in right:
                    if isinstance(a, int) and isinstance(b, int):
                        add_value(a + b)
                        add_value(a - b)
                        add_value(b - a)
                        add_value(a * b)
                    else:
                        add_value(add(a, b))
                        add_value(sub(a, b))
                        add_value(sub(b, a))
                        add_value(mul(a, b))
                    if b:
                        add_value(div(a, b))
                    if a:
                        add_value(div(b, a))
        return out

    # -- reachability and decompositions ---------------------------------------------------

    def reach(self, mask: int, v: Rat) -> bool:
        """Whether some expression over exactly ``mask`` has value ``v``."""
        vals = self.vals[mask]
        if vals is not None:
            return v in vals
        memo = self._reach[mask]
        found = memo.get(v)
        if found is None:
            found = next(self._decomps(mask, v), None) is not None
            memo[v] = found
        return found

    def decompose(self, mask: int, v: Rat) -> list[Decomp]:
        """Every top split ``(L, a, R, b, op)`` of an expression over ``mask`` worth ``v``."""
        memo = self._decomp[mask]
        found = memo.get(v)
        if found is None:
            found = list(self._decomps(mask, v))
            memo[v] = found
        return found

    def _decomps(self, mask: int, v: Rat) -> Iterator[Decomp]:
        vals = self.vals
        for s, t in self.splits(mask):
            vs, vt = vals[s], vals[t]
            if vs is not None and (vt is None or len(vs) <= len(vt)):
                x_mask, y_mask, xs = s, t, vs
            else:
                assert vt is not None
                x_mask, y_mask, xs = t, s, vt
            ys = vals[y_mask]
            has: Callable[[Rat], bool] = (
                ys.__contains__ if ys is not None else partial(self.reach, y_mask)
            )
            for x in xs:
                # x + y = v and y + x = v
                y = sub(v, x)
                if has(y):
                    yield (x_mask, x, y_mask, y, "+")
                    yield (y_mask, y, x_mask, x, "+")
                # x - y = v
                y = sub(x, v)
                if has(y):
                    yield (x_mask, x, y_mask, y, "-")
                # y - x = v
                y = add(v, x)
                if has(y):
                    yield (y_mask, y, x_mask, x, "-")
                if x:
                    # x * y = v and y * x = v
                    y = div(v, x)
                    if has(y):
                        yield (x_mask, x, y_mask, y, "*")
                        yield (y_mask, y, x_mask, x, "*")
                    # y / x = v
                    y = mul(v, x)
                    if has(y):
                        yield (y_mask, y, x_mask, x, "/")
                    # x / y = v, y != 0
                    if v:
                        y = div(x, v)
                        if has(y):
                            yield (x_mask, x, y_mask, y, "/")
                elif not v:
                    # 0 * y = 0, y * 0 = 0 for any y; 0 / y = 0 for any y != 0
                    yield (x_mask, x, y_mask, Free.ANY, "*")
                    yield (y_mask, Free.ANY, x_mask, x, "*")
                    yield (x_mask, x, y_mask, Free.NONZERO, "/")

    # -- labels and witnesses --------------------------------------------------------------

    def any_bits(self, mask: int) -> int:
        """Labels of expressions of any value over ``mask`` (``popcount >= 2``): x o (rest)."""
        bits = self._any_bits.get(mask)
        if bits is None:
            bits = 0
            for p in self.positions(mask):
                for k in range(1, len(OPS)):
                    bits |= self.bit[p][k]
            self._any_bits[mask] = bits
        return bits

    def labels(self, mask: int, v: Rat) -> int:
        """Bitset of the first-op labels of expressions over ``mask`` (2+ positions) worth ``v``."""
        memo = self._labels[mask]
        bits = memo.get(v)
        if bits is None:
            bits = 0
            for left, a, _right, _b, op in self.decompose(mask, v):
                if left & (left - 1) == 0:
                    bits |= self.bit[left.bit_length() - 1][OPS.index(op)]
                elif isinstance(a, Free):
                    bits |= self.any_bits(left)
                elif self.any_bits(left) & ~bits:
                    # Only descend when the left side could still add a label.
                    bits |= self.labels(left, a)
            memo[v] = bits
        return bits

    def sum_expr(self, mask: int) -> Expr:
        """The sum of the numbers in ``mask``: a nonzero expression over exactly ``mask``."""
        ps = self.positions(mask)
        expr: Expr = Num(self.numbers[ps[0]])
        for p in ps[1:]:
            expr = BinOp("+", expr, Num(self.numbers[p]))
        return expr

    def any_expr(self, mask: int, v: Operand) -> Expr:
        """Some expression over exactly ``mask`` worth ``v`` (any value for a free operand)."""
        if isinstance(v, Free):
            return self.sum_expr(mask)
        if mask & (mask - 1) == 0:
            return Num(self.numbers[mask.bit_length() - 1])
        memo = self._decomp[mask].get(v)
        first = memo[0] if memo else next(self._decomps(mask, v))
        left, a, right, b, op = first
        return BinOp(op, self.any_expr(left, a), self.any_expr(right, b))

    def witness(self, mask: int, v: Rat, label: int) -> Expr:
        """An expression over ``mask`` worth ``v`` whose first-op label bit is ``label``."""
        if mask & (mask - 1) == 0:
            return Num(self.numbers[mask.bit_length() - 1])
        for left, a, right, b, op in self.decompose(mask, v):
            if left & (left - 1) == 0:
                p = left.bit_length() - 1
                if self.bit[p][OPS.index(op)] == label:
                    return BinOp(op, Num(self.numbers[p]), self.any_expr(right, b))
            elif isinstance(a, Free):
                if self.any_bits(left) & label:
                    return BinOp(op, self._labelled_any(left, label), self.any_expr(right, b))
            elif self.labels(left, a) & label:
                return BinOp(op, self.witness(left, a, label), self.any_expr(right, b))
        raise AssertionError("witness requested for a label the search did not find")

    def _labelled_any(self, mask: int, label: int) -> Expr:
        for p in self.positions(mask):
            for k in range(1, len(OPS)):
                if self.bit[p][k] == label:
                    return BinOp(OPS[k], Num(self.numbers[p]), self.sum_expr(mask ^ (1 << p)))
        raise AssertionError("label not carried by any expression over this mask")

    # -- canonical solutions ---------------------------------------------------------------

    def trees(self, mask: int, v: Rat, cap: int) -> dict[str, Canon]:
        """The distinct canonical forms of expressions over ``mask`` worth ``v``.

        Raises:
            TruncatedError: when a set would exceed ``cap`` or more than
                ``WORK_PER_SOLUTION * cap`` combine steps were spent.
        """
        if mask & (mask - 1) == 0:
            x = self.numbers[mask.bit_length() - 1]
            return {str(x): leaf(x)} if x == v else {}
        memo = self._trees[mask]
        found = memo.get(v)
        if found is not None:
            return found
        out: dict[str, Canon] = {}
        for left, a, right, b, op in self.decompose(mask, v):
            lefts = self._trees_of(left, a, cap)
            rights = self._trees_of(right, b, cap)
            self.combines += len(lefts) * len(rights)
            if self.combines > WORK_PER_SOLUTION * cap:
                raise TruncatedError
            for lc in lefts.values():
                for rc in rights.values():
                    c = combine(op, lc, rc)
                    out.setdefault(c.text, c)
            if len(out) > cap:
                raise TruncatedError
        memo[v] = out
        return out

    def _trees_of(self, mask: int, v: Operand, cap: int) -> dict[str, Canon]:
        if not isinstance(v, Free):
            return self.trees(mask, v, cap)
        nonzero = v is Free.NONZERO
        key = (mask, nonzero)
        found = self._all_trees.get(key)
        if found is None:
            vals = self.vals[mask]
            if vals is None:
                raise TruncatedError  # a free operand over a large set: too many to list
            found = {}
            for w in vals:
                if w or not nonzero:
                    found.update(self.trees(mask, w, cap))
                    if len(found) > cap:
                        raise TruncatedError
            self._all_trees[key] = found
        return found
