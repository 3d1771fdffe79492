"""The versioned names this domain stamps on its results.

Example:
    >>> from certd.domains.countdown import KAPPA, VERIFIER
    >>> VERIFIER, KAPPA
    ('countdown@1.0.0', 'countdown.first-op.v1')

Bump ``VERIFIER`` whenever a verdict could change for some response, and ``KAPPA`` whenever a
label could change for some expression or text.
"""

from __future__ import annotations

__all__ = ["KAPPA", "VERIFIER"]

VERIFIER = "countdown@1.0.0"
"""The verifier's name@version, carried by every verdict."""

KAPPA = "countdown.first-op.v1"
"""The κ name@version of the first-op partition."""
