"""A toy domain plugs in through the registry alone: one spec (tests/unit/toy_echo.py) and one
``register`` call reach the task object, the digest's canonical JSON, the conversion with
field-named errors, the checkers and the dispatch, the learned κ's step reader and the forkgate
CLI. The wire ``Task`` oneof (tasks.proto) is the one place it cannot reach: a domain served
over gRPC adds its case there (docs/architecture.md, "Where does a change go")."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
import toy_echo as echo

from certd.authority.checker import Checkers
from certd.authority.dispatch import VerifyDispatch
from certd.authority.verify_items import CheckItem
from certd.authority.verifypool import VerifyPool
from certd.config import CertdConfig
from certd.domains import registry
from certd.domains.verdict import Status
from certd.errors import InvalidInputError
from certd.kappa.steps import domains as step_domains
from certd.kappa.steps import first_step
from certd.payloads import sha256_hex
from certd.service.convert import domain_value
from certd.signing.intoto import canonical_json
from certd.task_object import parse_task_object
from certd.taskspec import domain_names, task_spec
from forkgate.cli import build_parser

CFG = CertdConfig.model_validate({"math": {"enabled": False}})


@pytest.fixture
def toy() -> Iterator[None]:
    registry.register(echo.SPEC)
    try:
        yield
    finally:
        registry.unregister("echo")


@pytest.mark.usefixtures("toy")
def test_the_wire_half_is_registered() -> None:
    assert domain_names() == ("countdown", "math", "code", "echo")
    spec = task_spec("echo")
    assert spec is not None
    msg = spec.from_object({"text": "hi"})
    assert canonical_json(spec.canonical(msg, 2)) == b'{"domain":"echo","text":"hi"}'
    assert len(sha256_hex(canonical_json(spec.canonical(msg, 2)))) == 64
    with pytest.raises(ValueError, match=r"task\.text: expected a string"):
        spec.from_object({"text": 3})
    with pytest.raises(ValueError, match="expected countdown, math, code or echo, got 'sql'"):
        parse_task_object({"domain": "sql", "task": {}})


@pytest.mark.usefixtures("toy")
def test_conversion_names_the_field() -> None:
    spec = task_spec("echo")
    assert spec is not None
    assert domain_value("echo", spec.from_object({"text": "hi"}), CFG) == "hi"
    with pytest.raises(InvalidInputError) as e:
        domain_value("echo", spec.from_object({"text": ""}), CFG, "items[2].task")
    assert e.value.field == "items[2].task.echo.text"


@pytest.mark.usefixtures("toy")
def test_checked_through_the_checkers_and_the_dispatch() -> None:
    checkers = Checkers(CFG)
    try:
        assert checkers.domains == ("countdown", "code", "echo")
        pool = VerifyPool(checkers.for_domain("countdown"), workers=0, min_batch=1)
        items = [
            CheckItem("a", "hi", "00" * 32, "hi", "echo"),
            CheckItem("b", "hi", "00" * 32, "ho", "echo"),
        ]
        results = VerifyDispatch(checkers, pool).check(items)
        assert [r.verdict.status for r in results] == [Status.CORRECT, Status.WRONG_ANSWER]
        assert results[0].verdict.family is not None
        assert results[0].verdict.family.label == "h"
        assert all(len(r.digest) == 32 for r in results)
        assert checkers.for_domain("echo").components() == []  # a CheckerBase default
    finally:
        checkers.close()


@pytest.mark.usefixtures("toy")
def test_the_learned_kappa_and_the_cli_see_it() -> None:
    assert step_domains() == ("countdown", "math", "echo")
    assert first_step("echo", "a,b") == "a"
    args = build_parser().parse_args(
        [
            "certify",
            "--domain",
            "echo",
            "--task",
            '{"text": "hi"}',
            "--label",
            "h",
            "--witness",
            "hi",
        ]
    )
    assert args.domain == "echo"


def test_unregistered_the_toy_is_gone() -> None:
    assert "echo" not in domain_names()
    assert registry.get("echo") is None


def test_each_domain_config_section_lives_with_its_domain() -> None:
    """``CertdConfig``'s section of each registered domain is the domain's own model
    (``certd/domains/<d>/config.py``); ``certd.config`` holds only the core sections."""
    from certd.config import CertdConfig
    from certd.domains import registry

    for spec in registry.specs():
        if spec.config_section:
            model = CertdConfig.model_fields[spec.config_section].annotation
            assert getattr(model, "__module__", "") == f"certd.domains.{spec.name}.config"
    core = [m for m in vars(__import__("certd.config").config).values() if isinstance(m, type)]
    assert not [
        m for m in core if m.__module__.startswith("certd.config") and "Countdown" in m.__name__
    ]
