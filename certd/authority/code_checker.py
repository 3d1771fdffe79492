"""The code domain's checker: programs run in a warm sandbox pool, judged outside it.

Example::

    checker = CodeChecker(CertdConfig().code)
    task = CodeTask.io_cases("python", [IoCase("2 3\\n", "5\\n")])
    checker.verify(task, "```python\\nprint(sum(map(int, input().split())))\\n```").status
    # Status.CORRECT
    checker.close()

The pool (bwrap by default, Docker from the config) starts on the first check, so a server that
never sees a code task never starts a sandbox. Every failure of the sandbox machinery (no bwrap,
no engine, a full queue) is an INFRA_ERROR verdict, never a wrong answer.

Every sandbox run is scheduled for the current request (``certd.authority.jobs``): the pool
hands workers out round-robin across requests, and a cancelled request's queued runs are
dropped and its running ones killed. A batch runs at most ``pool_size`` of its checks at once
in sandboxes, on threads of its own (``batch_threads``, twice ``pool_size`` by default: the
extra ones prepare and judge while the others' checks run), so it never occupies a queue that
other requests wait in.
"""

from __future__ import annotations

import contextvars
import dataclasses
import logging
import threading
import time
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from typing import NoReturn

from certd.authority.checker import CheckerBase
from certd.authority.components import ComponentHealth
from certd.authority.jobs import Job, current_job, running
from certd.domains import code as cc
from certd.domains.code.config import CodeConfig
from certd.domains.verdict import Status, Verdict
from certd.errors import UnsupportedError
from sandboxes import ExecResult, ExecStatus, Limits, Program, Sandbox, SandboxError, WarmPool

__all__ = ["CodeChecker", "make_backend"]

_MAX_ANSWER_CHARS = 65_536
_log = logging.getLogger("certd.code")


def _request_id() -> str:
    """The serving RPC's request id (the service's ``certd_request_id`` context variable)."""
    for var, value in contextvars.copy_context().items():
        if var.name == "certd_request_id" and value:
            return str(value)
    return "-"


def _limits(cfg: CodeConfig, *, compile_step: bool = False) -> Limits:
    return Limits(
        cpu_time_s=cfg.compile_cpu_time_s if compile_step else cfg.cpu_time_s,
        wall_time_s=cfg.compile_wall_time_s if compile_step else cfg.wall_time_s,
        memory_bytes=cfg.compile_memory_bytes if compile_step else cfg.memory_bytes,
        processes=cfg.processes,
        output_bytes=cfg.compile_output_bytes if compile_step else cfg.output_bytes,
        file_size_bytes=max(cfg.file_size_bytes, cfg.compile_output_bytes)
        if compile_step
        else cfg.file_size_bytes,
        open_files=cfg.open_files,
        workdir_bytes=cfg.workdir_bytes,
    )


def _ceiling(a: Limits, b: Limits) -> Limits:
    return Limits(
        cpu_time_s=max(a.cpu_time_s, b.cpu_time_s),
        wall_time_s=max(a.wall_time_s, b.wall_time_s),
        memory_bytes=max(a.memory_bytes, b.memory_bytes),
        processes=max(a.processes, b.processes),
        output_bytes=max(a.output_bytes, b.output_bytes),
        file_size_bytes=max(a.file_size_bytes, b.file_size_bytes),
        open_files=max(a.open_files, b.open_files),
        workdir_bytes=max(a.workdir_bytes, b.workdir_bytes),
    )


def make_backend(cfg: CodeConfig) -> Sandbox:
    """The configured sandbox backend, its ceiling covering test runs and compiles.

    Where templates live across runs (bwrap, Docker), they preload the function-test harness
    (``Sandbox.preload``): a run finds it in ``sys.modules`` instead of loading it.

    Args:
        cfg: The code config.

    Returns:
        The backend.

    Raises:
        SandboxUnavailableError: It cannot run here.
    """
    box = _backend(cfg)
    if not box.fresh_per_run:
        box.preload(cc.HARNESS_MODULE, cc.HARNESS_SOURCE)
    return box


def _backend(cfg: CodeConfig) -> Sandbox:
    ceiling = _ceiling(_limits(cfg), _limits(cfg, compile_step=True))
    if cfg.backend == "docker":
        from sandboxes.docker import DockerOptions, DockerSandbox

        return DockerSandbox(
            ceiling,
            DockerOptions(image=cfg.docker_image, runtime=cfg.docker_runtime, cpus=cfg.docker_cpus),
        )
    if cfg.backend == "gvisor":
        from sandboxes.gvisor import GvisorSandbox

        return GvisorSandbox(ceiling)
    from sandboxes import BwrapSandbox

    return BwrapSandbox(ceiling)


class CodeChecker(CheckerBase):
    """Checks code responses (Python function tests, stdin/stdout cases in Python, C, C++)."""

    domain = "code"
    kappa = cc.KAPPA_FIRST_CALL
    kappas = (cc.KAPPA_FIRST_CALL, cc.KAPPA_FIRST_TOOL)
    verifier = cc.VERIFIER

    @property
    def isolation(self) -> str:  # type: ignore[override]
        """The sandbox backend ("bwrap", "docker", "docker:<runtime>")."""
        runtime = self.cfg.docker_runtime
        return f"docker:{runtime}" if self.cfg.backend == "docker" and runtime else self.cfg.backend

    def __init__(self, cfg: CodeConfig, pool: WarmPool | None = None) -> None:
        """Configure; the pool starts on first use unless one is given.

        Args:
            cfg: The code config.
            pool: A ready pool to use instead (tests, benchmarks).
        """
        self.cfg = cfg
        self.task_limits = cc.CodeLimits(
            max_program_bytes=cfg.max_program_bytes,
            max_cases=cfg.max_cases,
            max_case_bytes=cfg.max_case_bytes,
            max_response_bytes=cfg.max_response_bytes,
        )
        self.run_limits = _limits(cfg)
        self.compile_limits = _limits(cfg, compile_step=True)
        self._pool = pool
        self._owns_pool = pool is None
        self._lock = threading.Lock()
        self._closed = False

    def pool(self) -> WarmPool:
        """The warm pool, started on first use.

        Raises:
            SandboxError: The backend cannot run here.
        """
        with self._lock:
            if self._closed:
                raise SandboxError("the code checker is closed")
            if self._pool is None:
                self._pool = WarmPool(
                    make_backend(self.cfg),
                    size=self.cfg.pool_size,
                    max_runs=self.cfg.max_runs_per_worker,
                    queue_limit=self.cfg.queue_limit,
                    acquire_timeout_s=self.cfg.acquire_timeout_s,
                )
            return self._pool

    def _run(self, program: Program, limits: Limits) -> ExecResult:
        """Run on the pool; a sandbox that dies under the program twice is the program's doing.

        A sandbox that died while the program ran may have been killed by the program (it
        exhausted the sandbox's memory or lowered its supervisor's limits) or by the host. The
        program runs once more in a fresh sandbox: a second death is a RUNTIME_ERROR of the
        program, never an INFRA_ERROR it could use to drop itself from training. A run the host
        starved at its wall limit (``host_overloaded``) also runs once more; starved twice, it
        is an INFRA_ERROR (the host's fault, which the program cannot cause from its cgroup).
        The current job (if any) gives the fairness key and the cancellation of both runs.
        """
        job = current_job()

        def once() -> ExecResult:
            if job is None:
                return self.pool().run(program, limits)
            return self.pool().run(program, limits, key=job.pool_key, cancel=job.cancel)

        result = once()
        if result.host_overloaded:  # starved by the host at the wall limit: once more, then say so
            _log.warning("host overloaded during a run, running it again [%s]", _request_id())
            result = once()
        if result.status is not ExecStatus.SANDBOX_ERROR or not result.died_during_run:
            return result
        _log.warning(
            "sandbox died during a run, running it again [%s]: %s", _request_id(), result.detail
        )
        again = once()
        if again.status is not ExecStatus.SANDBOX_ERROR or not again.died_during_run:
            return again
        return dataclasses.replace(
            again,
            status=ExecStatus.RUNTIME_ERROR,
            detail=f"the program's sandbox died twice while it ran ({again.detail})",
        )

    def _verdict(self, outcome: cc.Outcome, base: Verdict | None = None) -> Verdict:
        if outcome.status is Status.CORRECT:
            reward = self.cfg.reward_correct
        elif self.cfg.partial_reward and outcome.status is not Status.INFRA_ERROR:
            reward = self.cfg.reward_wrong + outcome.pass_fraction * (
                self.cfg.reward_correct - self.cfg.reward_wrong
            )
        else:
            reward = self.cfg.reward_wrong
        detail = outcome.reason
        index = outcome.failing_case
        if index is not None and not detail.startswith(f"case {index}:"):
            detail = f"{detail} [failing case {index}]"
        if outcome.status is not Status.CORRECT and outcome.status is not Status.INFRA_ERROR:
            detail = f"{detail} [pass fraction {outcome.pass_fraction:.3f}]"
        if base is None:
            base = Verdict(status=outcome.status, reward=reward, verifier=self.verifier)
        return dataclasses.replace(base, status=outcome.status, reward=reward, detail=detail)

    def verify(self, task: cc.CodeTask, response: str, *, canonical: bool = False) -> Verdict:
        """Check one response; never raises.

        Args:
            task: The code task.
            response: The model's text.
            canonical: Fill ``Verdict.canonical`` (the gate's same-solution key).

        Returns:
            The verdict, labelled under ``code.first-call.v1`` (``family``) and
            ``code.first-tool.v1`` (``labels``).
        """
        try:
            verdict = self._verify(task, response, canonical)
        except SandboxError as exc:
            verdict = Verdict(
                status=Status.INFRA_ERROR,
                reward=0.0,
                verifier=self.verifier,
                detail=f"sandbox unavailable: {exc}"[:300],
            )
        if verdict.status is Status.INFRA_ERROR:
            _log.error("code check INFRA_ERROR [%s]: %s", _request_id(), verdict.detail)
        return verdict

    def _verify(self, task: cc.CodeTask, response: str, canonical: bool) -> Verdict:
        if len(response.encode(errors="replace")) > self.task_limits.max_response_bytes:
            return Verdict(
                status=Status.INVALID_FORMAT,
                reward=self.cfg.reward_wrong,
                verifier=self.verifier,
                detail=f"response larger than {self.task_limits.max_response_bytes} bytes",
            )
        code = cc.extract_program(response, task.language, which=self.cfg.extract)
        program = task.prompt + code if task.mode == "function" else code
        family = cc.first_call(
            program, task.entry_point if task.mode == "function" else None, task.language
        )
        labels = (cc.first_tool(response),)
        common = Verdict(
            status=Status.STATUS_UNSPECIFIED,
            reward=0.0,
            verifier=self.verifier,
            family=family,
            labels=labels,
            answer=code[:_MAX_ANSWER_CHARS],
            canonical=cc.canonical_form(code, task.language) if canonical else "",
        )
        if not code.strip():
            return self._verdict(cc.Outcome(Status.INVALID_FORMAT, "no program in the response"))
        if task.language == "python":
            error = cc.python_syntax_error(program)
            if error is not None:
                return self._verdict(cc.Outcome(Status.COMPILE_ERROR, error), common)
        if task.mode == "function":
            preloaded = cc.HARNESS_MODULE in self.pool().backend.preloads
            run = cc.function_program(task, code, preloaded=preloaded)
            result = self._run(run, self.run_limits)
            return self._verdict(cc.judge_function(task, result), common)
        binary = None
        if task.language in ("c", "cpp"):
            compiled = self._run(cc.compile_program(task, code), self.compile_limits)
            failed = cc.judge_compile(compiled)
            if failed is not None:
                return self._verdict(failed, common)
            binary = compiled.stdout
        results = [self._run(p, self.run_limits) for p in cc.case_programs(task, code, binary)]
        return self._verdict(cc.judge_cases(task, results), common)

    def verify_batch(self, pairs: Sequence[tuple[cc.CodeTask, str]]) -> list[Verdict]:
        """Check pairs, at most ``pool_size`` in sandboxes at a time, for the current job; order
        preserved.

        Args:
            pairs: (task, response) pairs.

        Returns:
            One verdict per pair (INFRA_ERROR for those the job's cancellation stopped).
        """
        return [v for v, _ in self.verify_batch_timed(pairs)]

    def verify_batch_timed(
        self, pairs: Sequence[tuple[cc.CodeTask, str]]
    ) -> list[tuple[Verdict, float]]:
        """``verify_batch`` with each pair's own check time in milliseconds (the verdict's
        ``elapsed_ms``), measured around its check, not the batch's mean."""
        job = current_job() or Job.new()

        def one(pair: tuple[cc.CodeTask, str]) -> tuple[Verdict, float]:
            started = time.perf_counter()
            with running(job):
                verdict = self.verify(pair[0], pair[1])
            return verdict, (time.perf_counter() - started) * 1e3

        if len(pairs) <= 1:
            return [one(pair) for pair in pairs]
        # Each check runs in its own copy of the caller's context, so its log lines carry the
        # request id.
        contexts = [contextvars.copy_context() for _ in pairs]
        # More threads than workers: while one check is parsed or judged here, another already
        # holds the worker it frees (the pool queues the rest), so no worker idles between
        # checks; sandbox runs stay at most pool_size at once.
        threads = min(self.cfg.batch_threads or 2 * self.cfg.pool_size, len(pairs))
        with ThreadPoolExecutor(threads, thread_name_prefix="code-verify") as executor:
            return list(executor.map(lambda c, p: c.run(one, p), contexts, pairs))

    def enumerate(self, task: cc.CodeTask) -> NoReturn:
        """Code families are not enumerable; they become feasible when a witness is certified.

        Raises:
            UnsupportedError: Always.
        """
        raise UnsupportedError("the code domain cannot enumerate its families")

    def components(self, *, heal: bool = False) -> list[ComponentHealth]:
        """The sandbox pool's state (health checks, metrics); ``heal`` is unused (the pool
        replaces its workers itself)."""
        pool = self._pool
        if pool is None:
            return [ComponentHealth("code_pool", False, self.cfg.pool_size, 0)]
        st = pool.stats()
        alive = st.idle + st.busy
        problem = None
        if alive < st.size:
            problem = (
                f"code pool: {alive} of {st.size} sandboxes ready or busy "
                f"({st.start_failures} failed starts)"
            )
        fatal = alive == 0 and st.start_failures > 0
        return [ComponentHealth("code_pool", True, st.size, alive, problem, fatal)]

    def close(self) -> None:
        """Stop the pool and its sandboxes."""
        with self._lock:
            self._closed = True
            pool, self._pool = self._pool, None
        if pool is not None and self._owns_pool:
            pool.close()
            pool.backend.close()
