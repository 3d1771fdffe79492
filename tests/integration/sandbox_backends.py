"""Backend fixtures shared by the sandbox tests: real bubblewrap and a real Docker engine.

Both backends must exist in CI: a missing bwrap, engine or runner image fails the tests with the
command that fixes it (``make sandbox-image``) instead of skipping them.
"""

from __future__ import annotations

import os
import re
from pathlib import Path

from sandboxes import BwrapSandbox, Limits, Sandbox
from sandboxes.docker import DEFAULT_IMAGE, DockerOptions, DockerSandbox

BACKENDS = ("bwrap", "docker")
CEILING = Limits(
    cpu_time_s=3.0,
    wall_time_s=4.0,
    memory_bytes=256 * 2**20,
    processes=16,
    output_bytes=64 * 1024,
    file_size_bytes=1 * 2**20,
    open_files=64,
    workdir_bytes=16 * 2**20,
)


def make_backend(name: str, limits: Limits = CEILING) -> Sandbox:
    """A real backend by name; raises (never skips) when it cannot run here."""
    if name == "bwrap":
        return BwrapSandbox(limits)
    if name == "gvisor":
        from sandboxes.gvisor import GvisorSandbox

        return GvisorSandbox(limits)
    return DockerSandbox(limits, DockerOptions(image=sandbox_image()))


def sandbox_image() -> str:
    """The runner image tag `make` built (``make unit`` passes it down), else the default."""
    return os.environ.get("FORKGATE_SANDBOX_IMAGE", DEFAULT_IMAGE)


def makefile_image() -> str:
    """The ``SANDBOX_IMAGE`` default written in the Makefile."""
    text = (Path(__file__).resolve().parents[2] / "Makefile").read_text()
    match = re.search(r"^SANDBOX_IMAGE \?= (\S+)$", text, re.MULTILINE)
    assert match, "the Makefile defines no SANDBOX_IMAGE"
    return match.group(1)
