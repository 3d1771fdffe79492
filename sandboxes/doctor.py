"""What isolation this machine gives, for ``certd doctor``.

Example:
    >>> from sandboxes.doctor import Finding
    >>> Finding("cgroups", "warn", "no writable cgroup hierarchy").status
    'warn'

Each finding is ``ok``, ``warn`` (the backend runs, with a weaker guarantee that the detail
names, e.g. no cgroup memory/pids limit) or ``fail`` (the backend cannot run).
"""

from __future__ import annotations

import os
import platform
import subprocess
from dataclasses import dataclass

from .bwrap import BwrapOptions, BwrapSandbox
from .cgroups import probe_cgroups
from .errors import SandboxError
from .limits import Limits
from .program import Program

__all__ = ["Finding", "diagnose_bwrap", "diagnose_docker", "diagnose_gvisor"]


@dataclass(frozen=True)
class Finding:
    """One check: ``name``, ``status`` (ok | warn | fail) and a human-readable ``detail``."""

    name: str
    status: str
    detail: str


def diagnose_bwrap(options: BwrapOptions | None = None) -> list[Finding]:
    """Check the bwrap backend: binary, namespaces, uid, cgroups, seccomp, a real run.

    Args:
        options: Backend settings.

    Returns:
        The findings.
    """
    opts = options or BwrapOptions()
    out: list[Finding] = []
    try:
        version = subprocess.run(
            [opts.bwrap, "--version"], capture_output=True, text=True, timeout=10, check=False
        ).stdout.strip()
        out.append(Finding("bwrap", "ok", version or opts.bwrap))
    except OSError as exc:
        out.append(Finding("bwrap", "fail", f"{opts.bwrap}: {exc} (apt-get install bubblewrap)"))
        return out
    if os.geteuid() == 0:
        out.append(Finding("worker uid", "ok", "one host uid per worker: RLIMIT_NPROC per worker"))
    else:
        out.append(
            Finding(
                "worker uid",
                "warn",
                "not root: workers share this uid, so RLIMIT_NPROC is not applied per worker",
            )
        )
    support = probe_cgroups() if os.geteuid() == 0 else None
    if support is not None and support.version is not None:
        cpu = "memory, pids and CPU" if support.cpu else "memory and pids (no CPU controller)"
        out.append(Finding("cgroups", "ok", f"cgroup v{support.version} {cpu} limits"))
    else:
        why = support.reason if support is not None else "not root"
        out.append(
            Finding(
                "cgroups",
                "warn",
                f"no cgroup memory/pids limit per sandbox ({why}); rlimits and the PID "
                "namespace still bound each run",
            )
        )
    if platform.machine() in ("x86_64", "AMD64") and opts.use_seccomp:
        out.append(Finding("seccomp", "ok", "deny-list filter installed by bwrap --seccomp"))
    else:
        out.append(Finding("seccomp", "warn", f"no seccomp filter on {platform.machine()}"))
    try:
        box = BwrapSandbox(Limits(cpu_time_s=2, wall_time_s=5), opts)
        result = box.run(Program(argv=("python3", "-c", "print('sandboxed')")))
    except SandboxError as exc:
        out.append(Finding("bwrap run", "fail", str(exc)))
        return out
    if result.ok and result.stdout == b"sandboxed\n":
        out.append(Finding("bwrap run", "ok", f"python3 ran in {result.wall_time_s * 1e3:.0f} ms"))
    else:
        detail = result.detail or result.stderr.decode(errors="replace")[-200:]
        out.append(Finding("bwrap run", "fail", f"{result.status.value}: {detail}"))
    return out


def diagnose_docker(image: str, runtime: str | None = None) -> list[Finding]:
    """Check the Docker backend: SDK, engine, image, runtime, a real run.

    Args:
        image: The runner image tag.
        runtime: The configured OCI runtime, if any.

    Returns:
        The findings.
    """
    from .docker import DockerOptions, DockerSandbox

    try:
        box = DockerSandbox(Limits(cpu_time_s=2, wall_time_s=5), DockerOptions(image, runtime))
    except SandboxError as exc:
        return [Finding("docker", "fail", str(exc))]
    out = [Finding("docker", "ok", f"engine reachable, image {image} present")]
    try:
        if runtime and runtime not in box.client.info().get("Runtimes", {}):
            out.append(Finding("docker runtime", "fail", f"runtime {runtime} is not installed"))
            return out
        result = box.run(Program(argv=("python3", "-c", "print('sandboxed')")))
    finally:
        box.close()
    if result.ok and result.stdout == b"sandboxed\n":
        out.append(Finding("docker run", "ok", f"python3 ran in {result.wall_time_s * 1e3:.0f} ms"))
    else:
        out.append(Finding("docker run", "fail", f"{result.status.value}: {result.detail}"))
    return out


def diagnose_gvisor() -> list[Finding]:
    """Check the gVisor backend: runsc, a real run in a fresh sandbox.

    Returns:
        The findings.
    """
    from .gvisor import GvisorSandbox

    try:
        box = GvisorSandbox(Limits(cpu_time_s=2, wall_time_s=5))
    except SandboxError as exc:
        return [Finding("gvisor", "fail", str(exc))]
    out = [Finding("gvisor", "ok", f"runsc at {box.options.runsc}, {box.options.platform}")]
    try:
        result = box.run(Program(argv=("python3", "-c", "print('sandboxed')")))
    finally:
        box.close()
    if result.ok and result.stdout == b"sandboxed\n":
        out.append(Finding("gvisor run", "ok", f"python3 ran in {result.wall_time_s * 1e3:.0f} ms"))
    else:
        out.append(Finding("gvisor run", "fail", f"{result.status.value}: {result.detail}"))
    return out
