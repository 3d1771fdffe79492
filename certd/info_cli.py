"""``certd info``: ask a running certd what it serves (the ``Info/ServerInfo`` RPC).

Example::

    certd info --server 127.0.0.1:50051            # domains, κs, verifiers, limits, log key
    certd info --server 127.0.0.1:50051 --json     # the same as one JSON object
    certd info --server certd.internal:443 --tls-ca ca.crt --token "$TOKEN"

Exit codes (``certd.exitcodes``): 0 answered; 1 refused (no or wrong credentials); 2 usage
(e.g. a ``--tls-ca`` that is no file); 3 the server cannot be reached.
"""

from __future__ import annotations

import argparse
import json
from typing import Any

import grpc

from certd.errors import AuthenticationError, CertdError, PermissionDeniedError, StoreError
from certd.v1 import info_pb2, info_pb2_grpc

__all__ = ["add_parser", "fetch_info", "info_dict", "render_info"]


def _number(value: float) -> int | float:
    return int(value) if float(value).is_integer() else value


def info_dict(reply: info_pb2.ServerInfoResponse) -> dict[str, Any]:
    """The reply as plain JSON types (integral limits as integers, sizes as numbers).

    Args:
        reply: a ``ServerInfoResponse``.

    Returns:
        The JSON object ``certd info --json`` prints.
    """
    log = reply.log
    return {
        "server_version": reply.server_version,
        "services": list(reply.services),
        "authenticated": reply.authenticated,
        "tls": reply.tls,
        "principal": reply.principal,
        "roles": list(reply.roles),
        "log": {
            "origin": log.origin,
            "key_name": log.key_name,
            "key_id": log.key_id,
            "vkey": log.vkey,
            "previous_key_ids": list(log.previous_key_ids),
            "store": log.store,
            "size": log.size,
        },
        "domains": [
            {
                "name": d.name,
                "verifier": d.verifier,
                "default_kappa": d.default_kappa,
                "kappas": list(d.kappas),
                "status": d.status,
                "isolation": d.isolation,
                "limits": {k: _number(v) for k, v in sorted(d.limits.items())},
            }
            for d in reply.domains
        ],
        "limits": {k: _number(v) for k, v in sorted(reply.limits.items())},
    }


def _limit_lines(limits: dict[str, Any], indent: str) -> list[str]:
    width = max((len(k) for k in limits), default=0)
    return [f"{indent}{k:<{width}}  {v}" for k, v in limits.items()]


def render_info(info: dict[str, Any], address: str) -> str:
    """The human form of ``info_dict``'s object.

    Args:
        info: ``info_dict(reply)``.
        address: where it was asked.

    Returns:
        Several lines of text.
    """
    log = info["log"]
    access = ("TLS" if info["tls"] else "plaintext") + (
        f", authenticated as {info['principal']} ({', '.join(info['roles'])})"
        if info["authenticated"]
        else ", unauthenticated"
    )
    lines = [
        f"certd {info['server_version']} at {address} ({access})",
        f"log {log['origin']}: {log['store']}, size {log['size']}, "
        f"key {log['key_name']} id {log['key_id']}",
        f"  vkey {log['vkey']}",
    ]
    if log["previous_key_ids"]:
        lines.append(f"  previous key ids: {', '.join(log['previous_key_ids'])}")
    lines.append("domains:")
    for d in info["domains"]:
        where = f", isolation {d['isolation']}" if d["isolation"] else ""
        lines.append(f"  {d['name']}: verifier {d['verifier']}, {d['status']}{where}")
        for kappa in d["kappas"]:
            default = " (default)" if kappa == d["default_kappa"] else ""
            lines.append(f"    κ {kappa}{default}")
        lines += _limit_lines(d["limits"], "    ")
    lines.append("service limits:")
    lines += _limit_lines(info["limits"], "  ")
    return "\n".join(lines)


def fetch_info(
    channel: grpc.Channel, address: str, timeout_s: float
) -> info_pb2.ServerInfoResponse:
    """Call ``Info/ServerInfo``, translating transport errors to certd errors once.

    Args:
        channel: a channel to certd.
        address: its address (for messages).
        timeout_s: the deadline.

    Raises:
        StoreError: the server cannot be reached (exit 3).
        AuthenticationError: no or invalid credentials (exit 1).
        PermissionDeniedError: the credentials lack every role (exit 1).
        CertdError: any other refusal.

    Returns:
        The reply.
    """
    try:
        reply: info_pb2.ServerInfoResponse = info_pb2_grpc.InfoStub(channel).ServerInfo(
            info_pb2.ServerInfoRequest(), timeout=timeout_s
        )
    except grpc.RpcError as e:  # the boundary: transport errors become certd errors
        code, message = e.code(), f"{address}: {e.code().name}: {e.details()}"
        if code in (grpc.StatusCode.UNAVAILABLE, grpc.StatusCode.DEADLINE_EXCEEDED):
            raise StoreError(message) from e
        if code == grpc.StatusCode.UNAUTHENTICATED:
            raise AuthenticationError(message) from e
        if code == grpc.StatusCode.PERMISSION_DENIED:
            raise PermissionDeniedError(message) from e
        raise CertdError(message) from e
    return reply


def _cmd_info(args: argparse.Namespace) -> int:
    from certd.ops_cli import log_channel

    channel = log_channel(
        args.server, args.tls_ca, args.token, args.tls_cert, args.tls_key, args.tls_server_name
    )
    try:
        info = info_dict(fetch_info(channel, args.server, args.timeout))
    finally:
        channel.close()
    print(json.dumps(info, sort_keys=True) if args.json else render_info(info, args.server))
    return 0


def add_parser(sub: Any) -> argparse.ArgumentParser:
    """Add the ``info`` subcommand to ``certd``'s parser."""
    from certd.clihelp import add_verb
    from certd.ops_cli import tls_flags

    p = add_verb(
        sub,
        "info",
        "ask a certd what it serves: domains, κs, verifiers, limits, log key",
        "0 answered, 1 refused (credentials), 2 usage, 3 unreachable",
        _cmd_info,
        description="Print what a running certd serves (the Info/ServerInfo RPC): its "
        "domains with their verifier and κ names@versions, the limits it enforces by "
        "config key (docs/config-schema.md), its log origin and key id, its version.",
    )
    p.add_argument("--server", "--addr", dest="server", required=True, help="certd's host:port")
    p.add_argument("--timeout", type=float, default=10.0, help="deadline in seconds")
    tls_flags(p)
    p.add_argument("--json", action="store_true", help="one JSON object instead of text")
    return p
