"""Importing this module warms the importing process for math checking (forkserver preload).

Example::

    import certd.domains.math.preload  # parses WARM_ANSWERS once
"""

from __future__ import annotations

from .warmup import warm_up

__all__: list[str] = []

warm_up()
