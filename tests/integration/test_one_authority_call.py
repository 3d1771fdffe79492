"""One authority call per RPC: the servicers validate, call the authority once, encode.

A real server; the authority objects its servicers hold (``Authority`` for Certify and the
reads, ``Verification`` for the Verifier service) get a wrapper around each public method that
counts the outermost entries (calls the authority makes into itself are not entries). Each RPC,
refusals and a whole stream of several receipt groups included, enters the authority once.
"""

from __future__ import annotations

import functools
import inspect
import threading
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from certd.config import CertdConfig
from certd.service.server import CertdServer
from forkgate import CertdClient, CertificationRefusedError, VerifyItem

TASK = {"domain": "countdown", "task": {"numbers": [25, 5, 4, 3], "target": 83}}
OTHER = {"domain": "countdown", "task": {"numbers": [25, 5, 4, 3], "target": 82}}


class _Entries:
    """Counts outermost entries into the public methods of the objects it wraps."""

    def __init__(self) -> None:
        self.calls: list[str] = []
        self._depth = threading.local()
        self._lock = threading.Lock()

    def wrap(self, obj: object) -> None:
        for name, member in inspect.getmembers(type(obj)):
            if name.startswith("_") or not inspect.isfunction(member):
                continue
            setattr(obj, name, self._counting(name, getattr(obj, name)))

    def _counting(self, name: str, method: Callable[..., Any]) -> Callable[..., Any]:
        @functools.wraps(method)
        def counted(*args: Any, **kwargs: Any) -> Any:
            depth = getattr(self._depth, "n", 0)
            if depth == 0:
                with self._lock:
                    self.calls.append(name)
            self._depth.n = depth + 1
            try:
                return method(*args, **kwargs)
            finally:
                self._depth.n = depth

        return counted

    def take(self) -> list[str]:
        with self._lock:
            calls, self.calls = self.calls, []
        return calls


@pytest.fixture
def counted(tmp_path: Path) -> Iterator[tuple[str, _Entries]]:
    cfg = CertdConfig.model_validate(
        {
            "data_dir": tmp_path / "certd-data",
            "listen": "127.0.0.1:0",
            "math": {"enabled": False},
            "limits": {"stream_receipt_every": 2},  # a stream of 5: three receipt groups
        }
    )
    server = CertdServer(cfg)
    entries = _Entries()
    entries.wrap(server.authority)
    entries.wrap(server.verification)
    server.start()
    try:
        yield f"127.0.0.1:{server.port}", entries
    finally:
        server.stop(grace_s=1.0)


def test_each_rpc_enters_the_authority_once(counted: tuple[str, _Entries]) -> None:
    address, entries = counted
    items = [
        VerifyItem(TASK, f"<answer>{a}</answer>", str(i))
        for i, a in enumerate(["(25-5)*4+3", "25-5*4+3", "3+4*(25-5)", "x", "(25-5)*4+3"])
    ] + [VerifyItem(OTHER, "<answer>(25-5)*4+2</answer>", "o")]
    with CertdClient(address) as c:
        c.verify(TASK, "<answer>(25-5)*4+3</answer>")
        assert entries.take() == ["verify"]
        c.verify_batch(items)
        assert entries.take() == ["verify"]
        assert len(list(c.verify_stream(items[:5]))) == 5
        assert entries.take() == ["verify_stream"]
        c.certify(TASK, "25,-", "(25-5)*4+3")  # κ resolved by the authority
        assert entries.take() == ["certify_one"]
        with pytest.raises(CertificationRefusedError):
            c.certify(TASK, "4,*", "(25-5)*4+3")  # LABEL_MISMATCH, raised by the authority
        assert entries.take() == ["certify_one"]
        batch = [
            (TASK, "25,-", "(25-5)*4+3"),  # existing
            (TASK, "3,+", "3+4*(25-5)"),  # a pseudo-fork of the first
            (TASK, "25,-", "25-5*4+3"),  # a wrong witness
            (TASK, "4,*", "4*(25-3)-5"),  # a new family
        ]
        results = c.certify_batch(batch)
        assert entries.take() == ["certify_batch"]
        refused = [r.reason for r in results if isinstance(r, CertificationRefusedError)]
        assert refused == ["PSEUDO_FORK", "WITNESS_NOT_CORRECT"]
        c.enumerate_families(TASK)
        assert entries.take() == ["enumerate"]
        tree = c.get_fork_tree(TASK, page_size=1)  # κ resolved by the authority, and the
        assert tree.kappa == "countdown.first-op.v1"  # second page's token checked against it
        assert [x.label.value for x in tree.certificates] == ["25,-", "4,*"]
        assert entries.take() == ["fork_tree", "fork_tree"]  # two pages: two RPCs
        cert = tree.certificates[0]
        c.get_certificate(certificate_id=cert.certificate_id)
        assert entries.take() == ["certificate"]
