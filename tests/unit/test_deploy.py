"""The cluster deployment files, checked statically (no image build, no cluster).

Kubernetes manifests against the API schemas shipped by ``kubernetes-validate`` (offline),
the compose file's commands against certd's own CLI parser and config model, and the
load balancer's upstreams against the replicas' listen addresses.
"""

from __future__ import annotations

import copy
import json
import re
import subprocess
from pathlib import Path
from typing import Any

import pytest
import yaml

from certd.cli import build_parser
from certd.config import CertdConfig

ROOT = Path(__file__).resolve().parents[2]
DEPLOY = ROOT / "deploy" / "cluster"
K8S_VERSION = "1.30.0"


def k8s_docs() -> list[tuple[str, dict[str, Any]]]:
    out = []
    for path in sorted((DEPLOY / "k8s").glob("*.yaml")):
        for doc in yaml.safe_load_all(path.read_text()):
            out.append((f"{path.name}:{doc['kind']}/{doc['metadata']['name']}", doc))
    return out


@pytest.mark.parametrize(("name", "doc"), k8s_docs(), ids=[n for n, _ in k8s_docs()])
def test_kubernetes_manifest_matches_the_api_schema(name: str, doc: dict[str, Any]) -> None:
    kv = pytest.importorskip("kubernetes_validate")
    kv.validate(doc, K8S_VERSION, strict=True)


def test_the_schema_validator_rejects_a_broken_manifest() -> None:
    kv = pytest.importorskip("kubernetes_validate")
    deployment = copy.deepcopy(next(d for _, d in k8s_docs() if d["kind"] == "Deployment"))
    deployment["spec"]["replicas"] = "three"
    with pytest.raises(kv.ValidationError):
        kv.validate(deployment, K8S_VERSION, strict=True)
    deployment = copy.deepcopy(next(d for _, d in k8s_docs() if d["kind"] == "Deployment"))
    deployment["spec"]["template"]["spec"]["containers"][0]["livenessProbe"]["bogus"] = 1
    with pytest.raises(kv.ValidationError):
        kv.validate(deployment, K8S_VERSION, strict=True)


def test_kubernetes_set_has_every_required_part() -> None:
    kinds = {(d["kind"], d["metadata"]["name"]) for _, d in k8s_docs()}
    for want in [
        ("Deployment", "certd"), ("Service", "certd"), ("StatefulSet", "redis"),
        ("Secret", "certd-keys"), ("ConfigMap", "certd-config"),
        ("PodDisruptionBudget", "certd"), ("StatefulSet", "witness"),
    ]:  # fmt: skip
        assert want in kinds
    assert any(k == "NetworkPolicy" for k, _ in kinds)
    docs = {(d["kind"], d["metadata"]["name"]): d for _, d in k8s_docs()}
    redis = docs[("StatefulSet", "redis")]["spec"]
    assert redis["volumeClaimTemplates"][0]["metadata"]["name"] == "data"
    certd = docs[("Deployment", "certd")]["spec"]
    assert certd["replicas"] == 3
    container = certd["template"]["spec"]["containers"][0]
    for probe in ("startupProbe", "readinessProbe", "livenessProbe"):
        assert probe in container
    args = build_parser().parse_args(container["args"])
    assert args.command == "serve"
    health = build_parser().parse_args(container["readinessProbe"]["exec"]["command"][1:])
    assert health.command == "health"
    cfg = CertdConfig.model_validate(
        json.loads(docs[("ConfigMap", "certd-config")]["data"]["certd.json"])
    )
    assert cfg.cluster.ledger_url and cfg.cluster.redis_appendfsync == "always"
    assert cfg.access.enabled and cfg.access.tls_cert_file is not None  # beyond loopback
    redis_conf = docs[("ConfigMap", "certd-config")]["data"]["redis.conf"]
    assert "appendonly yes" in redis_conf and "appendfsync always" in redis_conf
    pdb = docs[("PodDisruptionBudget", "certd")]["spec"]
    assert pdb["minAvailable"] < certd["replicas"]


def compose() -> dict[str, Any]:
    return dict(yaml.safe_load((DEPLOY / "compose.yaml").read_text()))


def test_compose_cluster_is_loopback_only_with_valid_commands() -> None:
    services = compose()["services"]
    assert {"redis", "certd-1", "certd-2", "certd-3", "lb", "witness"} <= set(services)
    listens = []
    for name, svc in services.items():
        assert svc["network_mode"] == "host", name  # no bridge networks
        cmd = [str(c) for c in svc.get("command", [])]
        if name.startswith("certd-"):
            args = build_parser().parse_args(cmd)
            assert args.command == "serve" and args.listen.startswith("127.0.0.1:")
            assert args.ledger == "redis://127.0.0.1:6390/0"
            listens.append(args.listen)
            health = build_parser().parse_args(svc["healthcheck"]["test"][2:])
            assert health.server == args.listen
        if name == "witness":
            args = build_parser().parse_args(cmd)
            assert args.command == "witness" and args.log == "127.0.0.1:50051"
            assert args.listen.startswith("127.0.0.1:")
    redis = [str(c) for c in services["redis"]["command"]]
    assert redis[redis.index("--bind") + 1] == "127.0.0.1"
    assert redis[redis.index("--appendonly") + 1] == "yes"
    assert redis[redis.index("--appendfsync") + 1] == "always"
    nginx = (DEPLOY / "nginx.conf").read_text()
    upstreams = re.findall(r"server (127\.0\.0\.1:\d+)", nginx)
    assert sorted(upstreams) == sorted(listens)
    assert "listen 127.0.0.1:50051 http2;" in nginx and "grpc_pass grpc://" in nginx
    cfg = CertdConfig.model_validate(json.loads((DEPLOY / "config" / "certd.json").read_text()))
    assert cfg.cluster.redis_appendfsync == "always"


def test_image_build_script_parses() -> None:
    script = DEPLOY / "build-image.sh"
    assert subprocess.run(["bash", "-n", str(script)], check=False).returncode == 0
    text = script.read_text()
    assert "debootstrap" in text and "--no-index" in text and "docker import" in text


def k8s_postgres_docs() -> list[tuple[str, dict[str, Any]]]:
    out = []
    for path in sorted((DEPLOY / "k8s-postgres").glob("*.yaml")):
        for doc in yaml.safe_load_all(path.read_text()):
            out.append((f"{path.name}:{doc['kind']}/{doc['metadata']['name']}", doc))
    return out


@pytest.mark.parametrize(
    ("name", "doc"), k8s_postgres_docs(), ids=[n for n, _ in k8s_postgres_docs()]
)
def test_kubernetes_postgres_manifest_matches_the_api_schema(
    name: str, doc: dict[str, Any]
) -> None:
    kv = pytest.importorskip("kubernetes_validate")
    kv.validate(doc, K8S_VERSION, strict=True)


def test_kubernetes_postgres_option_has_a_synchronous_standby() -> None:
    docs = {(d["kind"], d["metadata"]["name"]): d for _, d in k8s_postgres_docs()}
    pg = docs[("StatefulSet", "postgres")]["spec"]
    assert pg["replicas"] == 2 and pg["volumeClaimTemplates"][0]["metadata"]["name"] == "data"
    data = docs[("ConfigMap", "certd-config")]["data"]
    cfg = CertdConfig.model_validate(json.loads(data["certd.json"]))
    url = cfg.cluster.ledger_url or ""
    assert url.startswith("postgresql://") and "postgres-0." in url and "postgres-1." in url
    assert "target_session_attrs=read-write" in url
    assert cfg.cluster.postgres_require_sync_standby
    assert cfg.access.enabled and cfg.access.tls_cert_file is not None  # beyond loopback
    script = data["postgres-start.sh"]
    assert "synchronous_standby_names = 'postgres-1'" in script and "pg_basebackup" in script
    assert subprocess.run(["sh", "-n"], input=script, text=True).returncode == 0
    certd = next(d for _, d in k8s_docs() if d["kind"] == "Deployment")
    env = certd["spec"]["template"]["spec"]["containers"][0]["env"]
    assert {"name": "PGPASSWORD"}.items() <= env[0].items()
    assert env[0]["valueFrom"]["secretKeyRef"]["optional"] is True  # absent with Redis


def test_compose_postgres_option_is_loopback_only_with_valid_commands() -> None:
    services = dict(yaml.safe_load((DEPLOY / "compose.postgres.yaml").read_text()))["services"]
    assert {"postgres-primary", "postgres-standby", "certd-1", "certd-2", "certd-3"} <= set(
        services
    )
    assert "redis" not in services
    listens = []
    for name, svc in services.items():
        assert svc["network_mode"] == "host", name
        if name.startswith("certd-"):
            args = build_parser().parse_args([str(c) for c in svc["command"]])
            assert args.ledger == "postgresql://postgres@127.0.0.1:5490,127.0.0.1:5491/postgres"
            assert set(svc["depends_on"]) == {"postgres-primary", "postgres-standby"}
            listens.append(args.listen)
    primary = services["postgres-primary"]["command"][0]
    assert "listen_addresses = '127.0.0.1'" in primary
    assert "synchronous_standby_names = 'standby'" in primary
    assert "application_name=standby" in services["postgres-standby"]["command"][0]
    nginx = (DEPLOY / "nginx.conf").read_text()
    assert sorted(re.findall(r"server (127\.0\.0\.1:\d+)", nginx)) == sorted(listens)
