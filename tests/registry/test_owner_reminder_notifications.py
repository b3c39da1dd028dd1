"""The owner's reminder goes through the owner's notification preferences: email (a local SMTP
server) or a webhook digest, with a link to the recertify form, once per review period, each
sent notification audited; nobody else hears of alice's reminder. On real workers, the
reminder the approval scheduled sends the email with no sweep from the test."""

from datetime import timedelta

import django_rq
import pytest
from django.utils import timezone

from audit.models import AuditEntry
from reconciliation.actions import inbox_notices
from registry import actions
from registry.choices import VersionSource
from registry.models import Agent, Notification
from registry.recertification import ReviewOverride
from tests.conftest import approved_agent, confirmed_preference, eventually, refund_manifest
from tests.registry.test_notifications import mail_and_hooks, smtp, webhook  # noqa: F401
from tests.registry.test_owner_inbox import due_in

LINK = "https://governance.example/agents/refund-agent/#recertify-comment"


def reminder_mails(mailbox) -> list[tuple[list[str], str]]:
    return [(to, body) for to, body in mailbox.messages if "recertify refund-agent by" in body]


@pytest.mark.django_db
def test_alice_is_emailed_once_per_review_period_and_bob_hears_nothing_of_it(
        people, mail_and_hooks):  # noqa: F811 - pytest fixture
    mailbox, _ = mail_and_hooks
    confirmed_preference(actor=people.alice, channel="email", target="alice@example.com")
    confirmed_preference(actor=people.bob, channel="email", target="bob@example.com")
    agent = due_in(approved_agent(people, "refund-agent"), days=3)

    assert inbox_notices.sweep()["sent"] == 1
    ((to, body),) = reminder_mails(mailbox)
    assert to == ["alice@example.com"] and LINK in body
    assert inbox_notices.sweep()["sent"] == 0  # told once for this review date
    item = f"recertification-{agent.pk}-{int(agent.review_due_at.timestamp())}"
    sent = AuditEntry.objects.get(action="notification.sent")
    assert sent.after["items"] == [item] and sent.after["channel"] == "email"
    assert not Notification.objects.filter(preference__user=people.bob).exists()

    due_in(agent, days=5)  # a new review period (recertified): a new reminder when it comes
    assert inbox_notices.sweep()["sent"] == 1
    assert [to for to, _ in reminder_mails(mailbox)] == [["alice@example.com"]] * 2


@pytest.mark.django_db
def test_a_digest_webhook_carries_the_reminder_after_its_period(
        people, mail_and_hooks):  # noqa: F811 - pytest fixture
    _, hooks = mail_and_hooks
    confirmed_preference(actor=people.alice, channel="webhook", target=hooks.url,
                           mode="digest")
    due_in(approved_agent(people, "refund-agent"), hours=-1)  # already overdue
    assert inbox_notices.sweep()["sent"] == 0 and hooks.received == []
    assert inbox_notices.sweep(timezone.now() + timedelta(minutes=61))["sent"] == 1
    (digest,) = hooks.received
    assert "recertify refund-agent by" in digest["text"] and LINK in digest["text"]
    assert "overdue" in digest["text"]


def test_on_workers_the_scheduled_reminder_emails_the_owner_once(people, smtp,  # noqa: F811
                                                                 start_worker):
    confirmed_preference(actor=people.alice, channel="email", target="alice@example.com")
    worker = start_worker("reconcile", "default", INBOX_SWEEP_SECONDS="3600",
                          EMAIL_BACKEND="django.core.mail.backends.smtp.EmailBackend",
                          EMAIL_HOST="127.0.0.1", EMAIL_PORT=str(smtp.port),
                          SITE_URL="https://governance.example")
    (outcome,) = actions.apply_manifests([refund_manifest()], actor=people.alice,
                                         source=VersionSource.YAML)
    actions.approve_proposal(outcome.version.pk, actor=people.bob)
    # A review date 8 seconds away: the reminder (14 days ahead) is due at once.
    recert = actions.propose_recertification(
        "refund-agent", actor=people.alice, comment="short review cycle for the test",
        review=ReviewOverride(after_seconds=8))
    actions.approve_proposal(recert.version.pk, actor=people.bob)
    eventually(lambda: reminder_mails(smtp), timeout=90, message=worker.output())
    ((to, body),) = reminder_mails(smtp)
    assert to == ["alice@example.com"] and LINK in body
    eventually(lambda: Agent.objects.get(name="refund-agent").overdue_at is not None,
               timeout=90, message=worker.output())
    from reconciliation.jobs import inbox_sweep

    job = django_rq.get_queue("default", commit_mode="auto").enqueue(inbox_sweep)
    eventually(lambda: job.get_status(refresh=True) == "finished", timeout=90,
               message=worker.output())
    assert len(reminder_mails(smtp)) == 1  # overdue now, but told once for this date
    told = [e for e in AuditEntry.objects.filter(action="notification.sent")
            if any(i.startswith("recertification-") for i in e.after["items"])]
    assert len(told) == 1
