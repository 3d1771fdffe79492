"""A throwaway PKI for TLS tests: a CA, a server certificate for a DNS name (no IP SAN), a
client certificate, and a bearer tokens file, written with ``cryptography``."""

from __future__ import annotations

import datetime
import hashlib
import json
from dataclasses import dataclass
from pathlib import Path

from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import NameOID

__all__ = ["Pki", "make_pki"]

SERVER_NAME = "certd.cluster.test"


@dataclass(frozen=True)
class Pki:
    """Paths of the files ``make_pki`` wrote, and the names and tokens they hold."""

    ca: Path
    server_cert: Path
    server_key: Path
    client_cert: Path
    client_key: Path
    tokens_file: Path
    server_name: str
    tokens: dict[str, list[str]]

    def token_file(self, token: str) -> Path:
        """A file holding ``token`` (mode 0600)."""
        path = self.ca.parent / f"{token}.token"
        path.write_text(token + "\n")
        path.chmod(0o600)
        return path


def _name(cn: str) -> x509.Name:
    return x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, cn)])


def _issue(
    cn: str, ca: tuple[ec.EllipticCurvePrivateKey, str] | None, dns: str | None
) -> tuple[ec.EllipticCurvePrivateKey, x509.Certificate]:
    key = ec.generate_private_key(ec.SECP256R1())
    now = datetime.datetime.now(datetime.UTC)
    b = (
        x509.CertificateBuilder()
        .subject_name(_name(cn))
        .issuer_name(_name(ca[1] if ca else cn))
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - datetime.timedelta(minutes=5))
        .not_valid_after(now + datetime.timedelta(days=1))
        .add_extension(x509.BasicConstraints(ca=ca is None, path_length=None), critical=True)
    )
    if dns is not None:
        b = b.add_extension(x509.SubjectAlternativeName([x509.DNSName(dns)]), critical=False)
    return key, b.sign(ca[0] if ca else key, hashes.SHA256())


def _write(stem: Path, key: ec.EllipticCurvePrivateKey, cert: x509.Certificate) -> None:
    stem.with_suffix(".key").write_bytes(
        key.private_bytes(
            serialization.Encoding.PEM,
            serialization.PrivateFormat.PKCS8,
            serialization.NoEncryption(),
        )
    )
    stem.with_suffix(".key").chmod(0o600)  # certd refuses a private key others may read
    stem.with_suffix(".crt").write_bytes(cert.public_bytes(serialization.Encoding.PEM))


def make_pki(d: Path, tokens: dict[str, list[str]] | None = None) -> Pki:
    """Write a CA, a server certificate for ``SERVER_NAME`` only, a client certificate and a
    tokens file under ``d``."""
    d.mkdir(parents=True, exist_ok=True)
    ca_key, ca = _issue("cluster-test-ca", None, None)
    _write(d / "ca", ca_key, ca)
    _write(d / "server", *_issue("certd", (ca_key, "cluster-test-ca"), SERVER_NAME))
    _write(d / "client", *_issue("trainer", (ca_key, "cluster-test-ca"), None))
    tokens = tokens or {"c-token": ["certify", "verify"], "a-token": ["audit"]}
    entries = [
        {"sha256": hashlib.sha256(t.encode()).hexdigest(), "principal": t, "roles": roles}
        for t, roles in tokens.items()
    ]
    (d / "tokens.json").write_text(json.dumps({"tokens": entries}))
    return Pki(
        ca=d / "ca.crt",
        server_cert=d / "server.crt",
        server_key=d / "server.key",
        client_cert=d / "client.crt",
        client_key=d / "client.key",
        tokens_file=d / "tokens.json",
        server_name=SERVER_NAME,
        tokens=tokens,
    )
