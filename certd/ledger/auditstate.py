"""What an audit finds and what an auditor remembers: faults, the report, the state file.

Example:
    >>> AuditFault("entry", 17, "not a DSSE envelope").kind
    'entry'

Used by ``certd.ledger.audit`` (import the names from there).
"""

from __future__ import annotations

import base64
import binascii
import json
from dataclasses import dataclass
from pathlib import Path

from certd.atomicfile import write_atomic
from certd.errors import LedgerError
from certd.tlog import (
    HASH_SIZE,
)

__all__ = ["AuditFault", "AuditReport", "AuditState"]


@dataclass(frozen=True)
class AuditFault:
    """One thing the audit found wrong.

    Attributes:
        kind: ``store`` (rows the tree does not explain), ``entry``, ``node``, ``signature``,
            ``checkpoint``, ``consistency`` or
            ``state``.
        index: the entry index it concerns, or None.
        message: what is wrong, with expected and actual values.
    """

    kind: str
    index: int | None
    message: str

    def __str__(self) -> str:
        return self.message


@dataclass(frozen=True)
class AuditState:
    """The last checkpoint an auditor trusted (its state file).

    Attributes:
        origin: the log origin.
        size: the tree size.
        root_hash: the 32-byte root hash.
    """

    origin: str
    size: int
    root_hash: bytes

    def to_json(self) -> bytes:
        """Serialize as JSON.

        Returns:
            ``{"origin": …, "root": base64, "size": …}`` as UTF-8 bytes.
        """
        obj = {
            "origin": self.origin,
            "root": base64.b64encode(self.root_hash).decode("ascii"),
            "size": self.size,
        }
        return json.dumps(obj, sort_keys=True, indent=2).encode("utf-8") + b"\n"

    @classmethod
    def from_json(cls, data: bytes) -> AuditState:
        """Parse a state file.

        Args:
            data: the file contents.

        Raises:
            LedgerError: the contents are not a valid state.

        Returns:
            The state.
        """
        try:
            obj = json.loads(data.decode("utf-8"))
            origin, size, root_b64 = obj["origin"], obj["size"], obj["root"]
            root = base64.b64decode(root_b64, validate=True)
        except (UnicodeDecodeError, ValueError, KeyError, TypeError, binascii.Error) as e:
            raise LedgerError(f"expected an audit state {{origin, size, root}}: {e}") from e
        if not isinstance(origin, str) or not isinstance(size, int) or size < 0:
            raise LedgerError("expected a string origin and a size >= 0 in the audit state")
        if len(root) != HASH_SIZE:
            raise LedgerError(f"expected a 32-byte root in the audit state, got {len(root)}")
        return cls(origin, size, root)

    @classmethod
    def load(cls, path: Path) -> AuditState | None:
        """Read a state file.

        Args:
            path: the file.

        Raises:
            LedgerError: the file exists but cannot be read or parsed.

        Returns:
            The state, or None when the file does not exist.
        """
        try:
            data = Path(path).read_bytes()
        except FileNotFoundError:
            return None
        except OSError as e:
            raise LedgerError(f"cannot read the audit state {path}: {e.strerror}") from e
        return cls.from_json(data)

    def save(self, path: Path) -> None:
        """Write the state file atomically (``certd.atomicfile.write_atomic``).

        Args:
            path: the file.

        Raises:
            LedgerError: the file cannot be written.
        """
        path = Path(path)
        try:
            write_atomic(path, self.to_json(), parents=True)
        except OSError as e:
            raise LedgerError(f"cannot write the audit state {path}: {e.strerror}") from e


@dataclass(frozen=True)
class AuditReport:
    """What an audit found.

    Attributes:
        ok: True when no fault was found.
        origin: the checkpoint's origin, or None when no checkpoint could be opened.
        checkpoint_size: the latest checkpoint's tree size, or None.
        root_hash: the root rebuilt at ``checkpoint_size``, or None.
        entries_checked: how many entries were read and hashed.
        faults: the faults, entry faults by index first (at most ``max_faults``).
        faults_omitted: faults found beyond ``max_faults``.
        trusted_before: the state file's checkpoint before the audit, or None.
        state_updated: whether the state file was (re)written.
        duration_s: wall time of the audit, in seconds.
    """

    ok: bool
    origin: str | None
    checkpoint_size: int | None
    root_hash: bytes | None
    entries_checked: int
    faults: tuple[AuditFault, ...]
    faults_omitted: int
    trusted_before: AuditState | None
    state_updated: bool
    duration_s: float

    def summary(self) -> str:
        """Render the report as text for a terminal.

        Returns:
            One line of totals, then one line per fault.
        """
        head = (
            f"audit {'OK' if self.ok else 'FAILED'}: origin {self.origin}, checkpoint size "
            f"{self.checkpoint_size}, {self.entries_checked} entries checked in "
            f"{self.duration_s:.1f}s, {len(self.faults) + self.faults_omitted} faults"
        )
        lines = [head, *(f"  {f.message}" for f in self.faults)]
        if self.faults_omitted:
            lines.append(f"  … and {self.faults_omitted} more")
        return "\n".join(lines)
