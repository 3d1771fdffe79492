"""Shared readers of the ``forkgate`` verbs: input and output files (``-`` for stdin/stdout),
JSONL with file line numbers, ``--trust`` keys and ``--task`` objects, each a one-line usage
error (exit 2) when wrong.

Example::

    with open_in(args.input) as f: ...
    task = task_arg("", '{"domain": "math", "task": {"gold": "1/2"}}')
"""

from __future__ import annotations

import contextlib
import json
import os
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import IO, TYPE_CHECKING, Any

from certd.task_object import make_task, parse_task_object
from certd.v1 import tasks_pb2

from ._base import load_keyring
from .errors import InvalidRequestError, VerificationError

if TYPE_CHECKING:  # signing loads only when receipts are checked (start-up time)
    from certd.signing.dsse import KeyRing

__all__ = [
    "open_in",
    "open_in_bytes",
    "open_out",
    "open_out_bytes",
    "read_jsonl",
    "read_jsonl_numbered",
    "task_arg",
    "trust_arg",
]


def open_in(path: str) -> IO[str]:
    """An input file, or stdin for ``-`` (a missing file is a usage error naming it)."""
    if path == "-":
        return open(sys.stdin.fileno(), encoding="utf-8", closefd=False)
    try:
        return open(path, encoding="utf-8")
    except FileNotFoundError as e:
        raise InvalidRequestError(f"{path}: no such file", field="in") from e
    except IsADirectoryError as e:
        raise InvalidRequestError(f"{path}: is a directory, not a file", field="in") from e


def open_in_bytes(path: str) -> IO[bytes]:
    """``_open_in`` in binary (JSONL read by orjson)."""
    if path == "-":
        return open(sys.stdin.fileno(), "rb", closefd=False)
    open_in(path).close()  # the same one-line errors for a missing file or a directory
    return open(path, "rb")


@contextlib.contextmanager
def open_out(path: str) -> Iterator[IO[str]]:
    """An output file, or stdout for ``-``, written whole or not at all.

    The text goes to a temporary file beside ``path``, renamed over it when the ``with``
    block ends without an error (``certd.atomicfile``'s steps); on an error the temporary
    file is removed and an existing ``path`` is left as it was.

    Raises:
        InvalidRequestError: the folder does not exist or cannot be written.
    """
    with _atomic_out(path, binary=False) as f:
        yield f


@contextlib.contextmanager
def open_out_bytes(path: str) -> Iterator[IO[bytes]]:
    """``open_out`` in binary."""
    with _atomic_out(path, binary=True) as f:
        yield f


@contextlib.contextmanager
def _atomic_out(path: str, *, binary: bool) -> Iterator[IO[Any]]:
    if path == "-":
        mode = "wb" if binary else "w"
        with open(
            sys.stdout.fileno(), mode, encoding=None if binary else "utf-8", closefd=False
        ) as f:
            yield f
        return
    target = Path(path)
    try:
        fd, tmp = tempfile.mkstemp(prefix=f".{target.name}.", suffix=".tmp", dir=target.parent)
    except OSError as e:
        raise InvalidRequestError(f"{path}: cannot write there: {e.strerror}", field="out") from e
    umask = os.umask(0)
    os.umask(umask)
    os.fchmod(fd, 0o666 & ~umask)  # as open(path, "w") would create it
    try:
        with os.fdopen(fd, "wb" if binary else "w", encoding=None if binary else "utf-8") as f:
            yield f
            f.flush()
            os.fsync(f.fileno())
        if target.is_dir():
            raise InvalidRequestError(f"{path}: is a directory, not a file", field="out")
        os.replace(tmp, target)
    except BaseException:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(tmp)
        raise


def trust_arg(sources: list[str]) -> KeyRing | None:
    """The ``--trust`` keys (None when none given); a bad one is a usage error (exit 2).

    Raises:
        InvalidRequestError: a file that does not exist, a private key, or not a vkey.
    """
    try:
        return load_keyring(sources) if sources else None
    except VerificationError as e:
        reason = str(e).removeprefix("trusted key: ")
        raise InvalidRequestError(f"--trust: {reason}", field="trust") from e


def read_jsonl_numbered(path: str) -> list[tuple[int, Any]]:
    """``(line number in the file, object)`` per non-blank line (``-`` reads stdin)."""
    out = []
    with open_in(path) as f:
        for n, line in enumerate(f, 1):
            if line.strip():
                try:
                    out.append((n, json.loads(line)))
                except ValueError as e:
                    raise InvalidRequestError(f"{path}:{n}: not JSON: {e}", field="in") from e
    return out


def read_jsonl(path: str) -> list[dict[str, Any]]:
    return [obj for _, obj in read_jsonl_numbered(path)]


def task_arg(domain: str, text: str, flag: str = "--task") -> tasks_pb2.Task:
    """A task from a flag: the task object ``{"domain": …, "task": {…}}`` (docs/formats.md
    §1), or the domain's own object with ``--domain``. There is no default domain.

    Raises:
        InvalidRequestError: not JSON, no domain, or not the domain's shape.
    """
    try:
        obj = json.loads(text)
    except ValueError as e:
        raise InvalidRequestError(f"{flag}: not JSON: {e}", field="task") from e
    try:
        if isinstance(obj, dict) and "domain" in obj:
            if domain and domain != obj["domain"]:
                raise ValueError(f"domain {obj['domain']!r} but --domain {domain!r}")
            return parse_task_object(obj, stacklevel=3)
        if domain:
            return make_task(domain, obj)
        return parse_task_object(obj, stacklevel=3)
    except ValueError as e:
        raise InvalidRequestError(f"{flag}: {e}", field="task") from e
