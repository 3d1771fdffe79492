"""Family counts of fork-tree records, taken from what certd signed (one place for
``forkgate metrics`` and the run report).

Example::

    counts = signed_counts(enumerate(records, 1), keys)   # keys: a KeyRing, or None
    counts.certified[digest]          # the distinct labels the task's certificates sign
    counts.feasible_families[digest]  # the enumeration certd signed into them

The certified families of a task are the distinct labels its certificates sign, and its
feasible count is the enumeration certd signs into them (``predicate.feasible``; absent for a
domain without enumeration). No field of a record is read for a count: editing a record's
``feasible``/``feasible_labels`` moves nothing, and a record listing one family twice is
refused (``DUPLICATE_FAMILY``). With ``keys`` each certificate is verified through the one
verifier (``certd.statements.verify_certificate``); without, its payload is read as signed
but unchecked.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from google.protobuf import json_format

from certd.errors import CertdError
from certd.v1 import authority_pb2

__all__ = ["SignedCounts", "signed_counts"]


@dataclass
class SignedCounts:
    """Per task digest: certified labels and the signed feasible counts."""

    certified: dict[str, set[str]] = field(default_factory=dict)
    feasible_labels: dict[str, int] = field(default_factory=dict)
    feasible_families: dict[str, int] = field(default_factory=dict)


def _signed(fam: Mapping[str, Any], keys: Any) -> tuple[str, str, int | None, int | None]:
    """(task digest, label, feasible labels, feasible families) a family's certificate signs.

    Raises:
        CertdError: the certificate does not verify (with ``keys``).
        ValueError: it does not parse.
    """
    cert = authority_pb2.Certificate()
    json_format.ParseDict(fam["certificate"], cert)
    if keys is not None:
        from certd.statements import verify_certificate

        c = verify_certificate(cert, keys)
        return c.task_digest, c.label, c.feasible_labels, c.feasible_families
    from certd.signing.dsse import Envelope  # the signing stack loads only when a verb needs it

    p = json.loads(Envelope.from_json(cert.envelope).payload)["predicate"]
    feasible = p.get("feasible") or {}
    return str(p["task_digest"]), str(p["label"]), feasible.get("labels"), feasible.get("families")


def _keep(into: dict[str, int], digest: str, count: int | None, n: int) -> None:
    if count is not None and into.setdefault(digest, count) != count:
        raise ValueError(f"line {n}: TAMPERED_FEASIBLE certificates sign different feasible counts")


def signed_counts(records: Iterable[tuple[int, Mapping[str, Any]]], keys: Any) -> SignedCounts:
    """Count the certified families and the signed feasible counts of numbered records.

    Raises:
        ValueError: a line lists a family twice (``DUPLICATE_FAMILY``), its certificates sign
            different feasible counts, or a certificate does not parse (``MALFORMED``).
        CertdError: a certificate does not verify (the message names the line).
    """
    out = SignedCounts()
    for n, rec in records:
        seen: set[str] = set()
        for fam in rec["families"]:
            try:
                digest, label, labels, families = _signed(fam, keys)
            except (KeyError, TypeError, ValueError, json_format.ParseError) as e:
                raise ValueError(f"line {n}: MALFORMED certificate: {e!s:.160}") from e
            except CertdError as e:
                raise CertdError(f"line {n}: {type(e).__name__}: {e}") from e
            if label in seen:
                raise ValueError(f"line {n}: DUPLICATE_FAMILY {label!r} listed twice")
            seen.add(label)
            out.certified.setdefault(digest, set()).add(label)
            _keep(out.feasible_labels, digest, labels, n)
            _keep(out.feasible_families, digest, families, n)
    return out
