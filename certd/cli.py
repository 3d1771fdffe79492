"""The ``certd`` command line: serve, keygen, families, audit, doctor, kappa-report.

Example::

    certd serve                                  # ./certd-data, 127.0.0.1:50051
    certd families countdown --numbers 25,5,4,3 --target 83 --json
    certd audit --data-dir certd-data --json
    certd doctor                                 # what isolation the sandboxes get here
    certd kappa-report --in verdicts.jsonl --json

Every command takes ``--json``. The library raises typed errors; this module renders them and
exits with the codes of ``certd.exitcodes`` (docs/exit-codes.md): 0 all good, 1 refused or
failed verification (a failed audit, a store the log does not explain), 2 usage and input
errors, 3 a server or store that cannot be reached.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import logging
import os
import signal
import sys
import threading
from collections.abc import Callable, Sequence
from pathlib import Path
from types import FrameType
from typing import Any

from certd.clihelp import OneLineErrorParser, add_verb, finish_parser
from certd.config import CertdConfig, describe_validation_error, load_config
from certd.errors import (
    CertdError,
    ConfigError,
    InvalidInputError,
    LedgerError,
    SigningError,
    StoreError,
)
from certd.exitcodes import EXIT_OK, EXIT_REFUSED, exit_code_of
from certd.ledger.audit import AuditReport, audit_remote, audit_store
from certd.signing.keys import VerifierKey, read_verifier_key

__all__ = ["main"]


def _emit(args: argparse.Namespace, obj: dict[str, Any], text: str) -> None:
    print(json.dumps(obj, sort_keys=True) if args.json else text, flush=True)


def _with_cluster(cfg: CertdConfig, **fields: object) -> CertdConfig:
    """``cfg`` with fields of its cluster section replaced (None values ignored)."""
    from pydantic import ValidationError

    cluster = cfg.cluster.model_dump()
    cluster.update({k: v for k, v in fields.items() if v is not None})
    try:
        return CertdConfig.model_validate({**cfg.model_dump(), "cluster": cluster})
    except ValidationError as e:
        raise ConfigError(f"invalid cluster settings: {describe_validation_error(e)}") from e


def _cmd_serve(args: argparse.Namespace) -> int:
    from certd.service.server import CertdServer

    logging.basicConfig(
        level=logging.INFO,
        format="%(asctime)s %(levelname)s %(name)s %(message)s",
        stream=sys.stderr,
    )
    cfg = load_config(args.config, data_dir=args.data_dir, listen=args.listen)
    if args.ledger is not None or args.redis_prefix is not None:
        cfg = _with_cluster(cfg, ledger_url=args.ledger, redis_prefix=args.redis_prefix)
    if cfg.observability.log_format == "json":
        from certd.service.observability import JsonFormatter

        for handler in logging.getLogger().handlers:
            handler.setFormatter(JsonFormatter())
    server = CertdServer(cfg)
    port = server.start()
    done = threading.Event()

    def on_signal(signum: int, frame: FrameType | None) -> None:
        done.set()

    signal.signal(signal.SIGTERM, on_signal)
    signal.signal(signal.SIGINT, on_signal)
    host = cfg.listen.rsplit(":", 1)[0]
    _emit(
        args,
        {
            "event": "serving",
            "address": f"{host}:{port}",
            "data_dir": str(cfg.data_dir),
            "vkey": server.key.verifier().to_vkey(),
            "pid": os.getpid(),
            "metrics_port": server.metrics_port or None,
        },
        f"certd serving on {host}:{port} (data dir {cfg.data_dir}); "
        f"log key {server.key.verifier().to_vkey()}",
    )
    done.wait()
    server.stop()
    _emit(args, {"event": "stopped"}, "certd stopped")
    return 0


def _cmd_keygen(args: argparse.Namespace) -> int:
    from certd.signing.keys import SigningKey, save_signing_key

    key = SigningKey.generate(args.name)
    vkey = key.verifier().to_vkey()
    if args.out == "-":  # e.g. into a secret store: the private key on stdout, the vkey on stderr
        print(key.to_private_string(), flush=True)
        print(vkey, file=sys.stderr, flush=True)
        return 0
    out = Path(args.out)
    if out.exists() and not args.force:
        raise InvalidInputError(f"{out} exists; pass --force to overwrite", field="out")
    try:
        out.parent.mkdir(parents=True, exist_ok=True)
        save_signing_key(out, key)
        out.with_suffix(".pub").write_text(vkey + "\n")
    except SigningError as e:
        raise InvalidInputError(f"--out: {e}", field="out") from e
    except OSError as e:
        raise InvalidInputError(f"--out: cannot write {out}: {e.strerror}", field="out") from e
    _emit(
        args,
        {"name": key.name, "key_id": key.key_id_hex, "vkey": vkey, "path": str(out)},
        f"wrote {out} (private, mode 0600) and {out.with_suffix('.pub')}\n{vkey}",
    )
    return 0


def _numbers(text: str) -> tuple[int, ...]:
    try:
        return tuple(int(x) for x in text.replace(" ", "").split(",") if x)
    except ValueError as e:
        raise InvalidInputError(
            f"--numbers: expected comma-separated integers, got {text!r}", field="numbers"
        ) from e


def _cmd_families(args: argparse.Namespace) -> int:
    from certd.domains import countdown as cd

    task = cd.CountdownTask(
        numbers=_numbers(args.numbers),
        target=args.target,
        rules=cd.CountdownRules(exactly_once=not args.at_most_once),
    )
    found = cd.enumerate_families(task)
    labels = [
        {"operand": lw.operand, "operator": lw.operator, "witness": lw.witness}
        for lw in found.labels
    ]
    families = [list(f) for f in found.families]
    lines = [
        f"{len(labels)} feasible labels, {len(families)} families"
        f"{'' if found.complete else ' (family computation capped)'}"
    ]
    for n, fam in enumerate(families):
        members = ", ".join(
            f"({labels[i]['operand']}, {labels[i]['operator']}) {labels[i]['witness']}" for i in fam
        )
        lines.append(f"  family {n}: {members}")
    _emit(
        args, {"labels": labels, "families": families, "complete": found.complete}, "\n".join(lines)
    )
    return 0


def _cmd_kappa_report(args: argparse.Namespace) -> int:
    from certd.domains.kappa_report import determinacy, rollouts_by_kappa

    try:
        text = sys.stdin.read() if args.input == "-" else Path(args.input).read_text("utf-8")
    except FileNotFoundError as e:
        raise InvalidInputError(f"{args.input}: no such file", field="in") from e
    except OSError as e:
        raise InvalidInputError(f"cannot read {args.input}: {e.strerror}", field="in") from e
    numbers, rows = [], []
    for n, line in enumerate(text.splitlines(), 1):
        if line.strip():
            try:
                rows.append(json.loads(line))
            except ValueError as e:
                raise InvalidInputError(f"{args.input}:{n}: not JSON: {e}", field="in") from e
            numbers.append(n)
    try:
        by_kappa = rollouts_by_kappa(rows, numbers)
    except ValueError as e:
        raise InvalidInputError(f"{args.input}: {e}", field="in") from e
    if args.kappa:
        if args.kappa not in by_kappa:
            raise InvalidInputError(
                f"--kappa: {args.kappa!r} labels no row (found: {', '.join(sorted(by_kappa))})",
                field="kappa",
            )
        by_kappa = {args.kappa: by_kappa[args.kappa]}
    reports = {k: determinacy(v).as_dict() for k, v in sorted(by_kappa.items())}
    lines = []
    for k, r in reports.items():
        ratio = "inf" if r["ratio"] is None else f"{r['ratio']:.3f}"
        lines.append(
            f"{k}: {r['verdict']} (within/between = {ratio}, random-label baseline "
            f"{r['random_label_baseline']:.2f}; {r['families']} families over {r['tasks']} "
            f"tasks, {r['rollouts']} rollouts)"
        )
    _emit(args, {"kappas": reports}, "\n".join(lines))
    return 0


def _default_state(where: str) -> Path:
    base = Path(os.environ.get("XDG_STATE_HOME") or Path.home() / ".local" / "state")
    tag = hashlib.sha256(where.encode()).hexdigest()[:16]
    return base / "forkgate" / f"audit-{tag}.json"


def _trusted(args: argparse.Namespace) -> list[VerifierKey]:
    from certd.ops_cli import stdin_text

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


def _cmd_audit(args: argparse.Namespace) -> int:
    keys = _trusted(args)
    if args.server:
        state = _audit_state(args, f"server:{args.server}")
        report = _remote_audit(args.server, keys, state, args)
    elif args.ledger:
        from certd.ledger.redis_store import RedisStore

        prefix = args.redis_prefix or "certd"
        state = _audit_state(args, f"redis:{args.ledger}#{prefix}")
        redis_store = RedisStore(args.ledger, prefix=prefix, appendfsync="any")
        try:
            report = audit_store(redis_store, keys, state)
        finally:
            redis_store.close()
    else:
        from certd.ledger.sqlite import SQLiteStore

        path = args.data_dir / "ledger.sqlite"
        if not path.is_file():
            raise InvalidInputError(f"--data-dir: no ledger at {path}", field="data_dir")
        state = _audit_state(args, f"dir:{args.data_dir.resolve()}")
        store = SQLiteStore(path)
        try:
            report = audit_store(store, keys, state)
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
    _emit(args, obj, text)
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


def _audit_state(args: argparse.Namespace, where: str) -> Path:
    """The auditor state file (``--state`` or the default for ``where``); ``--reset-state``
    removes it first so this audit trusts the log afresh."""
    state: Path = args.state or _default_state(where)
    if args.reset_state:
        state.unlink(missing_ok=True)
    return state


def _cmd_doctor(args: argparse.Namespace) -> int:
    from sandboxes.doctor import diagnose_bwrap, diagnose_docker

    cfg = load_config(args.config)
    bwrap = diagnose_bwrap()
    docker = (
        diagnose_docker(cfg.code.docker_image, cfg.code.docker_runtime)
        if cfg.code.backend == "docker" or args.docker
        else []
    )
    findings = bwrap + docker
    failed = [f for f in (docker if cfg.code.backend == "docker" else bwrap) if f.status == "fail"]
    lines = [f"{f.status.upper():4}  {f.name}: {f.detail}" for f in findings]
    lines.append(f"code backend: {cfg.code.backend} ({'not usable' if failed else 'usable'})")
    _emit(
        args,
        {
            "backend": cfg.code.backend,
            "usable": not failed,
            "findings": [
                {"name": f.name, "status": f.status, "detail": f.detail} for f in findings
            ],
        },
        "\n".join(lines),
    )
    return 1 if failed else 0


def build_parser() -> argparse.ArgumentParser:
    """The argument parser of ``certd``."""
    p = OneLineErrorParser(
        prog="certd",
        description="ForkGate verifier certificate authority. Every verb: one-line errors on "
        "stderr, exit 0 ok, 1 refused or failed, 2 usage, 3 unreachable (docs/exit-codes.md).",
    )
    sub = p.add_subparsers(dest="command", required=True)
    config_help = "JSON config file ('-': stdin; every key: certd config --print-default)"

    s = add_verb(
        sub,
        "serve",
        "serve Verifier, Authority, Ledger and Info over gRPC",
        "0 stopped cleanly on SIGTERM/SIGINT, 1 refused to start (a store the log "
        "does not explain), 2 a bad config or argument, 3 the ledger store unreachable",
        _cmd_serve,
    )
    s.add_argument(
        "--data-dir",
        type=Path,
        default=None,
        help="data dir: signing key, SQLite ledger (default ./certd-data)",
    )
    s.add_argument("--listen", default=None, help="default 127.0.0.1:50051 (loopback only)")
    s.add_argument("--config", type=Path, default=None, help=config_help)
    s.add_argument(
        "--ledger",
        default=None,
        help="redis://HOST:PORT/DB: a replica of a cluster sharing this Redis ledger "
        "(default: the embedded SQLite ledger in the data dir)",
    )
    s.add_argument("--redis-prefix", default=None, help="key prefix in Redis (default certd)")

    k = add_verb(
        sub,
        "keygen",
        "create an Ed25519 log key (C2SP signed-note format)",
        "0 written, 2 OUT exists (without --force) or cannot be written",
        _cmd_keygen,
    )
    k.add_argument("--name", default="forkgate.local/certd", help="the key's name")
    k.add_argument(
        "--out",
        default="certd-data/signing.key",
        help="private key file (mode 0600; its vkey goes to OUT.pub); '-': the private key "
        "to stdout and the vkey to stderr",
    )
    k.add_argument("--force", action="store_true", help="overwrite an existing OUT")

    f = add_verb(
        sub,
        "families",
        "enumerate feasible entry families of a task",
        "0 enumerated, 2 bad --numbers or --target, or more numbers than the enumeration takes",
    )
    fsub = f.add_subparsers(dest="domain", required=True)
    fc = add_verb(
        fsub,
        "countdown",
        "a Countdown task: every (first operand, operator) label "
        "with a witness, grouped into pseudo-fork families",
        "0 enumerated, 2 bad --numbers or --target, or more numbers than the enumeration takes",
    )
    fc.add_argument("--numbers", required=True, help="comma-separated integers, e.g. 25,5,4,3")
    fc.add_argument("--target", type=int, required=True, help="an integer, e.g. 83")
    fc.add_argument("--at-most-once", action="store_true", help="numbers may go unused")
    fc.add_argument("--json", action="store_true", help="machine-readable output")
    fc.set_defaults(fn=_cmd_families)

    a = add_verb(
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
    where.add_argument("--ledger", help="redis://HOST:PORT/DB: audit a cluster's Redis ledger")
    a.add_argument("--redis-prefix", default=None, help="key prefix in Redis (default certd)")
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
        "(default: $XDG_STATE_HOME/forkgate/audit-<hash of the log's place>.json)",
    )
    a.add_argument(
        "--reset-state",
        action="store_true",
        help="forget the trusted checkpoint first (after deliberately recreating a data dir)",
    )

    d = add_verb(
        sub,
        "doctor",
        "report the sandboxes' isolation on this machine",
        "0 the configured code backend is usable, 1 it is not, 2 a bad config",
        _cmd_doctor,
    )
    d.add_argument("--config", type=Path, default=None, help=config_help)
    d.add_argument("--docker", action="store_true", help="also check the Docker backend")

    r = add_verb(
        sub,
        "kappa-report",
        "is a κ decisive? within- vs between-family variance of downstream success",
        "0 reported, 2 an unreadable or malformed input, or a --kappa no row has",
        _cmd_kappa_report,
    )
    r.add_argument(
        "--in",
        dest="input",
        required=True,
        help="JSONL of verified rollouts, e.g. forkgate verify-batch output ('-' for stdin)",
    )
    r.add_argument("--kappa", default="", help="report this κ only (default: every κ found)")

    from certd.config_cli import add_parser as add_config_parser
    from certd.info_cli import add_parser as add_info_parser
    from certd.ops_cli import add_parsers as add_ops_parsers

    add_ops_parsers(sub)
    add_info_parser(sub)
    add_config_parser(sub)

    for cmd in (s, k, a, d, r):
        cmd.add_argument("--json", action="store_true", help="machine-readable output")
    finish_parser(p, version=True)
    return p


def main(argv: Sequence[str] | None = None) -> int:
    """Run the CLI; return the exit status."""
    args = build_parser().parse_args(argv)
    try:
        return int(args.fn(args))
    except CertdError as e:  # one line: on stderr, or with --json one object on stdout
        if getattr(args, "json", False):
            _emit(args, {"error": type(e).__name__, "message": str(e)}, "")
        else:
            print(f"certd: error: {e}", file=sys.stderr, flush=True)
        return exit_code_of(e)


if __name__ == "__main__":
    raise SystemExit(main())
