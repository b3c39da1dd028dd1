"""The stream's two sources: audit entries as they are placed, alerts as they are recorded.
Both run inside the writer's transaction; delivery is kicked after it commits."""

from typing import Any

from django.db import transaction

from audit.sequencing import placed
from reconciliation.alerts import recorded
from siem import actions, delivery, receivers_cache


def _entries_placed(sender: Any, last_seq: int, **kwargs: Any) -> None:
    if receivers_cache.any_enabled():
        transaction.on_commit(delivery.kick, robust=True)


def _alert_recorded(sender: Any, row: Any, **kwargs: Any) -> None:
    if receivers_cache.any_enabled():
        message = row.to_message()
        message.pop("owner_id", None)  # an internal id, meaningless to a SIEM
        actions.queue_alert(message)
        transaction.on_commit(delivery.kick, robust=True)


placed.connect(_entries_placed, dispatch_uid="siem.entries_placed")
recorded.connect(_alert_recorded, dispatch_uid="siem.alert_recorded")
