"""What a server serves (``Info/ServerInfo``, ``certd info``) and the config it reads
(``certd config``, ``docs/config-schema.md``), over a real certd on 127.0.0.1.

The access tests reuse test_access's PKI and TLS server (real TLS, real bearer tokens).
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import grpc
import pytest
from server_helpers import LAZY_MATH, NO_POOL
from test_access import pki, tls_server  # noqa: F401  # fixtures

from certd.cli import main as certd_main
from certd.clihelp import package_version
from certd.config import CertdConfig, load_config
from certd.config_cli import default_config_json, schema_markdown
from certd.domains import countdown as cd
from certd.errors import ConfigError
from certd.service.server import SERVICE_NAMES, CertdServer
from certd.v1 import info_pb2, info_pb2_grpc
from forkgate import AsyncCertdClient, CertdClient, ForkgateError

ROOT = Path(__file__).resolve().parents[2]


def _one_line(err: str) -> str:
    lines = [x for x in err.splitlines() if x.strip()]
    assert len(lines) == 1, err
    assert "Traceback" not in err and "errors.pydantic.dev" not in err, err
    return lines[0]


def _run(*argv: str, stdin: str = "") -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "certd.cli", *argv],
        input=stdin, capture_output=True, text=True, timeout=120,
    )  # fmt: skip


def test_server_info_reports_what_the_server_enforces(tmp_path: Path) -> None:
    cfg = CertdConfig.model_validate(
        {
            "data_dir": tmp_path / "d",
            "listen": "127.0.0.1:0",
            "math": {"enabled": False},
            "limits": {"max_batch_items": 77},  # not the default: read from the live config
            "code": {"cpu_time_s": 1.5},
        }
    )
    server = CertdServer(cfg)
    server.start()
    try:
        with CertdClient(f"127.0.0.1:{server.port}") as c:
            c.verify({"domain": "countdown", "numbers": [25, 5, 4, 3], "target": 83}, "1+2")
            info = c.server_info()
    finally:
        server.stop(grace_s=1.0)
    assert info.server_version == package_version()
    assert list(info.services) == list(SERVICE_NAMES)
    by_name = {d.name: d for d in info.domains}
    assert set(by_name) == {"countdown", "code"}  # math disabled: not claimed
    countdown = by_name["countdown"]
    assert countdown.verifier == cd.VERIFIER and countdown.default_kappa == cd.KAPPA
    assert list(countdown.kappas) == [cd.KAPPA] and countdown.status == "ready"
    assert countdown.limits["countdown.max_numbers"] == 8
    assert by_name["code"].limits["code.cpu_time_s"] == 1.5
    assert by_name["code"].isolation == "bwrap"
    assert info.limits["limits.max_batch_items"] == 77
    assert info.limits["limits.max_certify_batch_items"] == 5000
    assert not any(k.startswith("cluster.") for k in info.limits)  # no cluster here
    assert info.log.origin == cfg.ledger.origin and info.log.store == "sqlite"
    assert info.log.key_id == server.key.key_id_hex
    assert info.log.vkey == server.key.verifier().to_vkey()
    assert info.log.size >= 1  # the verify's receipt was logged before the info call
    assert not info.authenticated and not info.tls and info.principal == ""


def test_certd_info_text_and_json(
    address: str, vkey: str, capsys: pytest.CaptureFixture[str]
) -> None:
    assert certd_main(["info", "--server", address, "--json"]) == 0
    info = json.loads(capsys.readouterr().out)
    assert info["log"]["vkey"] == vkey and isinstance(info["log"]["size"], int)
    assert {d["name"] for d in info["domains"]} == {"countdown", "code", "math"}
    assert info["limits"]["limits.max_batch_items"] == 10_000  # an integer, not 10000.0
    assert certd_main(["info", "--addr", address]) == 0
    text = capsys.readouterr().out
    assert f"at {address} (plaintext, unauthenticated)" in text
    assert f"κ {cd.KAPPA} (default)" in text and "math.route.v1" in text
    assert vkey in text


def test_certd_info_of_nobody_is_3(tmp_path: Path, dead_address: str) -> None:
    done = _run("info", "--server", dead_address, "--timeout", "3")
    assert done.returncode == 3
    assert _one_line(done.stderr).startswith(f"certd: error: {dead_address}: UNAVAILABLE")
    missing = _run("info", "--server", dead_address, "--tls-ca", str(tmp_path / "no"))
    assert missing.returncode == 2
    assert _one_line(missing.stderr) == f"certd: error: --tls-ca: {tmp_path / 'no'}: no such file"


def test_server_info_refuses_the_unauthenticated(
    tls_server: CertdServer,  # noqa: F811  # fixture
    pki: Path,  # noqa: F811  # fixture
    capsys: pytest.CaptureFixture[str],
) -> None:
    address = f"127.0.0.1:{tls_server.port}"
    with CertdClient(address, tls_ca=pki / "ca.crt") as anonymous:
        with pytest.raises(ForkgateError, match=r"UNAUTHENTICATED|credentials|token"):
            anonymous.server_info()
    with CertdClient(address, tls_ca=pki / "ca.crt", token="not-a-token") as wrong:
        with pytest.raises(ForkgateError):
            wrong.server_info()
    for token, roles in (("a-token", ["audit"]), ("v-token", ["verify"])):  # any role may ask
        with CertdClient(address, tls_ca=pki / "ca.crt", token=token) as c:
            info = c.server_info()
        assert info.authenticated and info.tls
        assert info.principal == token and list(info.roles) == roles
    # the raw RPC without credentials: UNAUTHENTICATED, and the server keeps serving
    creds = grpc.ssl_channel_credentials(root_certificates=(pki / "ca.crt").read_bytes())
    with grpc.secure_channel(address, creds) as channel:
        with pytest.raises(grpc.RpcError) as caught:
            info_pb2_grpc.InfoStub(channel).ServerInfo(info_pb2.ServerInfoRequest(), timeout=10)
    assert caught.value.code() == grpc.StatusCode.UNAUTHENTICATED
    tls = ["--tls-ca", str(pki / "ca.crt")]
    assert certd_main(["info", "--server", address, *tls]) == 1  # refused: exit 1
    err = capsys.readouterr().err
    assert _one_line(err).startswith(f"certd: error: {address}: UNAUTHENTICATED")
    assert certd_main(["info", "--server", address, *tls, "--token", "a-token", "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["principal"] == "a-token"


def test_print_default_round_trips_through_the_loader(tmp_path: Path) -> None:
    done = _run("config", "--print-default")
    assert done.returncode == 0, done.stderr
    assert done.stdout == default_config_json()
    path = tmp_path / "certd.json"
    path.write_text(done.stdout)
    assert load_config(path) == CertdConfig()
    checked = _run("config", "--check", "-", stdin=done.stdout)  # '-': stdin
    assert checked.returncode == 0, checked.stderr
    every_section = json.loads(done.stdout)
    assert set(every_section) == set(CertdConfig.model_fields)
    schema = json.loads(_run("config", "--schema").stdout)
    assert set(schema["properties"]) == set(CertdConfig.model_fields)


def test_the_schema_page_is_the_generated_one() -> None:
    committed = (ROOT / "docs" / "config-schema.md").read_text(encoding="utf-8")
    assert committed == schema_markdown(), (
        "docs/config-schema.md is stale: certd config --schema-markdown > docs/config-schema.md"
    )
    for name in CertdConfig.model_fields:  # every section and key is on the page
        assert f"`{name}`" in committed


@pytest.mark.parametrize(
    ("config", "wanted"),
    [
        ({"workers": 4}, "unknown key 'workers' (did you mean 'math.workers'?); valid keys of "
                         "the top level: acceptance, access, cluster, code,"),
        ({"ledger": {"max_batch_items": 1}},
         "unknown key 'ledger.max_batch_items' (did you mean 'limits.max_batch_items'?); "
         "valid keys of ledger: group_commit_max_delay_ms,"),
        ({"acceptance": {"task_sets": [{"name": "a", "tasks": [{}], "kk": 1}]}},
         "unknown key 'acceptance.task_sets.0.kk'; valid keys of acceptance.task_sets.0: k,"),
    ],
)  # fmt: skip
def test_a_key_at_the_wrong_level_is_one_line(
    tmp_path: Path, config: dict[str, object], wanted: str
) -> None:
    path = tmp_path / "c.json"
    path.write_text(json.dumps(config))
    with pytest.raises(ConfigError) as caught:
        load_config(path)
    assert wanted in str(caught.value) and "\n" not in str(caught.value)
    done = _run("config", "--check", str(path))
    assert done.returncode == 2
    assert wanted in _one_line(done.stderr)


def test_config_check_of_a_missing_or_broken_file_is_one_line(tmp_path: Path) -> None:
    missing = _run("config", "--check", str(tmp_path / "none.json"))
    assert missing.returncode == 2
    assert _one_line(missing.stderr).endswith("none.json: no such file")
    broken = _run("config", "--check", "-", stdin="{not json")
    assert broken.returncode == 2
    assert "config -: not JSON" in _one_line(broken.stderr)


def test_async_client_mirrors_server_info(address: str) -> None:
    import asyncio

    async def ask() -> info_pb2.ServerInfoResponse:
        async with AsyncCertdClient(address) as c:
            return await c.server_info()

    with CertdClient(address) as c:
        sync = c.server_info()
    assert asyncio.run(ask()) == sync


def test_certd_info_of_a_server_without_the_info_service_is_one_line() -> None:
    """An older certd (or any gRPC server) without Info: UNIMPLEMENTED, exit 1, one line."""
    from concurrent import futures

    from grpc_health.v1 import health, health_pb2_grpc

    server = grpc.server(futures.ThreadPoolExecutor(max_workers=2))
    health_pb2_grpc.add_HealthServicer_to_server(health.HealthServicer(), server)
    port = server.add_insecure_port("127.0.0.1:0")
    server.start()
    try:
        done = _run("info", "--server", f"127.0.0.1:{port}")
    finally:
        server.stop(None)
    assert done.returncode == 1
    assert _one_line(done.stderr).startswith(f"certd: error: 127.0.0.1:{port}: UNIMPLEMENTED")


def test_server_info_refuses_a_client_certificate_without_roles(
    tmp_path: Path,
    pki: Path,  # noqa: F811  # fixture
) -> None:
    from certd.config import AccessConfig

    access = AccessConfig(
        tls_cert_file=pki / "server.crt",
        tls_key_file=pki / "server.key",
        client_ca_file=pki / "ca.crt",
        client_roles={"trainer": ["verify"]},
    )
    cfg = CertdConfig(
        data_dir=tmp_path / "d",
        listen="127.0.0.1:0",
        access=access,
        math=LAZY_MATH,
        countdown=NO_POOL,
    )
    server = CertdServer(cfg)
    server.start()
    address = f"127.0.0.1:{server.port}"
    try:
        tls = {"tls_ca": pki / "ca.crt"}
        with CertdClient(address, tls_cert=pki / "stranger.crt", tls_key=pki / "stranger.key",
                         **tls) as stranger:  # fmt: skip
            with pytest.raises(ForkgateError, match="has no roles"):
                stranger.server_info()
        with CertdClient(address, tls_cert=pki / "trainer.crt", tls_key=pki / "trainer.key",
                         **tls) as trainer:  # fmt: skip
            info = trainer.server_info()  # the server kept serving
        assert info.principal == "trainer" and list(info.roles) == ["verify"]
    finally:
        server.stop(grace_s=1.0)


def test_a_cluster_replica_reports_its_redis_ledger_and_rate_limit(
    tmp_path: Path, redis_server: object, redis_prefix: str
) -> None:
    cfg = CertdConfig.model_validate(
        {
            "data_dir": tmp_path / "d",
            "listen": "127.0.0.1:0",
            "math": {"enabled": False},
            "cluster": {
                "ledger_url": redis_server.url,  # type: ignore[attr-defined]
                "redis_prefix": redis_prefix,
                "rate_limit_per_s": 50,
                "rate_limit_burst": 9,
            },
        }
    )
    server = CertdServer(cfg)
    server.start()
    try:
        with CertdClient(f"127.0.0.1:{server.port}") as c:
            info = c.server_info()
    finally:
        server.stop(grace_s=1.0)
    assert info.log.store == "redis"
    assert info.limits["cluster.rate_limit_per_s"] == 50
    assert info.limits["cluster.rate_limit_burst"] == 9
    assert "cluster.redis_prefix" not in info.limits  # a name, not a limit
