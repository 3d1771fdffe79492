"""The embedded policy's text format: compact prompts, reasoning-then-answer responses, tokens.

Example:
    >>> solution_text("(25-5)*4+3")
    '<think>25-5=20, 20*4=80, 80+3=83</think><answer>(25-5)*4+3</answer>'
    >>> compact_prompt({"numbers": [25, 5, 4, 3], "target": 83})
    '25 5 4 3>83|'
    >>> tok = CharTokenizer()
    >>> tok.decode(tok.encode("<think>25-5=20</think>"))
    '<think>25-5=20</think>'

The policy reads a compact prompt (``numbers>target|``) and writes the steps of its solution in
evaluation order inside ``<think>``, then the expression inside ``<answer>``. Its first step
starts with the answer's leftmost literal and that literal's operator, so the κ
``countdown.first-op.v1`` family the verifier reads from the answer is the one the first
characters of the reasoning commit to; forcing ``<think>{operand}{operator}`` forces an entry.

The expression reader here is a small recursive-descent parser over ``+ - * / ( )`` and
non-negative integers with exact fractions (no ``eval``); it only formats the project's own
training data and certified witnesses. certd's verifier is the judge of every model answer.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from fractions import Fraction
from typing import Any

__all__ = [
    "ANSWER",
    "CharTokenizer",
    "END_ANSWER",
    "END_THINK",
    "Node",
    "THINK",
    "compact_prompt",
    "first_step_label",
    "parse",
    "prompt_task",
    "solution_text",
    "steps",
]

THINK = "<think>"
END_THINK = "</think>"
ANSWER = "<answer>"
END_ANSWER = "</answer>"
_SPECIALS = ("<pad>", "<bos>", "<eos>", THINK, END_THINK, ANSWER, END_ANSWER)
_CHARS = "0123456789+-*/()=, >|"
_TAG = re.compile(r"</?(?:think|answer)>")
_TINYZERO = re.compile(r"Using the numbers \[([0-9,\s]*)\].*?equals\s+([0-9]+)", re.S)
_COMPACT = re.compile(r"^\s*((?:[0-9]+ )*[0-9]+)>([0-9]+)\|?\s*$")


class CharTokenizer:
    """Characters of the format plus the four tags, ``<pad>``, ``<bos>`` and ``<eos>``."""

    def __init__(self) -> None:
        self.itos: list[str] = [*_SPECIALS, *_CHARS]
        self.stoi = {s: i for i, s in enumerate(self.itos)}
        self.pad, self.bos, self.eos = 0, 1, 2

    @property
    def vocab_size(self) -> int:
        """Number of token ids."""
        return len(self.itos)

    def encode(self, text: str) -> list[int]:
        """Token ids of ``text``.

        Raises:
            ValueError: ``text`` has a character outside the format.
        """
        out: list[int] = []
        pos = 0
        for m in _TAG.finditer(text):
            out.extend(self._chars(text[pos : m.start()]))
            out.append(self.stoi[m.group(0)])
            pos = m.end()
        out.extend(self._chars(text[pos:]))
        return out

    def _chars(self, text: str) -> list[int]:
        try:
            return [self.stoi[c] for c in text]
        except KeyError as e:
            raise ValueError(f"character {e.args[0]!r} is not in the policy's vocabulary") from e

    def decode(self, ids: Sequence[int]) -> str:
        """Text of token ids (``<pad>``, ``<bos>`` and ``<eos>`` are dropped)."""
        return "".join(self.itos[i] for i in ids if i > self.eos)


def compact_prompt(task: Mapping[str, Any]) -> str:
    """The policy's prompt for a Countdown task: ``"25 5 4 3>83|"``."""
    return " ".join(str(int(x)) for x in task["numbers"]) + f">{int(task['target'])}|"


def prompt_task(prompt: str) -> dict[str, Any]:
    """The task a prompt asks about: a compact prompt or the TinyZero Countdown prompt.

    Raises:
        ValueError: the prompt is neither.
    """
    m = _COMPACT.match(prompt)
    if m:
        return {"numbers": [int(x) for x in m.group(1).split()], "target": int(m.group(2))}
    m = _TINYZERO.search(prompt)
    if m:
        numbers = [int(x) for x in m.group(1).replace(",", " ").split()]
        if numbers:
            return {"numbers": numbers, "target": int(m.group(2))}
    raise ValueError(f"not a Countdown prompt the embedded policy reads: {prompt[:80]!r}")


@dataclass(frozen=True, slots=True)
class Node:
    """An expression tree node: a literal (``op == ""``) or a binary operation."""

    op: str
    value: Fraction
    left: Node | None = None
    right: Node | None = None
    text: str = ""


def parse(expr: str) -> Node:
    """Parse ``+ - * / ( )`` over non-negative integers with standard precedence.

    Raises:
        ValueError: a syntax error or a division by zero.
    """
    toks = re.findall(r"[0-9]+|[-+*/()]|\S", expr)
    node, pos = _expr(toks, 0)
    if pos != len(toks):
        raise ValueError(f"unexpected {toks[pos]!r} in {expr!r}")
    return node


def _expr(toks: list[str], pos: int) -> tuple[Node, int]:
    node, pos = _term(toks, pos)
    while pos < len(toks) and toks[pos] in "+-":
        op = toks[pos]
        right, pos = _term(toks, pos + 1)
        node = _bin(op, node, right)
    return node, pos


def _term(toks: list[str], pos: int) -> tuple[Node, int]:
    node, pos = _factor(toks, pos)
    while pos < len(toks) and toks[pos] in "*/":
        op = toks[pos]
        right, pos = _factor(toks, pos + 1)
        node = _bin(op, node, right)
    return node, pos


def _factor(toks: list[str], pos: int) -> tuple[Node, int]:
    if pos >= len(toks):
        raise ValueError("unexpected end of expression")
    tok = toks[pos]
    if tok.isdigit():
        return Node("", Fraction(int(tok)), text=tok), pos + 1
    if tok == "(":
        node, pos = _expr(toks, pos + 1)
        if pos >= len(toks) or toks[pos] != ")":
            raise ValueError("unbalanced parenthesis")
        return node, pos + 1
    raise ValueError(f"unexpected {tok!r}")


def _bin(op: str, a: Node, b: Node) -> Node:
    if op == "/" and b.value == 0:
        raise ValueError("division by zero")
    value = {
        "+": lambda: a.value + b.value,
        "-": lambda: a.value - b.value,
        "*": lambda: a.value * b.value,
        "/": lambda: a.value / b.value,
    }[op]()
    return Node(op, value, a, b)


def _num(x: Fraction) -> str:
    return str(x.numerator) if x.denominator == 1 else f"{x.numerator}/{x.denominator}"


def steps(node: Node) -> list[str]:
    """The operations of a tree in evaluation order (left subtree first): ``["25-5=20", …]``."""
    out: list[str] = []
    stack: list[tuple[Node, bool]] = [(node, False)]
    while stack:
        cur, visited = stack.pop()
        if cur.left is None or cur.right is None:
            continue
        if visited:
            out.append(f"{_num(cur.left.value)}{cur.op}{_num(cur.right.value)}={_num(cur.value)}")
        else:
            stack.extend([(cur, True), (cur.right, False), (cur.left, False)])
    return out


def first_step_label(expr: str) -> str | None:
    """The κ label ``"operand,operator"`` when the first step starts with the answer's entry.

    That is when the leftmost literal's sibling is a literal too, so the reasoning's first
    step ``a op b`` names the answer's family; otherwise ``None``.
    """
    node = parse(expr)
    parent = None
    while node.left is not None:
        parent, node = node, node.left
    if parent is None or parent.right is None or parent.right.left is not None:
        return None
    return f"{node.text},{parent.op}"


def solution_text(expr: str) -> str:
    """The reasoning-then-answer response for a solution expression.

    Raises:
        ValueError: the expression does not parse.
    """
    body = ", ".join(steps(parse(expr)))
    return f"{THINK}{body}{END_THINK}{ANSWER}{expr}{END_ANSWER}"
