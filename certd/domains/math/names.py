"""Names and versions of the math verifier and its κs.

Example:
    >>> VERIFIER, KAPPA_ROUTE
    ('math@2.0.0', 'math.route.v1')
"""

from __future__ import annotations

__all__ = ["KAPPA_FIRST_STEP", "KAPPA_ROUTE", "VERIFIER"]

VERIFIER = "math@2.0.0"
KAPPA_ROUTE = "math.route.v1"
# The full κ name carries the embedding model's hash: see ``first_step.kappa_first_step_name``.
KAPPA_FIRST_STEP = "math.first-step.v1"
