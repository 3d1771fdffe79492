"""Answer extraction from model text: boxed, display/inline math, answer phrases, plain text.

Example:
    >>> extract_answer(r"So $x=2$ and the result is \\boxed{\\frac{1}{2}}.").text
    '\\\\frac{1}{2}'
    >>> extract_answer("The answer is (C).", choices=True).text
    'C'

Sources, tried in ``ExtractConfig.priority`` order (the first that finds anything wins):

- ``boxed``: ``\\boxed{…}`` / ``\\fbox{…}`` with nested braces; the last one by default
  (``boxed="first"`` takes the first). An unclosed ``\\boxed{`` (a truncated response) makes
  the whole response UNPARSED: it never falls back to an earlier answer.
- ``phrase``: "the (final) answer is …" / "answer: …", the last occurrence, up to the end of
  the sentence or line.
- ``display``: the last ``\\[…\\]`` or ``$$…$$``.
- ``inline``: the last ``$…$`` or ``\\(…\\)``.
- ``plain``: the whole text when it is short and reads as one expression, else the last
  number in the text (with thousands separators, decimals and percent signs).

Choice letters (``choices=True``, used when the gold answer is a letter A–J) read a single
letter from the chosen source or, failing that, from "(C)", "answer: C" patterns.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from .errors import MathLimitError, MathUnparsedError
from .limits import MathLimits

__all__ = [
    "ExtractConfig",
    "Extracted",
    "SOURCES",
    "all_boxed",
    "extract_answer",
    "last_number",
    "match_brace",
    "rendered",
]

SOURCES = ("boxed", "phrase", "display", "inline", "plain")

_OPEN = {"{": "}", "(": ")", "[": "]"}


@dataclass(frozen=True, slots=True)
class ExtractConfig:
    """Where the answer is looked for, and in what order.

    Attributes:
        priority: source names from ``SOURCES``, first tried first.
        boxed: ``last`` (default) or ``first`` when several boxes are written.
    """

    priority: tuple[str, ...] = SOURCES
    boxed: str = "last"

    def __post_init__(self) -> None:
        unknown = [p for p in self.priority if p not in SOURCES]
        if unknown or not self.priority:
            raise ValueError(f"priority must name sources from {SOURCES}, got {self.priority}")
        if self.boxed not in ("last", "first"):
            raise ValueError(f"boxed must be 'last' or 'first', got {self.boxed!r}")


@dataclass(frozen=True, slots=True)
class Extracted:
    """An extracted answer: its text and the source it came from."""

    text: str
    source: str


def match_brace(text: str, start: int, max_depth: int) -> int:
    """The index just past the brace that closes the one at ``text[start]``.

    Args:
        text: the text.
        start: index of an opening ``{``.
        max_depth: nesting cap.

    Raises:
        MathUnparsedError: the brace is never closed (truncated or unbalanced input).
        MathLimitError: nesting deeper than ``max_depth``.

    Returns:
        The index after the matching ``}``.
    """
    depth = 0
    i = start
    n = len(text)
    while i < n:
        c = text[i]
        if c == "\\" and i + 1 < n and text[i + 1] in "{}":
            i += 2
            continue
        if c == "{":
            depth += 1
            if depth > max_depth:
                raise MathLimitError(f"braces nest deeper than max_brace_depth={max_depth}")
        elif c == "}":
            depth -= 1
            if depth == 0:
                return i + 1
        i += 1
    raise MathUnparsedError("unbalanced braces: a '{' is never closed (truncated answer?)")


_BOXED = re.compile(r"\\(?:boxed|fbox)\s*\{")
_IFFALSE = re.compile(r"\\iffalse(?![A-Za-z]).*?(?:\\fi(?![A-Za-z])|\Z)", re.DOTALL)
_COMMENT = re.compile(r"(?<!\\)%([^\n]*)")
_PHANTOM = re.compile(r"\\[vh]?phantom\s*\{")
_AFTER_NUMBER = re.compile(r"\d\s*$")


def _comment(text: str, m: re.Match[str]) -> str:
    """A LaTeX comment is dropped; ``%`` right after a number is a percent sign (prose such
    as "4% of $10,000" is Markdown, where ``%`` renders) unless boxes stand on both sides of
    it: ``\\boxed{4} 5% \\boxed{3}`` answers 4 under LaTeX and 3 under Markdown, and an
    answer that depends on the reader is read the way that hides the later box."""
    percent = _AFTER_NUMBER.search(text[max(0, m.start() - 8) : m.start()])
    if percent and not (_BOXED.search(m.group(1)) and _BOXED.search(text, 0, m.start())):
        return m.group(0)
    return ""


def rendered(text: str) -> str:
    """``text`` without what LaTeX does not render: comments (an unescaped ``%`` to the end
    of its line; ``\\%`` is a percent sign, and so is ``%`` right after a number),
    ``\\phantom``/``\\vphantom``/``\\hphantom`` and their argument, ``\\iffalse … \\fi``.

    Args:
        text: a response.

    Returns:
        The text that renders (an unclosed ``\\iffalse`` or phantom hides the rest).
    """
    if "%" not in text and "phantom" not in text and "iffalse" not in text:
        return text
    text = _IFFALSE.sub("", text)
    text = _COMMENT.sub(lambda m: _comment(text, m), text)
    while (m := _PHANTOM.search(text)) is not None:
        try:
            end = match_brace(text, m.end() - 1, 10_000)
        except MathUnparsedError:
            end = len(text)
        text = text[: m.start()] + text[end:]
    return text


def all_boxed(text: str, limits: MathLimits) -> list[str]:
    """The contents of every ``\\boxed{…}`` in order.

    Raises:
        MathUnparsedError: a box is never closed.
        MathLimitError: braces nest deeper than the cap.
    """
    out = []
    for m in _BOXED.finditer(text):
        start = m.end() - 1
        out.append(text[start + 1 : match_brace(text, start, limits.max_brace_depth) - 1])
    return out


def _boxed(text: str, cfg: ExtractConfig, limits: MathLimits) -> tuple[str, int] | None:
    starts = [m.end() - 1 for m in _BOXED.finditer(text)]
    if not starts:
        return None
    # The chosen box must close; an unclosed last box means a truncated response.
    start = starts[-1] if cfg.boxed == "last" else starts[0]
    end = match_brace(text, start, limits.max_brace_depth)
    return text[start + 1 : end - 1], end


def _find(source: str, text: str) -> tuple[str, int] | None:
    if source == "display":
        return _last_group(_DISPLAY, text)
    if source == "inline":
        return _last_group(_INLINE, text)
    return _plain(text)


_PHRASE = re.compile(
    r"(?:final\s+answer|the\s+answer|answer)\s*(?:is|:|=)?\s*[:]?\s*",
    re.IGNORECASE,
)


def _phrase(text: str) -> tuple[str, int] | None:
    found = None
    for m in _PHRASE.finditer(text):
        rest = text[m.end() :]
        if rest.startswith("$$"):
            close = rest.find("$$", 2)
            cand = rest[2:close] if close > 0 else None
        elif rest.startswith("$"):
            close_m = re.compile(r"(?<!\\)\$").search(rest, 1)
            cand = rest[1 : close_m.start()] if close_m else None
        elif rest.startswith("\\[") or rest.startswith("\\("):
            close = rest.find("\\]" if rest[1] == "[" else "\\)", 2)
            cand = rest[2:close] if close > 0 else None
        else:
            line = rest.split("\n", 1)[0]
            cand = re.split(r"\.(?:\s|$)", line, maxsplit=1)[0].strip().strip('"\\').strip()
        if cand is not None and "\n" not in cand and cand.strip():
            cand = cand.strip()
            if _prose(cand):
                cand = last_number(cand)
            if cand:
                found = (cand, m.end())
    return found


_DISPLAY = re.compile(r"\\\[(.+?)\\\]|\$\$(.+?)\$\$", re.DOTALL)
_INLINE = re.compile(r"\\\(([^\n]+?)\\\)|(?<![\\$])\$(?!\$)([^\n$]+?)(?<!\\)\$")
_BROKEN_INLINE = re.compile(r"(?<![\\$])\$(?!\$)[^$]*\n[^$]*\$|\\\([^)]*\n")


def _last_group(pattern: re.Pattern[str], text: str) -> tuple[str, int] | None:
    found = None
    for m in pattern.finditer(text):
        g = m.group(1) if m.group(1) is not None else m.group(2)
        if g is not None and g.strip():
            found = (g.strip(), m.end())
    return found


_NUMBER = re.compile(
    r"(?<![A-Za-z\d.])-?(?:\d+/\d+(?![\d.,]\d)|\d{1,3}(?:,\d{3})+(?:\.\d+)?|\d+(?:[.,]\d+)?|\.\d+)%?(?!\d)"
)
_WORD = re.compile(r"[A-Za-z]{3,}")
_NOT_PROSE = re.compile(
    r"\\(?:begin|end|text|mathrm|textbf|mbox|operatorname)\{[^{}]*\}|\\[A-Za-z]+"
)


def last_number(text: str) -> str | None:
    """The last number written in prose (thousands separators, decimals, fractions ``a/b``,
    percent signs)."""
    found = _last_number(text)
    return found[0] if found else None


def _last_number(text: str) -> tuple[str, int] | None:
    found = None
    for m in _NUMBER.finditer(text):
        found = (m.group(0), m.end())
    return found


def _prose(text: str) -> bool:
    words = _WORD.findall(_NOT_PROSE.sub("", text))
    return any(w.lower() not in ("and", "or") for w in words)


def _plain(text: str) -> tuple[str, int] | None:
    stripped = text.strip()
    if not stripped:
        return None
    # A short text without prose words reads as one expression.
    if len(stripped) <= 200 and "\n" not in stripped and not _prose(stripped):
        return stripped.rstrip("."), len(text)
    if _BROKEN_INLINE.search(text):
        return None  # a math span broken across lines is no answer, nor are numbers in it
    return _last_number(text)


_LETTER = re.compile(r"^\(?\s*(?:\\text\{\s*)?\(?([A-J])\)?\s*\}?\s*\)?\.?$")
_CHOICE_IN_TEXT = re.compile(
    r"(?:answer|option|choice)\s*(?:is|:)?\s*\(?\$?\\?(?:text\{)?\s*([A-J])\b|\(([A-J])\)"
)


def _choice(candidate: str | None, text: str) -> str | None:
    if candidate is not None:
        m = _LETTER.match(candidate.strip())
        if m:
            return m.group(1)
    found = None
    for m in _CHOICE_IN_TEXT.finditer(text):
        found = m.group(1) or m.group(2)
    return found


_UNANCHORED = ("display", "inline", "plain")


def _look(
    text: str, cfg: ExtractConfig, lim: MathLimits, i: int
) -> tuple[tuple[str, int] | None, str]:
    """What the ``i``-th source of ``cfg.priority`` finds, and the source that found it.

    ``boxed`` yields to a ``phrase`` later in the text when ``phrase`` comes after it in the
    priority; a run of unanchored sources is searched together and the latest match wins.
    """
    source = cfg.priority[i]
    if source == "boxed":
        box = _boxed(text, cfg, lim)
        phrase = _phrase(text) if "phrase" in cfg.priority[i:] else None
        if box is not None and phrase is not None and phrase[1] > box[1]:
            return phrase, "phrase"  # "the final answer is …" after the box
        return box, source
    if source == "phrase":
        return _phrase(text), source
    group = []
    for s in cfg.priority[i:]:
        if s not in _UNANCHORED:
            break
        group.append(s)
    candidates = [(_find(s, text), s) for s in group]
    present = [(c, s) for c, s in candidates if c is not None]
    if present:  # the latest in the text wins among unanchored sources
        return max(present, key=lambda cs: cs[0][1])
    return None, source


def extract_answer(
    text: str,
    config: ExtractConfig | None = None,
    limits: MathLimits | None = None,
    *,
    choices: bool = False,
) -> Extracted:
    """Extract the answer a response gives.

    Args:
        text: the response.
        config: where to look and in what order (default ``ExtractConfig()``).
        limits: size caps (default ``MathLimits()``).
        choices: read a choice letter A–J (the gold answer is one).

    Raises:
        MathUnparsedError: no answer, or a truncated/unbalanced one.
        MathLimitError: the response or the answer is over a cap.

    Returns:
        The answer text and the source it came from.
    """
    cfg = config or ExtractConfig()
    lim = limits or MathLimits()
    if len(text) > lim.max_response_chars:
        raise MathLimitError(
            f"response is {len(text)} chars, over max_response_chars={lim.max_response_chars}"
        )
    for i, name in enumerate(cfg.priority):
        if name not in ("boxed", "phrase") and i > 0 and cfg.priority[i - 1] in _UNANCHORED:
            continue  # handled with the first of its group
        found, source = _look(text, cfg, lim, i)
        if choices:
            letter = _choice(found[0] if found else None, text)
            if letter is not None:
                return Extracted(letter, "choice")
            continue
        if found is not None and found[0].strip():
            if len(found[0]) > lim.max_answer_chars:
                raise MathLimitError(
                    f"answer is {len(found[0])} chars, over max_answer_chars={lim.max_answer_chars}"
                )
            return Extracted(found[0].strip(), source)
    raise MathUnparsedError("no answer found")
