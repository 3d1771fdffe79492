"""Settings for test servers that check no math: the math domain starts on first use.

Example::

    from server_helpers import LAZY_MATH, LAZY_MATH_SECTION

    CertdServer(CertdConfig(data_dir=tmp_path / "d", listen="127.0.0.1:0", math=LAZY_MATH))
    Cluster(tmp_path, config={"math": LAZY_MATH_SECTION})        # a JSON config section

By default (``math.warm_start``) a certd starts the math worker pool and loads the first-step
embedding model in the background as soon as it starts: two worker processes that parse a
warm-up set and then prime the LaTeX grammar for about 10 CPU-seconds each, and the model in
the serving process. A test server that never checks a math answer would spend that CPU beside
the test on a shared machine, and stop it half done. With these settings math starts on the
first math request instead, as it does with ``warm_start: false`` in production.

The warm start itself keeps its tests, on the default config: ``test_math_exactness_service``
(health ``certd.v1.Verifier/math`` NOT_SERVING until ready, then SERVING; a request during the
warm-up gets UNAVAILABLE naming the stage), ``test_math_service``, ``test_component_health``
and ``test_orphans``.
"""

from __future__ import annotations

from typing import Any

from certd.config import MathConfig

__all__ = ["LAZY_MATH", "LAZY_MATH_SECTION"]

LAZY_MATH = MathConfig(warm_start=False)
LAZY_MATH_SECTION: dict[str, Any] = {"warm_start": False}
