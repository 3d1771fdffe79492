"""Every certd RPC has exactly one retry rule in the client's service config."""

from __future__ import annotations

import json

import pytest

from certd.v1 import authority_pb2, info_pb2, ledger_pb2, verifier_pb2
from forkgate._retry import IDEMPOTENT, KEYED, MAX_ATTEMPTS, NOT_RETRIED, service_config


def _rpcs() -> set[tuple[str, str]]:
    files = (authority_pb2, info_pb2, ledger_pb2, verifier_pb2)
    return {
        (service.full_name, method.name)
        for f in files
        for service in f.DESCRIPTOR.services_by_name.values()
        for method in service.methods
    }


def _rule(rpc: tuple[str, str]) -> list[str]:
    return [
        name
        for name, group in (("keyed", KEYED), ("idempotent", IDEMPOTENT), ("none", NOT_RETRIED))
        if rpc in group or (rpc[0], "") in group
    ]


def test_each_rpc_has_one_rule() -> None:
    assert {rpc: _rule(rpc) for rpc in _rpcs() if len(_rule(rpc)) != 1} == {}


def test_policy_follows_the_settings() -> None:
    config = json.loads(service_config(max_retries=2, backoff_s=0.05, backoff_max_s=0.01))
    policy = config["methodConfig"][0]["retryPolicy"]
    assert policy["maxAttempts"] == 3
    assert (policy["initialBackoff"], policy["maxBackoff"]) == ("0.050s", "0.050s")
    off = json.loads(service_config(max_retries=0, backoff_s=0.1, backoff_max_s=1))
    assert all("retryPolicy" not in c for c in off["methodConfig"])
    with pytest.raises(ValueError, match="max_retries"):
        service_config(max_retries=MAX_ATTEMPTS, backoff_s=0.1, backoff_max_s=1)
