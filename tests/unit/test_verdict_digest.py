"""The hand-written verdict digest equals SHA-256 of the documented canonical JSON."""

from __future__ import annotations

import hashlib
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from certd.signing.intoto import canonical_json, sha256_hex
from certd.statements import verdict_digest_of

TEXT = st.text(max_size=40)
LABEL = st.one_of(
    st.none(),
    st.fixed_dictionaries(
        {"fields": st.dictionaries(TEXT, TEXT, max_size=3), "kappa": TEXT, "value": TEXT}
    ),
)


@settings(max_examples=300, deadline=None)
@given(
    item_id=TEXT,
    status=TEXT,
    detail=TEXT,
    verifier=TEXT,
    answer=TEXT,
    task=TEXT,
    response=TEXT,
    family=LABEL,
    initiated=LABEL,
    labels=st.lists(LABEL.filter(lambda label: label is not None), max_size=2),
    reward=st.floats(allow_nan=False, allow_infinity=False),
)
def test_fast_digest_is_canonical_json(
    item_id: str,
    status: str,
    detail: str,
    verifier: str,
    answer: str,
    task: str,
    response: str,
    family: dict[str, Any] | None,
    initiated: dict[str, Any] | None,
    labels: list[dict[str, Any]],
    reward: float,
) -> None:
    obj: dict[str, Any] = {
        "answer": answer,
        "detail": detail,
        "family": family,
        "id": item_id,
        "initiated": initiated,
        "response_sha256": sha256_hex(response.encode("utf-8", "surrogatepass")),
        "reward": reward,
        "status": status,
        "task_sha256": task,
        "verifier": verifier,
    }
    if labels:  # present only when the domain labels under several κs
        obj["labels"] = labels
    try:
        want = hashlib.sha256(canonical_json(obj)).digest()
    except UnicodeEncodeError:  # lone surrogates cannot come off the wire (protobuf is UTF-8)
        return
    got = verdict_digest_of(
        item_id=item_id,
        status=status,
        reward=reward,
        family=family,
        initiated=initiated,
        labels=labels,
        detail=detail,
        verifier=verifier,
        answer=answer,
        task_sha256=task,
        response=response,
    )
    assert got == want
