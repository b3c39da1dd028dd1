"""`agentctl audit monitor`: follow a live trail as a transparency-log monitor does.

Each run reads the head it saw last (a small JSON file the monitor keeps), asks the server for
its newest signed tree head, checks the signature with keys the monitor trusts, and asks for an
RFC 6962 consistency proof from the old head to the new one. A head that is smaller than the one
seen, a different root for the same size, or a proof that does not hold means the log was
rewritten or forked: the run fails and the saved head stays where it was, so every later run
fails too until a person looks. See docs/audit-format.md, "Monitoring a live trail".
"""

from __future__ import annotations

import json
import os
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol

from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PublicKey

from agentgov import checkpoints as signing
from agentgov.merkle import ProofError, verify_consistency

SAVED_FIELDS = ("size", "root", "at", "key_id", "algorithm", "signature")


class LiveTrail(Protocol):
    def audit_newest_checkpoint(self) -> dict[str, Any] | None: ...

    def audit_consistency_proof(self, first: int, second: int) -> list[str]: ...


@dataclass(frozen=True)
class Observation:
    """One run's outcome: `ok`, a first line for the person reading, and the head now saved."""

    ok: bool
    line: str


def load_head(path: Path) -> dict[str, Any] | None:
    """The head saved by the last run (None before the first); ValueError if unreadable."""
    try:
        head = json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        return None
    except (OSError, ValueError) as error:
        raise ValueError(f"the saved head {path} is unreadable: {error}") from None
    if not isinstance(head, dict) or type(head.get("size")) is not int or not isinstance(
            head.get("root"), str):
        raise ValueError(f"the saved head {path} is not a signed tree head")
    return head


def save_head(path: Path, head: Mapping[str, Any]) -> None:
    """Replace the saved head at once (write, then rename)."""
    staged = path.with_name(path.name + ".new")
    staged.write_text(json.dumps({k: head.get(k) for k in SAVED_FIELDS}) + "\n",
                      encoding="utf-8")
    os.replace(staged, path)


def observe(trail: LiveTrail, state: Path, keys: Mapping[str, Ed25519PublicKey]) -> Observation:
    """Check the trail's newest signed head against the saved one; save it when consistent."""
    newest = trail.audit_newest_checkpoint()
    seen = load_head(state)
    if newest is None:
        if seen is not None:
            return Observation(False, f"FORK the server holds no signed head, but head "
                                      f"{seen['size']} was seen before: the log was replaced")
        return Observation(True, "OK no signed head yet")
    try:
        signing.verify_checkpoint(newest, keys, getattr(keys, "ranges", None))
    except signing.SignatureError as error:
        return Observation(False, f"FAILED the newest head ({newest.get('size')}) is not "
                                  f"signed by a trusted key: {error}")
    size, root = newest["size"], newest["root"]
    if seen is None:
        save_head(state, newest)
        return Observation(True, f"OK first head {size} (root {root}) saved to {state}: "
                                 f"later runs hold the log to it")
    if size < seen["size"]:
        return Observation(False, f"FORK the newest signed head has {size} entries, fewer than "
                                  f"the {seen['size']} seen before: the log was cut back")
    if size == seen["size"]:
        if root != seen["root"]:
            return Observation(False, f"FORK head {size} now has root {root}, not the root "
                                      f"{seen['root']} seen before: the log was rewritten")
        return Observation(True, f"OK head {size} unchanged (root {root})")
    try:
        proof = [bytes.fromhex(node) for node in
                 trail.audit_consistency_proof(seen["size"], size)]
        verify_consistency(seen["size"], size, bytes.fromhex(seen["root"]),
                           bytes.fromhex(root), proof)
    except (ProofError, ValueError) as error:
        return Observation(False, f"FORK head {size} is not consistent with head "
                                  f"{seen['size']} seen before ({error}): the log was "
                                  f"rewritten below entry {seen['size'] + 1}")
    save_head(state, newest)
    return Observation(True, f"OK head {size} extends head {seen['size']} (root {root})")
