"""The math checker: the killable worker pool plus the two math κs.

Example::

    checker = MathChecker.from_config(cfg.math)
    v = checker.verify(MathTask(gold="3"), "We factor ... so \\\\boxed{3}", canonical=True)
    v.family.kappa      # 'math.first-step.v1+minilm.53aa51172d14.74314dfc' (default κ)
    v.labels[0].label   # 'step-by-step' (math.route.v1)
    v.canonical         # 'first-step:factor'
    checker.close()

Checking (extract, parse, compare) runs in ``MathPool`` worker processes under a hard
deadline and a memory cap. The first-step label needs the embedding model, which runs here,
in the serving process, batched per call and serialised by a lock. The default κ is
``math.first-step.v1+…`` when ``MathConfig.first_step`` is on and the model package is
installed; ``math.route.v1`` otherwise. ``canonical`` (the gate's same-solution key) is
``first-step:<move>``: witnesses whose first steps fall in one cluster are one family.
With ``warm_start`` (the default) the pool and the model start at construction, in a
background thread that logs each stage; ``ready`` is set when both are up, and a check that
arrives before waits up to ``ready_wait_s`` for it, then raises ``WarmingUpError`` naming the
stage (gRPC UNAVAILABLE) instead of hanging. ``on_ready`` lets the server flip the domain's
health status. Without ``warm_start`` they start on first use.
"""

from __future__ import annotations

import functools
import importlib.util
import logging
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import replace
from pathlib import Path
from typing import TYPE_CHECKING, NoReturn

from certd.authority.checker import CheckerBase
from certd.authority.components import ComponentHealth
from certd.authority.jobs import current_job
from certd.authority.mathpool import MathPool, MathWork, PoolClosedError, preload_forkserver
from certd.domains import math as dm
from certd.domains.math.config import MathConfig
from certd.domains.math.first_step import (
    first_step_family,
    first_step_text,
    kappa_first_step_name,
)
from certd.domains.verdict import Status, Verdict
from certd.errors import ConfigError, UnsupportedError, WarmingUpError
from certd.kappa.weights import model_dir, sha256_file
from sandboxes.errors import CheckCancelledError

if TYPE_CHECKING:  # the model (torch, NumPy) loads on first use
    from certd.kappa.embedder import StepEmbedder

__all__ = ["MathChecker"]

log = logging.getLogger("certd.math")

# What the pool's workers import to check (``certd.domains.math.verify``): found here, not
# imported, so a server that never checks math loads none of it, and one without the math
# extra still refuses to serve math at start (``Checkers`` names the extra in one line).
_WORKER_NEEDS = ("sympy", "mpmath", "latex2sympy2_extended")


def _require_the_math_extra() -> None:
    """Raise ModuleNotFoundError (naming the module) when the math extra is not installed."""
    for name in _WORKER_NEEDS:
        if importlib.util.find_spec(name) is None:
            raise ModuleNotFoundError(f"No module named {name!r}", name=name)


_require_the_math_extra()


@functools.lru_cache(maxsize=4)
def _weights_sha256(path: str, size: int, mtime_ns: int) -> str:
    """The model file's SHA-256, hashed once per (path, size, mtime) in this process."""
    return sha256_file(Path(path))


class MathChecker(CheckerBase):
    """Math, checked in a killable worker pool; labelled by route and first step.

    Args:
        cfg: the math config section.
    """

    domain = "math"
    verifier = dm.VERIFIER

    def __init__(self, cfg: MathConfig) -> None:
        self.cfg = cfg
        self.work = MathWork(
            limits=dm.MathLimits(
                max_response_chars=cfg.max_response_chars,
                max_gold_chars=cfg.max_gold_chars,
                max_answer_chars=cfg.max_answer_chars,
                max_brace_depth=cfg.max_brace_depth,
                max_fracs=cfg.max_fracs,
                max_tree_nodes=cfg.max_tree_nodes,
                max_integer_digits=cfg.max_integer_digits,
                max_power_digits=cfg.max_power_digits,
            ),
            extract=dm.ExtractConfig(priority=cfg.extract_priority, boxed=cfg.boxed),
            shaping=dm.MathShaping(
                correct=cfg.reward_correct,
                wrong_answer=cfg.reward_wrong_answer,
                unparsed=cfg.reward_unparsed,
            ),
            prime=cfg.prime_grammar,
            nice=cfg.worker_nice,
        )
        self.first_step_kappa = ""
        if cfg.first_step:
            try:
                weights = model_dir() / "model.safetensors"
                stat = weights.stat()
                digest = _weights_sha256(str(weights), stat.st_size, stat.st_mtime_ns)
                self.first_step_kappa = kappa_first_step_name(digest)
            except (ConfigError, OSError):
                self.first_step_kappa = ""  # no model package: route only
        self.kappa = self.first_step_kappa or dm.KAPPA_ROUTE
        self.kappas: tuple[str, ...] = (
            (self.first_step_kappa, dm.KAPPA_ROUTE) if self.first_step_kappa else (dm.KAPPA_ROUTE,)
        )
        self._pool: MathPool | None = None
        preload_forkserver()  # before the Countdown pool starts the forkserver
        self._embedder: StepEmbedder | None = None
        self._start_lock = threading.Lock()
        self._build_lock = threading.Lock()
        self._embed_lock = threading.Lock()
        self._closed = False
        self.ready = threading.Event()
        self.stage = "not started"
        self._started = time.monotonic()
        self._on_ready: list[Callable[[], None]] = []
        self._warmed = False  # ready, and not because the warm-up failed
        if cfg.warm_start:
            threading.Thread(target=self._warm, name="math-warm", daemon=True).start()
        else:
            self.stage = "ready (starts on first use)"
            self._warmed = True
            self.ready.set()

    def _warm(self) -> None:
        """Start the pool, then load the model, logging each stage; then call ``on_ready``."""
        failed: list[Exception] = []

        def load_model() -> None:  # in parallel: the workers start in their own processes
            try:
                self._get_embedder()
            except (OSError, RuntimeError, ConfigError) as e:
                failed.append(e)

        loader = None
        try:
            if self.first_step_kappa:
                loader = threading.Thread(target=load_model, name="math-model", daemon=True)
                loader.start()
                self._stage(
                    f"starting {self.cfg.workers} math workers and loading the first-step "
                    "embedding model"
                )
            else:
                self._stage(f"starting {self.cfg.workers} math workers (grammar warm-up)")
            self._get_pool()
            if loader is not None:
                self._stage("math workers ready; loading the first-step embedding model")
                loader.join()
                if failed:
                    raise failed[0]
        except (OSError, RuntimeError, ConfigError, UnsupportedError) as e:
            self._stage(f"warm-up failed ({e}); checks will start the pool on first use")
            self.ready.set()  # requests go on: the lazy path answers or gives INFRA_ERROR
            return
        self._stage("ready")
        self._warmed = True
        self.ready.set()
        for callback in list(self._on_ready):
            callback()

    def _stage(self, stage: str) -> None:
        self.stage = stage
        log.info("math warm-up: %s (%.1f s since start)", stage, self._elapsed())

    def _elapsed(self) -> float:
        return time.monotonic() - self._started

    def on_ready(self, callback: Callable[[], None]) -> None:
        """Call ``callback`` (from the warm-up thread) once the domain is ready; at once when
        it already is."""
        self._on_ready.append(callback)
        if self.ready.is_set() and self._warmed:
            callback()

    def wait_ready(self, timeout_s: float | None = None) -> None:
        """Wait for the warm-up, at most ``timeout_s`` (default ``cfg.ready_wait_s``).

        Raises:
            WarmingUpError: still warming up after the wait; the message names the stage.
        """
        wait = self.cfg.ready_wait_s if timeout_s is None else timeout_s
        if self.ready.wait(wait):
            return
        raise WarmingUpError(
            f"math domain is warming up: {self.stage} ({self._elapsed():.0f} s since start); "
            "retry, or watch health service certd.v1.Verifier/math until SERVING"
        )

    def _get_pool(self) -> MathPool:
        with self._build_lock:  # one start at a time; close() never waits for it
            with self._start_lock:
                if self._pool is not None:
                    return self._pool
                if self._closed:
                    raise UnsupportedError("the math checker is closed")
            pool = MathPool(
                self.work,
                workers=self.cfg.workers,
                deadline_s=self.cfg.deadline_s,
                memory_bytes=self.cfg.memory_bytes,
            )
            with self._start_lock:
                if self._closed:  # closed while starting: stop what was started
                    pool.close()
                    raise UnsupportedError("the math checker is closed")
                self._pool = pool
                return pool

    def _get_embedder(self) -> StepEmbedder:
        with self._embed_lock:
            if self._embedder is None:
                from certd.kappa.embedder import StepEmbedder

                self._embedder = StepEmbedder.load(
                    threads=self.cfg.embed_threads, screen=self.cfg.embed_screen
                )
                if self._embedder.kappa != self.first_step_kappa:
                    raise ConfigError(
                        f"model changed on disk: κ {self._embedder.kappa}, "
                        f"expected {self.first_step_kappa}"
                    )
            return self._embedder

    def _label(
        self, verdicts: list[Verdict], steps: list[str | None], moves: list[str], canonical: bool
    ) -> list[Verdict]:
        """Move the route label to ``labels`` and put the first-step label in ``family``."""
        if not self.first_step_kappa:
            return verdicts
        out = []
        for v, step, move in zip(verdicts, steps, moves, strict=True):
            if v.status is Status.INFRA_ERROR:
                out.append(v)
                continue
            route = v.family
            out.append(
                replace(
                    v,
                    family=first_step_family(self.first_step_kappa, move, step),
                    labels=(route,) if route is not None else (),
                    canonical=f"first-step:{move}" if canonical else "",
                )
            )
        return out

    def verify(self, task: dm.MathTask, response: str, *, canonical: bool = False) -> Verdict:
        """Check one response (thread-safe; never raises for any response text).

        Raises:
            WarmingUpError: the domain is still warming up after ``ready_wait_s``.
        """
        return self._check([(task, response)], canonical=canonical)[0]

    def verify_batch(self, pairs: Sequence[tuple[dm.MathTask, str]]) -> list[Verdict]:
        """Check pairs on the worker pool, order preserved.

        Raises:
            WarmingUpError: the domain is still warming up after ``ready_wait_s``.
        """
        return self._check(pairs, canonical=False)

    def verify_batch_timed(
        self, pairs: Sequence[tuple[dm.MathTask, str]]
    ) -> list[tuple[Verdict, float]]:
        """``verify_batch`` with each pair's own check time in milliseconds (the verdict's
        ``elapsed_ms``: from handing it to a worker to its answer), not the batch's mean.

        Raises:
            WarmingUpError: the domain is still warming up after ``ready_wait_s``.
        """
        times: list[float] = []
        verdicts = self._check(pairs, canonical=False, times=times)
        return list(zip(verdicts, times or [0.0] * len(verdicts), strict=True))

    def _check(
        self,
        pairs: Sequence[tuple[dm.MathTask, str]],
        *,
        canonical: bool,
        times: list[float] | None = None,
    ) -> list[Verdict]:
        self.wait_ready()
        try:
            pool = self._get_pool()
            steps: list[str | None] = []
            moves: list[str] = []
            failed: list[BaseException] = []
            labeller = None
            if self.first_step_kappa:
                # Embed first steps here while the workers check the answers.
                def label() -> None:
                    try:
                        steps.extend(first_step_text(r) for _, r in pairs)
                        moves.extend(self._get_embedder().moves(steps, spare=pool.idle))
                    except (OSError, RuntimeError, ConfigError) as e:
                        failed.append(e)

                labeller = threading.Thread(target=label, name="math-first-step")
                labeller.start()
            job = current_job()
            if job is None:
                timed = pool.verify_many_timed(pairs)
            else:
                timed = pool.verify_many_timed(pairs, key=job.key, cancel=job.cancel)
            verdicts = [v for v, _ in timed]
            if times is not None:
                times.extend(ms for _, ms in timed)
            if labeller is not None:
                labeller.join()
                if failed:
                    raise failed[0]
            return self._label(verdicts, steps, moves, canonical)
        except CheckCancelledError:
            why = "the request was cancelled before this check finished"
            return [Verdict(Status.INFRA_ERROR, 0.0, self.verifier, detail=why) for _ in pairs]
        except (OSError, RuntimeError, ConfigError, UnsupportedError, PoolClosedError) as e:
            why = f"math checker unavailable: {e}"
            return [Verdict(Status.INFRA_ERROR, 0.0, self.verifier, detail=why) for _ in pairs]

    def enumerate(self, task: dm.MathTask) -> NoReturn:
        """Math families are not enumerable: they become feasible when a witness is certified.

        Raises:
            UnsupportedError: always.
        """
        raise UnsupportedError("the math domain cannot enumerate its families")

    def components(self, *, heal: bool = False) -> list[ComponentHealth]:
        """The math pool's and the embedding model's state (health checks, metrics).

        Args:
            heal: first replace idle workers that died (the health monitor does).
        """
        pool = self._pool
        if pool is None:
            out = [ComponentHealth("math_pool", False, self.cfg.workers, 0)]
        else:
            if heal:
                pool.heal()
            alive = pool.alive()
            problem = None
            if alive < pool.workers:
                problem = f"math pool: {alive} of {pool.workers} workers alive"
            out = [
                ComponentHealth("math_pool", True, pool.workers, alive, problem, fatal=alive == 0)
            ]
        if self.first_step_kappa:
            loaded = self._embedder is not None
            out.append(ComponentHealth("embedder", loaded, 1, int(loaded)))
        return out

    def close(self) -> None:
        """Stop the worker pool (a pool still starting is stopped when its start ends)."""
        with self._start_lock:
            self._closed = True
            pool, self._pool = self._pool, None
        if pool is not None:
            pool.close()
