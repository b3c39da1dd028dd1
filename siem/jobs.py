"""RQ entry points of the SIEM stream (thin: siem/delivery.py does the work)."""

from siem import delivery


def deliver_all() -> int:
    """Bring every enabled sink up to date (kicked after commits, and run periodically)."""
    return delivery.deliver_all()


def deliver(sink_id: int) -> int:
    """Bring one sink up to date now."""
    return delivery.deliver(sink_id)


def retry(sink_id: int) -> int:
    """Try one sink again after its backoff (scheduled when it failed)."""
    return delivery.retry_after_backoff(sink_id)
