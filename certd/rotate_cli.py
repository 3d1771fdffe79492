"""``certd rotate-key``: move the log onto a new signing key through a signed log statement.

Example::

    certd keygen --out new.key --name certd.example/log
    certd rotate-key --config certd.json --new-key new.key

With every replica stopped: the ``key-rotation/v1`` statement, signed by the current key
(``DATA_DIR/signing.key``) and the new one, is appended to the ledger and covered by a
checkpoint the current key signs (``certd.authority.key_rotation``). Then the new key
replaces ``DATA_DIR/signing.key`` and the old public key is written next to it as
``signing-<old key id>.pub``: list it in ``access.previous_log_keys``, give every replica the
new key and restart them (docs/operating-a-cluster.md, "Rotation"). ``key-rotation-<R>.json``
(the entry with its inclusion proof) is for clients: ``forkgate … --trust old.pub --trust
key-rotation-<R>.json`` follows the log onto the new key.
"""

from __future__ import annotations

import argparse
import json
import time
from pathlib import Path
from typing import Any

from certd.clihelp import add_verb, emit
from certd.errors import InvalidInputError

__all__ = ["add_parser"]


def _cmd_rotate_key(args: argparse.Namespace) -> int:
    from certd.authority.key_rotation import record_rotation
    from certd.config import load_config
    from certd.keyrotation import rotation_record
    from certd.service.server import ensure_key, open_ledger
    from certd.signing.keys import save_signing_key

    cfg = load_config(args.config, data_dir=args.data_dir, listen=None)
    for path, what in ((cfg.key_path, "the current signing key"), (args.new_key, "--new-key")):
        if not Path(path).is_file():
            raise InvalidInputError(f"{path}: no such file ({what})", field="new_key")
    old = ensure_key(cfg.key_path, cfg.key_name)
    new = ensure_key(args.new_key, cfg.key_name)
    with open_ledger(cfg, old) as ledger:
        index = record_rotation(ledger, old, new, now=int(time.time()))
        size = ledger.checkpoint().checkpoint.size
        cp = ledger.checkpoint_at(index + 1)  # the old key signs the one covering it
        path = ledger.inclusion_proof(index, index + 1)
        record = rotation_record(index, ledger.entry(index), cp.note, index + 1, path)
    record_path = cfg.key_path.with_name(f"key-rotation-{index}.json")
    record_path.write_text(json.dumps(record, indent=1) + "\n")
    old_pub = cfg.key_path.with_name(f"signing-{old.key_id_hex}.pub")
    old_pub.write_text(old.verifier().to_vkey() + "\n")
    save_signing_key(cfg.key_path, new)
    cfg.key_path.with_suffix(".pub").write_text(new.verifier().to_vkey() + "\n")
    out = {
        "rotation_index": index,
        "checkpoint_size": size,
        "old_key_id": old.key_id_hex,
        "new_key_id": new.key_id_hex,
        "previous_log_key": str(old_pub),
        "rotation_record": str(record_path),
    }
    emit(
        args,
        out,
        f"key rotation {old.key_id_hex} -> {new.key_id_hex} recorded at ledger index {index} "
        f"(checkpoint size {size}, signed by the old key); {cfg.key_path} now holds the new "
        f"key. Add {old_pub} to access.previous_log_keys, copy the new key to every replica "
        f"and restart them. Clients follow the log with --trust {record_path} (after the "
        f"old key's --trust).",
    )
    return 0


def add_parser(sub: Any) -> argparse.ArgumentParser:
    """Register ``rotate-key``."""
    r = add_verb(
        sub,
        "rotate-key",
        "rotate the log's signing key through a signed key-rotation statement in the ledger",
        "0 rotated, 2 a bad config, a missing or misnamed --new-key, or the log already "
        "rotated onto it, 3 the ledger store unreachable",
        _cmd_rotate_key,
    )
    r.add_argument("--new-key", type=Path, required=True, help="the new private key file")
    r.add_argument("--config", type=Path, default=None, help="certd's JSON config")
    r.add_argument("--data-dir", type=Path, default=None, help="data dir (default ./certd-data)")
    return r
