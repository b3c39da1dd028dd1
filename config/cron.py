"""Periodic jobs for `manage.py cron` (RQ's cron scheduler, run by whichever cron process leads:
config/cron_leader.py)."""

from django.conf import settings
from rq import cron

from audit.jobs import checkpoint, sequence
from chat.jobs import post_pending as post_to_chat
from gitsource.jobs import poll_sources
from reconciliation.jobs import enforce_retention, find_silent_agents, inbox_sweep, resync
from registry.jobs import check_reviews
from runtime.jobs import (
    expire_overdue_decisions,
    lift_overdue_group_blocks,
    recount_events,
    resend_overdue_webhooks,
)
from sandbox.jobs import simulate_drift
from siem.jobs import deliver_all as deliver_to_siem

cron.register(checkpoint, queue_name="default", interval=settings.AUDIT_CHECKPOINT_MINUTES * 60)
# Both sequencers leave entries queued at times (a writer that found the head taken, a worker
# killed mid-batch): this run bounds their wait.
cron.register(sequence, queue_name="default", interval=settings.AUDIT_SEQUENCE_DELAY_SECONDS)

cron.register(resync, queue_name="reconcile", interval=settings.RECONCILE_RESYNC_SECONDS)
cron.register(recount_events, queue_name="ingest", interval=30)
cron.register(expire_overdue_decisions, queue_name="default", interval=30)
cron.register(lift_overdue_group_blocks, queue_name="default", interval=60)
cron.register(resend_overdue_webhooks, queue_name="default", interval=60)
cron.register(find_silent_agents, queue_name="default", interval=settings.SILENCE_CHECK_SECONDS)
cron.register(check_reviews, queue_name="default", interval=settings.RECERT_CHECK_SECONDS)
cron.register(inbox_sweep, queue_name="default", interval=settings.INBOX_SWEEP_SECONDS)
cron.register(post_to_chat, queue_name="default", interval=settings.INBOX_SWEEP_SECONDS)
cron.register(deliver_to_siem, queue_name="default", interval=settings.SIEM_POLL_SECONDS)
cron.register(poll_sources, queue_name="default", interval=settings.GIT_POLL_SECONDS)
cron.register(enforce_retention, queue_name="default", interval=settings.RETENTION_CHECK_SECONDS)

if settings.DEMO_SIMULATOR_SECONDS:
    cron.register(simulate_drift, queue_name="default", interval=settings.DEMO_SIMULATOR_SECONDS)
