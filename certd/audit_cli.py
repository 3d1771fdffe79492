"""``certd audit``: check a ledger's roots, signatures and consistency against the auditor's
trusted checkpoint, which persists between runs.

Example::

    certd audit --data-dir certd-data --json
    certd audit --server 127.0.0.1:50051 --trust certd-data/signing.pub
    certd audit --ledger redis://127.0.0.1:6379/0 --trust KEY

Exit codes (``certd.exitcodes``): 0 passed; 1 a fault (with a hint when it is against an
earlier auditor state); 2 usage (no ledger at DATA_DIR, a bad ``--trust``); 3 server or Redis
unreachable.
"""

from __future__ import annotations

import argparse
import functools
import hashlib
import os
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

from certd.clihelp import add_verb, emit
from certd.errors import InvalidInputError, LedgerError, SigningError, StoreError
from certd.exitcodes import EXIT_OK, EXIT_REFUSED

if TYPE_CHECKING:  # imported where a verb runs: building the parser stays light
    from certd.ledger.audit import AuditReport
    from certd.ledger.store import LedgerStore
    from certd.signing.keys import VerifierKey

__all__ = ["add_parser"]


def _default_state(keys: list[VerifierKey]) -> Path:
    """The default state file of the log the trusted keys sign: one per log (its key names,
    i.e. origins, and key ids), never per address, so auditing replica after replica of one
    log checks every one against the same trusted checkpoint (a split view fails)."""
    base = Path(os.environ.get("XDG_STATE_HOME") or Path.home() / ".local" / "state")
    log_id = ",".join(sorted(f"{k.name}+{k.key_id_hex}" for k in keys))
    tag = hashlib.sha256(f"log:{log_id}".encode()).hexdigest()[:16]
    return base / "forkgate" / f"audit-{tag}.json"


def _trusted(args: argparse.Namespace) -> list[VerifierKey]:
    from certd.ops_cli import stdin_text
    from certd.signing.keys import read_verifier_key

    sources = list(args.trust)
    if not sources and args.data_dir is not None:
        sources = [str(args.data_dir / "signing.pub")]
    if not sources:
        raise InvalidInputError(
            "--trust: an auditor of a server must name the log key", field="trust"
        )
    keys = []
    for src in sources:
        try:
            keys.append(read_verifier_key(stdin_text() if src == "-" else src))
        except SigningError as e:  # a usage error: neither a key file nor a vkey
            raise InvalidInputError(f"--trust: {e}", field="trust") from e
    return keys


def _remote_audit(
    address: str, keys: list[VerifierKey], state: Path, args: argparse.Namespace
) -> AuditReport:
    import grpc

    from certd.ledger.audit import audit_remote
    from certd.ops_cli import log_channel
    from certd.v1 import ledger_pb2, ledger_pb2_grpc

    channel = log_channel(
        address, args.tls_ca, args.token, args.tls_cert, args.tls_key, args.tls_server_name
    )
    stub = ledger_pb2_grpc.LedgerStub(channel)

    def rpc(fn: Callable[..., Any], req: Any) -> Any:
        try:
            return fn(req, timeout=60)
        except grpc.RpcError as e:  # the boundary: transport errors become certd errors
            message = f"{address}: {e.code().name}: {e.details()}"
            if e.code() in (grpc.StatusCode.UNAVAILABLE, grpc.StatusCode.DEADLINE_EXCEEDED):
                raise StoreError(message) from e  # certd is down: exit 3
            raise LedgerError(message) from e  # e.g. PERMISSION_DENIED: an audit fault, exit 1

    def get_checkpoint() -> str:
        return str(rpc(stub.GetCheckpoint, ledger_pb2.GetCheckpointRequest()).note)

    def get_entries(start: int, end: int) -> list[bytes]:
        return list(
            rpc(stub.GetEntries, ledger_pb2.GetEntriesRequest(start=start, end=end)).entries
        )

    def get_consistency(first: int, second: int) -> list[bytes]:
        req = ledger_pb2.GetConsistencyProofRequest(first_size=first, second_size=second)
        return list(rpc(stub.GetConsistencyProof, req).hashes)

    try:
        try:
            get_checkpoint()  # unreachable: StoreError, exit 3 (not a failed audit, exit 1)
        except StoreError:
            raise
        except LedgerError:
            pass  # the audit reports it as a fault
        return audit_remote(get_checkpoint, get_entries, get_consistency, keys, state)
    finally:
        channel.close()


def _store_opener(args: argparse.Namespace) -> Callable[[], LedgerStore]:
    """Opens the store ``--ledger`` names (a store URL, ``certd.ledger.store``) or
    ``--data-dir`` holds; picklable, so the audit's workers open it too.

    Raises:
        InvalidInputError: the data dir holds no ledger.
    """
    from certd.ledger.store import StoreOptions, open_store

    prefix = args.redis_prefix or "certd"
    # An auditor only reads: any Redis persistence policy will do.
    options = StoreOptions(redis_prefix=prefix, redis_appendfsync="any", postgres_schema=prefix)
    if args.ledger:
        return functools.partial(open_store, args.ledger, options)
    path = args.data_dir / "ledger.sqlite"
    if not path.is_file():
        raise InvalidInputError(f"--data-dir: no ledger at {path}", field="data_dir")
    return functools.partial(open_store, str(path), options)


def _cmd_audit(args: argparse.Namespace) -> int:
    from certd.ledger.audit import audit_store

    keys = _trusted(args)
    if args.server:
        state = _audit_state(args, keys)
        report = _remote_audit(args.server, keys, state, args)
    else:
        opener = _store_opener(args)  # ConfigError: the URL is not valid
        store = opener()  # StoreError: the store cannot be opened
        try:
            state = _audit_state(args, keys)
            report = audit_store(store, keys, state, opener=opener)
        finally:
            store.close()
    obj = {
        "ok": report.ok,
        "origin": report.origin,
        "size": report.checkpoint_size,
        "root": report.root_hash.hex() if report.root_hash else None,
        "entries_checked": report.entries_checked,
        "faults": [{"kind": f.kind, "index": f.index, "message": f.message} for f in report.faults],
        "faults_omitted": report.faults_omitted,
        "state": str(state),
        "state_updated": report.state_updated,
        "seconds": round(report.duration_s, 3),
    }
    hint = _state_hint(report, state)
    if hint:
        obj["hint"] = hint
    text = report.summary() + f"\n  auditor state: {state}" + (f"\n  hint: {hint}" if hint else "")
    emit(args, obj, text)
    return EXIT_OK if report.ok else EXIT_REFUSED


def _state_hint(report: AuditReport, state: Path) -> str:
    """How to reset the auditor's state when a fault is against it (e.g. a recreated data dir)."""
    if not any(f.kind == "consistency" for f in report.faults):
        return ""
    return (
        f"the fault is against the checkpoint trusted in {state} from an earlier audit; if "
        "this log was deliberately recreated (a new data dir at the same place), rerun with "
        "--reset-state (or delete that file, or pass --state NEW_FILE); otherwise the log "
        "has rolled back or forked and must not be trusted"
    )


def _audit_state(args: argparse.Namespace, keys: list[VerifierKey]) -> Path:
    """The auditor state file (``--state`` or the default for the log ``keys`` sign);
    ``--reset-state`` removes it first so this audit trusts the log afresh."""
    from certd.ledger.audit import AuditState

    state: Path = args.state or _default_state(keys)
    if args.reset_state:
        state.unlink(missing_ok=True)
    try:
        AuditState.load(state)
    except LedgerError as e:  # a state file that is not one: usage (exit 2), not a fault
        raise InvalidInputError(f"--state: {e} (fix it, or --reset-state)", field="state") from e
    return state


def add_parser(sub: Any) -> argparse.ArgumentParser:
    """Add ``audit`` to ``certd``'s parser (``sub``: its subparsers); return it."""
    a: argparse.ArgumentParser = add_verb(
        sub,
        "audit",
        "audit a ledger: roots, signatures, consistency",
        "0 passed, 1 a fault (with a hint when it is against an earlier auditor state), "
        "2 usage (no ledger at DATA_DIR, a bad --trust), 3 server or Redis unreachable",
        _cmd_audit,
    )
    where = a.add_mutually_exclusive_group(required=True)
    where.add_argument("--data-dir", type=Path, help="audit the SQLite ledger of a data dir")
    where.add_argument("--server", help="host:port: audit a running certd over gRPC")
    where.add_argument(
        "--ledger",
        help="a ledger store URL: sqlite:///PATH, redis://HOST:PORT/DB or "
        "postgresql://HOST[,HOST2]/DB (docs/operating-a-cluster.md)",
    )
    a.add_argument(
        "--redis-prefix",
        default=None,
        help="key prefix in Redis, or schema in PostgreSQL (default certd)",
    )
    a.add_argument("--tls-ca", type=Path, default=None, help="--server: CA of certd's cert")
    a.add_argument("--tls-cert", type=Path, default=None, help="--server: client cert (mTLS)")
    a.add_argument("--tls-key", type=Path, default=None, help="--server: client key (mTLS)")
    a.add_argument("--tls-server-name", default=None, help="--server: name in certd's cert")
    a.add_argument("--token", default=None, help="--server: bearer token with the audit role")
    a.add_argument(
        "--trust",
        action="append",
        default=[],
        help="trusted log key: a vkey, a file holding one, or '-' (stdin); repeatable; "
        "default DATA_DIR/signing.pub",
    )
    a.add_argument(
        "--state",
        type=Path,
        default=None,
        help="the auditor's trusted-checkpoint state file, JSON "
        "(default: $XDG_STATE_HOME/forkgate/audit-<hash of the log's origin and key id>.json, "
        "one per log whatever address it is audited at)",
    )
    a.add_argument(
        "--reset-state",
        action="store_true",
        help="forget the trusted checkpoint first (after deliberately recreating a data dir)",
    )
    return a
