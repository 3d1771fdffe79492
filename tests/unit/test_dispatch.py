"""VerifyDispatch: items go to their domain's checker and come back in order."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import pytest

from certd.authority.checker import CheckerBase, Checkers
from certd.authority.dispatch import VerifyDispatch
from certd.authority.verify_items import CheckItem
from certd.authority.verifypool import VerifyPool
from certd.config import CertdConfig
from certd.domains import countdown as cd
from certd.domains.verdict import Family, Status, Verdict
from certd.errors import UnsupportedError

TASK = cd.CountdownTask(numbers=(25, 5, 4, 3), target=83)


@dataclass
class EchoChecker(CheckerBase):
    """A second domain for the routing tests: CORRECT when the response equals the task."""

    fail: bool = False
    domain: str = "echo"
    kappa: str = "echo.first.v1"
    kappas: tuple[str, ...] = ("echo.first.v1", "echo.len.v1")
    verifier: str = "echo@1"
    batches: int = 0

    def verify(self, task: str, response: str, *, canonical: bool = False) -> Verdict:
        ok = task == response
        return Verdict(
            Status.CORRECT if ok else Status.WRONG_ANSWER,
            1.0 if ok else 0.0,
            self.verifier,
            family=Family(self.kappa, response[:1]),
            labels=(Family("echo.len.v1", str(len(response))),),
        )

    def verify_batch(self, pairs: Sequence[tuple[str, str]]) -> list[Verdict]:
        self.batches += 1
        if self.fail:
            raise RuntimeError("sandbox pool is gone")
        return [self.verify(t, r) for t, r in pairs]

    def enumerate(self, task: str) -> cd.Enumeration:
        raise UnsupportedError("echo cannot enumerate")

    def close(self) -> None:
        pass


@pytest.fixture
def setup() -> tuple[Checkers, VerifyDispatch, EchoChecker]:
    checkers = Checkers(CertdConfig())
    echo = EchoChecker()
    checkers.register(echo)
    pool = VerifyPool(checkers.for_domain("countdown"), workers=0, min_batch=1)
    return checkers, VerifyDispatch(checkers, pool), echo


def _items() -> list[CheckItem]:
    return [
        CheckItem("a", TASK, "00" * 32, "<answer>(25-5)*4+3</answer>", "countdown"),
        CheckItem("b", "abc", "11" * 32, "abc", "echo"),
        CheckItem("c", TASK, "00" * 32, "<answer>(25-5)*4-3</answer>", "countdown"),
        CheckItem("d", "abc", "11" * 32, "abd", "echo"),
    ]


def test_mixed_batch_keeps_order_and_domains(
    setup: tuple[Checkers, VerifyDispatch, EchoChecker],
) -> None:
    _, dispatch, echo = setup
    results = dispatch.check(_items())
    got = [(r.verdict.verifier.split("@")[0], r.verdict.status) for r in results]
    assert got == [
        ("countdown", Status.CORRECT),
        ("echo", Status.CORRECT),
        ("countdown", Status.WRONG_ANSWER),
        ("echo", Status.WRONG_ANSWER),
    ]
    assert echo.batches == 1  # one verify_batch call for the domain's items
    assert results[1].verdict.label_for("echo.len.v1") == Family("echo.len.v1", "3")


def test_labels_change_the_digest(setup: tuple[Checkers, VerifyDispatch, EchoChecker]) -> None:
    _, dispatch, _ = setup
    [with_labels] = dispatch.check([_items()[1]])
    echo_item = _items()[1]
    bare = CheckItem(
        echo_item.item_id, TASK, echo_item.task_sha256, echo_item.response, "countdown"
    )
    [without] = dispatch.check([bare])
    assert with_labels.digest != without.digest


def test_a_failing_checker_is_infra_error_for_its_items_only(
    setup: tuple[Checkers, VerifyDispatch, EchoChecker],
) -> None:
    _, dispatch, echo = setup
    echo.fail = True
    part = dispatch.check(_items())
    statuses = [r.verdict.status for r in part]
    assert statuses == [Status.CORRECT, Status.INFRA_ERROR, Status.WRONG_ANSWER, Status.INFRA_ERROR]
    assert "sandbox pool is gone" in part[1].verdict.detail


def test_a_domain_not_served_is_a_verdict_per_item_and_the_rest_is_checked(
    setup: tuple[Checkers, VerifyDispatch, EchoChecker],
) -> None:
    _, dispatch, _ = setup
    items = [
        CheckItem("x", "t", "22" * 32, "r", "nope"),
        CheckItem("y", "same", "33" * 32, "same", "echo"),
    ]
    nope, echo = dispatch.check(items)
    assert nope.verdict.status == Status.INFRA_ERROR
    assert nope.verdict.detail.startswith("domain 'nope' not served here (served: countdown")
    assert nope.verdict.verifier == "certd.dispatch@1"
    assert echo.verdict.status == Status.CORRECT


def test_checkers_have_no_attribute_named_after_a_domain() -> None:
    """Every domain's checker and pool comes through the registry (``for_domain``,
    ``DomainSpec.process_pool``), never a name-specific attribute such as ``countdown``."""
    from certd.authority.checker import Checkers
    from certd.domains import registry

    for spec in registry.specs():
        assert not hasattr(Checkers, spec.name), spec.name
