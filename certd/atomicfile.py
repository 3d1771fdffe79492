"""One way to replace a state file atomically and durably.

Example:
    >>> import tempfile, pathlib
    >>> d = pathlib.Path(tempfile.mkdtemp())
    >>> write_atomic(d / "state.json", b'{"size": 3}')
    >>> (d / "state.json").read_bytes()
    b'{"size": 3}'

The steps (what every trusted-state file in certd and forkgate uses: the audit state, the
log's anti-rollback checkpoint, the witness state, the ratchet state, private keys):

1. write the bytes to a fresh temporary file in the same directory (``mkstemp``, so two
   writers never share a temporary name);
2. ``fsync`` the file, so its bytes are on disk before its name is;
3. ``os.replace`` it over the target (atomic on POSIX: a reader sees the old or the new
   file, never a mix);
4. ``fsync`` the directory, so the rename itself survives a power loss.

A failure at any step removes the temporary file and raises ``OSError``; the old file is
left as it was.
"""

from __future__ import annotations

import os
import tempfile
from pathlib import Path

__all__ = ["write_atomic"]


def write_atomic(
    path: Path | str, data: bytes, *, mode: int | None = None, parents: bool = False
) -> None:
    """Replace ``path`` with ``data`` atomically and durably (see the module docstring).

    Args:
        path: the file to replace.
        data: the new content.
        mode: permission bits for the new file (e.g. ``0o600`` for a private key), or None
            for ``mkstemp``'s default (0o600 as well, owner only).
        parents: create the directory (and its parents) when missing.

    Raises:
        OSError: a step failed; the old file is untouched.
    """
    path = Path(path)
    directory = path.parent
    if parents:
        directory.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=directory)
    try:
        if mode is not None:
            os.fchmod(fd, mode)
        with os.fdopen(fd, "wb") as f:
            f.write(data)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
    dir_fd = os.open(directory, os.O_RDONLY)
    try:
        os.fsync(dir_fd)
    finally:
        os.close(dir_fd)
