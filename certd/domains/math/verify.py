"""Check one math response against its task: extract, parse, compare, label the route.

Example:
    >>> from certd.domains.math.task import MathTask
    >>> v = verify_math(MathTask(gold=r"\\frac{1}{2}"), r"So the answer is \\boxed{0.5}.")
    >>> v.status.name, v.reward, v.family.label
    ('CORRECT', 1.0, 'direct')
    >>> v.detail
    'gold 1/2 [\\\\frac{1}{2}]; pred 1/2 [\\\\frac{1}{2}] from boxed'

This function does the bounded-by-caps work only; it runs inside a worker process of the
math pool (``certd.authority.mathpool``), which adds the hard deadline and the memory cap.
Verdicts: CORRECT, WRONG_ANSWER, UNPARSED (no answer, truncated, over a cap, does not
parse). The pool adds TIME_LIMIT and MEMORY_LIMIT.
"""

from __future__ import annotations

import itertools
import re
import secrets

import sympy

from certd.domains.verdict import Status, Verdict

from .equiv import equivalent
from .errors import MathUnparsedError
from .extract import ExtractConfig, Extracted, all_boxed, extract_answer, rendered
from .identity import IdentityTest
from .limits import MathLimits
from .names import VERIFIER
from .parse import Parsed, normalized, parse_answer
from .route import kappa_route
from .shaping import MathShaping
from .task import MathTask

__all__ = ["MathShaping", "parse_gold", "verify_math"]

_BOXED = re.compile(r"\\(?:boxed|fbox)\s*\{")
_CHOICE = re.compile(r"^\s*\(?\s*(?:\\text\{\s*)?([A-J])\s*\}?\s*\)?\s*$")
# Errors an answer can raise in SymPy or mpmath (``e^{e^{100}}``, 10,000 nested powers):
# the answer's verdict (UNPARSED or WRONG_ANSWER), never INFRA_ERROR.
_ANSWER_FAULTS = (OverflowError, RecursionError, ArithmeticError)
_GOLD_EXTRACT = ExtractConfig(priority=("boxed", "display", "inline", "plain"))


def _form(p: Parsed) -> str:
    v = p.value
    try:
        shown = v if isinstance(v, str) else str(v)
    except ValueError:  # an integer past Python's str() digit limit
        shown = "<too long to print>"
    return f"{shown[:200]}{'%' if p.percent else ''}"


_INLINE_SEG = re.compile(r"\$+([^$]+)\$+|\\\((.+?)\\\)")
_SEPARATORS = re.compile(r"^(?:\s|,|;|\.|and|or|\\q?quad(?![A-Za-z])|\\text\{\s*(?:and|or)\s*\})*$")


def _joined(gold: str, spans: list[tuple[int, int]]) -> bool:
    """Whether only "and"/"or"/commas (and math delimiters), or at most a few characters,
    stand between the spans."""
    gaps = [gold[a[1] : b[0]] for a, b in itertools.pairwise(spans)]
    return all(len(g.strip()) <= 12 for g in gaps) or all(
        _SEPARATORS.match(g.replace("$", "").replace("\\(", "").replace("\\)", "").strip())
        for g in gaps
    )


def _gold_text(gold: str, limits: MathLimits) -> tuple[str, bool]:
    """The gold answer text, and whether it is several answers: several boxes, or several
    ``$…$``, joined only by "and"/"or"/commas."""
    marks = [(m.start(), m.end() - 1) for m in _BOXED.finditer(gold)]
    boxes = all_boxed(gold, limits)
    if len(set(boxes)) > 1:
        spans = [(a, b + len(box) + 2) for (a, b), box in zip(marks, boxes, strict=True)]
        if _joined(gold, spans):
            return ",".join(boxes), True
        return boxes[-1], False
    if boxes:
        return boxes[-1], False
    segments = list(_INLINE_SEG.finditer(gold))
    if len(segments) > 1 and _joined(gold, [m.span() for m in segments]):
        head, tail = gold[: segments[0].start()], gold[segments[-1].end() :]
        if _SEPARATORS.match(head.strip()) and _SEPARATORS.match(tail.strip()):
            return ",".join((m.group(1) or m.group(2)).strip() for m in segments), True
    return extract_answer(gold, _GOLD_EXTRACT, limits).text, False


def parse_gold(task: MathTask, limits: MathLimits) -> Parsed:
    """Parse the task's gold answer (a letter A–J is kept as a choice).

    Several boxed answers, or several ``$…$`` joined by "and"/"or"/commas, are one
    multi-answer (a set).

    Args:
        task: the task.
        limits: the caps.

    Raises:
        MathUnparsedError: the gold answer does not parse.

    Returns:
        The parsed gold answer.
    """
    text, multi = _gold_text(task.gold, limits)
    m = _CHOICE.match(text.strip("$ "))
    if m:
        return Parsed(m.group(1), m.group(1))
    return parse_answer(text, limits, numbers=not multi)


def _multi(gold: Parsed) -> int:
    v = gold.value
    if isinstance(v, sympy.FiniteSet | sympy.Tuple) and len(v.args) > 1:
        return len(v.args)
    return 0


def _pred_text(response: str, gold: Parsed, cfg: ExtractConfig, limits: MathLimits) -> Extracted:
    """Read the prediction the way the gold is written: a multi-answer gold takes the last
    boxes (one per answer) when the response boxes them separately."""
    n = _multi(gold)
    if n and "boxed" in cfg.priority and len(response) <= limits.max_response_chars:
        boxes = all_boxed(response, limits)
        if len(boxes) > 1:
            return Extracted(",".join(boxes[-n:]), "boxed")
    return extract_answer(response, cfg, limits)


def _prediction(
    response: str, gold: Parsed, extract: ExtractConfig | None, lim: MathLimits
) -> tuple[Extracted, Parsed]:
    """The extracted answer and its parsed form, read the way the gold answer asks.

    Raises:
        MathUnparsedError: no answer is found, or it does not parse.
    """
    choices = isinstance(gold.value, str) and gold.text == gold.value and len(gold.value) == 1
    if choices:
        found = extract_answer(response, extract, lim, choices=True)
        return found, Parsed(found.text, found.text)
    found = _pred_text(response, gold, extract or ExtractConfig(), lim)
    if isinstance(gold.value, str):  # a text answer: compared as text
        return found, Parsed(found.text, found.text)
    numbers = not isinstance(gold.value, sympy.Set | sympy.Tuple)
    if len(found.text) <= lim.max_answer_chars:
        if normalized(found.text, numbers=numbers) == (gold.text, gold.percent):
            return found, gold  # the same normalised text: the same answer, nothing to parse
    return found, parse_answer(found.text, lim, numbers=numbers)


def verify_math(
    task: MathTask,
    response: str,
    *,
    limits: MathLimits | None = None,
    extract: ExtractConfig | None = None,
    shaping: MathShaping | None = None,
    seed: bytes | None = None,
) -> Verdict:
    """Check a response; never raises for any response text.

    Args:
        task: the task (gold answer, declared precision).
        response: the model text.
        limits: caps (default ``MathLimits()``).
        extract: extraction priority (default ``ExtractConfig()``).
        shaping: rewards (default ``MathShaping()``).
        seed: the key of the random-point identity test (16 fresh random bytes when None);
            when the test was used, ``detail`` ends with ``seed=<hex>``, which replays it.

    Returns:
        CORRECT, WRONG_ANSWER or UNPARSED, with the parsed forms in ``detail``, the
        extracted answer in ``answer`` and the ``math.route.v1`` family.
    """
    lim = limits or MathLimits()
    shp = shaping or MathShaping()
    if len(response) <= lim.max_response_chars:
        response = rendered(response)  # only what renders counts (extract.rendered)
    family = kappa_route(response[: lim.max_response_chars])
    try:
        gold = parse_gold(task, lim)
    except MathUnparsedError as e:
        return Verdict(
            Status.INFRA_ERROR, 0.0, VERIFIER, family=family, detail=f"gold does not parse: {e}"
        )
    try:
        found, pred = _prediction(response, gold, extract, lim)
    except (MathUnparsedError, *_ANSWER_FAULTS) as e:
        why = str(e) if isinstance(e, MathUnparsedError) else f"the answer raised {e!r:.120}"
        return Verdict(
            Status.UNPARSED,
            shp.unparsed,
            VERIFIER,
            family=family,
            detail=f"gold {_form(gold)}; pred unparsed: {why}",
            answer="",
        )
    answer = found.text
    test = IdentityTest(seed=seed if seed is not None else secrets.token_bytes(16))
    fault = ""
    try:
        same = equivalent(gold, pred, precision_digits=task.precision_digits, test=test)
    except _ANSWER_FAULTS as e:  # the answer's own overflow or depth: its verdict, logged
        same, fault = False, f"; the comparison raised {e!r:.120}"
    detail = f"gold {_form(gold)} [{gold.text[:200]}]; pred {_form(pred)} [{pred.text[:200]}]"
    detail += f" from {found.source}{fault}"
    if test.drawn:
        detail += f"; identity test: {test.drawn} random points, seed={test.seed.hex()}"
    return Verdict(
        Status.CORRECT if same else Status.WRONG_ANSWER,
        shp.correct if same else shp.wrong_answer,
        VERIFIER,
        family=family,
        detail=detail,
        answer=answer[:1024],
    )
