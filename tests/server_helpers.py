"""Settings for test servers: math starts on first use, no Countdown worker pool.

Example::

    from server_helpers import LAZY_MATH, LAZY_MATH_SECTION, NO_POOL

    CertdServer(
        CertdConfig(
            data_dir=tmp_path / "d", listen="127.0.0.1:0", math=LAZY_MATH, countdown=NO_POOL
        )
    )
    Cluster(tmp_path, config={"math": LAZY_MATH_SECTION})        # a JSON config section

By default (``math.warm_start``) a certd starts the math worker pool and loads the first-step
embedding model in the background as soon as it starts: two worker processes that parse a
warm-up set and then prime the LaTeX grammar for about 10 CPU-seconds each, and the model in
the serving process. A test server that never checks a math answer would spend that CPU beside
the test on a shared machine, and stop it half done. With these settings math starts on the
first math request instead, as it does with ``warm_start: false`` in production; and once
started, its workers do not prime the grammar in idle time (``prime_grammar: false``: about
10 CPU-seconds per worker spent beside the tests, warming only, never a different parse;
``test_math_pool`` and ``tests/unit/math/test_math_prime.py`` test the priming).

The warm start itself keeps its tests, on the default config: ``test_math_exactness_service``
(health ``certd.v1.Verifier/math`` NOT_SERVING until ready, then SERVING; a request during the
warm-up gets UNAVAILABLE naming the stage), ``test_math_service``, ``test_component_health``
and ``test_orphans``.

``NO_POOL`` (``countdown.verify_workers: 0``): the server checks every Countdown batch in
process instead of starting two worker processes at start (about 2 s of CPU each time on this
machine, before the first test line runs). Only batches of ``verify_pool_min_batch`` (256)
items or more ever reach the pool, and no test that uses ``NO_POOL`` sends one; the pool keeps
its own tests (``test_verify_pool``, ``test_orphans``, ``test_observability``'s worker gauges,
and the module-shared ``certd_server`` of ``tests/conftest.py``, which runs it).
"""

from __future__ import annotations

from typing import Any

from certd.config import CountdownConfig, MathConfig

__all__ = ["LAZY_MATH", "LAZY_MATH_SECTION", "NO_POOL", "NO_POOL_SECTION"]

LAZY_MATH = MathConfig(warm_start=False, prime_grammar=False)
LAZY_MATH_SECTION: dict[str, Any] = {"warm_start": False, "prime_grammar": False}
NO_POOL = CountdownConfig(verify_workers=0)
NO_POOL_SECTION: dict[str, Any] = {"verify_workers": 0}
