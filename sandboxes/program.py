"""What to run: files, argv, stdin, and how to run it.

Example:
    >>> from sandboxes.program import Program
    >>> p = Program(argv=("python3", "main.py"), files={"main.py": b"print(1)"})
    >>> p.argv[0]
    'python3'
    >>> Program(argv=("python3",), files={"../x": b""})
    Traceback (most recent call last):
    ...
    sandboxes.errors.SandboxConfigError: files: expected a plain file name, got '../x'
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass, field

from .errors import SandboxConfigError

__all__ = ["Program"]

_NAME = re.compile(r"^[A-Za-z0-9_][A-Za-z0-9_.\-]{0,99}$")


@dataclass(frozen=True)
class Program:
    """One program run.

    Attributes:
        argv: The command; ``argv[0]`` is resolved on the sandbox's read-only system PATH
            (``python3``, ``gcc``, ``g++``) or is a file of the work directory (``./prog``).
        files: Files written into the fresh work directory before the run (name -> bytes).
        executables: Names in ``files`` that get mode 0755.
        stdin: Bytes fed to the program's standard input.
        inline_python: Run ``argv[1]`` (a Python file of ``files``) in a process forked from
            the sandbox's clean template interpreter (which never holds any run's data)
            instead of exec'ing a new one: the same semantics as ``python3 -I -S FILE``
            without the interpreter's start-up cost. Ignored unless ``argv[0]`` is
            ``python3``.
        completion_channel: Give the program a completion channel: fd 4 yields a one-time
            nonce, fd 3 takes it back. ``ExecResult.completed`` says whether exactly that nonce
            came back; a program cannot learn the nonce before it reads fd 4.
    """

    argv: tuple[str, ...]
    files: Mapping[str, bytes] = field(default_factory=dict)
    executables: frozenset[str] = frozenset()
    stdin: bytes = b""
    inline_python: bool = False
    completion_channel: bool = False

    def __post_init__(self) -> None:
        if not self.argv or not all(isinstance(a, str) and "\0" not in a for a in self.argv):
            raise SandboxConfigError(f"argv: expected non-empty strings, got {self.argv!r}")
        for name, data in self.files.items():
            if not isinstance(name, str) or not _NAME.match(name) or name in (".", ".."):
                raise SandboxConfigError(f"files: expected a plain file name, got {name!r}")
            if not isinstance(data, bytes | bytearray):
                raise SandboxConfigError(f"files[{name!r}]: expected bytes, got {type(data)}")
        missing = self.executables - set(self.files)
        if missing:
            raise SandboxConfigError(f"executables: not in files: {sorted(missing)}")
        if not isinstance(self.stdin, bytes | bytearray):
            raise SandboxConfigError(f"stdin: expected bytes, got {type(self.stdin)}")
        if self.inline_python and (len(self.argv) < 2 or self.argv[1] not in self.files):
            raise SandboxConfigError("inline_python: argv[1] must name a file of files")

    @property
    def input_bytes(self) -> int:
        """Total size of the files and stdin (what travels into the sandbox)."""
        return len(self.stdin) + sum(len(d) for d in self.files.values())
