"""Shared fixtures: a real certd on 127.0.0.1 with a fresh data dir."""

from __future__ import annotations

import json
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
MODULE_SECONDS = Path(__file__).with_name("module_seconds.json")

pytest_plugins = ["cpu_accounting"]  # CPU per module, only with FORKGATE_CPU_REPORT set


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """The slowest modules first (their seconds in ``tests/module_seconds.json``), each
    module's tests in their own order; modules not listed keep their order, after those listed.

    ``make unit`` hands whole modules to two xdist workers in this order
    (``--dist loadfile --no-loadscope-reorder``): the long modules start at once and the short
    ones fill in behind them, so the workers finish together instead of one waiting out a
    long module that started last. Refresh the table from a run's JUnit XML with
    ``scripts/module_seconds.py`` when modules grow or move; a stale table reorders only.
    """
    seconds: dict[str, float] = json.loads(MODULE_SECONDS.read_text())
    items.sort(key=lambda item: -seconds.get(item.nodeid.split("::", 1)[0], 0.0))
    for item in items:
        if item.get_closest_marker("serial") and not _names_the_serial_mark(item.path):
            raise pytest.UsageError(
                f"{item.nodeid} is serial, but its module never writes "
                f"{SERIAL_MARK!r}: the serial phase would not collect it"
            )


SERIAL_MARK = "mark.serial"


def _names_the_serial_mark(path: Path) -> bool:
    return SERIAL_MARK in path.read_text(encoding="utf-8")


def pytest_ignore_collect(collection_path: Path, config: pytest.Config) -> bool | None:
    """The serial phase (``-m serial``) reads only the test modules that write ``mark.serial``.

    Collecting a module imports it, and the suite's modules import TRL, torch, verl and
    hypothesis: ~20 CPU-seconds to keep 4 modules' tests. Every other run collects every module,
    and ``pytest_collection_modifyitems`` refuses a serial test whose module does not write the
    mark, so this filter cannot leave one out.
    """
    if config.getoption("markexpr", "") != "serial" or collection_path.suffix != ".py":
        return None
    if not collection_path.name.startswith("test_"):
        return None
    return True if not _names_the_serial_mark(collection_path) else None


def _test_config(data_dir: Path, *, verify_pool: bool) -> object:
    from certd.config import CertdConfig

    return CertdConfig.model_validate(
        {
            "data_dir": data_dir,
            "listen": "127.0.0.1:0",  # the OS picks the port; the server reports it
            # math starts on first use (no background warm-up: test_math_exactness_service
            # tests it), its workers do not prime the grammar when idle (server_helpers.py
            # says why), and a check may take 20 s on a machine running 8 suites at once
            # (these servers check honest answers; test_math_service tests the 2 s default)
            "math": {"warm_start": False, "prime_grammar": False, "deadline_s": 20.0},
            # the Countdown pool starts its worker processes with the server (about 2 s of
            # CPU on this machine); a per-test server checks in process instead
            # (``verify_workers: 0``), the shared one keeps the product's pool
            "countdown": {} if verify_pool else {"verify_workers": 0},
        }
    )


@contextmanager
def _serving(data_dir: Path, *, verify_pool: bool) -> Iterator[object]:
    from certd.service.server import CertdServer

    server = CertdServer(_test_config(data_dir, verify_pool=verify_pool))  # type: ignore[arg-type]
    server.start()
    try:
        yield server
    finally:
        server.stop(grace_s=1.0)


@pytest.fixture(scope="module")
def shared_certd_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[object]:
    """One certd for every ``shared_certd`` test of a module (see ``certd_server``).

    It runs the product's Countdown worker pool (batches of ``verify_pool_min_batch`` items
    or more are checked there), started once per module.
    """
    data_dir = tmp_path_factory.mktemp("certd-shared") / "certd-data"
    with _serving(data_dir, verify_pool=True) as server:
        yield server


@pytest.fixture()
def certd_server(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[object]:
    """A CertdServer serving on a loopback port (real gRPC, real SQLite, real keys).

    By default each test gets its own server with a fresh data dir: a test that stops the
    server, enters graceful shutdown, counts ledger entries or checkpoint sizes, certifies a
    family another test certifies too (a second certify is an existing certificate or a
    PSEUDO_FORK), or spends a quota sees only its own effects. Such a server checks every
    batch in process (no Countdown worker pool: none of these tests sends a batch of
    ``verify_pool_min_batch`` items).

    A test (or a module, through ``pytestmark``) marked ``@pytest.mark.shared_certd`` only
    reads, or verifies and certifies what no other test's assertions depend on; it gets its
    module's one ``shared_certd_server`` and skips a server start and stop. In such a module,
    ``@pytest.mark.fresh_certd`` gives one test its own server again (say why beside it).
    """
    node = request.node
    if node.get_closest_marker("shared_certd") and not node.get_closest_marker("fresh_certd"):
        yield request.getfixturevalue("shared_certd_server")
        return
    with _serving(tmp_path / "certd-data", verify_pool=False) as server:
        yield server


@pytest.fixture()
def address(certd_server: object) -> str:
    return f"127.0.0.1:{certd_server.port}"  # type: ignore[attr-defined]


@pytest.fixture()
def vkey(certd_server: object) -> str:
    return str(certd_server.key.verifier().to_vkey())  # type: ignore[attr-defined]


@pytest.fixture()
def dead_address() -> Iterator[str]:
    """A loopback address nothing listens on for the whole test: connections are refused.

    The port stays bound (never listening) until the test ends, so no other process can
    take it meanwhile (tests/port_helpers.py).
    """
    from port_helpers import closed_port

    with closed_port() as port:
        yield f"127.0.0.1:{port}"


@pytest.fixture(scope="session")
def redis_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[object]:
    """One real redis-server for the session (AOF, appendfsync always, a free loopback port).

    Tests share it under distinct key prefixes (``redis_prefix``); tests that restart or
    kill Redis start their own ``RedisProcess``.
    """
    from redis_helpers import RedisProcess

    server = RedisProcess(tmp_path_factory.mktemp("redis")).start()
    try:
        yield server
    finally:
        server.stop()


@pytest.fixture()
def redis_prefix() -> str:
    """A key prefix no other test uses."""
    import uuid

    return f"t{uuid.uuid4().hex[:12]}"
