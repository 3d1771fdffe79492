"""The versioned names the code domain stamps on its results.

Example:
    >>> from certd.domains.code import KAPPA_FIRST_CALL, KAPPA_FIRST_TOOL, VERIFIER
    >>> VERIFIER, KAPPA_FIRST_CALL, KAPPA_FIRST_TOOL
    ('code@1.0.0', 'code.first-call.v1', 'code.first-tool.v1')

Bump ``VERIFIER`` whenever a verdict could change for some response, a κ name whenever a label
could change for some program or trajectory.
"""

from __future__ import annotations

__all__ = ["KAPPA_FIRST_CALL", "KAPPA_FIRST_TOOL", "VERIFIER"]

VERIFIER = "code@1.0.0"
"""The verifier's name@version, carried by every verdict."""

KAPPA_FIRST_CALL = "code.first-call.v1"
"""κ: the first call the solution makes in execution order of its entry function."""

KAPPA_FIRST_TOOL = "code.first-tool.v1"
"""κ: the first tool named in a tool-calling trajectory."""
