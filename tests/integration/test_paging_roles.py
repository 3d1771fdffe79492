"""Paginated list RPCs (AIP-158) and the role matrix, over real gRPC.

``GetForkTree`` and ``ListAcceptances`` return pages of ``page_size`` with keyset tokens: the
pages together are the whole list, a label certified between pages still appears, a token
from another query or a negative size is INVALID_ARGUMENT. Every Authority, Verifier and
Ledger method is checked against the documented matrix, and an ``audit`` token reads
certificates, fork trees and acceptance decisions but cannot certify or verify.
"""

from __future__ import annotations

from pathlib import Path

import grpc
import pytest
from test_acceptance_service import BANDS, CKPTS, _evaluate, _register
from test_access import TASK, pki, tls_server  # noqa: F401  # fixtures

from certd.service.access import allowed_roles
from certd.service.server import CertdServer
from certd.v1 import authority_pb2, authority_pb2_grpc, info_pb2, ledger_pb2, verifier_pb2
from forkgate import CertdClient, ForkgateError, as_task, make_task
from forkgate.acceptance import list_acceptances
from forkgate.jobs.scripted import ScriptedModel
from forkgate.puzzles import countdown_puzzles

# The matrix as docs/operating-a-cluster.md states it: method -> roles that may call it.
MATRIX = {
    "Verifier": {"*": {"verify"}},
    "Authority": {
        "EnumerateFamilies": {"verify"},
        "GetCertificate": {"certify", "audit"},
        "GetForkTree": {"certify", "audit"},
        "ListAcceptances": {"certify", "audit"},
        "RegisterTaskSet": {"operator"},
        "*": {"certify"},
    },
    "Ledger": {"*": {"audit"}},
    "Info": {"*": set()},  # any authenticated caller
}


def test_every_method_has_the_documented_roles() -> None:
    files = {
        "Verifier": verifier_pb2,
        "Authority": authority_pb2,
        "Ledger": ledger_pb2,
        "Info": info_pb2,
    }
    for service, module in files.items():
        for method in module.DESCRIPTOR.services_by_name[service].methods:
            rules = MATRIX[service]
            want = rules.get(method.name, rules["*"])
            got = allowed_roles(f"/certd.v1.{service}/{method.name}")
            assert got is not None and set(got) == want, (service, method.name, got)
    assert allowed_roles("/grpc.health.v1.Health/Check") is None


def families(client: CertdClient, task: dict[str, object]) -> list[tuple[str, str]]:
    found = client.enumerate_families(task)
    firsts = [found.labels[g.label_indexes[0]] for g in found.families]
    return [(lb.label.value, lb.witness) for lb in firsts]


def wide_task(client: CertdClient) -> tuple[dict[str, object], list[tuple[str, str]]]:
    """A Countdown task with at least 5 families."""
    for p in countdown_puzzles(200, seed=7):
        task = {"domain": "countdown", "task": {"numbers": p["numbers"], "target": p["target"]}}
        fams = families(client, task)
        if len(fams) >= 5:
            return task, fams
    raise AssertionError("no puzzle with 5 families")


def test_fork_tree_pages(address: str, vkey: str) -> None:
    with CertdClient(address, trusted_keys=[vkey]) as c:
        tree, fams = wide_task(c)
        early, late = fams[:-2], fams[-2:]
        items = [(tree, label, witness) for label, witness in early]
        done = [r for r in c.certify_batch(items) if not isinstance(r, ForkgateError)]
        assert len(done) >= 3  # pseudo-forks among the families are refused
        whole = c.get_fork_tree(tree)
        paged = c.get_fork_tree(tree, page_size=2)
        assert [x.certificate_id for x in paged.certificates] == [
            x.certificate_id for x in whole.certificates
        ]
        with grpc.insecure_channel(address) as ch:
            stub = authority_pb2_grpc.AuthorityStub(ch)
            req = authority_pb2.GetForkTreeRequest(task=as_task(tree), page_size=2)
            first = stub.GetForkTree(req, timeout=30)
            assert len(first.certificates) == 2 and first.next_page_token
            added = []  # certified between pages
            for r in c.certify_batch([(tree, label, witness) for label, witness in late]):
                if not isinstance(r, ForkgateError):
                    added.append(r.label.value)
            seen = [x.label.value for x in first.certificates]
            req.page_token = first.next_page_token
            while req.page_token:
                page = stub.GetForkTree(req, timeout=30)
                seen += [x.label.value for x in page.certificates]
                req.page_token = page.next_page_token
            # The first page was the two smallest labels; the rest follow in label order,
            # the late label among them when it sorts after the first page (keyset cursor).
            certified = [r.label.value for r in done] + added
            rest = sorted(label for label in certified if label > seen[1])
            assert seen == seen[:2] + rest
            other = authority_pb2.GetForkTreeRequest(
                task=make_task("countdown", {"numbers": [1, 2, 3], "target": 6}),
                page_token=first.next_page_token,
            )
            with pytest.raises(grpc.RpcError) as bad:
                stub.GetForkTree(other, timeout=30)
            assert bad.value.code() == grpc.StatusCode.INVALID_ARGUMENT
            for token, size in (("garbage!", 0), ("", -1)):
                wrong = authority_pb2.GetForkTreeRequest(
                    task=as_task(tree), page_token=token, page_size=size
                )
                with pytest.raises(grpc.RpcError) as bad:
                    stub.GetForkTree(wrong, timeout=30)
                assert bad.value.code() == grpc.StatusCode.INVALID_ARGUMENT


def test_acceptance_pages(address: str, vkey: str) -> None:
    with CertdClient(address, trusted_keys=[vkey]) as c:
        _register(c)
        policy = ScriptedModel.from_certd(c, BANDS)
        for ckpt in CKPTS:
            _evaluate(c, policy, ckpt)
        whole = list_acceptances(c, "r1")
        assert len(whole) == len(CKPTS)
        for size in (1, 3):
            paged = list_acceptances(c, "r1", page_size=size)
            assert [d.SerializeToString() for d in paged] == [d.SerializeToString() for d in whole]
        with grpc.insecure_channel(address) as ch:
            stub = authority_pb2_grpc.AuthorityStub(ch)
            one = stub.ListAcceptances(
                authority_pb2.ListAcceptancesRequest(run="r1", page_size=1), timeout=30
            )
            with pytest.raises(grpc.RpcError) as bad:
                stub.ListAcceptances(
                    authority_pb2.ListAcceptancesRequest(run="r2", page_token=one.next_page_token),
                    timeout=30,
                )
            assert bad.value.code() == grpc.StatusCode.INVALID_ARGUMENT


def test_an_audit_token_reads_but_cannot_write(tls_server: CertdServer, pki: Path) -> None:  # noqa: F811
    address = f"127.0.0.1:{tls_server.port}"
    ca = pki / "ca.crt"
    with CertdClient(address, tls_ca=ca, token="c-token") as c:
        cert = c.certify(TASK, "25,-", "(25-5)*4+3")
    with CertdClient(address, tls_ca=ca, token="a-token") as a:
        assert a.get_certificate(certificate_id=cert.certificate_id).envelope == cert.envelope
        assert len(a.get_fork_tree(TASK).certificates) == 1
        with pytest.raises(ForkgateError, match="no acceptance decision"):
            list_acceptances(a, "r1")  # allowed; the run has none
        with pytest.raises(ForkgateError, match="lacks role 'certify'"):
            a.certify(TASK, "3,+", "3+4*(25-5)")
        with pytest.raises(ForkgateError, match="lacks role 'verify'"):
            a.enumerate_families(TASK)
    with CertdClient(address, tls_ca=ca, token="v-token") as v:
        with pytest.raises(ForkgateError, match="lacks role 'certify' or 'audit'"):
            v.get_certificate(certificate_id=cert.certificate_id)
