"""An escalation or pending decision is posted as soon as its alert commits (proposals, which
raise no alert, wait for the cron's run every INBOX_SWEEP_SECONDS)."""

import logging
from typing import Any

from django.conf import settings
from django.db import transaction
from redis.exceptions import RedisError

from audit.alert_kinds import AlertKind
from config import queues
from reconciliation.alerts import recorded

log = logging.getLogger(__name__)
POSTED_EVENTS = frozenset({AlertKind.ESCALATION_OPENED, AlertKind.DECISION_PENDING})


def _queue_post() -> None:
    try:
        queues.queue("default").enqueue("chat.jobs.post_pending")
    except RedisError as error:  # the cron's run posts it
        log.warning("could not queue the Slack post: %s", error)


def _alert_recorded(sender: Any, row: Any, **kwargs: Any) -> None:
    if settings.SLACK_WEBHOOK_URL and row.event in POSTED_EVENTS:
        transaction.on_commit(_queue_post, robust=True)


recorded.connect(_alert_recorded, dispatch_uid="chat.alert_recorded")
