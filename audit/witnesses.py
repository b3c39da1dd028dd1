"""Witnesses: copies of every checkpoint kept outside the database (AUDIT_WITNESSES), so a log
rolled back or forked in the database still disagrees with what was published.

`file:///dir` writes one file per checkpoint and never overwrites one (mount a write-once
bucket there); `https://...` receives a POST signed like decision webhooks
(config/webhook_signing.py), sent through their outbound guard (config/outbound.py). Verify
reads the directories back; an HTTP witness keeps its own copies.
"""

import json
import logging
import os
import time
from pathlib import Path
from typing import Any
from urllib.parse import quote, unquote, urlsplit

from django.conf import settings

from audit.chain import canonical_json
from config import outbound, queues, retries
from config.webhook_signing import SIGNATURE_HEADER, signature

log = logging.getLogger(__name__)
FILE_PREFIX, FILE_SUFFIX = "checkpoint-", ".json"


def file_name(size: int) -> str:
    return f"{FILE_PREFIX}{size:012d}{FILE_SUFFIX}"


def directory(url: str) -> Path | None:
    """The directory of a file:// witness, None for any other kind."""
    parts = urlsplit(url)
    return Path(unquote(parts.path)) if parts.scheme == "file" else None


def publish(checkpoint: dict[str, Any]) -> None:
    """Hand a just-committed checkpoint to every witness; a witness that fails is logged and
    later reported by verify as missing the checkpoint."""
    for url in settings.AUDIT_WITNESSES:
        folder = directory(url)
        try:
            if folder is not None:
                write_copy(folder, checkpoint)
            else:
                queues.queue("default").enqueue(
                    "audit.jobs.post_to_witness", url, checkpoint,
                    retry=retries.witness_post())
        except (OSError, ConnectionError) as error:
            log.error("audit witness %s did not take checkpoint %s: %s", url,
                      checkpoint["size"], error)


def write_copy(folder: Path, checkpoint: dict[str, Any]) -> None:
    """Write the checkpoint's file once; an existing copy is left exactly as it is. Under
    var/ (the development witness) it is owner-only, as everything there is."""
    inside_var = Path(settings.VAR_DIR).resolve() in [folder.resolve(), *folder.resolve().parents]
    folder.mkdir(parents=True, exist_ok=True, mode=0o700 if inside_var else 0o777)
    try:
        descriptor = os.open(folder / file_name(checkpoint["size"]),
                             os.O_WRONLY | os.O_CREAT | os.O_EXCL,
                             0o400 if inside_var else 0o444)
    except FileExistsError:
        return
    with os.fdopen(descriptor, "w", encoding="utf-8") as out:
        out.write(canonical_json(checkpoint) + "\n")


def post(url: str, checkpoint: dict[str, Any]) -> None:
    """POST the checkpoint JSON, signed with AUDIT_WITNESS_SECRET, through the outbound guard
    (AUDIT_WITNESS_HOSTS, checked on the address the name resolves to now; no redirect is
    followed); raises so RQ retries."""
    destination = outbound.check(url, settings.AUDIT_WITNESS_HOSTS)
    body = canonical_json(checkpoint).encode("utf-8")
    headers = {"Content-Type": "application/json"}
    if settings.AUDIT_WITNESS_SECRET:
        headers[SIGNATURE_HEADER] = signature(body, settings.AUDIT_WITNESS_SECRET,
                                              int(time.time()))
    query = urlsplit(url).query
    target = quote(destination.path, safe="/%") + (f"?{query}" if query else "")
    answer = outbound.send(destination, "POST", target, headers, body, timeout=10,
                           max_bytes=settings.OUTBOUND_MAX_ANSWER_BYTES)
    if answer.status >= 300:  # a redirect could point anywhere: never followed, retried
        raise OSError(f"witness {url} answered {answer.status}")


def copies(url: str) -> dict[int, dict[str, Any] | None]:
    """size -> checkpoint held by a directory witness (None for a file that does not parse)."""
    folder = directory(url)
    if folder is None or not folder.is_dir():
        return {}
    held: dict[int, dict[str, Any] | None] = {}
    for path in folder.glob(f"{FILE_PREFIX}*{FILE_SUFFIX}"):
        try:
            size = int(path.name[len(FILE_PREFIX):-len(FILE_SUFFIX)])
        except ValueError:
            continue
        try:
            held[size] = json.loads(path.read_text(encoding="utf-8"))
        except (OSError, ValueError):
            held[size] = None
    return held


def readable_witnesses() -> list[str]:
    """The witnesses verify can read back (directories)."""
    return [url for url in settings.AUDIT_WITNESSES if directory(url) is not None]
