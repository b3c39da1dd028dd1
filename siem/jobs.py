"""RQ entry points of the SIEM stream (thin: siem/delivery.py does the work)."""

from siem import delivery


def deliver_all() -> int:
    """Bring every enabled sink up to date (kicked after commits, and run periodically)."""
    return delivery.deliver_all()


def deliver(sink_id: int) -> int:
    """Retry one sink after its backoff."""
    return delivery.deliver(sink_id)
