"""The work queues, one RQ queue object per name and settings in each process, so each keeps
its Redis connection pool: django_rq's `get_queue` builds a new client, and opens a new
connection, on every call (one per changed report, pending decision or job enqueued)."""

import json

import django_rq
from django.conf import settings
from rq import Queue

_QUEUES: dict[str, Queue] = {}


def queue(name: str) -> Queue:
    """The queue `name` of RQ_QUEUES. It enqueues at once: callers that change the database
    enqueue on commit themselves (`transaction.on_commit`)."""
    # Keyed on the settings, read each time: tests (and a reloaded worker) change RQ_QUEUES.
    key = f"{name} {json.dumps(settings.RQ_QUEUES[name], sort_keys=True, default=repr)}"
    found = _QUEUES.get(key)
    if found is None:
        found = _QUEUES[key] = django_rq.get_queue(  # noqa: TID251 (the one place)
            name, commit_mode="auto")
    return found
