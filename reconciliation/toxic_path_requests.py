"""Asking for a check of the fleet's toxic paths (reconciliation/toxic_paths.py): after commit,
collapsed into one already queued (the queued key, cleared when the check starts). Apart from
the check, which opens and moves findings through the actions, so that an action asking for one
(a changed observation) need not import it."""

from django.db import transaction

from config import queues

QUEUED_KEY = "toxic:check:queued"
QUEUED_TTL = 300  # a lost check job stops collapsing new requests after this long


def enqueue_path_check() -> bool:
    """Queue a check unless one is queued already."""
    queue = queues.queue("default")
    if not queue.connection.set(QUEUED_KEY, "1", nx=True, ex=QUEUED_TTL):
        return False
    queue.enqueue("reconciliation.toxic_paths.check_observed_paths_job")
    return True


def request_path_check() -> None:
    """After commit, a fleet check (collapsed with any already waiting)."""
    transaction.on_commit(enqueue_path_check, robust=True)
