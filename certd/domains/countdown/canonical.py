"""The pseudo-fork normal form of a solution, and every first-op label its renderings carry.

Example:
    >>> from certd.domains.countdown import canonical_form, labels_of, parse_expression
    >>> canonical_form(parse_expression("(25-5)*4+3"))
    '3+4*(25-5)'
    >>> canonical_form(parse_expression("3+(25-5)*4"))
    '3+4*(25-5)'
    >>> sorted(labels_of(parse_expression("(25-5)*4+3")))
    [(3, '+'), (4, '*'), (25, '-')]

The normal form flattens every ``+``/``-`` chain into a multiset of signed terms and every
``*``/``/`` chain into a multiset of factors with exponent ±1, recursively, and sorts each
multiset: literals first by value, then compound parts by their text. Identity operations are
removed first (``reduce_identities``): a factor ``1`` (``×1``, ``÷1``), a term ``0`` (``+0``,
``−0``), a factor that appears both multiplied and divided (``×a÷a``, ``×(a÷a)``), a term that
appears both added and subtracted (``+a−a``, ``+(a−a)``), and their nestings, so one
computation has one form:

    >>> canonical_form(parse_expression("(5+3*4)/1")) == canonical_form(parse_expression("3*4+5"))
    True
    >>> canonical_form(parse_expression("3*4*(2/2)+5-(4-4)"))
    '5+3*4'

Beyond identities it is purely structural: ``(25-5)*4+3`` and ``25*4-5*4+3`` stay different even
though they are equal in value. The form is itself an expression (positive terms first, then
``-t``; numerator factors first, then ``/f``), so it parses back and evaluates to the same value.
"""

from __future__ import annotations

from collections import Counter

from .expr import BinOp, Expr, Num

__all__ = [
    "Canon",
    "canon_labels",
    "canon_of",
    "canonical_form",
    "combine",
    "labels_of",
    "leaf",
    "make",
    "reduce_identities",
    "render_carrying",
]


class Canon:
    """A node of the normal form (internal).

    Attributes:
        kind: ``"n"`` literal, ``"+"`` sum, ``"*"`` product.
        value: the literal's value (0 for sums and products).
        pos: positive terms of a sum, numerator factors of a product (sorted).
        neg: negative terms of a sum, denominator factors of a product (sorted).
        text: the rendering, e.g. ``3+4*(25-5)``; two nodes are the same iff texts are equal.
        key: the sort key among siblings.
    """

    __slots__ = ("key", "kind", "neg", "pos", "text", "value")

    def __init__(
        self,
        kind: str,
        value: int,
        pos: tuple[Canon, ...],
        neg: tuple[Canon, ...],
        text: str,
    ) -> None:
        self.kind = kind
        self.value = value
        self.pos = pos
        self.neg = neg
        self.text = text
        self.key: tuple[int, int, str] = (0, value, "") if kind == "n" else (1, 0, text)


def leaf(value: int) -> Canon:
    """The normal form of a literal (internal)."""
    return Canon("n", value, (), (), str(value))


def _key(c: Canon) -> tuple[int, int, str]:
    return c.key


def make(kind: str, pos: list[Canon], neg: list[Canon]) -> Canon:
    """A sum (``kind`` ``+``) or product (``*``) node from its unsorted parts (internal)."""
    pos.sort(key=_key)
    neg.sort(key=_key)
    if kind == "+":
        text = "+".join([t.text for t in pos]) + "".join(["-" + t.text for t in neg])
    else:
        text = "*".join([_factor(f) for f in pos]) + "".join(["/" + _factor(f) for f in neg])
    return Canon(kind, 0, tuple(pos), tuple(neg), text)


def _factor(f: Canon) -> str:
    return f"({f.text})" if f.kind == "+" else f.text


def combine(op: str, left: Canon, right: Canon) -> Canon:
    """The normal form of ``left op right`` from the normal forms of its operands (internal)."""
    kind = "+" if op in "+-" else "*"
    lp, ln = (left.pos, left.neg) if left.kind == kind else ((left,), ())
    rp, rn = (right.pos, right.neg) if right.kind == kind else ((right,), ())
    if op == "-" or op == "/":
        rp, rn = rn, rp
    return make(kind, [*lp, *rp], [*ln, *rn])


def canon_of(expr: Expr) -> Canon:
    """The normal-form node of an expression tree (internal).

    Iterative and O(n log n): each maximal ``+``/``-`` or ``*``/``/`` chain is collected once
    as a group of signed members, and groups are built children first.
    """
    if type(expr) is Num:
        return leaf(expr.value)
    assert type(expr) is BinOp
    groups: list[tuple[BinOp, str, list[tuple[bool, Expr]]]] = []
    pending = [expr]
    while pending:
        root = pending.pop()
        kind = _KIND[root.op]
        members: list[tuple[bool, Expr]] = []
        walk: list[tuple[Expr, bool]] = [(root, False)]
        while walk:
            node, negated = walk.pop()
            if type(node) is BinOp and _KIND[node.op] == kind:
                walk.append((node.right, negated != (node.op in "-/")))
                walk.append((node.left, negated))
            else:
                members.append((negated, node))
                if type(node) is BinOp:
                    pending.append(node)
        groups.append((root, kind, members))
    built: dict[int, Canon] = {}
    for root, kind, members in reversed(groups):
        pos: list[Canon] = []
        neg: list[Canon] = []
        for negated, node in members:
            c = leaf(node.value) if type(node) is Num else built[id(node)]
            (neg if negated else pos).append(c)
        built[id(root)] = make(kind, pos, neg)
    return built[id(expr)]


_KIND = {"+": "+", "-": "+", "*": "*", "/": "*"}


def reduce_identities(node: Canon) -> Canon:
    """The normal form with every identity operation removed (bottom-up, re-flattened).

    In a product, factors ``1`` are dropped and a factor present in both the numerator and the
    denominator cancels once per pair; in a sum, terms ``0`` are dropped and a term both added
    and subtracted cancels likewise. A part left empty is its unit (``0``/``1``, then dropped by
    its parent), a part left with one positive member is that member (flattened into a parent
    of the same kind), and a part left with only negative members gets the unit as its first
    term (``0-x``, ``1/x``) so that it still renders. Iterative, so any depth is safe.

    Args:
        node: a normal-form node (``canon_of`` or built by ``combine``).

    Returns:
        The reduced node; ``node`` itself when it has no identity operation.
    """
    done: dict[int, Canon] = {}
    todo: list[tuple[Canon, bool]] = [(node, False)]
    while todo:  # children first, iteratively: a form may nest as deep as its expression
        current, expanded = todo.pop()
        if current.kind == "n" or id(current) in done:
            done[id(current)] = done.get(id(current), current)
            continue
        if not expanded:
            todo.append((current, True))
            todo.extend((m, False) for m in (*current.pos, *current.neg))
            continue
        done[id(current)] = _reduce_node(current, done)
    return done[id(node)]


def _reduce_node(node: Canon, done: dict[int, Canon]) -> Canon:
    """One sum or product node reduced, its members already reduced in ``done``."""
    kind = node.kind
    unit = 0 if kind == "+" else 1
    pos: list[Canon] = []
    neg: list[Canon] = []
    changed = False
    for members, positive in ((node.pos, True), (node.neg, False)):
        for member in members:
            r = done[id(member)]
            changed |= r is not member
            if r.kind == kind:
                pos.extend(r.pos if positive else r.neg)
                neg.extend(r.neg if positive else r.pos)
            elif r.kind == "n" and r.value == unit:
                changed = True
            else:
                (pos if positive else neg).append(r)
    pos, neg, cancelled = _cancel(pos, neg)
    if not (changed or cancelled):
        return node
    if not pos and not neg:
        return leaf(unit)
    if len(pos) == 1 and not neg:
        return pos[0]
    return make(kind, pos or [leaf(unit)], neg)


def _cancel(pos: list[Canon], neg: list[Canon]) -> tuple[list[Canon], list[Canon], bool]:
    """Drop one positive and one negative member per pair with equal texts."""
    both = Counter(p.text for p in pos) & Counter(n.text for n in neg)
    if not both:
        return pos, neg, False
    return _without(pos, Counter(both)), _without(neg, Counter(both)), True


def _without(members: list[Canon], drop: Counter[str]) -> list[Canon]:
    kept: list[Canon] = []
    for m in members:
        if drop[m.text] > 0:
            drop[m.text] -= 1
        else:
            kept.append(m)
    return kept


def canonical_form(expr: Expr) -> str:
    """The pseudo-fork normal form of a solution.

    Two expressions get the same string exactly when one is a commuted or re-associated
    rendering of the other (``a-(b-c)`` and ``a-b+c`` included) once identity operations are
    removed (``reduce_identities``); nothing else is merged by value.

    Args:
        expr: the expression tree.

    Returns:
        The normal form, itself a valid expression, e.g. ``3+4*(25-5)``.
    """
    return reduce_identities(canon_of(expr)).text


def canon_labels(node: Canon) -> frozenset[tuple[int, str]]:
    """Every first-op label some rendering of ``node`` carries (internal; see labels_of)."""
    if node.kind == "n":
        return frozenset({(node.value, "")})
    return frozenset(_inner_labels(node))


def _inner_labels(node: Canon) -> set[tuple[int, str]]:
    # The leftmost term of a rendering is a positive term (there is no unary minus). When it is
    # a literal, the operator written after it is `+` (or `*`) if another positive term can
    # follow and `-` (or `/`) if a negative term exists; otherwise the label lies inside it.
    out: set[tuple[int, str]] = set()
    todo = [node]
    while todo:
        current = todo.pop()
        plus, minus = ("+", "-") if current.kind == "+" else ("*", "/")
        seen: set[str] = set()
        for term in current.pos:
            if term.text in seen:
                continue
            seen.add(term.text)
            if term.kind == "n":
                if len(current.pos) > 1:
                    out.add((term.value, plus))
                if current.neg:
                    out.add((term.value, minus))
            else:
                todo.append(term)
    return out


def labels_of(expr: Expr) -> frozenset[tuple[int, str]]:
    """Every first-op label that some commuted or re-associated rendering of a solution carries.

    Derived from the normal form: at a sum, any positive term can come first; a literal first
    term is followed by ``+`` when another positive term remains and by ``-`` when a negative
    term exists; a compound first term contributes its own labels. Products likewise with
    ``*`` and ``/``. A bare literal has the single label ``(value, "")``.

    Args:
        expr: the expression tree.

    Returns:
        The set of ``(operand, operator)`` labels; it always contains ``kappa_first_op(expr)``.
    """
    return canon_labels(canon_of(expr))


def _term(parent: str, node: Canon, negative: bool) -> str:
    """A child's text inside its parent: sums inside products are parenthesised."""
    if parent == "*" and node.kind == "+":
        return f"({node.text})"
    del negative  # sums never hold sums and products never hold products (flattened)
    return node.text


def render_carrying(node: Canon, label: tuple[int, str]) -> str | None:
    """A rendering of a normal-form solution whose first-op label is ``label``.

    Example: ``3+4*(25-5)`` rendered to carry ``(25, "-")`` is ``(25-5)*4+3``.

    Args:
        node: the solution's normal form.
        label: ``(operand, operator)``; must be in ``canon_labels(node)`` to succeed.

    Returns:
        The expression text, or None when no rendering carries the label.
    """
    if node.kind == "n":
        return str(node.value) if label == (node.value, "") else None
    plus, minus = ("+", "-") if node.kind == "+" else ("*", "/")
    terms = [(plus, t) for t in node.pos] + [(minus, t) for t in node.neg]
    for i, first in enumerate(node.pos):
        rest = terms[:i] + terms[i + 1 :]
        if first.kind == "n":
            if first.value != label[0] or label[1] not in (plus, minus):
                continue
            at = next((j for j, (op, _) in enumerate(rest) if op == label[1]), None)
            if at is None:
                continue
            rest.insert(0, rest.pop(at))
            head = str(first.value)
        else:
            inner = render_carrying(first, label)
            if inner is None:
                continue
            head = f"({inner})" if node.kind == "*" and first.kind == "+" else inner
        return head + "".join(op + _term(node.kind, t, op == minus) for op, t in rest)
    return None
