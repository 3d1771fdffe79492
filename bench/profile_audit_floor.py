"""How fast a 1M-entry audit could be on this machine: the audit's per-entry floor.

Signs ``--entries`` distinct feasibility envelopes as ``bench_ledger.py`` does, appends them to
a SQLite store, then times per entry (process CPU, best of ``--passes``), in one process:

* ``worker``: what an audit worker does to each entry (``audit_chunk``: read, open every entry
  with ``open_envelope``, leaf hashes, the chunk's subtree compared with the stored nodes);
* ``worker_without_signatures``: the same chunk with ``verify=False`` (read, hash, compare);
* ``verify_fast`` / ``verify_dalek`` / ``verify_libsodium``: the bare strict Ed25519 verify
  of the same signatures: the audit's (``enable_fast_verify``: the fixed-key verifier when
  its extension is built), ed25519-dalek through solders, libsodium through PyNaCl;
* ``minimal``: the least any audit of these entries must do, with the project's own parsers:
  the envelope, the payload as strict JSON, the predicate's two digests, the audit's verify
  and the leaf hash; no key ring, statement or shape checks, no store.

Each is projected to 1,000,000 entries spread over every CPU with nothing else to do
(``per_entry × 1e6 ÷ cpus``): a lower bound on that audit's wall time, start-up excluded.

Run: ``.venv/bin/python bench/profile_audit_floor.py [--entries 4096] [--passes 7]``
→ ``bench/results/audit_floor.json``.
"""

from __future__ import annotations

import argparse
import functools
import hashlib
import os
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

from _common import write
from bench_ledger import envelopes
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PublicKey

from certd.ledger import auditchunk
from certd.ledger.store.sqlite import SQLiteStore
from certd.signing import ed25519
from certd.signing.dsse import Envelope, KeyRing
from certd.signing.intoto import canonical_json, load_statement_json
from certd.signing.keys import SigningKey
from certd.tlog import leaf_hash


def best_cpu_us(fn: Callable[[], object], n: int, passes: int) -> float:
    """The least process CPU of ``passes`` calls of ``fn``, in µs per entry of ``n``."""
    best = float("inf")
    for _ in range(passes):
        t0 = time.process_time()
        fn()
        best = min(best, time.process_time() - t0)
    return best / n * 1e6


def minimal(entries: list[bytes], verify: ed25519.FastVerify) -> None:
    """Parse, bind and verify every entry, and hash it as a leaf; raise on any failure."""
    for data in entries:
        env = Envelope.from_json(data)
        p = load_statement_json(env.payload)["predicate"]
        assert hashlib.sha256(canonical_json(p["task"])).hexdigest() == p["task_digest"]
        assert hashlib.sha256(p["witness"].encode()).hexdigest() == p["witness_digest"]
        assert verify(env.pae(), env.signatures[0].sig)
        leaf_hash(data)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--entries", type=int, default=4096)
    parser.add_argument("--passes", type=int, default=7)
    ns = parser.parse_args()
    n, passes = ns.entries, ns.passes
    key = SigningKey.generate("bench.local/certd")
    entries = envelopes(key, n)
    envs = [Envelope.from_json(e) for e in entries]
    signed = [(env.pae(), env.signatures[0].sig) for env in envs]
    load_dalek = ed25519.load_dalek_verify()
    if load_dalek is None or not ed25519.enable_fast_verify():
        raise SystemExit("solders (ed25519-dalek) is not installed: pip install -e '.[server]'")
    fast, dalek = ed25519.fast_for(key.public_key), load_dalek(key.public_key)
    assert fast is not None and dalek is not None
    verifier = key.verifier()
    openssl_key = Ed25519PublicKey.from_public_bytes(key.public_key)
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "ledger.sqlite"
        store = SQLiteStore(path)
        store.append([(None, e) for e in entries])
        store.close()
        auditchunk.init_worker(functools.partial(SQLiteStore, path), KeyRing([verifier]))
        result = auditchunk.audit_chunk(0, n, True)
        assert not result.faults and result.leaves is not None
        us = {
            "worker": best_cpu_us(lambda: auditchunk.audit_chunk(0, n, True), n, passes),
            "worker_without_signatures": best_cpu_us(
                lambda: auditchunk.audit_chunk(0, n, False), n, passes
            ),
            "verify_fast": best_cpu_us(lambda: [fast(m, s) for m, s in signed], n, passes),
            "verify_dalek": best_cpu_us(lambda: [dalek(m, s) for m, s in signed], n, passes),
            "verify_libsodium": best_cpu_us(
                lambda: [ed25519.verify(openssl_key, key.public_key, m, s) for m, s in signed],
                n,
                passes,
            ),
            "minimal": best_cpu_us(lambda: minimal(entries, fast), n, passes),
        }
    cpus = os.cpu_count() or 1
    write(
        "audit_floor",
        {
            "entries": n,
            "passes": passes,
            "audit_verifier": fast.__qualname__.split(".")[0],
            "us_per_entry": {k: round(v, 2) for k, v in us.items()},
            "loadavg_1m": round(os.getloadavg()[0], 2),
            # µs per entry × 1,000,000 entries = seconds, over every CPU
            "projected_1m_seconds_on_all_cpus": {k: round(v / cpus, 2) for k, v in us.items()},
            "cpus": cpus,
        },
    )


if __name__ == "__main__":
    main()
