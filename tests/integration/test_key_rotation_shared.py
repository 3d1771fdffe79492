"""``certd rotate-key`` on a cluster's shared ledger (real Redis, real PostgreSQL 15), and the
rotation served to clients (Ledger.GetKeyRotations).

certd certifies under the old key on the shared store, stops; ``certd rotate-key --config``
(the config names the store) records the ``key-rotation/v1`` statement there; certd restarts
on the new key and certifies again. A client that trusts only the old key fetches the rotation
from the server, verifies it (inclusion in the last checkpoint the old key signed), follows the
log onto the new key and verifies both certificates; the audit of the store passes.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from server_helpers import LAZY_MATH

from certd.cli import main as certd_main
from certd.config import AccessConfig, CertdConfig, ClusterConfig
from certd.keyrotation import follow, open_rotation_record
from certd.ledger.audit import audit_store
from certd.ledger.store.factory import StoreOptions, open_store
from certd.service.server import CertdServer
from certd.signing.dsse import KeyRing
from certd.signing.keys import SigningKey, load_signing_key, save_signing_key
from certd.statements import verify_certificate
from certd.v1 import authority_pb2
from forkgate import AsyncCertdClient, CertdClient

TASK = {"domain": "countdown", "task": {"numbers": [25, 5, 4, 3], "target": 83}}


@pytest.fixture(params=["redis", "postgresql"])
def shared_url(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[tuple[str, str]]:
    """(ledger URL, prefix or schema) of a fresh shared ledger."""
    if request.param == "redis":
        pytest.importorskip("redis")
        server = request.getfixturevalue("redis_server")
        yield server.url, request.getfixturevalue("redis_prefix")
        return
    pytest.importorskip("psycopg")
    from pg_helpers import PgServer, pg_available, remove_root

    why = pg_available()
    if why:
        pytest.skip(why)
    root = PgServer.make_root()
    pg = PgServer(root).init().start()
    try:
        yield pg.url(), "rotation"
    finally:
        pg.stop()
        remove_root(root)


def _config(data: Path, url: str, prefix: str, access: AccessConfig | None = None) -> CertdConfig:
    name = "postgres_schema" if url.startswith("postgres") else "redis_prefix"
    cluster = ClusterConfig(ledger_url=url, **{name: prefix})
    return CertdConfig(
        data_dir=data,
        listen="127.0.0.1:0",
        math=LAZY_MATH,
        cluster=cluster,
        access=access or AccessConfig(),
    )


async def _key_rotations_aio(address: str) -> list[dict[str, object]]:
    async with AsyncCertdClient(address) as c:
        return await c.key_rotations()


def _serve(cfg: CertdConfig, label: str, witness: str) -> tuple[authority_pb2.Certificate, Any]:
    """Certify one label; also fetch the log's key rotations from the same server."""
    server = CertdServer(cfg)
    server.start()
    try:
        address = f"127.0.0.1:{server.port}"
        with CertdClient(address) as c:
            cert, records = c.certify(TASK, label, witness), c.key_rotations()
        assert asyncio.run(_key_rotations_aio(address)) == records
        return cert, records
    finally:
        server.stop(grace_s=1.0)


def test_rotate_key_on_a_shared_store_and_the_rotation_served_to_clients(
    shared_url: tuple[str, str], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    url, prefix = shared_url
    data = tmp_path / "data"
    cfg = _config(data, url, prefix)
    before, none_yet = _serve(cfg, "25,-", "(25-5)*4+3")
    assert none_yet == []
    old = load_signing_key(data / "signing.key")
    new = SigningKey.generate(cfg.key_name)
    save_signing_key(tmp_path / "new.key", new)
    cfg_file = tmp_path / "certd.json"
    cfg_file.write_text(cfg.model_dump_json())
    argv = ["rotate-key", "--config", str(cfg_file), "--new-key", str(tmp_path / "new.key")]
    assert certd_main([*argv, "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    rot_index = out["rotation_index"]
    assert rot_index > before.ledger_index and out["new_key_id"] == new.key_id_hex

    access = AccessConfig(previous_log_keys=[out["previous_log_key"]])
    after, records = _serve(_config(data, url, prefix, access), "4,*", "4*(25-3)-5")
    assert after.ledger_index > rot_index
    # A client trusting only the old key: the served record proves the rotation.
    assert len(records) == 1
    assert records[0] == json.loads(Path(out["rotation_record"]).read_text())
    rot = open_rotation_record(records[0], KeyRing([old.verifier()]))
    assert rot.index == rot_index and rot.new.key_id_hex == new.key_id_hex
    ring = follow(KeyRing([old.verifier()]), [rot])
    assert verify_certificate(before, ring).ledger_index < rot_index
    assert verify_certificate(after, ring).ledger_index > rot_index

    options = StoreOptions(redis_prefix=prefix, postgres_schema=prefix, redis_appendfsync="any")
    store = open_store(url, options)
    try:
        report = audit_store(store, KeyRing([old.verifier(), new.verifier()]), None)
    finally:
        store.close()
    assert report.ok, report.summary()
