"""Extraction of the program from a model response.

Example:
    >>> from certd.domains.code import extract_program
    >>> text = "Try:\\n```python\\nprint(1)\\n```\\nor\\n```python\\nprint(2)\\n```"
    >>> extract_program(text, "python")
    'print(2)\\n'
    >>> extract_program("    return x + 1\\n", "python")
    '    return x + 1\\n'

Rules: the fenced code blocks (```` ``` ```` or ``~~~``, optional info string) are found in
order; blocks whose info string names another language are skipped when one names this
language or has none; of the rest the *last* one is taken (``which="first"`` takes the first).
Without any fenced block the whole response is the program (a HumanEval-style completion).
An unterminated final fence runs to the end of the response.
"""

from __future__ import annotations

import re

__all__ = ["LANGUAGE_TAGS", "code_blocks", "extract_program"]

LANGUAGE_TAGS: dict[str, frozenset[str]] = {
    "python": frozenset({"python", "py", "python3"}),
    "c": frozenset({"c", "h"}),
    "cpp": frozenset({"cpp", "c++", "cc", "cxx", "hpp"}),
}
_FENCE = re.compile(r"^[ \t]{0,3}(`{3,}|~{3,})[ \t]*([^\n`]*)$", re.MULTILINE)


def code_blocks(text: str) -> list[tuple[str, str]]:
    """All fenced code blocks in order.

    Args:
        text: The response.

    Returns:
        ``(info, body)`` pairs; ``info`` is the lower-cased first word of the info string.
    """
    blocks: list[tuple[str, str]] = []
    pos = 0
    while True:
        opening = _FENCE.search(text, pos)
        if opening is None:
            return blocks
        fence, info = opening.group(1), opening.group(2).strip().lower()
        start = opening.end() + 1
        closing = re.compile(
            rf"^[ \t]{{0,3}}{re.escape(fence[0])}{{{len(fence)},}}[ \t]*$", re.MULTILINE
        ).search(text, start)
        end = closing.start() if closing else len(text)
        body = text[start:end] if start <= len(text) else ""
        blocks.append((info.split()[0] if info else "", body))
        if closing is None:
            return blocks
        pos = closing.end()


def extract_program(response: str, language: str, *, which: str = "last") -> str:
    """The program a response contains.

    Args:
        response: The model's text.
        language: ``python``, ``c`` or ``cpp``.
        which: ``last`` (default) or ``first`` fenced block.

    Returns:
        The program text ("" when a fenced block is empty).
    """
    blocks = code_blocks(response)
    if not blocks:
        return response
    tags = LANGUAGE_TAGS.get(language, frozenset())
    matching = [b for info, b in blocks if info in tags]
    untagged = [b for info, b in blocks if not info]
    chosen = matching or untagged or [b for _, b in blocks]
    return chosen[0] if which == "first" else chosen[-1]
