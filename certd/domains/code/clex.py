"""A linear-time C/C++ tokenizer for κ and the canonical form (comments dropped).

Example:
    >>> from certd.domains.code.clex import c_tokens
    >>> c_tokens('int main() { /* hi */ printf("%d", a->b); } // end')
    ['int', 'main', '(', ')', '{', 'printf', '(', '"%d"', ',', 'a', '->', 'b', ')', ';', '}']

Every alternative of the one regular expression consumes what it starts, including an
unterminated comment (to the end of the text) or string literal (to the end of its line), so a
scan never re-reads text: model-written code cannot make it quadratic.
"""

from __future__ import annotations

import re

__all__ = ["c_tokens"]

_TOKEN = re.compile(
    r"(?P<skip>//[^\n]*|/\*(?:[^*]|\*(?!/))*(?:\*/|\Z)|\s+)"
    r'|(?P<tok>"(?:\\.|[^"\\\n])*(?:"|$)'
    r"|'(?:\\.|[^'\\\n])*(?:'|$)"
    r"|[A-Za-z_]\w*|\d[\w.]*|::|->|\S)",
    re.MULTILINE,
)


def c_tokens(source: str) -> list[str]:
    """The tokens of a C/C++ source, comments and whitespace dropped.

    Args:
        source: The program.

    Returns:
        Identifiers, numbers, string/char literals, ``::``, ``->`` and single characters.
    """
    return [m.group("tok") for m in _TOKEN.finditer(source) if m.group("tok") is not None]
