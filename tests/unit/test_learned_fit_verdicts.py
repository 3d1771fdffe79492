"""Which rollouts a learned-κ fit rests on never depends on the machine's load.

The verify callback here is scripted on purpose: a real math pool cannot be made to time out
on cue, and the rule under test is the labeller's (re-check once, then refuse), not the
checker's. tests/integration/test_learned_kappa_service.py runs the real path.
"""

from __future__ import annotations

from collections.abc import Sequence

import pytest

from certd.authority.labeller import _correct
from certd.domains.verdict import Status
from certd.errors import CertificationRefusedError


def _scripted(*rounds: dict[str, Status]):  # type: ignore[no-untyped-def]
    calls: list[list[str]] = []

    def verify(rs: Sequence[str]) -> list[Status]:
        plan = rounds[len(calls)]
        calls.append(list(rs))
        return [plan.get(r, Status.CORRECT) for r in rs]

    return verify, calls


def test_a_time_limit_is_checked_once_more_and_then_counts() -> None:
    verify, calls = _scripted({"b": Status.TIME_LIMIT, "c": Status.WRONG_ANSWER}, {})
    assert _correct(["a", "b", "c"], verify) == ["a", "b"]
    assert calls == [["a", "b", "c"], ["b"]]  # only the indefinite one is checked again


def test_definite_verdicts_are_checked_once() -> None:
    verify, calls = _scripted({"c": Status.WRONG_ANSWER})
    assert _correct(["a", "c"], verify) == ["a"]
    assert len(calls) == 1


@pytest.mark.parametrize("status", [Status.TIME_LIMIT, Status.MEMORY_LIMIT, Status.INFRA_ERROR])
def test_an_indefinite_verdict_twice_refuses_instead_of_dropping(status: Status) -> None:
    verify, _ = _scripted({"b": status}, {"b": status})
    with pytest.raises(CertificationRefusedError) as e:
        _correct(["a", "b"], verify)
    assert e.value.reason == "CLUSTERS_UNVERIFIED"
    assert f"1 of 2 distinct rollouts got no definite verdict twice ({status.name})" in str(e.value)
