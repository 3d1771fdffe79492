"""certd: the ForkGate verifier certificate authority.

Example:
    >>> from certd.domains.countdown import verify_countdown, CountdownTask
    >>> verify_countdown(CountdownTask(numbers=(25, 5, 4, 3), target=83), "(25-5)*4+3").status.name
    'CORRECT'

This package keeps its ``__init__`` free of imports so that the light, pure parts
(``certd.v1``, ``certd.tlog.merkle``, ``certd.tlog.checkpoint``, ``certd.signing``)
can be used by the ``forkgate`` client without the server's dependencies.
"""

__version__ = "0.1.0"
