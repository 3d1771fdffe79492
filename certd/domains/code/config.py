"""The code domain's config section (``CertdConfig.code``; ``DomainSpec.config_section``).

Example:
    >>> CodeConfig().backend, CodeConfig(pool_size=4).pool_size
    ('bwrap', 4)

It lives with its domain; ``certd.config`` assembles the sections into ``CertdConfig`` and
``docs/config-schema.md`` describes every key.
"""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict, Field

__all__ = ["CodeConfig"]


class CodeConfig(BaseModel):
    """The code domain: sandbox backend, warm pool, per-run limits, task sizes, rewards."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    backend: str = Field(
        "bwrap",
        pattern="^(bwrap|docker|gvisor)$",
        description="gvisor: a fresh runsc sandbox (its own kernel) per check; see "
        "docs/sandboxes.md for its cost",
    )
    pool_size: int = Field(2, ge=1, description="warm sandboxed workers (checks at once)")
    batch_threads: int = Field(
        0,
        ge=0,
        description="threads one batch prepares and judges its checks on (0: 2 x pool_size); "
        "sandbox runs stay at most pool_size at once",
    )
    max_runs_per_worker: int = Field(200, ge=1, description="checks before a worker is replaced")
    queue_limit: int = Field(1024, ge=0, description="checks waiting for a worker; more = busy")
    acquire_timeout_s: float = Field(300.0, gt=0)
    cpu_time_s: float = Field(5.0, gt=0, description="per test run")
    wall_time_s: float = Field(10.0, gt=0, description="per test run")
    memory_bytes: int = Field(512 << 20, ge=16 << 20, description="per process (RLIMIT_AS)")
    processes: int = Field(32, ge=1)
    output_bytes: int = Field(1 << 20, ge=1024, description="stdout/stderr kept per run")
    file_size_bytes: int = Field(16 << 20, ge=1024)
    open_files: int = Field(64, ge=8)
    workdir_bytes: int = Field(64 << 20, ge=1 << 20, description="tmpfs /work and /tmp size")
    compile_cpu_time_s: float = Field(20.0, gt=0)
    compile_wall_time_s: float = Field(30.0, gt=0)
    compile_memory_bytes: int = Field(1 << 30, ge=64 << 20)
    compile_output_bytes: int = Field(16 << 20, ge=1 << 20, description="largest binary")
    docker_image: str = Field("forkgate/sandbox-runner:1", min_length=1)
    docker_runtime: str | None = Field(None, description="OCI runtime, e.g. runsc (gVisor)")
    docker_cpus: float = Field(1.0, gt=0)
    max_program_bytes: int = Field(256 << 10, ge=1)
    max_cases: int = Field(256, ge=1)
    max_case_bytes: int = Field(1 << 20, ge=1)
    max_response_bytes: int = Field(512 << 10, ge=1)
    extract: str = Field("last", pattern="^(last|first)$", description="which fenced block")
    reward_correct: float = 1.0
    reward_wrong: float = 0.0
    partial_reward: bool = Field(False, description="stdin/stdout: reward = pass fraction")
