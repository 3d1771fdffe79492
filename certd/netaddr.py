"""certd's addresses: ``host`` alone means certd's default port, never gRPC's :443.

Example:
    >>> with_default_port("localhost"), with_default_port("10.0.0.1:7000")
    ('localhost:50051', '10.0.0.1:7000')
    >>> with_default_port("::1"), with_default_port("[::1]"), with_default_port("unix:/run/c")
    ('[::1]:50051', '[::1]:50051', 'unix:/run/c')
"""

from __future__ import annotations

import ipaddress

__all__ = ["DEFAULT_PORT", "with_default_port"]

DEFAULT_PORT = 50051
"""The port ``certd serve`` listens on by default (``listen = "127.0.0.1:50051"``)."""

_SCHEMES = ("unix:", "unix-abstract:", "dns:", "ipv4:", "ipv6:", "vsock:")


def with_default_port(address: str) -> str:
    """``address`` with certd's default port when it names none.

    A gRPC target with a scheme (``unix:``, ``dns:``, ``ipv4:`` …) is left as it is.
    """
    a = address.strip()
    if not a or "/" in a or a.startswith(_SCHEMES):
        return a
    if a.startswith("["):  # [v6] or [v6]:port
        return a if "]:" in a else f"{a}:{DEFAULT_PORT}"
    if ":" not in a:
        return f"{a}:{DEFAULT_PORT}"
    if a.count(":") > 1:  # a bare IPv6 address has no room for a port
        try:
            ipaddress.IPv6Address(a)
        except ValueError:
            return a
        return f"[{a}]:{DEFAULT_PORT}"
    return a
