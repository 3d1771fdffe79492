"""A toy domain plugs in through the registry alone: one spec (tests/unit/toy_echo.py) and one
``register`` call reach the task object, the digest's canonical JSON, the conversion with
field-named errors, the config tree (its ``echo`` section: keys, defaults, validation, the file
``certd serve --config`` loads), the checkers and the dispatch, the learned κ's step reader and
the forkgate CLI. The wire ``Task`` oneof (tasks.proto) is the one place it cannot reach: a
domain served over gRPC adds its case there (docs/architecture.md, "Where does a change go")."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest
import toy_echo as echo
from pydantic import ValidationError

from certd.authority.checker import Checkers
from certd.authority.dispatch import VerifyDispatch
from certd.authority.verify_items import CheckItem
from certd.authority.verifypool import VerifyPool
from certd.config import CertdConfig, config_model, describe_validation_error, load_config
from certd.config_cli import default_config_json, schema_markdown
from certd.domains import registry
from certd.domains.verdict import Status
from certd.errors import ConfigError, InvalidInputError, LimitExceededError
from certd.kappa.steps import domains as step_domains
from certd.kappa.steps import first_step
from certd.payloads import sha256_hex
from certd.service.convert import domain_value
from certd.signing.intoto import canonical_json
from certd.task_object import parse_task_object
from certd.taskspec import domain_names, task_spec
from forkgate.cli import build_parser


def _cfg(**echo_section: object) -> CertdConfig:
    """A config tree of the domains registered now (the toy's section too, once registered)."""
    return config_model().model_validate({"math": {"enabled": False}, "echo": echo_section})


@pytest.fixture
def toy() -> Iterator[None]:
    registry.register(echo.SPEC)
    try:
        yield
    finally:
        registry.unregister("echo")


@pytest.mark.usefixtures("toy")
def test_the_config_section_comes_through_the_registry(tmp_path: Path) -> None:
    model = config_model()
    assert issubclass(model, CertdConfig) and model is not CertdConfig
    assert model.model_fields["echo"].annotation is echo.EchoConfig
    assert model().echo == echo.EchoConfig()  # the section's defaults
    assert json.loads(default_config_json())["echo"] == {"max_text_chars": 64, "verifier": "echo@1"}
    assert "## `echo`" in schema_markdown() and "`max_text_chars`" in schema_markdown()
    path = tmp_path / "certd.json"
    path.write_text(json.dumps({"echo": {"max_text_chars": 3}}))
    assert load_config(path).echo.max_text_chars == 3
    path.write_text(json.dumps({"echo": {"max_chars": 3}}))
    with pytest.raises(ConfigError, match=r"unknown key 'echo\.max_chars'.*max_text_chars"):
        load_config(path)
    with pytest.raises(ValidationError) as e:
        model.model_validate({"echo": {"max_text_chars": 0}})
    assert "echo.max_text_chars" in describe_validation_error(e.value)


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
    assert domain_value("echo", spec.from_object({"text": "hi"}), _cfg()) == "hi"
    with pytest.raises(InvalidInputError) as e:
        domain_value("echo", spec.from_object({"text": ""}), _cfg(), "items[2].task")
    assert e.value.field == "items[2].task.echo.text"
    with pytest.raises(LimitExceededError) as limit:  # the section's limit, from the config
        domain_value("echo", spec.from_object({"text": "hello"}), _cfg(max_text_chars=3))
    assert limit.value.field == "task.echo.text"


@pytest.mark.usefixtures("toy")
def test_checked_through_the_checkers_and_the_dispatch() -> None:
    checkers = Checkers(_cfg(verifier="echo@2"))  # the factory gets the toy's section
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
        assert results[0].verdict.verifier == "echo@2"
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
    assert config_model() is CertdConfig
    assert "echo" not in json.loads(default_config_json())


def test_each_domain_config_section_lives_with_its_domain() -> None:
    """``CertdConfig``'s section of each registered domain is the domain's own model
    (``certd/domains/<d>/config.py``); ``certd.config`` holds only the core sections."""
    for spec in registry.specs():
        if spec.config_section:
            model = CertdConfig.model_fields[spec.config_section].annotation
            assert getattr(model, "__module__", "") == f"certd.domains.{spec.name}.config"
            assert spec.config is model  # the spec names it, through the registry
    declared = set(vars(__import__("certd.config").config)["_CertdCore"].model_fields)
    assert not declared & {s.config_section for s in registry.specs()}
    core = [m for m in vars(__import__("certd.config").config).values() if isinstance(m, type)]
    assert not [
        m for m in core if m.__module__.startswith("certd.config") and "Countdown" in m.__name__
    ]
