"""The ``certd`` command line: serve, keygen, families, audit, doctor, kappa-report, kappa-fit.

Example::

    certd serve                                  # ./certd-data, 127.0.0.1:50051
    certd families countdown --numbers 25,5,4,3 --target 83 --json
    certd audit --data-dir certd-data --json
    certd doctor                                 # what isolation the sandboxes get here
    certd kappa-report --in verdicts.jsonl --json
    certd kappa-fit --config certd.json --rollouts trusted.jsonl   # operator: record κ models

Every command takes ``--json``. The library raises typed errors; this module renders them and
exits with the codes of ``certd.exitcodes`` (docs/exit-codes.md): 0 all good, 1 refused or
failed verification (a failed audit, a store the log does not explain), 2 usage and input
errors, 3 a server or store that cannot be reached.
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import signal
import socket
import sys
import threading
from collections.abc import Sequence
from pathlib import Path
from types import FrameType
from typing import TYPE_CHECKING, Any

from certd.atomicfile import write_atomic
from certd.audit_cli import add_parser as add_audit_parser
from certd.clihelp import OneLineErrorParser, add_verb, emit, finish_parser
from certd.errors import (
    CertdError,
    ConfigError,
    InvalidInputError,
    SigningError,
)
from certd.exitcodes import EXIT_INTERRUPTED, exit_code_of
from certd.kappa_cli import add_parser as add_kappa_fit_parser
from certd.rotate_cli import add_parser as add_rotate_key_parser

if TYPE_CHECKING:  # the config (pydantic) is imported by the verbs that read one
    from certd.config import CertdConfig

__all__ = ["main"]


def _with_cluster(cfg: CertdConfig, **fields: object) -> CertdConfig:
    """``cfg`` with fields of its cluster section replaced (None values ignored)."""
    from pydantic import ValidationError

    from certd.config import CertdConfig, describe_validation_error

    cluster = cfg.cluster.model_dump()
    cluster.update({k: v for k, v in fields.items() if v is not None})
    try:
        return CertdConfig.model_validate({**cfg.model_dump(), "cluster": cluster})
    except ValidationError as e:
        raise ConfigError(f"invalid cluster settings: {describe_validation_error(e)}") from e


def _check_port_free(listen: str) -> None:
    """Fail with one line when ``host:port`` is taken (port 0 picks a free one).

    Raises:
        ConfigError: another process listens there (exit 2).
    """
    host, _, port = listen.rpartition(":")
    host = host.strip("[]")
    if not port.isdigit() or int(port) == 0:
        return  # gRPC reports a malformed address itself
    try:
        infos = socket.getaddrinfo(host or None, int(port), type=socket.SOCK_STREAM)
    except OSError:
        return  # gRPC reports an unresolvable host itself
    for family, kind, proto, _, addr in infos:
        with socket.socket(family, kind, proto) as probe:
            probe.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)  # as gRPC binds
            try:
                probe.bind(addr)
            except OSError as e:
                raise ConfigError(f"cannot listen on {listen}: {e.strerror}") from e


def _cmd_serve(args: argparse.Namespace) -> int:
    from certd.config import load_config
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
    _check_port_free(cfg.listen)  # before the server starts its math workers and threads
    server = CertdServer(cfg)
    port = server.start()
    done = threading.Event()

    def on_signal(signum: int, frame: FrameType | None) -> None:
        done.set()

    signal.signal(signal.SIGTERM, on_signal)
    signal.signal(signal.SIGINT, on_signal)
    host = cfg.listen.rsplit(":", 1)[0]
    emit(
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
    # Woken at least every 0.5 s: the kernel may deliver SIGTERM to any thread (gRPC's, the
    # committer's), and then only a main thread that runs Python again calls ``on_signal``;
    # a wait without a timeout would sleep through it.
    while not done.wait(0.5):
        pass
    server.stop()
    emit(args, {"event": "stopped"}, "certd stopped")
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
        write_atomic(out.with_suffix(".pub"), (vkey + "\n").encode(), mode=0o644)
    except SigningError as e:
        raise InvalidInputError(f"--out: {e}", field="out") from e
    except OSError as e:
        raise InvalidInputError(f"--out: cannot write {out}: {e.strerror}", field="out") from e
    emit(
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
    lines = [  # a label is what κ returns; a family is a set of labels (one solution family)
        f"{len(labels)} feasible labels in {len(families)} families"
        f"{'' if found.complete else ' (family computation capped)'}"
    ]
    for n, fam in enumerate(families):
        members = ", ".join(
            f"({labels[i]['operand']}, {labels[i]['operator']}) {labels[i]['witness']}" for i in fam
        )
        lines.append(f"  family {n}: {members}")
    doc = {
        "labels": labels,
        "families": families,
        "complete": found.complete,
        "certifiable": found.certifiable,
    }
    emit(args, doc, "\n".join(lines))
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
    emit(args, {"kappas": reports}, "\n".join(lines))
    return 0


def _cmd_doctor(args: argparse.Namespace) -> int:
    from certd.config import load_config
    from sandboxes.doctor import diagnose_bwrap, diagnose_docker, diagnose_gvisor

    cfg = load_config(args.config)
    bwrap = diagnose_bwrap()
    docker = (
        diagnose_docker(cfg.code.docker_image, cfg.code.docker_runtime)
        if cfg.code.backend == "docker" or args.docker
        else []
    )
    gvisor = diagnose_gvisor() if cfg.code.backend == "gvisor" else []
    findings = bwrap + docker + gvisor
    chosen = {"docker": docker, "gvisor": gvisor}.get(cfg.code.backend, bwrap)
    failed = [f for f in chosen if f.status == "fail"]
    lines = [f"{f.status.upper():4}  {f.name}: {f.detail}" for f in findings]
    lines.append(f"code backend: {cfg.code.backend} ({'not usable' if failed else 'usable'})")
    emit(
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


_CONFIG_HELP = "JSON config file ('-': stdin; every key: certd config --print-default)"


def _add_serve(sub: Any) -> argparse.ArgumentParser:
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
    s.add_argument("--config", type=Path, default=None, help=_CONFIG_HELP)
    s.add_argument(
        "--ledger",
        default=None,
        help="redis://HOST:PORT/DB or postgresql://HOST[,HOST2]/DB: a replica of a cluster "
        "sharing this ledger "
        "(default: the embedded SQLite ledger in the data dir)",
    )
    s.add_argument("--redis-prefix", default=None, help="key prefix in Redis (default certd)")
    return s


def _add_keygen(sub: Any) -> argparse.ArgumentParser:
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
    return k


def _add_families(sub: Any) -> None:
    """``families`` and its one domain ``countdown`` (which takes its own ``--json``)."""
    exits = "0 enumerated, 2 bad --numbers or --target, or more numbers than the enumeration takes"
    f = add_verb(sub, "families", "enumerate feasible entry families of a task", exits)
    fsub = f.add_subparsers(dest="domain", required=True)
    fc = add_verb(
        fsub,
        "countdown",
        "a Countdown task: every (first operand, operator) label "
        "with a witness, grouped into pseudo-fork families",
        exits,
    )
    fc.add_argument("--numbers", required=True, help="comma-separated integers, e.g. 25,5,4,3")
    fc.add_argument("--target", type=int, required=True, help="an integer, e.g. 83")
    fc.add_argument("--at-most-once", action="store_true", help="numbers may go unused")
    fc.add_argument("--json", action="store_true", help="machine-readable output")
    fc.set_defaults(fn=_cmd_families)


def _add_doctor(sub: Any) -> argparse.ArgumentParser:
    d = add_verb(
        sub,
        "doctor",
        "report the sandboxes' isolation on this machine",
        "0 the configured code backend is usable, 1 it is not, 2 a bad config",
        _cmd_doctor,
    )
    d.add_argument("--config", type=Path, default=None, help=_CONFIG_HELP)
    d.add_argument("--docker", action="store_true", help="also check the Docker backend")
    return d


def _add_kappa_report(sub: Any) -> argparse.ArgumentParser:
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
    return r


def build_parser() -> argparse.ArgumentParser:
    """The argument parser of ``certd``: one ``_add_…`` per verb, in ``--help`` order."""
    from certd.config_cli import add_parser as add_config_parser
    from certd.info_cli import add_parser as add_info_parser
    from certd.ops_cli import add_parsers as add_ops_parsers

    p = OneLineErrorParser(
        prog="certd",
        description="ForkGate verifier certificate authority. Every verb: one-line errors on "
        "stderr, exit 0 ok, 1 refused or failed, 2 usage, 3 unreachable (docs/exit-codes.md).",
    )
    sub = p.add_subparsers(dest="command", required=True)
    s = _add_serve(sub)
    k = _add_keygen(sub)
    _add_families(sub)
    verbs = [
        s,
        k,
        add_audit_parser(sub),
        _add_doctor(sub),
        _add_kappa_report(sub),
        add_kappa_fit_parser(sub),
        add_rotate_key_parser(sub),
    ]
    add_ops_parsers(sub)
    add_info_parser(sub)
    add_config_parser(sub)
    for cmd in verbs:
        cmd.add_argument("--json", action="store_true", help="machine-readable output")
    finish_parser(p, version=True)
    return p


def main(argv: Sequence[str] | None = None) -> int:
    """Run the CLI; return the exit status (130 on Ctrl-C, with one line on stderr)."""
    try:
        return _main(argv)
    except KeyboardInterrupt:
        print("certd: interrupted", file=sys.stderr, flush=True)
        return EXIT_INTERRUPTED


def _main(argv: Sequence[str] | None) -> int:
    args = build_parser().parse_args(argv)
    try:
        return int(args.fn(args))
    except CertdError as e:  # one line: on stderr, or with --json one object on stdout
        if getattr(args, "json", False):
            emit(args, {"error": type(e).__name__, "message": str(e)}, "")
        else:
            print(f"certd: error: {e}", file=sys.stderr, flush=True)
        return exit_code_of(e)


if __name__ == "__main__":
    raise SystemExit(main())
