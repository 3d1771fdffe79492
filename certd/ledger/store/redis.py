"""The cluster ledger store: one Redis shared by every certd replica.

Example::

    from certd.ledger.store.redis import RedisStore
    store = RedisStore("redis://127.0.0.1:6379/0", prefix="certd", appendfsync="always")
    store.append([("k1", b"entry one")])     # 0, from whichever replica gets there first
    store.close()

Keys (``P`` is the prefix; the ``{P}`` hash tag keeps them in one Redis Cluster slot)::

    {P}:meta              hash    schema_version
    {P}:size              string  committed number of entries
    {P}:entries           hash    decimal index -> entry bytes
    {P}:keys              hash    lookup key -> decimal index
    {P}:nodes:<level>     string  complete node i of that level at bytes [32 i, 32 i + 32)
    {P}:checkpoints       hash    decimal size -> signed checkpoint note
    {P}:checkpoint:latest string  the largest size with a stored checkpoint

Sequencing: an append is one Lua script, run atomically by Redis. It compares the stored
size with the size the replica built its Merkle nodes on (compare-and-set), refuses a key
that is already stored (an entry may claim several keys joined by ``KEY_SEPARATOR``; each
must be new), then writes the entries, their keys, every complete node they
create (one ``SETRANGE`` per level) and the new size. A replica that lost the race gets
``AppendConflictError`` and nothing was written, so indexes have no gaps and no duplicates
however many replicas append at once. Complete nodes never change once written, so any
tree size up to the committed one is a consistent view to sign.

Durability: Redis acknowledges a write after appending it to its append-only file (AOF);
``appendfsync always`` fsyncs before every reply, so an acknowledged append survives a
power loss; ``everysec`` fsyncs once a second (a crash of the machine may lose the last
second of acknowledged entries and checkpoints, which clients may already hold: a fork);
``no`` leaves it to the kernel. The store checks the server's policy when it opens
(``appendfsync``, default ``"always"``; ``"any"`` skips the check, for servers that hide
``CONFIG``). See ``docs/operating-a-cluster.md``.
"""

from __future__ import annotations

import threading
import time
import uuid
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from typing import Any
from urllib.parse import urlsplit

import redis
from redis.exceptions import RedisError

from certd.errors import ConfigError, StoreError
from certd.ledger.store.interface import (
    KEY_SEPARATOR,
    AppendConflictError,
    DuplicateKeyError,
    Entry,
    LedgerStore,
    Node,
    StoreLimits,
)
from certd.tlog import HASH_SIZE

__all__ = ["APPENDFSYNC_POLICIES", "KEY_SEPARATOR", "RedisStore", "SCHEMA_VERSION", "redis_url_ok"]

SCHEMA_VERSION = 1
"""Version of the key layout, stored in ``{P}:meta``."""

APPENDFSYNC_POLICIES = ("always", "everysec", "no", "any")
"""Accepted values of ``appendfsync``: a required server policy, or ``any``."""

_APPEND = """
local first = tonumber(ARGV[1])
local n = tonumber(ARGV[2])
local nl = tonumber(ARGV[3])
local size = tonumber(redis.call('GET', KEYS[1]) or '0')
if size ~= first then return {'CONFLICT', tostring(size)} end
local base = 4
local seen = {}
for i = 0, n - 1 do
  for part in string.gmatch(ARGV[base + 2 * i], '[^\\30]+') do
    local at = redis.call('HGET', KEYS[3], part)
    if at then return {'DUPLICATE', part, at} end
    if seen[part] then return {'DUPLICATE_IN_APPEND', part} end
    seen[part] = true
  end
end
for i = 0, n - 1 do
  local idx = tostring(first + i)
  redis.call('HSET', KEYS[2], idx, ARGV[base + 2 * i + 1])
  for part in string.gmatch(ARGV[base + 2 * i], '[^\\30]+') do
    redis.call('HSET', KEYS[3], part, idx)
  end
end
local lb = base + 2 * n
for j = 0, nl - 1 do
  redis.call('SETRANGE', KEYS[4 + j], tonumber(ARGV[lb + 2 * j]), ARGV[lb + 2 * j + 1])
end
redis.call('SET', KEYS[1], tostring(first + n))
return {'OK'}
"""

_PUT_CHECKPOINT = """
local size = tonumber(ARGV[1])
local stored = tonumber(redis.call('GET', KEYS[3]) or '0')
if size > stored then return {'BEYOND', tostring(stored)} end
redis.call('HSET', KEYS[1], ARGV[1], ARGV[2])
local latest = tonumber(redis.call('GET', KEYS[2]) or '-1')
if size > latest then redis.call('SET', KEYS[2], ARGV[1]) end
return {'OK'}
"""

_LATEST_CHECKPOINT = """
local latest = redis.call('GET', KEYS[2])
if not latest then return false end
return {latest, redis.call('HGET', KEYS[1], latest)}
"""

_UNLOCK = """
if redis.call('GET', KEYS[1]) == ARGV[1] then return redis.call('DEL', KEYS[1]) end
return 0
"""

_NODE_LEVELS = 64
_LOCK_TTL_MS = 10_000
_LOCK_WAIT_S = 30.0


def redis_url_ok(url: str) -> bool:
    """Whether ``url`` names a Redis server (``redis://``, ``rediss://`` or ``unix://``).

    Args:
        url: the ``--ledger`` value.

    Returns:
        True for a Redis URL.
    """
    return urlsplit(url).scheme in ("redis", "rediss", "unix")


def _check_settings(url: str, prefix: str, appendfsync: str) -> None:
    """Refuse a store's settings before connecting.

    Raises:
        ConfigError: the AOF policy, the URL or the prefix is not valid.
    """
    if appendfsync not in APPENDFSYNC_POLICIES:
        raise ConfigError(f"expected appendfsync in {APPENDFSYNC_POLICIES}, got {appendfsync!r}")
    if not redis_url_ok(url):
        raise ConfigError(f"expected a redis:// URL, got {url!r}")
    if not prefix or any(c in prefix for c in "{}: \n"):
        raise ConfigError(f"expected a prefix without braces, colons or spaces, got {prefix!r}")


class RedisStore(LedgerStore):
    """A ``LedgerStore`` in Redis, shared by any number of certd processes."""

    shared = True

    def __init__(
        self,
        url: str,
        *,
        prefix: str = "certd",
        appendfsync: str = "always",
        limits: StoreLimits | None = None,
        socket_timeout_s: float = 10.0,
        client: redis.Redis | None = None,
    ) -> None:
        """Connect, check the server's persistence policy and the key layout.

        Args:
            url: ``redis://host:port/db`` (or ``rediss://``, ``unix://``).
            prefix: the key prefix; one Redis can hold several ledgers under different ones.
            appendfsync: the AOF policy the server must run with (``always``, ``everysec``,
                ``no``), or ``any`` to skip the check.
            limits: the store limits, or None for the defaults.
            socket_timeout_s: timeout of each Redis command.
            client: an existing client to use instead of connecting to ``url``.

        Raises:
            ConfigError: the URL or policy is not valid, or the server runs another policy.
            StoreError: Redis cannot be reached, or holds another schema under ``prefix``.
        """
        super().__init__(limits)
        _check_settings(url, prefix, appendfsync)
        self.url = url
        self.prefix = prefix
        p = "{" + prefix + "}"
        self._name_keys(p)
        self._closed = False
        self._lock = threading.Lock()
        try:
            self._r = client or redis.Redis.from_url(
                url, socket_timeout=socket_timeout_s, socket_connect_timeout=socket_timeout_s
            )
            self._append = self._r.register_script(_APPEND)
            self._put_cp = self._r.register_script(_PUT_CHECKPOINT)
            self._latest_cp = self._r.register_script(_LATEST_CHECKPOINT)
            self._unlock = self._r.register_script(_UNLOCK)
            self._check_policy(appendfsync)
            self._r.hsetnx(self._k_meta, "schema_version", SCHEMA_VERSION)
            version = self._r.hget(self._k_meta, "schema_version")
        except RedisError as e:
            raise StoreError(f"cannot open the Redis ledger at {url}: {e}") from e
        if version is None or int(version) != SCHEMA_VERSION:
            raise StoreError(f"expected schema version {SCHEMA_VERSION} under {p}, got {version!r}")

    def _name_keys(self, p: str) -> None:
        """Name the ledger's Redis keys under the hash-tagged prefix ``p`` (``{certd}``)."""
        self._k_meta = f"{p}:meta"
        self._k_size = f"{p}:size"
        self._k_entries = f"{p}:entries"
        self._k_keys = f"{p}:keys"
        self._k_nodes = [f"{p}:nodes:{level}" for level in range(_NODE_LEVELS)]
        self._k_checkpoints = f"{p}:checkpoints"
        self._k_latest = f"{p}:checkpoint:latest"
        self._k_lock = f"{p}:writer"

    def _check_policy(self, appendfsync: str) -> None:
        if appendfsync == "any":
            return
        conf: dict[str, str] = {}
        for name in ("appendonly", "appendfsync"):
            got = self._r.config_get(name)
            conf.update({_text(k): _text(v) for k, v in got.items()})
        if conf.get("appendonly") != "yes" or conf.get("appendfsync") != appendfsync:
            raise ConfigError(
                f"expected Redis at {self.url} to run with appendonly yes and appendfsync "
                f"{appendfsync}, got appendonly {conf.get('appendonly')} and appendfsync "
                f"{conf.get('appendfsync')} (set them in redis.conf, or pass appendfsync='any')"
            )

    def _check_open(self) -> None:
        if self._closed:
            raise StoreError("expected an open store, got a closed one")

    @property
    def client(self) -> redis.Redis:
        """The raw Redis client, for tests and tools that inspect the keys (certd uses none)."""
        return self._r

    @property
    def key_prefix(self) -> str:
        """The hash-tagged key prefix, ``{prefix}``."""
        return "{" + self.prefix + "}"

    # -- hooks --------------------------------------------------------------------------------

    def _read_size(self) -> int:
        self._check_open()
        try:
            raw = self._r.get(self._k_size)
        except RedisError as e:
            raise StoreError(f"cannot read the tree size: {e}") from e
        return 0 if raw is None else int(raw)

    def _read_unexplained(self, size: int, limit: int) -> list[str]:
        self._check_open()
        try:
            if int(self._r.hlen(self._k_entries)) <= size:
                return []
            out = []
            for field, _ in self._r.hscan_iter(self._k_entries, count=1000):
                name = _raw(field).decode("utf-8", "replace")
                if not name.isdigit() or int(name) >= size:
                    out.append(f"entry at {name} beyond the tree size {size}")
                    if len(out) >= limit:
                        break
        except RedisError as e:
            raise StoreError(f"cannot look for entries beyond the tree: {e}") from e
        return out

    def _read_entries(self, start: int, end: int) -> list[bytes | None]:
        self._check_open()
        if end <= start:
            return []
        try:
            got = self._r.hmget(self._k_entries, [str(i) for i in range(start, end)])
        except RedisError as e:
            raise StoreError(f"cannot read entries [{start}, {end}): {e}") from e
        return [None if v is None else _raw(v) for v in got]

    @staticmethod
    def _split_nodes(raw: bytes, count: int) -> list[bytes | None]:
        out: list[bytes | None] = []
        zero = bytes(HASH_SIZE)
        for i in range(count):
            h = raw[i * HASH_SIZE : (i + 1) * HASH_SIZE]
            out.append(h if len(h) == HASH_SIZE and h != zero else None)
        return out

    def _read_nodes(self, level: int, start: int, end: int) -> list[bytes | None]:
        self._check_open()
        if end <= start:
            return []
        try:
            raw = self._r.getrange(self._k_nodes[level], start * HASH_SIZE, end * HASH_SIZE - 1)
        except RedisError as e:
            raise StoreError(f"cannot read nodes at level {level}: {e}") from e
        return self._split_nodes(_raw(raw), end - start)

    def _read_node_set(self, coords: Sequence[tuple[int, int]]) -> list[bytes | None]:
        self._check_open()
        if not coords:
            return []
        try:
            pipe = self._r.pipeline(transaction=False)
            for level, index in coords:
                pipe.getrange(self._k_nodes[level], index * HASH_SIZE, (index + 1) * HASH_SIZE - 1)
            got = pipe.execute()
        except RedisError as e:
            raise StoreError(f"cannot read {len(coords)} nodes: {e}") from e
        return [self._split_nodes(_raw(raw), 1)[0] for raw in got]

    def _scan_keys(self, prefix: str) -> list[tuple[str, int]] | None:
        self._check_open()
        pattern = "".join("\\" + c if c in "*?[]\\" else c for c in prefix) + "*"
        try:
            found = self._r.hscan_iter(self._k_keys, match=pattern, count=10_000)
            return [(_text(k), int(v)) for k, v in found]
        except RedisError as e:
            raise StoreError(f"cannot list keys {prefix!r}*: {e}") from e

    def _read_entry_set(self, indexes: Sequence[int]) -> list[bytes | None]:
        self._check_open()
        out: list[bytes | None] = []
        try:
            for i in range(0, len(indexes), 4096):
                chunk = [str(x) for x in indexes[i : i + 4096]]
                out += [
                    None if v is None else _raw(v) for v in self._r.hmget(self._k_entries, chunk)
                ]
        except RedisError as e:
            raise StoreError(f"cannot read {len(indexes)} entries: {e}") from e
        return out

    def _find_keys(self, keys: Sequence[str]) -> dict[str, int]:
        self._check_open()
        if not keys:
            return {}
        parts = [[p for p in k.split(KEY_SEPARATOR) if p] for k in keys]
        flat = [p for ps in parts for p in ps]
        try:
            got = self._r.hmget(self._k_keys, flat)
        except RedisError as e:
            raise StoreError(f"cannot look up keys: {e}") from e
        at = dict(zip(flat, got, strict=True))
        found: dict[str, int] = {}
        for key, ps in zip(keys, parts, strict=True):
            hit = next((at[p] for p in ps if at[p] is not None), None)
            if hit is not None:
                found[key] = int(hit)
        return found

    def _write_batch(self, first: int, entries: Sequence[Entry], nodes: Sequence[Node]) -> None:
        self._check_open()
        by_level: dict[int, list[tuple[int, bytes]]] = {}
        for level, index, h in nodes:
            by_level.setdefault(level, []).append((index, h))
        keys: list[str] = [self._k_size, self._k_entries, self._k_keys]
        args: list[Any] = [first, len(entries), len(by_level)]
        for key, data in entries:
            args += [key or "", data]
        for level in sorted(by_level):
            run = sorted(by_level[level])
            start = run[0][0]
            if [i for i, _ in run] != list(range(start, start + len(run))):
                raise StoreError(f"expected contiguous new nodes at level {level}, got gaps")
            keys.append(self._k_nodes[level])
            args += [start * HASH_SIZE, b"".join(h for _, h in run)]
        try:
            result = self._append(keys=keys, args=args)
        except RedisError as e:
            raise StoreError(f"append of {len(entries)} entries at {first} failed: {e}") from e
        status = _text(result[0])
        if status == "CONFLICT":
            raise AppendConflictError(first, int(result[1]))
        if status == "DUPLICATE":
            raise DuplicateKeyError(_text(result[1]), int(result[2]))
        if status == "DUPLICATE_IN_APPEND":
            raise DuplicateKeyError(_text(result[1]), None)
        if status != "OK":
            raise StoreError(f"append of {len(entries)} entries at {first}: got {result!r}")

    def _write_checkpoint(self, size: int, signed_note: str) -> None:
        self._check_open()
        try:
            result = self._put_cp(
                keys=[self._k_checkpoints, self._k_latest, self._k_size], args=[size, signed_note]
            )
        except RedisError as e:
            raise StoreError(f"cannot store the checkpoint at size {size}: {e}") from e
        if _text(result[0]) != "OK":
            raise StoreError(f"checkpoint at size {size} is beyond the stored tree {result[1]!r}")

    def _read_checkpoint(self, size: int | None) -> tuple[int, str] | None:
        self._check_open()
        try:
            if size is None:
                got = self._latest_cp(keys=[self._k_checkpoints, self._k_latest], args=[])
                if not got or got[1] is None:
                    return None
                return int(got[0]), _text(got[1])
            note = self._r.hget(self._k_checkpoints, str(size))
        except RedisError as e:
            raise StoreError(f"cannot read checkpoints: {e}") from e
        return None if note is None else (size, _text(note))

    @contextmanager
    def writer_lock(self) -> Iterator[None]:
        """A Redis lock (SET NX PX, released by its owner only) around one replica's commit.

        Replicas then queue for the append instead of redoing lost compare-and-set races.
        It is an optimisation: appends stay compare-and-set, so a lock that expires (a replica
        stalled over ``10 s``) or cannot be had within ``30 s`` costs retries, not correctness.
        """
        token = uuid.uuid4().hex
        held = False
        deadline = time.monotonic() + _LOCK_WAIT_S
        delay = 0.0002
        try:
            while not (held := bool(self._r.set(self._k_lock, token, nx=True, px=_LOCK_TTL_MS))):
                if time.monotonic() >= deadline:
                    break
                time.sleep(delay)
                delay = min(delay * 2, 0.005)
        except RedisError as e:
            raise StoreError(f"cannot take the writer lock: {e}") from e
        try:
            yield
        finally:
            if held:
                try:
                    self._unlock(keys=[self._k_lock], args=[token])
                except RedisError:
                    pass  # it expires after _LOCK_TTL_MS

    def ping(self) -> None:
        """Check that Redis answers.

        Raises:
            StoreError: it does not.
        """
        self._check_open()
        try:
            self._r.ping()
        except RedisError as e:
            raise StoreError(f"Redis at {self.url} does not answer: {e}") from e

    def close(self) -> None:
        """Close the connection pool. Idempotent."""
        with self._lock:
            if self._closed:
                return
            self._closed = True
            self._r.close()


def _text(value: object) -> str:
    return value.decode() if isinstance(value, bytes) else str(value)


def _raw(value: object) -> bytes:
    if isinstance(value, bytes):
        return value
    raise StoreError(f"expected bytes from Redis, got {type(value).__name__}")
