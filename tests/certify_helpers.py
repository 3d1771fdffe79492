"""Certifying through a failover: the retry loop the failover tests share.

Example::

    certify_until_done(lambda: cluster.addresses, vkey, items, certs, settings=SETTINGS)
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable

from certd.v1 import authority_pb2
from forkgate import CertdClient, CertificationRefusedError, ClientSettings
from forkgate.errors import CertdUnavailableError, DeadlineExceededError

__all__ = ["Certs", "Item", "Sent", "certify_until_done"]

Item = tuple[dict[str, object], str, str]
Certs = dict[str, authority_pb2.Certificate]
Sent = dict[str, Item]

_LOCK = threading.Lock()


def certify_until_done(
    addresses: Callable[[], list[str]],
    vkey: str,
    items: list[Item],
    certs: Certs,
    *,
    settings: ClientSettings,
    sent: Sent | None = None,
    same_index: bool = True,
    deadline_s: float = 180.0,
) -> None:
    """Certify ``items`` 4 at a time against the replicas of the moment; a batch that fails
    for want of the store (or of the replicas, restarted elsewhere) is sent again, on a new
    client.

    A retried batch gets the same certificates (the ledger key of (task, κ, label) is
    unique), so every certificate in the ledger ends up acknowledged to some client. A
    refusal must be ``PSEUDO_FORK`` (another witness of a family certified already); every
    other certificate is recorded in ``certs`` (its inclusion proof verified by the client)
    and its item in ``sent``. With ``same_index`` a certificate acknowledged twice must have
    one index (off where the store may lose acknowledged entries, as Redis can).
    """
    for start in range(0, len(items), 4):
        batch = items[start : start + 4]
        deadline = time.monotonic() + deadline_s
        while True:
            try:
                with CertdClient(addresses(), trusted_keys=[vkey], settings=settings) as cl:
                    results = cl.certify_batch(batch)
                break
            except (CertdUnavailableError, DeadlineExceededError):
                if time.monotonic() > deadline:
                    raise
                time.sleep(0.2)
        for item, r in zip(batch, results, strict=True):
            if isinstance(r, CertificationRefusedError):
                assert r.reason == "PSEUDO_FORK", r
                continue
            with _LOCK:
                prior = certs.setdefault(r.certificate_id, r)
                assert not same_index or prior.ledger_index == r.ledger_index, (prior, r)
                if sent is not None:
                    sent.setdefault(r.certificate_id, item)
