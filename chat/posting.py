"""Posting what waits for an approver to the Slack incoming webhook: each pending proposal and
open escalation once, oldest first."""

import logging

from django.conf import settings

from chat.choices import Subject
from chat.messages import escalation_message, proposal_message
from chat.models import ChatPost
from chat.slack import post
from reconciliation.choices import EscalationStatus
from reconciliation.models import Escalation
from registry.choices import VersionState
from registry.models import DesiredStateVersion

log = logging.getLogger(__name__)
BATCH = 50


def _posted(subject: str) -> set[int]:
    return set(ChatPost.objects.filter(subject=subject).values_list("object_id", flat=True))


def post_pending() -> int:
    """Post what has not been posted; a failed post is tried again on the next run."""
    if not settings.SLACK_WEBHOOK_URL:
        return 0
    sent = 0
    done = _posted(Subject.PROPOSAL)
    versions = (DesiredStateVersion.objects.filter(state=VersionState.PENDING)
                .exclude(pk__in=done).select_related("agent", "proposed_by")
                .order_by("pk")[:BATCH])
    for version in versions:
        sent += _post(Subject.PROPOSAL, version.pk, proposal_message(version))
    done = _posted(Subject.ESCALATION)
    escalations = (Escalation.objects.filter(status=EscalationStatus.OPEN).exclude(pk__in=done)
                   .select_related("agent", "decision").order_by("pk")[:BATCH])
    for escalation in escalations:
        sent += _post(Subject.ESCALATION, escalation.pk, escalation_message(escalation))
    return sent


def _post(subject: str, pk: int, message: dict) -> int:
    try:
        post(settings.SLACK_WEBHOOK_URL, message)
    except OSError as error:
        log.warning("could not post %s %s to Slack: %s", subject, pk, error)
        return 0
    ChatPost.objects.get_or_create(subject=subject, object_id=pk)
    return 1
