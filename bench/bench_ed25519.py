"""Microseconds per Ed25519 verify for each installed backend, side by side in one process.

Usage: ``.venv/bin/python bench/bench_ed25519.py [--rounds 15] [--n 2000] [--msg-bytes 1500]``
→ ``bench/results/ed25519.json``.

Each round times every backend on the same signatures, backends interleaved, and the table
gives each one's median over rounds and its ratio to libsodium (PyNaCl). It also prints which
of ``tests/ed25519_ref.py``'s forged signatures each backend accepts (a strict verifier, like
libsodium, accepts none). Backends not installed are skipped; extra ones may be put on the
path with ``PYTHONPATH`` (survey candidates installed with ``pip install --target``).
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import time
from collections.abc import Callable
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))

from _common import write
from ed25519_ref import bad_signatures, sodium_accepts

Verify = Callable[[bytes, bytes, bytes], bool]  # (public, message, signature) -> ok


def _c_backends() -> dict[str, Verify]:
    """libsodium (when PyNaCl is installed) and OpenSSL (always)."""
    out: dict[str, Verify] = {}
    try:
        import nacl.bindings  # noqa: F401  # sodium_accepts calls it
    except ImportError:
        pass
    else:
        out["libsodium (PyNaCl)"] = sodium_accepts
    from cryptography.exceptions import InvalidSignature
    from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PublicKey

    def openssl(pub: bytes, msg: bytes, sig: bytes) -> bool:
        try:
            Ed25519PublicKey.from_public_bytes(pub).verify(sig, msg)
        except (InvalidSignature, ValueError):
            return False
        return True

    out["OpenSSL (cryptography)"] = openssl
    return out


def _backends() -> dict[str, Verify]:
    out = _c_backends()
    try:
        from solders.pubkey import Pubkey
        from solders.signature import Signature

        out["ed25519-dalek verify_strict (solders)"] = lambda pub, msg, sig: Signature(sig).verify(
            Pubkey(pub), msg
        )
    except ImportError:
        pass
    try:
        import ed25519_zebra

        out["ed25519-zebra (py-ed25519-zebra-bindings)"] = lambda pub, msg, sig: (
            ed25519_zebra.ed_verify(sig, msg, pub)
        )
    except ImportError:
        pass
    try:
        import ed25519_orlp

        out["orlp/ed25519 (ed25519-orlp)"] = lambda pub, msg, sig: bool(
            ed25519_orlp.ed25519_verify(sig, msg, pub)
        )
    except ImportError:
        pass
    try:
        import pyhacl.signature.ed25519 as hacl

        out["HACL* (pyhacl)"] = lambda pub, msg, sig: bool(hacl.verify(pub, msg, sig))
    except ImportError:
        pass
    try:
        import eddsa

        out["libeddsa (eddsa)"] = lambda pub, msg, sig: bool(eddsa.ed25519_verify(sig, pub, msg))
    except ImportError:
        pass
    try:
        from certd.signing import ed25519

        make = ed25519.fast_verifier if ed25519.enable_fast_verify() else None
        if make is not None:
            cache: dict[bytes, ed25519.FastVerify | None] = {}

            def certd_fast(pub: bytes, msg: bytes, sig: bytes) -> bool:
                if pub not in cache:
                    cache[pub] = make(pub)
                fast = cache[pub]
                return fast is not None and fast(msg, sig)

            source = make.__qualname__.split(".")[0]  # load_fixed_key_verify, load_dalek_verify
            out[f"certd fast path ({source}, key prepared)"] = certd_fast
    except (ImportError, AttributeError):
        pass
    return out


def _strictness(backends: dict[str, Verify]) -> dict[str, list[str]]:
    """Which backends accept each forgery (printed, and returned by forgery)."""
    seed = os.urandom(32)
    msg = os.urandom(200)
    print("\nforged signatures accepted (a strict verifier accepts none):")
    out: dict[str, list[str]] = {}
    for what, pub, sig in bad_signatures(seed, msg):
        accepted = []
        for name, verify in backends.items():
            try:
                ok = verify(pub, msg, sig)
            except (ValueError, TypeError):  # a binding that raises instead of returning False
                ok = False
            if ok:
                accepted.append(name)
        print(f"  {what:40s} {', '.join(accepted) or '-'}")
        out[what] = accepted
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--rounds", type=int, default=15)
    ap.add_argument("--n", type=int, default=2000)
    ap.add_argument("--msg-bytes", type=int, default=1500)
    args = ap.parse_args()
    from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey
    from cryptography.hazmat.primitives.serialization import Encoding, PublicFormat

    key = Ed25519PrivateKey.generate()
    pub = key.public_key().public_bytes(Encoding.Raw, PublicFormat.Raw)
    msgs = [os.urandom(args.msg_bytes) for _ in range(args.n)]
    sigs = [key.sign(m) for m in msgs]
    backends = _backends()
    times: dict[str, list[float]] = {name: [] for name in backends}
    for _ in range(args.rounds):
        for name, verify in backends.items():
            t0 = time.perf_counter()
            for m, s in zip(msgs, sigs, strict=True):
                if not verify(pub, m, s):
                    raise SystemExit(f"{name} refused a valid signature")
            times[name].append((time.perf_counter() - t0) / args.n * 1e6)
    base = statistics.median(next(iter(times.values())))
    print(f"{args.n} verifies of {args.msg_bytes}-byte messages x {args.rounds} rounds")
    print(f"{'backend':45s} {'median µs':>10s} {'min µs':>8s} {'vs first':>9s}")
    for name, ts in times.items():
        med = statistics.median(ts)
        print(f"{name:45s} {med:10.1f} {min(ts):8.1f} {med / base:8.2f}x")
    forgeries = _strictness(backends)
    write(
        "ed25519",
        {
            "n": args.n,
            "rounds": args.rounds,
            "msg_bytes": args.msg_bytes,
            "median_us": {name: round(statistics.median(ts), 2) for name, ts in times.items()},
            "ratio_to_first": {
                name: round(statistics.median(ts) / base, 3) for name, ts in times.items()
            },
            "forgeries_accepted_by": forgeries,
            "loadavg_1m": round(os.getloadavg()[0], 2),
        },
    )


if __name__ == "__main__":
    main()
