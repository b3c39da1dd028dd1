"""Every state change of the runtime domain (what agents do): events in, counted in windows,
broken rules turned into findings, decisions asked and answered, group rules. Each writes its
audit rows in the same transaction and sends alerts after commit."""

from runtime.actions.behaviour import (
    adopt_unregistered,
    assign_unregistered,
    ingest_events,
    record_violations,
)
from runtime.actions.decisions import decide_pending, expire_decision, request_decision

__all__ = [
    "adopt_unregistered", "assign_unregistered", "decide_pending", "expire_decision",
    "ingest_events", "record_violations", "request_decision",
]
