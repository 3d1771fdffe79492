"""Trusted verifier keys with optional validity windows, indexed by DSSE key id.

Example:
    >>> from certd.signing.keys import SigningKey
    >>> from certd.signing.keyring import KeyRing, TrustedKey
    >>> key = SigningKey.generate("certd.example/log").verifier()
    >>> ring = KeyRing([TrustedKey(key, first_index=10)])
    >>> ring.lookup(key.key_id_hex, at_index=9), len(ring.lookup(key.key_id_hex, at_index=10))
    ((), 1)
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from dataclasses import dataclass

from certd.errors import SigningError
from certd.signing.keys import VerifierKey

__all__ = ["KeyRing", "TrustedKey"]


@dataclass(frozen=True)
class TrustedKey:
    """A trusted key with an optional validity window.

    Attributes:
        key: the verifier key.
        not_before: first POSIX second the key is valid (inclusive), or None.
        not_after: last POSIX second the key is valid (inclusive), or None.
        first_index: first ledger index the key may sign (a key-rotation statement's
            incoming key: the index after the rotation entry), or None.
        last_index: last ledger index the key may sign (an outgoing key: the rotation
            entry's own index), or None.
    """

    key: VerifierKey
    not_before: int | None = None
    not_after: int | None = None
    first_index: int | None = None
    last_index: int | None = None

    def __post_init__(self) -> None:
        if (
            self.not_before is not None
            and self.not_after is not None
            and self.not_after < self.not_before
        ):
            raise SigningError(
                f"expected not_after >= not_before for {self.key.name}, "
                f"got {self.not_after} < {self.not_before}"
            )

    @property
    def unbounded(self) -> bool:
        """No time or index window: valid at every time and ledger index."""
        return (
            self.not_before is None
            and self.not_after is None
            and self.first_index is None
            and self.last_index is None
        )

    def valid_at(self, at_time: int | None) -> bool:
        """Tell whether the key is valid at a time.

        Args:
            at_time: POSIX seconds, or None to ignore the window.

        Returns:
            True when ``at_time`` is None or inside the window.
        """
        if at_time is None:
            return True
        if self.not_before is not None and at_time < self.not_before:
            return False
        return self.not_after is None or at_time <= self.not_after

    def valid_at_index(self, index: int | None) -> bool:
        """Tell whether the key may sign the ledger entry at ``index`` (None: any)."""
        if index is None:
            return True
        if self.first_index is not None and index < self.first_index:
            return False
        return self.last_index is None or index <= self.last_index


class KeyRing:
    """Trusted verifier keys indexed by DSSE key id (8 lowercase hex digits)."""

    def __init__(self, keys: Iterable[VerifierKey | TrustedKey] = ()) -> None:
        """Build a ring.

        Args:
            keys: keys to trust, each without a window (VerifierKey) or with one (TrustedKey).
        """
        self._by_id: dict[str, list[TrustedKey]] = {}
        # The keys of an id none of whose keys has a window: ``lookup``'s answer whatever
        # the time and index (the audit looks one up a million times).
        self._unbounded: dict[str, tuple[VerifierKey, ...]] = {}
        for k in keys:
            self.add(k if isinstance(k, TrustedKey) else TrustedKey(k))

    def add(self, trusted: TrustedKey) -> None:
        """Trust one more key.

        Args:
            trusted: the key and its validity window.
        """
        keyid = trusted.key.key_id_hex
        entries = self._by_id.setdefault(keyid, [])
        entries.append(trusted)
        self._unbounded.pop(keyid, None)
        if all(t.unbounded for t in entries):
            self._unbounded[keyid] = tuple(t.key for t in entries)

    def lookup(
        self, keyid_hex: str, at_time: int | None = None, at_index: int | None = None
    ) -> tuple[VerifierKey, ...]:
        """Find the trusted keys with a key id.

        Args:
            keyid_hex: the key id, 8 lowercase hex digits.
            at_time: POSIX seconds the key must be valid at, or None to ignore windows.
            at_index: the ledger index the key must be valid at, or None to ignore.

        Returns:
            The matching keys valid at ``at_time`` and ``at_index`` (usually one).
        """
        keys = self._unbounded.get(keyid_hex)
        if keys is not None:
            return keys
        return tuple(
            t.key
            for t in self._by_id.get(keyid_hex, ())
            if t.valid_at(at_time) and t.valid_at_index(at_index)
        )

    def knows(self, keyid_hex: str) -> bool:
        """Tell whether any key with this id is trusted, whatever its windows
        (``bool(lookup(keyid_hex))``, without building the tuple)."""
        return keyid_hex in self._by_id

    def __iter__(self) -> Iterator[TrustedKey]:
        for entries in self._by_id.values():
            yield from entries

    def __len__(self) -> int:
        return sum(len(v) for v in self._by_id.values())
