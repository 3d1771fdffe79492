"""Access control over real gRPC: TLS, mutual TLS, bearer tokens, roles, log-key rotation.

Certificates are generated here with ``cryptography``: a CA, a server certificate for
127.0.0.1, and client certificates.
"""

from __future__ import annotations

import datetime
import hashlib
import ipaddress
import json
import time
from collections.abc import Iterator
from pathlib import Path

import grpc
import pytest
from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import NameOID
from grpc_health.v1 import health_pb2, health_pb2_grpc
from server_helpers import LAZY_MATH, NO_POOL

from certd.cli import main as certd_main
from certd.config import AccessConfig, CertdConfig
from certd.errors import ConfigError
from certd.ledger.audit import audit_store
from certd.ledger.store.sqlite import SQLiteStore
from certd.service.access import required_role
from certd.service.server import CertdServer
from certd.signing.dsse import KeyRing, TrustedKey
from certd.signing.keys import SigningKey, save_signing_key
from certd.statements import verify_certificate
from forkgate import CertdClient, ForkgateError

TASK = {"domain": "countdown", "task": {"numbers": [25, 5, 4, 3], "target": 83}}
TOKENS = {
    "v-token": ["verify"],
    "c-token": ["certify", "verify"],
    "a-token": ["audit"],
    "o-token": ["operator"],
}


def _name(cn: str) -> x509.Name:
    return x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, cn)])


def _issue(
    subject: str, issuer_key: ec.EllipticCurvePrivateKey | None, issuer: str, ca: bool, ip: bool
) -> tuple[ec.EllipticCurvePrivateKey, x509.Certificate]:
    key = ec.generate_private_key(ec.SECP256R1())
    now = datetime.datetime.now(datetime.UTC)
    b = (
        x509.CertificateBuilder()
        .subject_name(_name(subject))
        .issuer_name(_name(issuer))
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - datetime.timedelta(minutes=5))
        .not_valid_after(now + datetime.timedelta(days=1))
        .add_extension(x509.BasicConstraints(ca=ca, path_length=None), critical=True)
    )
    if ip:
        b = b.add_extension(
            x509.SubjectAlternativeName([x509.IPAddress(ipaddress.ip_address("127.0.0.1"))]),
            critical=False,
        )
    return key, b.sign(issuer_key or key, hashes.SHA256())


def _write(path: Path, key: ec.EllipticCurvePrivateKey, cert: x509.Certificate) -> None:
    path.with_suffix(".key").write_bytes(
        key.private_bytes(
            serialization.Encoding.PEM,
            serialization.PrivateFormat.PKCS8,
            serialization.NoEncryption(),
        )
    )
    path.with_suffix(".key").chmod(0o600)  # certd refuses a private key others may read
    path.with_suffix(".crt").write_bytes(cert.public_bytes(serialization.Encoding.PEM))


@pytest.fixture(scope="module")
def pki(tmp_path_factory: pytest.TempPathFactory) -> Path:
    d = tmp_path_factory.mktemp("pki")
    ca_key, ca = _issue("test-ca", None, "test-ca", ca=True, ip=False)
    _write(d / "ca", ca_key, ca)
    _write(d / "server", *_issue("certd", ca_key, "test-ca", ca=False, ip=True))
    _write(d / "trainer", *_issue("trainer", ca_key, "test-ca", ca=False, ip=False))
    _write(d / "stranger", *_issue("stranger", ca_key, "test-ca", ca=False, ip=False))
    rogue_key, _ = _issue("rogue-ca", None, "rogue-ca", ca=True, ip=False)
    _write(d / "rogue", *_issue("trainer", rogue_key, "rogue-ca", ca=False, ip=False))
    tokens = [
        {"sha256": hashlib.sha256(t.encode()).hexdigest(), "principal": t, "roles": roles}
        for t, roles in TOKENS.items()
    ]
    (d / "tokens.json").write_text(json.dumps({"tokens": tokens}))
    return d


def _server(tmp_path: Path, access: AccessConfig) -> CertdServer:
    cfg = CertdConfig(
        data_dir=tmp_path / "data",
        listen="127.0.0.1:0",
        access=access,
        math=LAZY_MATH,
        countdown=NO_POOL,
    )
    server = CertdServer(cfg)
    server.start()
    return server


@pytest.fixture()
def tls_server(tmp_path: Path, pki: Path) -> Iterator[CertdServer]:
    access = AccessConfig(
        tls_cert_file=pki / "server.crt",
        tls_key_file=pki / "server.key",
        tokens_file=pki / "tokens.json",
    )
    server = _server(tmp_path, access)
    try:
        yield server
    finally:
        server.stop(grace_s=1.0)


def test_roles_of_methods() -> None:
    assert required_role("/certd.v1.Verifier/VerifyStream") == "verify"
    assert required_role("/certd.v1.Authority/EnumerateFamilies") == "verify"
    assert required_role("/certd.v1.Authority/CertifyBatch") == "certify"
    assert required_role("/certd.v1.Ledger/GetEntries") == "audit"
    assert required_role("/grpc.health.v1.Health/Check") is None
    with pytest.raises(Exception, match="no role"):
        required_role("/certd.v1.Other/Method")


def test_tokens_and_roles_over_tls(tls_server: CertdServer, pki: Path) -> None:
    address = f"127.0.0.1:{tls_server.port}"
    vkey = tls_server.key.verifier().to_vkey()
    ca = pki / "ca.crt"
    with CertdClient(address, tls_ca=ca, token="c-token", trusted_keys=[vkey]) as c:
        cert = c.certify(TASK, "25,-", "(25-5)*4+3")
        assert c.verify(TASK, "<answer>(25-5)*4+3</answer>").status
        with pytest.raises(ForkgateError, match=r"lacks role 'audit'"):
            c.checkpoint()
    with CertdClient(address, tls_ca=ca, token="v-token") as c:
        c.verify(TASK, "<answer>(25-5)*4+3</answer>")
        with pytest.raises(ForkgateError, match="lacks role 'certify'"):
            c.certify(TASK, "25,-", "(25-5)*4+3")
    with CertdClient(address, tls_ca=ca, token="a-token") as c:
        assert c.checkpoint().size > cert.ledger_index
        with pytest.raises(ForkgateError, match="lacks role 'verify'"):
            c.verify(TASK, "<answer>1</answer>")
    with CertdClient(address, tls_ca=ca, token="wrong") as c:
        with pytest.raises(ForkgateError, match="unknown bearer token"):
            c.verify(TASK, "<answer>1</answer>")
    with CertdClient(address, tls_ca=ca) as c:
        with pytest.raises(ForkgateError, match=r"expected a bearer token"):
            c.verify(TASK, "<answer>1</answer>")
    # The asyncio client speaks TLS with a token too.
    import asyncio

    from forkgate import AsyncCertdClient

    async def verify_async() -> int:
        async with AsyncCertdClient(address, tls_ca=ca, token="v-token") as ac:
            return int((await ac.verify(TASK, "<answer>(25-5)*4+3</answer>")).status)

    assert asyncio.run(verify_async()) > 0
    # The auditor reads the ledger over TLS with an audit token; a certify token is refused.
    from certd.cli import main as certd_main

    state = pki.parent / f"audit-{tls_server.port}.json"
    base = ["audit", "--server", address, "--trust", vkey, "--tls-ca", str(ca), "--json"]
    assert certd_main([*base, "--token", "a-token", "--state", str(state)]) == 0
    assert certd_main([*base, "--token", "c-token", "--state", str(state)]) == 1
    # Health needs no credentials (probes), but still TLS.
    creds = grpc.ssl_channel_credentials(ca.read_bytes())
    with grpc.secure_channel(address, creds) as ch:
        reply = health_pb2_grpc.HealthStub(ch).Check(health_pb2.HealthCheckRequest(), timeout=10)
        assert reply.status == health_pb2.HealthCheckResponse.SERVING
    # A plaintext client cannot talk to the TLS port.
    with grpc.insecure_channel(address) as ch:
        with pytest.raises(grpc.RpcError):
            health_pb2_grpc.HealthStub(ch).Check(health_pb2.HealthCheckRequest(), timeout=5)


def test_mutual_tls(tmp_path: Path, pki: Path) -> None:
    access = AccessConfig(
        tls_cert_file=pki / "server.crt",
        tls_key_file=pki / "server.key",
        client_ca_file=pki / "ca.crt",
        client_roles={"trainer": ["certify", "verify"]},
    )
    server = _server(tmp_path, access)
    address = f"127.0.0.1:{server.port}"
    ca = pki / "ca.crt"
    try:
        with CertdClient(
            address, tls_ca=ca, tls_cert=pki / "trainer.crt", tls_key=pki / "trainer.key"
        ) as c:
            c.certify(TASK, "25,-", "(25-5)*4+3")
        with CertdClient(
            address, tls_ca=ca, tls_cert=pki / "stranger.crt", tls_key=pki / "stranger.key"
        ) as c:
            with pytest.raises(ForkgateError, match="has no roles"):
                c.verify(TASK, "<answer>1</answer>")
        # A certificate from another CA, or none: the handshake fails.
        with CertdClient(
            address, tls_ca=ca, tls_cert=pki / "rogue.crt", tls_key=pki / "rogue.key"
        ) as c:
            with pytest.raises(ForkgateError):
                c.verify(TASK, "<answer>1</answer>")
        with CertdClient(address, tls_ca=ca) as c:
            with pytest.raises(ForkgateError):
                c.verify(TASK, "<answer>1</answer>")
    finally:
        server.stop(grace_s=1.0)


def test_plaintext_beyond_loopback_is_refused(tmp_path: Path) -> None:
    cfg = CertdConfig(
        data_dir=tmp_path / "d", listen="0.0.0.0:0", math=LAZY_MATH, countdown=NO_POOL
    )
    server = CertdServer(cfg)
    try:
        with pytest.raises(ConfigError, match="beyond loopback needs TLS"):
            server.start()
    finally:
        server.stop(grace_s=0)


def test_log_key_rotation_keeps_old_certificates_verifiable(tmp_path: Path) -> None:
    data = tmp_path / "data"
    cfg = CertdConfig(data_dir=data, listen="127.0.0.1:0", math=LAZY_MATH, countdown=NO_POOL)
    server = CertdServer(cfg)
    server.start()
    old_key = server.key.verifier()
    with CertdClient(f"127.0.0.1:{server.port}") as c:
        old_cert = c.certify(TASK, "25,-", "(25-5)*4+3")
    server.stop(grace_s=1.0)
    # The rotation goes through the log (tests/integration/test_key_rotation.py): the
    # key-rotation statement, then the new key; time windows still apply on top.
    save_signing_key(tmp_path / "new.key", SigningKey.generate(cfg.key_name))
    argv = ["rotate-key", "--data-dir", str(data), "--new-key", str(tmp_path / "new.key")]
    assert certd_main(argv) == 0
    old_pub = data / f"signing-{old_key.key_id_hex}.pub"
    rotated_at = int(time.time())
    time.sleep(1.1)  # the new key's window starts after every certificate of the old one
    access = AccessConfig(previous_log_keys=[str(old_pub)])
    server = CertdServer(cfg.model_copy(update={"access": access}))
    server.start()
    new_key = server.key.verifier()
    assert new_key.key_id != old_key.key_id
    ring = KeyRing(
        [TrustedKey(old_key, not_after=rotated_at), TrustedKey(new_key, not_before=rotated_at + 1)]
    )
    try:
        with CertdClient(f"127.0.0.1:{server.port}", trusted_keys=ring) as c:
            new_cert = c.certify(TASK, "4,*", "4*(25-3)-5")
            again = c.get_certificate(certificate_id=old_cert.certificate_id)
        # The old certificate (old key, inside its window) under a checkpoint of the new key.
        verify_certificate(again, ring)
        verify_certificate(new_cert, ring)
        # A certificate signed by the old key claiming a time after its window is refused.
        with pytest.raises(Exception, match="not a trusted key"):
            verify_certificate(
                again,
                KeyRing([TrustedKey(old_key, not_after=rotated_at - 10**6), TrustedKey(new_key)]),
            )
    finally:
        server.stop(grace_s=1.0)
    store = SQLiteStore(data / "ledger.sqlite")
    try:
        report = audit_store(store, KeyRing([old_key, new_key]), None)
        assert report.ok, report.summary()
    finally:
        store.close()


def _write_tokens(path: Path, tokens: dict[str, list[str]]) -> None:
    rows = [
        {"sha256": hashlib.sha256(t.encode()).hexdigest(), "principal": t, "roles": roles}
        for t, roles in tokens.items()
    ]
    tmp = path.with_suffix(".tmp")
    tmp.write_text(json.dumps({"tokens": rows}))
    tmp.replace(path)  # how an operator (or a mounted secret) swaps the file


def test_tokens_file_reloads_without_restart(tmp_path: Path, pki: Path) -> None:
    tokens = tmp_path / "tokens.json"
    _write_tokens(tokens, {"old-token": ["verify"]})
    access = AccessConfig(
        tls_cert_file=pki / "server.crt", tls_key_file=pki / "server.key", tokens_file=tokens
    )
    server = _server(tmp_path, access)
    address, ca = f"127.0.0.1:{server.port}", pki / "ca.crt"
    answer = "<answer>(25-5)*4+3</answer>"
    try:
        with CertdClient(address, tls_ca=ca, token="old-token") as c:
            assert c.verify(TASK, answer).status
        _write_tokens(tokens, {"new-token": ["verify"]})  # revoke old, add new
        with CertdClient(address, tls_ca=ca, token="old-token") as c:
            with pytest.raises(ForkgateError, match="unknown bearer token"):
                c.verify(TASK, answer)
        with CertdClient(address, tls_ca=ca, token="new-token") as c:
            assert c.verify(TASK, answer).status
            tokens.write_text("{not json")  # a broken edit keeps the last good tokens
            assert c.verify(TASK, answer).status
    finally:
        server.stop(grace_s=1.0)


def test_only_an_operator_registers_acceptance_task_sets(
    tls_server: CertdServer, pki: Path
) -> None:
    from forkgate.acceptance import register_task_set

    address, ca = f"127.0.0.1:{tls_server.port}", pki / "ca.crt"
    with CertdClient(address, tls_ca=ca, token="c-token") as c:
        with pytest.raises(ForkgateError, match="lacks role 'operator'"):
            register_task_set(c, "band-1", [TASK], k=8)
    with CertdClient(address, tls_ca=ca, token="o-token") as o:
        try:  # the access layer lets it through; the set itself may still be refused
            register_task_set(o, "band-1", [TASK], k=8)
        except ForkgateError as e:
            assert "lacks role" not in str(e)
