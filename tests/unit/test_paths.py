"""Verify, certify, audit, admit and accept each go one way through their modules
(docs/architecture.md).

Each path is drawn as legs: a leg is the modules a request passes, in order, going down the
layers; a path with two legs (verify: the check, then the receipt) returns to the module where
they meet between them. Read from the source (AST), not by importing: a module's imports are every
``import`` and ``from … import`` in it, also under ``TYPE_CHECKING`` and inside functions (a
lazy or typing-only import back up the path is still a cycle a reader has to walk).

The layers themselves (which package may import which) are the import-linter contracts in
pyproject.toml; these tests add the order along each path, and that the authority takes values
from the service, never its functions (a callback is a way back up that no import shows).
"""

from __future__ import annotations

import ast
import collections.abc
import inspect
import itertools
import typing
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]

# Each path: its legs, each leg the modules in the order a request passes them.
PATHS: dict[str, list[list[str]]] = {
    "verify": [
        [
            "certd.service.verifier",  # validate the tasks; encode verdicts and receipt once
            "certd.authority.verification",  # the one call: check, then issue the receipt
            "certd.authority.dispatch",  # route each item to its domain, keep the order
            "certd.authority.verifypool",  # Countdown's worker processes (large batches)
            "certd.authority.checker",  # the Checker protocol, the checkers by domain
            "certd.domains.registry",  # each domain's spec: its converter and checker factory
        ],
        [
            "certd.service.verifier",
            "certd.authority.verification",
            "certd.authority.receipts",  # the batch tree, the signed receipt, its proof
            "certd.ledger.log",  # submit, then prove against the latest checkpoint
            "certd.ledger.groupcommit",  # the committer: one store transaction per batch
            "certd.ledger.checkpointer",  # consistency checks, the signed checkpoint
            "certd.ledger.store",  # the store (SQLite or Redis)
        ],
    ],
    "certify": [
        [
            "certd.service.authority",  # the servicer: messages in, messages out
            "certd.authority.feasibility",  # witness verdict, label, gate decision, signing
            "certd.ledger.certificates",  # the one ledger call: record (keys, uniqueness, races)
            "certd.ledger.log",  # the ledger's face
            "certd.ledger.groupcommit",
            "certd.ledger.checkpointer",
            "certd.ledger.store",
        ],
    ],
    "accept": [
        [
            "certd.service.acceptance_rpcs",  # the servicer: samples in, the proven decision out
            "certd.authority.acceptances",  # verify the samples, decide, sign, log, prove
            "certd.ledger.acceptancekeys",  # the decision keys; the decisions read back
            "certd.ledger.log",
            "certd.ledger.groupcommit",
            "certd.ledger.checkpointer",
            "certd.ledger.store",
        ],
    ],
    "audit": [
        [
            "certd.cli",  # `certd audit`: the store or a server, the state file's path
            "certd.ledger.audit",  # entry points: load the state, feed the entries
            "certd.ledger.auditor",  # the engine: rebuild the tree, open every entry
            "certd.ledger.auditstate",  # the report, the trusted state written atomically
            "certd.tlog",  # compact ranges, consistency proofs
        ],
        [
            "certd.ledger.auditor",
            "certd.opening",  # open_statement: the one way to open a signed statement
            "certd.signing.dsse",  # envelopes and their signatures
        ],
    ],
    "admit": [
        [
            "forkgate.ratchet",  # Ratchet.admit: decide without I/O, remember on disk
            "certd.statements",  # verify_certificate / verify_receipt: compare the copies
            "certd.opening",
            "certd.signing.dsse",
        ],
        [
            "forkgate.ratchet",
            "forkgate.ratchet_state",  # the trusted checkpoint, consistency
            "certd.tlog",
        ],
    ],
}

LEGS = [(name, i, leg) for name, legs in PATHS.items() for i, leg in enumerate(legs)]
LEG_IDS = [f"{name}-{i}" for name, i, _ in LEGS]


def _path_of(module: str) -> Path:
    parts = module.split(".")
    if parts[0] == "forkgate":  # the package-dir mapping of pyproject.toml
        parts = ["client", *parts[1:]]
    file = ROOT.joinpath(*parts).with_suffix(".py")
    return file if file.exists() else ROOT.joinpath(*parts, "__init__.py")


def _is_module(module: str) -> bool:
    return _path_of(module).exists()


def _imports(module: str) -> set[str]:
    """The certd and forkgate modules ``module`` imports (``from a import b``: a.b if a module)."""
    file = _path_of(module)
    package = module if file.name == "__init__.py" else module.rpartition(".")[0]
    tree = ast.parse(file.read_text(encoding="utf-8"))
    found: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            found |= {a.name for a in node.names}
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                anchor = package.split(".")[: len(package.split(".")) - (node.level - 1)]
                base = ".".join([*anchor, base] if base else anchor)
            subs = {f"{base}.{a.name}" for a in node.names if _is_module(f"{base}.{a.name}")}
            if len(subs) < len(node.names):  # a name defined in ``base`` itself
                found.add(base)
            found |= subs
    return {m for m in found if m.split(".")[0] in ("certd", "forkgate") and _is_module(m)}


def _reach(module: str) -> set[str]:
    """Every certd or forkgate module ``module`` imports, directly or not."""
    seen: set[str] = set()
    todo = [module]
    while todo:
        for dep in _imports(todo.pop()):
            if dep not in seen:
                seen.add(dep)
                todo.append(dep)
    return seen


def _within(module: str, modules: set[str]) -> bool:
    """``module`` is one of ``modules`` or inside one of them (a package on the path)."""
    return any(module == m or module.startswith(f"{m}.") for m in modules)


@pytest.mark.parametrize(("name", "index", "leg"), LEGS, ids=LEG_IDS)
def test_no_module_reaches_back_up_its_leg(name: str, index: int, leg: list[str]) -> None:
    for position, module in enumerate(leg):
        earlier = set(leg[:position])
        back = sorted(m for m in _reach(module) if _within(m, earlier))
        assert not back, f"{name}: {module} reaches back up the path to {back}"


@pytest.mark.parametrize(("name", "index", "leg"), LEGS, ids=LEG_IDS)
def test_each_step_leads_to_the_next(name: str, index: int, leg: list[str]) -> None:
    for here, there in itertools.pairwise(leg):
        reached = _reach(here)
        assert there in reached or any(m.startswith(f"{there}.") for m in reached), (
            f"{name}: {here} does not lead to {there}"
        )


def test_the_verify_legs_meet_only_in_the_one_authority_call() -> None:
    """The check does not lead into the receipt, nor the receipt into the check: they meet in
    ``Verification`` (the servicer's one call), below the service."""
    check, receipt = PATHS["verify"]
    assert check[1] == receipt[1] == "certd.authority.verification"
    assert not _within("certd.authority.receipts", _reach(check[2]) | {check[2]})
    assert not (set(check[2:]) & (_reach(receipt[2]) | {receipt[2]}))


def _callables_in(func: object) -> list[str]:
    hints = typing.get_type_hints(func)
    hints.pop("return", None)
    return [
        name
        for name, hint in hints.items()
        if typing.get_origin(hint) is collections.abc.Callable or hint is collections.abc.Callable
    ]


def test_the_authority_takes_values_from_the_service_never_its_functions() -> None:
    """The verify path once handed the service's encoder down into the worker pool."""
    from certd.authority.dispatch import VerifyDispatch
    from certd.authority.feasibility import Authority
    from certd.authority.receipts import ReceiptIssuer
    from certd.authority.verification import Verification
    from certd.authority.verifypool import VerifyPool

    for cls in (VerifyDispatch, VerifyPool, ReceiptIssuer, Authority, Verification):
        for name, method in inspect.getmembers(cls, inspect.isfunction):
            if not name.startswith("_"):
                assert not _callables_in(method), f"{cls.__name__}.{name} takes a function"


def test_the_ledger_key_is_the_ledgers_business() -> None:
    """Only the ledger builds ledger keys: the authority and the service never see them."""
    for module in ("certd.authority.feasibility", "certd.service.authority"):
        text = _path_of(module).read_text(encoding="utf-8")
        assert "KEY_SEPARATOR" not in text and "certd.ledger.store" not in _imports(module)
        assert "feasibility/" not in text and "canonical_key" not in text
    for module in ("certd.authority.acceptances", "certd.service.acceptance_rpcs"):
        text = _path_of(module).read_text(encoding="utf-8")
        assert "acceptance/{" not in text and "acceptance-refusal/{" not in text, module
        assert ".keyed(" not in text, module  # reading the decisions back is the ledger's too
        assert "certd.ledger.store" not in _imports(module), module


def test_the_servicer_reads_through_the_authority() -> None:
    """GetCertificate and GetForkTree ask the authority, not its index or the ledger's."""
    text = _path_of("certd.service.authority").read_text(encoding="utf-8")
    for reach_in in (".index", "catch_up", "label_items", "index_of", "CertificateIndex"):
        assert reach_in not in text, reach_in
    assert "certd.ledger.certindex" not in _imports("certd.service.authority")


def test_the_verifier_reads_no_ledger() -> None:
    """The receipt comes back from the authority with its inclusion proof."""
    assert not _within("certd.ledger", _imports("certd.service.verifier"))


def _names(module: str) -> set[str]:
    """Every name, attribute and parameter ``module`` mentions (annotations included)."""
    tree = ast.parse(_path_of(module).read_text(encoding="utf-8"))
    found: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Name):
            found.add(node.id)
        elif isinstance(node, ast.Attribute):
            found.add(node.attr)
        elif isinstance(node, ast.arg):
            found.add(node.arg)
    return found


@pytest.mark.parametrize("module", ["certd.service.authority", "certd.service.acceptance_rpcs"])
def test_the_authority_servicers_read_no_ledger(module: str) -> None:
    """Certificates, fork trees and acceptance decisions come back from the authority with
    their inclusion proofs (``Proven``); the servicers encode them and hold no ``Ledger``."""
    assert not _within("certd.ledger", _imports(module)), _imports(module)
    held = _names(module) & {"Ledger", "ledger", "_ledger"}
    assert not held, f"{module} holds a ledger: {sorted(held)}"


def test_the_authority_servicer_is_built_without_a_ledger() -> None:
    from certd.service.authority import AuthorityServicer

    assert "ledger" not in inspect.signature(AuthorityServicer).parameters


# The service modules that may hold the ``Ledger``: its own servicer (the Ledger RPCs), the
# server assembly (which opens it), Info (the checkpoint size) and the health and metrics
# probes (size, queue depth, fail-stop). No RPC of the Verifier or Authority service is among
# them: the authority returns what their replies carry.
LEDGER_HOLDERS = {
    "certd.service.ledger",
    "certd.service.server",
    "certd.service.info",
    "certd.service.observability",
}


def test_the_service_reads_the_ledger_only_in_the_ledger_servicer() -> None:
    service = sorted(f"certd.service.{f.stem}" for f in (ROOT / "certd/service").glob("*.py"))
    readers = {m for m in service if "certd.ledger.log" in _imports(m) or "Ledger" in _names(m)}
    assert readers <= LEDGER_HOLDERS, sorted(readers - LEDGER_HOLDERS)


def test_every_rpc_converts_tasks_through_the_one_task_cache() -> None:
    """Verify, Certify and the acceptance RPCs (and the configured task sets at start-up) get
    their checked tasks from the one ``TaskCache``; only it calls ``convert.checked_task``."""
    service = sorted(f"certd.service.{f.stem}" for f in (ROOT / "certd/service").glob("*.py"))
    callers = {m for m in service if "checked_task" in _names(m)}
    assert callers == {"certd.service.taskcache"}, sorted(callers)  # convert defines it
    for module in ("certd.service.acceptance_rpcs", "certd.service.verifier"):
        assert "TaskCache" in _names(module), module
