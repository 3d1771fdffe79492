"""Operator commands: ``certd witness`` (follow a log and cosign it) and ``certd health``.

``certd health --server HOST:PORT`` asks the gRPC health service and exits 0 when certd is
SERVING, 1 otherwise, 3 when it cannot be reached (``certd.exitcodes``; for container and
Kubernetes probes any non-zero is a failure; TLS flags as for ``witness``).

Example::

    certd keygen --name witness.example/w1 --out w1/witness.key
    certd witness --log 127.0.0.1:50051 --log-key certd-data/signing.pub \\
        --origin forkgate.local/certd --key w1/witness.key --state w1/state.json \\
        --listen 127.0.0.1:8480

Every ``--interval`` seconds it fetches the log's checkpoint and, when it grew, the
consistency proof from the last cosigned size, and cosigns (``certd.ledger.cosigner``). A fork
is logged and refused; the witness keeps its state and keeps refusing until the log comes
back to a consistent tree. ``GET /checkpoint`` returns the last cosigned note (log signature
plus this witness's cosignature); ``GET /health`` is 200 once a checkpoint is cosigned and
the last poll succeeded, else 503. The cosigner vkey is printed at start-up.
"""

from __future__ import annotations

import argparse
import json
import logging
import threading
from collections.abc import Callable, Sequence
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import grpc

from certd.clihelp import add_verb
from certd.errors import (
    CertdError,
    ConfigError,
    InvalidInputError,
    LedgerError,
    SigningError,
    StoreError,
)
from certd.exitcodes import EXIT_OK, EXIT_REFUSED, EXIT_UNAVAILABLE
from certd.ledger.cosigner import Witness
from certd.netaddr import with_default_port
from certd.signing.keys import VerifierKey, load_signing_key, read_verifier_key

__all__ = ["WitnessFollower", "add_parsers", "log_channel", "stdin_text", "tls_flags"]

log = logging.getLogger("certd.witness")


def _read(path: Path, flag: str) -> bytes:
    """A TLS file's bytes; a missing or unreadable one is a usage error (exit 2)."""
    try:
        return path.read_bytes()
    except FileNotFoundError as e:
        raise InvalidInputError(f"{flag}: {path}: no such file", field=flag) from e
    except OSError as e:
        raise InvalidInputError(f"{flag}: cannot read {path}: {e.strerror}", field=flag) from e


def log_channel(
    address: str,
    tls_ca: Path | None = None,
    token: str | None = None,
    tls_cert: Path | None = None,
    tls_key: Path | None = None,
    server_name: str | None = None,
) -> grpc.Channel:
    """A channel to a certd (plaintext, TLS, mTLS, with an optional bearer token).

    Args:
        address: ``host:port``.
        tls_ca: the CA of certd's certificate; None for plaintext.
        token: a bearer token (TLS only).
        tls_cert: client certificate for mTLS.
        tls_key: its key.
        server_name: the name to check certd's certificate against, when it differs from
            the host in ``address``.

    Raises:
        ConfigError: a token or client certificate without TLS.
        InvalidInputError: a TLS file that is missing or unreadable.

    Returns:
        The channel.
    """
    options: list[tuple[str, int | str]] = [
        ("grpc.max_receive_message_length", 64 << 20),
        # A follower must notice a log that comes back within seconds, not minutes.
        ("grpc.initial_reconnect_backoff_ms", 500),
        ("grpc.min_reconnect_backoff_ms", 500),
        ("grpc.max_reconnect_backoff_ms", 5000),
        # no connection (and its backoff) shared with another channel of the process
        ("grpc.use_local_subchannel_pool", 1),
    ]
    if server_name is not None:
        options.append(("grpc.ssl_target_name_override", server_name))
    if tls_ca is None:
        if token is not None or tls_cert is not None:
            raise ConfigError("--token and --tls-cert need --tls-ca")
        return grpc.insecure_channel(with_default_port(address), options=options)
    creds = grpc.ssl_channel_credentials(
        root_certificates=_read(tls_ca, "--tls-ca"),
        private_key=_read(tls_key, "--tls-key") if tls_key is not None else None,
        certificate_chain=_read(tls_cert, "--tls-cert") if tls_cert is not None else None,
    )
    if token is not None:
        creds = grpc.composite_channel_credentials(creds, grpc.access_token_call_credentials(token))
    return grpc.secure_channel(with_default_port(address), creds, options=options)


class WitnessFollower:
    """Polls one log and feeds its checkpoints to a ``Witness``."""

    def __init__(self, witness: Witness, channel: grpc.Channel, address: str) -> None:
        from certd.v1 import ledger_pb2_grpc

        self.witness = witness
        self.address = address
        self._stub = ledger_pb2_grpc.LedgerStub(channel)
        self.last_error: str | None = None
        self.healthy = False

    def _rpc(self, fn: Callable[..., Any], req: Any) -> Any:
        try:
            return fn(req, timeout=30)
        except grpc.RpcError as e:  # the boundary: transport errors become certd errors
            raise StoreError(f"{self.address}: {e.code().name}: {e.details()}") from e

    def step(self) -> str:
        """Fetch the log's checkpoint and cosign it if consistent.

        Raises:
            ConsistencyError: the log forked from what this witness cosigned.
            CertdError: the log is unreachable or sent something invalid.

        Returns:
            The cosigned note.
        """
        from certd.v1 import ledger_pb2

        note = str(self._rpc(self._stub.GetCheckpoint, ledger_pb2.GetCheckpointRequest()).note)

        def consistency(first: int, second: int) -> list[bytes]:
            req = ledger_pb2.GetConsistencyProofRequest(first_size=first, second_size=second)
            return list(self._rpc(self._stub.GetConsistencyProof, req).hashes)

        return self.witness.observe(note, consistency)

    def run(self, interval_s: float, stop: threading.Event) -> None:
        """Poll until ``stop`` is set; failures are logged and retried."""
        while not stop.is_set():
            try:
                self.step()
                self.healthy, self.last_error = True, None
            except CertdError as e:
                self.healthy, self.last_error = False, f"{type(e).__name__}: {e}"
                log.error("witness: %s", self.last_error)
            stop.wait(interval_s)


def _http(follower: WitnessFollower, listen: str) -> ThreadingHTTPServer:
    host, _, port = listen.rpartition(":")

    class Handler(BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            state = follower.witness.state
            if self.path == "/checkpoint" and state is not None:
                self._reply(200, state.note, "text/plain; charset=utf-8")
            elif self.path == "/health":
                ok = follower.healthy and state is not None
                body = json.dumps({"ok": ok, "size": state.size if state else None,
                                   "error": follower.last_error})  # fmt: skip
                self._reply(200 if ok else 503, body, "application/json")
            else:
                self._reply(404, "not found\n", "text/plain")

        def _reply(self, code: int, body: str, ctype: str) -> None:
            data = body.encode()
            self.send_response(code)
            self.send_header("Content-Type", ctype)
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

        def log_message(self, format: str, *args: Any) -> None:
            log.debug(format, *args)

    return ThreadingHTTPServer((host.strip("[]"), int(port)), Handler)


def _vkeys(sources: Sequence[str]) -> list[VerifierKey]:
    """The keys named by ``--log-key`` (``-``: a vkey on stdin); a bad one is a usage error."""
    try:
        return [read_verifier_key(stdin_text() if src == "-" else src) for src in sources]
    except SigningError as e:  # neither a key file nor a vkey
        raise InvalidInputError(f"--log-key: {e}", field="log_key") from e


def stdin_text() -> str:
    """Standard input, stripped (a ``-`` argument); an empty stdin is a usage error."""
    import sys

    text = sys.stdin.read().strip()
    if not text:
        raise InvalidInputError("-: expected a vkey on stdin, got nothing", field="stdin")
    return text


def _cmd_witness(args: argparse.Namespace) -> int:
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(message)s")
    if not args.log_key:
        raise InvalidInputError("--log-key: name the log's key", field="log_key")
    key = load_signing_key(args.key)
    try:
        witness = Witness(key, _vkeys(args.log_key), args.origin, args.state)
    except LedgerError as e:  # a state file that is not one, or another log's: usage (exit 2)
        raise InvalidInputError(f"--state: {e}", field="state") from e
    channel = log_channel(
        args.log, args.tls_ca, args.token, args.tls_cert, args.tls_key, args.tls_server_name
    )
    follower = WitnessFollower(witness, channel, args.log)
    if args.once:
        note = follower.step()
        print(json.dumps({"event": "cosigned", "note": note}) if args.json else note, flush=True)
        return 0
    server = _http(follower, args.listen)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    host, port = str(server.server_address[0]), int(server.server_address[1])
    info = {
        "event": "witnessing",
        "address": f"{host}:{port}",
        "cosigner_vkey": witness.verifier.to_vkey(),
        "log": args.log,
    }
    print(json.dumps(info) if args.json else f"witness on {host}:{port}; {info}", flush=True)
    stop = threading.Event()
    import signal

    signal.signal(signal.SIGTERM, lambda *_: stop.set())
    signal.signal(signal.SIGINT, lambda *_: stop.set())
    follower.run(args.interval, stop)
    server.shutdown()
    return 0


def _cmd_health(args: argparse.Namespace) -> int:
    from grpc_health.v1 import health_pb2, health_pb2_grpc

    channel = log_channel(
        args.server, args.tls_ca, args.token, args.tls_cert, args.tls_key, args.tls_server_name
    )
    try:
        reply = health_pb2_grpc.HealthStub(channel).Check(
            health_pb2.HealthCheckRequest(service=args.service), timeout=args.timeout
        )
        status = health_pb2.HealthCheckResponse.ServingStatus.Name(reply.status)
    except grpc.RpcError as e:
        status = f"{e.code().name}: {e.details()}"
        down = e.code() in (grpc.StatusCode.UNAVAILABLE, grpc.StatusCode.DEADLINE_EXCEEDED)
    else:
        down = False
    finally:
        channel.close()
    print(json.dumps({"server": args.server, "status": status}) if args.json else status)
    if down:
        return EXIT_UNAVAILABLE
    return EXIT_OK if status == "SERVING" else EXIT_REFUSED


def tls_flags(p: argparse.ArgumentParser) -> None:
    p.add_argument("--tls-ca", type=Path, default=None, help="CA of certd's certificate")
    p.add_argument("--tls-cert", type=Path, default=None, help="client certificate (mTLS)")
    p.add_argument("--tls-key", type=Path, default=None, help="client key (mTLS)")
    p.add_argument("--tls-server-name", default=None, help="name in certd's certificate")
    p.add_argument("--token", default=None, help="bearer token")


def add_parsers(sub: Any) -> None:
    """Add the ``witness`` and ``health`` subcommands to ``certd``'s parser."""
    h = add_verb(
        sub,
        "health",
        "probe a certd's health (gRPC health service), e.g. for container probes",
        "0 SERVING, 1 NOT_SERVING or refused, 2 usage, 3 unreachable",
    )
    h.add_argument("--server", required=True, help="certd's host:port")
    h.add_argument("--service", default="", help="a service name, or '' for the server")
    h.add_argument("--timeout", type=float, default=5.0, help="deadline in seconds")
    tls_flags(h)
    h.add_argument("--json", action="store_true", help="machine-readable output")
    h.set_defaults(fn=_cmd_health)
    _add_witness(sub)


def _add_witness(sub: Any) -> argparse.ArgumentParser:
    """Add the ``witness`` subcommand to ``certd``'s parser."""
    w = add_verb(
        sub,
        "witness",
        "follow a log and cosign its checkpoints (C2SP tlog-cosignature)",
        "0 stopped (or --once cosigned), 1 refused (the log forked from what it cosigned), "
        "2 usage (a bad key or state file), 3 the log unreachable (--once)",
    )
    w.add_argument("--log", required=True, help="certd address host:port")
    w.add_argument(
        "--log-key",
        action="append",
        default=[],
        help="the log's key: a vkey, a file holding one, or '-' (stdin); repeatable",
    )
    w.add_argument("--origin", required=True, help="the log's checkpoint origin")
    w.add_argument(
        "--key", type=Path, required=True, help="the witness's private key file (certd keygen)"
    )
    w.add_argument(
        "--state", type=Path, required=True, help="last cosigned checkpoint (JSON, kept on disk)"
    )
    w.add_argument("--listen", default="127.0.0.1:0", help="HTTP address for /checkpoint")
    w.add_argument("--interval", type=float, default=1.0, help="seconds between polls")
    w.add_argument("--once", action="store_true", help="cosign the current checkpoint and exit")
    tls_flags(w)
    w.add_argument("--json", action="store_true", help="machine-readable output")
    w.set_defaults(fn=_cmd_witness)
    return w
