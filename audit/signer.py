"""The signer's memory: before the control plane signs a tree head it proves the head consistent
with the last head it signed, which it keeps outside the database (AUDIT_SIGNED_HEAD_FILE,
beside the private key) and which the directory witnesses hold too. A database rewritten under
it (entries edited and re-hashed, later checkpoints deleted, the log cut back) cannot get the
real key to sign the forgery: the signer refuses, loudly (a critical log line, an alert, /readyz
`degraded`, an `audit.signing_refused` entry), until the trail is consistent again.

The first head ever signed is trusted on first use: there is nothing to hold it against.
"""

import fcntl
import json
import logging
import os
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from agentgov import checkpoints, merkle
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey
from django.conf import settings
from django.dispatch import Signal
from django.utils import timezone

from audit import keys, tree, witnesses

log = logging.getLogger(__name__)
# Sent after a refusal is recorded; reconciliation turns it into a live alert (audit may not
# import the apps above it).
signing_refused = Signal()


class SigningRefused(Exception):
    """The head to sign is not an extension of the last head signed: nothing is signed."""

    def __init__(self, size: int, message: str) -> None:
        super().__init__(message)
        self.size, self.message = size, message


def _write_private(path: Path, text: str) -> None:
    """Write `text` to `path` owner-only (the memory sits beside the private key)."""
    descriptor = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(descriptor, "w", encoding="utf-8") as out:
        out.write(text)


def memory_file() -> Path:
    return Path(settings.AUDIT_SIGNED_HEAD_FILE)


def refusal_file() -> Path:
    return memory_file().with_name(memory_file().name + ".refused")


def last_signed() -> dict[str, Any] | None:
    """The last head this signer signed ({size, root, key_id, at}), None before the first."""
    try:
        head = json.loads(memory_file().read_text(encoding="utf-8"))
    except FileNotFoundError:
        return None
    except (OSError, ValueError) as error:
        raise SigningRefused(0, f"the signer's memory {memory_file()} is unreadable: "
                                f"{error}") from None
    if not (isinstance(head, dict) and type(head.get("size")) is int
            and isinstance(head.get("root"), str)):
        raise SigningRefused(0, f"the signer's memory {memory_file()} is not a signed head")
    return head


def _newest_witnessed() -> list[tuple[str, dict[str, Any]]]:
    """The newest checkpoint each directory witness holds (the signer's second memory): the
    file names are listed, only the newest is read."""
    newest = []
    for url in witnesses.readable_witnesses():
        folder = witnesses.directory(url)
        if folder is None or not folder.is_dir():
            continue
        names = sorted(entry.name for entry in os.scandir(folder)
                       if entry.name.startswith(witnesses.FILE_PREFIX)
                       and entry.name.endswith(witnesses.FILE_SUFFIX))
        if not names:
            continue
        try:
            copy = json.loads((folder / names[-1]).read_text(encoding="utf-8"))
        except (OSError, ValueError) as error:
            raise SigningRefused(0, f"witness {url}'s newest copy {names[-1]} is unreadable: "
                                    f"{error}") from None
        newest.append((url, copy if isinstance(copy, dict) else {}))
    return newest


def check(size: int, root: str, private: Ed25519PrivateKey) -> None:
    """Raise SigningRefused unless the tree of `size` entries with `root` extends every head
    signed before (this signer's memory and each directory witness's newest copy), and the key
    may sign a tree of this size (the trusted key list)."""
    key_id = checkpoints.key_id(private.public_key())
    listed, ranges = keys.trusted()
    if key_id not in listed:
        raise SigningRefused(size, f"the signing key {key_id} is not in the trusted key list: "
                                   f"nothing it signs would verify")
    try:
        checkpoints.check_range({"size": size, "key_id": key_id}, ranges.get(key_id))
    except checkpoints.SignatureError as error:
        raise SigningRefused(size, f"refused to sign: {error}") from None
    remembered = last_signed()
    known = [("the signer's memory", remembered)] if remembered else []
    known += [(f"witness {url}", copy) for url, copy in _newest_witnessed()]
    for where, head in known:
        _extends(size, root, head, where)


def _extends(size: int, root: str, head: dict[str, Any], where: str) -> None:
    before, before_root = head.get("size"), head.get("root")
    if not isinstance(before, int) or not isinstance(before_root, str):
        raise SigningRefused(size, f"{where} holds no readable signed head")
    if size < before:
        raise SigningRefused(size, f"refused to sign the head at entry {size}: {where} holds a "
                                   f"signed head of {before} entries (the log was cut back)")
    if size == before:
        if root != before_root:
            raise SigningRefused(size, f"refused to sign the head at entry {size}: its root "
                                       f"differs from the one {where} holds for that size "
                                       f"(the log was rewritten)")
        return
    try:
        proof = [bytes.fromhex(node) for node in tree.consistency_proof(before, size)]
        merkle.verify_consistency(before, size, bytes.fromhex(before_root),
                                  bytes.fromhex(root), proof)
    except (KeyError, ValueError):  # a missing node, or a proof that does not hold
        raise SigningRefused(size, f"refused to sign the head at entry {size}: it is not "
                                   f"consistent with the head of {before} entries {where} "
                                   f"holds (the log was rewritten below entry "
                                   f"{before + 1})") from None


@contextmanager
def _locked() -> Iterator[None]:
    """One writer of the memory at a time, across processes."""
    memory_file().parent.mkdir(parents=True, exist_ok=True, mode=0o700)
    lock_path = memory_file().with_name(memory_file().name + ".lock")
    with os.fdopen(os.open(lock_path, os.O_WRONLY | os.O_CREAT, 0o600), "a") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(lock, fcntl.LOCK_UN)


def remember(checkpoint: dict[str, Any]) -> None:
    """Keep a just-committed checkpoint as the last head signed (never a smaller one), and
    clear a refusal: the trail is signable again."""
    with _locked():
        try:
            known = last_signed()
        except SigningRefused:
            known = None
        if known is None or checkpoint["size"] > known["size"]:
            staged = memory_file().with_name(memory_file().name + ".new")
            _write_private(staged, json.dumps({name: checkpoint[name] for name in
                                               ("size", "root", "key_id", "at")}) + "\n")
            os.replace(staged, memory_file())
        refusal_file().unlink(missing_ok=True)


def refusal() -> dict[str, Any] | None:
    """The refusal in force, if any ({size, message, at})."""
    try:
        return json.loads(refusal_file().read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None


def keep_refusal(error: SigningRefused) -> bool:
    """Log a refusal and keep it beside the memory for /readyz; True when none was in force
    (audit.actions.refuse_signing then records and announces it: once per refusal, not on
    every append that reaches a checkpoint size while it lasts)."""
    log.critical("audit signing refused: %s", error.message)
    first = refusal() is None
    try:
        refusal_file().parent.mkdir(parents=True, exist_ok=True, mode=0o700)
        _write_private(refusal_file(), json.dumps({"size": error.size, "message": error.message,
                                                   "at": timezone.now().isoformat()}) + "\n")
    except OSError as failure:
        log.critical("audit signing refusal not kept in %s: %s", refusal_file(), failure)
    return first
