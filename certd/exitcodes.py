"""Exit codes of every ``certd`` and ``forkgate`` command (one table, docs/exit-codes.md).

Example:
    >>> from certd.errors import InvalidInputError, StoreError
    >>> EXIT_OK, EXIT_REFUSED, EXIT_USAGE, EXIT_UNAVAILABLE
    (0, 1, 2, 3)
    >>> exit_code_of(InvalidInputError("bad --task")), exit_code_of(StoreError("down"))
    (2, 3)

* ``0`` — all good: everything read verified, every record admitted, the audit passed.
* ``1`` — something was refused or failed verification (a refused record, a certificate
  that does not verify, a failed audit, a server that refuses to start on a bad store).
* ``2`` — usage: bad arguments, an unreadable or malformed input file (argparse uses 2 too).
* ``3`` — the server or store could not be reached (gRPC UNAVAILABLE or deadline, Redis down).
* ``130`` — interrupted (Ctrl-C, SIGINT), after one line on stderr (128 + SIGINT, as a shell).
"""

from __future__ import annotations

from certd.errors import CertdError, ConfigError, InvalidInputError, StoreError

__all__ = [
    "EXIT_INTERRUPTED",
    "EXIT_OK",
    "EXIT_REFUSED",
    "EXIT_UNAVAILABLE",
    "EXIT_USAGE",
    "exit_code_of",
]

EXIT_OK = 0
EXIT_REFUSED = 1
EXIT_USAGE = 2
EXIT_UNAVAILABLE = 3
EXIT_INTERRUPTED = 130


def exit_code_of(error: CertdError) -> int:
    """The exit code for a certd error a command did not handle itself."""
    if isinstance(error, InvalidInputError | ConfigError):
        return EXIT_USAGE
    if isinstance(error, StoreError):
        return EXIT_UNAVAILABLE
    return EXIT_REFUSED
