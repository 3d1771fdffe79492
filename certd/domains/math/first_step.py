"""κ ``math.first-step.v1``: the first substantive solution step and its semantic cluster.

Example:
    >>> first_step_text("Let's think step by step. We substitute u = x^2, so the equation "
    ...                 "becomes u^2 - 5u + 4 = 0.")
    'We substitute u = x^2, so the equation becomes u^2 - 5u + 4 = 0.'
    >>> first_step_text(r"\\boxed{4}") is None
    True
    >>> nearest_move([1.0, 0.0], [("factor", [0.0, 1.0]), ("substitute", [0.9, 0.1])])
    'substitute'

**First substantive step.** The response (after a leading ``<think>``) is cut into sentences
(at ``.``/``!``/``?`` followed by a space, and at line breaks). A response that
``math.route.v1`` routes ``direct`` (it opens with the answer, or is a short answer) has no
step. Preamble sentences are skipped:
those that only announce work ("Let's think step by step", "Okay, so I need to find …",
"We need to find …", "To solve this problem, …" with no math after it, "The problem asks …").
A preamble sentence that names a move (``MOVE_WORDS``: substitute, factor, apply, use,
theorem, formula, …) is kept. The first remaining sentence that writes math (a digit, ``=``,
``$``, a LaTeX command) or names a move is the step; it is cut to 300 characters. A
response with none (a bare answer) has no first step: its label is ``none``.

**Clusters.** The step is embedded with the packaged all-MiniLM-L6-v2 model
(``certd.kappa.embedder``) and assigned to the nearest of ``MOVES``, a fixed, ordered list
of 32 solution moves (the theorem used, the decomposition chosen, the substitution made), each
given by a few exemplar sentences: the move whose closest exemplar has the highest cosine
similarity wins; ties go to the earlier move. The assignment is a pure function of the
step's text, so it is deterministic, needs no state, and Certify recomputes it from the
witness alone. Within one task, two witnesses whose first steps fall in one cluster carry the
same label and the same canonical key (``first-step:<move>``), so the gate treats them as one
family. The κ version names the model file's SHA-256 and the move list's digest.
"""

from __future__ import annotations

import hashlib
import math
import re
from collections.abc import Sequence

from certd.domains.verdict import Family

from .names import KAPPA_FIRST_STEP
from .route import route_of

__all__ = [
    "MAX_SEQ_TOKENS",
    "MOVES",
    "MOVE_WORDS",
    "NO_STEP",
    "first_step_family",
    "first_step_text",
    "kappa_first_step_name",
    "moves_digest",
    "nearest_move",
]

NO_STEP = "none"
MAX_SEQ_TOKENS = 64  # the embedding reads at most this many word pieces of a step

# (label, exemplar sentences embedded as the cluster's prototypes). Order matters only for ties.
MOVES: tuple[tuple[str, tuple[str, ...]], ...] = (
    (
        "substitute",
        (
            "Let u = x^2, substituting a new variable.",
            "Substitute t = x + 1.",
            "Put y = 2x so the equation becomes simpler.",
        ),
    ),
    (
        "factor",
        (
            "Factor the expression.",
            "x^2 - 5x + 6 = (x - 2)(x - 3).",
            "Factoring out the common factor gives x(x + 4).",
        ),
    ),
    ("expand", ("Expand the product and collect like terms.", "(x+1)^2 = x^2 + 2x + 1.")),
    ("quadratic-formula", ("Apply the quadratic formula.", "x = (-b ± sqrt(b^2 - 4ac)) / 2a.")),
    ("complete-square", ("Complete the square.", "x^2 + 6x = (x + 3)^2 - 9.")),
    (
        "set-up-equation",
        (
            "Set up an equation from the conditions.",
            "Let x be the number of apples; then 3x + 2 = 20.",
        ),
    ),
    ("system", ("Solve the system of equations.", "Adding the two equations eliminates y.")),
    (
        "pythagorean",
        ("By the Pythagorean theorem, a^2 + b^2 = c^2.", "The hypotenuse is sqrt(3^2 + 4^2) = 5."),
    ),
    (
        "trig-identity",
        (
            "Use the identity sin^2 x + cos^2 x = 1.",
            "Using the double-angle formula sin 2x = 2 sin x cos x.",
        ),
    ),
    (
        "law-of-sines-cosines",
        (
            "By the law of cosines, c^2 = a^2 + b^2 - 2ab cos C.",
            "By the law of sines, a / sin A = b / sin B.",
        ),
    ),
    (
        "coordinates",
        ("Place the points in the coordinate plane.", "Let A = (0, 0) and B = (4, 0)."),
    ),
    (
        "area-volume",
        (
            "The area of the triangle is one half base times height.",
            "The volume of the cylinder is pi r^2 h.",
        ),
    ),
    ("similar-triangles", ("Triangles ABC and DEF are similar, so the sides are proportional.",)),
    (
        "vieta",
        ("By Vieta's formulas, the sum of the roots is -b/a.", "The product of the roots is c/a."),
    ),
    ("modular", ("Work modulo 7.", "2^10 ≡ 1 (mod 11).", "The remainder when divided by 9.")),
    ("prime-factorization", ("The prime factorization is 360 = 2^3 · 3^2 · 5.",)),
    (
        "gcd-divisibility",
        (
            "The greatest common divisor of 12 and 18 is 6.",
            "n must divide 90.",
            "The least common multiple is 60.",
        ),
    ),
    (
        "counting",
        (
            "There are 5 choose 2 = 10 ways.",
            "Count the arrangements: 4! = 24.",
            "By the multiplication principle there are 6 · 5 choices.",
        ),
    ),
    (
        "probability",
        (
            "The probability is favourable outcomes over total outcomes.",
            "P(A) = 1/2 since each flip is fair.",
        ),
    ),
    ("casework", ("Consider two cases: x ≥ 0 and x < 0.", "Case 1: n is even.")),
    (
        "recursion-pattern",
        (
            "Compute the first few terms to find a pattern.",
            "The recurrence is a_n = a_{n-1} + a_{n-2}.",
        ),
    ),
    (
        "sequence-series",
        (
            "The sum of the arithmetic series is n(a_1 + a_n)/2.",
            "The geometric series sums to a / (1 - r).",
        ),
    ),
    ("induction", ("We prove it by induction on n.", "Base case: n = 1.")),
    ("inequality", ("By AM-GM, (a + b)/2 ≥ sqrt(ab).", "By the Cauchy-Schwarz inequality.")),
    ("derivative", ("Take the derivative and set it to zero.", "f'(x) = 3x^2 - 6x = 0.")),
    ("integral", ("Integrate from 0 to 1.", "Integrating by parts with u = x.")),
    ("logarithm-exponent", ("Take logarithms of both sides.", "log_2 8 = 3 since 2^3 = 8.")),
    (
        "complex-numbers",
        ("Write z = a + bi.", "Since i^2 = -1, the product is 5.", "In polar form z = r e^{iθ}."),
    ),
    (
        "vectors-matrices",
        ("The determinant of the matrix is ad - bc.", "The dot product of the vectors is 3."),
    ),
    ("direct-computation", ("Compute directly: 12 × 15 = 180.", "Adding them up, 3 + 4 + 5 = 12.")),
    (
        "unit-conversion",
        ("Convert hours to minutes: 2 hours is 120 minutes.", "Distance equals speed times time."),
    ),
    ("function-evaluation", ("Plug x = 2 into f: f(2) = 7.", "Evaluate the function at 3.")),
)

MOVE_WORDS = frozenset(
    "substitute substituting substitution factor factoring factorize expand expanding apply "
    "applying use using plug plugging rewrite multiply multiplying divide dividing subtract "
    "square squaring theorem formula formulas identity law draw count counting cases "
    "induction modulo derivative differentiate integrate integral coordinates".split()
)

_THINK = re.compile(r"^\s*<think>\s*", re.IGNORECASE)
_SPLIT = re.compile(r"(?<=[.!?])\s+|\n+")
_PREAMBLE = re.compile(
    r"^\s*(?:okay|ok|alright|hmm|so|well|first(?:ly)?|now)?[,.\s]*"
    r"(?:let(?:'s| us| me)\s+"
    r"(?:think|solve|break|work|tackle|figure|start|see|try|begin|analy[sz]e)"
    r"|i\s+(?:need|have|want|will|am|'m|'ll)|we\s+(?:need|want|are\s+asked|have\s+to)"
    r"|to\s+(?:solve|find|determine|answer)|the\s+(?:problem|question)\s+(?:asks|is|says|gives)"
    r"|this\s+(?:problem|question)|here\s+is|here's|step\s+\d+\s*:?\s*$)",
    re.IGNORECASE,
)
_MATH = re.compile(r"\d|=|\$|\\[A-Za-z]+|[+*/^<>]")
_WORDS = re.compile(r"[a-z']+")
_MAX_STEP_CHARS = 300
_MAX_SENTENCES = 40


def first_step_text(response: str) -> str | None:
    """The first substantive step of a response, or None (a bare answer, or only preamble).

    Args:
        response: the model text.

    Returns:
        The step's sentence, at most 300 characters.
    """
    if route_of(response) == "direct":
        return None  # a direct answer writes no solution step (κ math.route.v1's rules)
    body = _THINK.sub("", response[:20_000])
    for n, sentence in enumerate(_SPLIT.split(body)):
        if n >= _MAX_SENTENCES:
            break
        s = sentence.strip()
        if len(s) < 3:
            continue
        has_math = bool(_MATH.search(s))
        words = set(_WORDS.findall(s.lower()))
        if _PREAMBLE.match(s) and not (has_math and len(s) > 40) and not words & MOVE_WORDS:
            continue
        if has_math or words & MOVE_WORDS:
            if re.fullmatch(r"\$*\s*\\boxed\{.*\}\s*\$*\.?", s):
                return None  # the first "step" is the answer itself
            return s[:_MAX_STEP_CHARS]
    return None


def _cosine(a: Sequence[float], b: Sequence[float]) -> float:
    dot = sum(x * y for x, y in zip(a, b, strict=True))
    na = math.sqrt(sum(x * x for x in a))
    nb = math.sqrt(sum(y * y for y in b))
    return dot / (na * nb) if na and nb else 0.0


def nearest_move(vector: Sequence[float], prototypes: Sequence[tuple[str, Sequence[float]]]) -> str:
    """The label of the prototype nearest to ``vector`` by cosine (ties: the earlier one).

    A move with several exemplars appears once per exemplar; its best one counts.

    Args:
        vector: the step's embedding.
        prototypes: (label, embedding) of each move, in ``MOVES`` order.

    Raises:
        ValueError: no prototypes.

    Returns:
        The nearest move's label.
    """
    if not prototypes:
        raise ValueError("no prototypes")
    best, best_sim = prototypes[0][0], -2.0
    for label, proto in prototypes:
        sim = round(_cosine(vector, proto), 6)  # rounding keeps ties stable across BLAS builds
        if sim > best_sim:
            best, best_sim = label, sim
    return best


def moves_digest() -> str:
    """SHA-256 (first 8 hex) of the move list and the token limit: part of the κ version."""
    text = "\n".join(f"{label}\t{chr(31).join(examples)}" for label, examples in MOVES)
    text += f"\nmax_seq_tokens={MAX_SEQ_TOKENS}"
    return hashlib.sha256(text.encode("utf-8")).hexdigest()[:8]


def kappa_first_step_name(model_sha256: str) -> str:
    """The full κ name: ``math.first-step.v1+minilm.<model sha256[:12]>.<moves digest>``.

    Args:
        model_sha256: hex SHA-256 of the embedding model's weights file.

    Returns:
        The κ name@version string.
    """
    return f"{KAPPA_FIRST_STEP}+minilm.{model_sha256[:12]}.{moves_digest()}"


def first_step_family(kappa: str, move: str, step: str | None) -> Family:
    """The family of a response under ``math.first-step.v1``.

    Args:
        kappa: the full κ name (``kappa_first_step_name``).
        move: the cluster label (``NO_STEP`` when there is no step).
        step: the step's text (None when there is none).

    Returns:
        The label, with fields ``move`` and ``step``.
    """
    return Family(kappa, move, {"move": move, "step": (step or "")[:_MAX_STEP_CHARS]})
