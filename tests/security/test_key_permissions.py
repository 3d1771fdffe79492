"""certd refuses to start with a private key file other users may read (signing or TLS key)."""

from __future__ import annotations

from pathlib import Path

import pytest

from certd.config import AccessConfig
from certd.errors import ConfigError
from certd.service.access import server_credentials
from certd.service.server import ensure_key
from certd.signing.keys import SigningKey, save_signing_key


@pytest.mark.parametrize("mode", [0o644, 0o604, 0o602, 0o601, 0o666])
def test_a_signing_key_open_to_others_is_refused(tmp_path: Path, mode: int) -> None:
    path = tmp_path / "signing.key"
    save_signing_key(path, SigningKey.generate("forkgate.test/perm"))
    path.chmod(mode)
    with pytest.raises(ConfigError, match=r"open to other users.*chmod 600"):
        ensure_key(path, "forkgate.test/perm")
    path.chmod(0o440)  # group access is allowed (Kubernetes secrets and fsGroup)
    assert ensure_key(path, "forkgate.test/perm").name == "forkgate.test/perm"


def test_a_tls_key_open_to_others_is_refused(tmp_path: Path) -> None:
    key, cert = tmp_path / "server.key", tmp_path / "server.crt"
    key.write_text("not read: refused first")
    cert.write_text("unused")
    key.chmod(0o644)
    with pytest.raises(ConfigError, match=r"access\.tls_key_file"):
        server_credentials(AccessConfig(tls_cert_file=cert, tls_key_file=key))
