"""Approvers are told where they work: email through Django's mail backend (a local SMTP
server here) and a Slack/Teams-compatible incoming webhook (a local receiver here), per person
or per team, immediately or as a digest, each with a link straight to the item and each sent
notification audited; an SLA breach alerts once and notifies the next approver, found by the
sweep on a real worker."""

import json
import socket
import threading
from datetime import timedelta
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest
from aiosmtpd.controller import Controller
from django.utils import timezone

from audit.models import AuditEntry
from reconciliation import actions
from reconciliation.actions import inbox_notices
from reconciliation.models import AlertEvent, Escalation
from registry.models import Notification, SlaBreach
from sandbox import actions as sandbox_actions
from tests.conftest import (
    BAD_DEPLOYMENT,
    approved_agent,
    confirmed_preference,
    eventually,
    make_person,
)


class Mailbox:
    """aiosmtpd handler: keeps every message it is given."""

    def __init__(self) -> None:
        self.messages: list[tuple[list[str], str]] = []

    async def handle_DATA(self, server, session, envelope):  # noqa: N802 - aiosmtpd's name
        self.messages.append((list(envelope.rcpt_tos), envelope.content.decode()))
        return "250 OK"


@pytest.fixture
def smtp():
    mailbox = Mailbox()
    with socket.socket() as probe:  # a free port (the controller checks itself by connecting)
        probe.bind(("127.0.0.1", 0))
        mailbox.port = probe.getsockname()[1]
    controller = Controller(mailbox, hostname="127.0.0.1", port=mailbox.port)
    controller.start()
    yield mailbox
    controller.stop()


@pytest.fixture
def webhook():
    """A Slack-style incoming webhook receiver on loopback."""
    received: list[dict] = []

    class Receiver(BaseHTTPRequestHandler):
        def do_POST(self):  # noqa: N802 - http.server's name
            length = int(self.headers.get("Content-Length", 0))
            received.append(json.loads(self.rfile.read(length)))
            self.send_response(200)
            self.end_headers()
            self.wfile.write(b"ok")

        def log_message(self, *args):
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Receiver)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    server.received = received
    server.url = f"http://127.0.0.1:{server.server_address[1]}/hooks/T000/B000"
    yield server
    server.shutdown()


@pytest.fixture
def mail_and_hooks(settings, smtp, webhook):
    settings.EMAIL_BACKEND = "django.core.mail.backends.smtp.EmailBackend"
    settings.EMAIL_HOST, settings.EMAIL_PORT = "127.0.0.1", smtp.port
    settings.NOTIFY_WEBHOOK_HOSTS = [f"127.0.0.1:{webhook.server_address[1]}"]
    settings.SITE_URL = "https://governance.example"
    return smtp, webhook


def escalated(people, name: str = "payouts-agent", **labels) -> list[Escalation]:
    agent = approved_agent(people, name, enforcement={"default": "escalate"})
    if labels:
        agent.labels = labels
        agent.save(update_fields=["labels"])
    actions.reconcile_agent(agent.pk, trigger="approved")
    sandbox_actions.sandbox_deploy(agent, actor="system:test", changes=BAD_DEPLOYMENT, reason="bad")
    actions.reconcile_agent(agent.pk, trigger="observation")
    return list(Escalation.objects.filter(agent=agent).order_by("pk"))


@pytest.mark.django_db
def test_email_now_and_a_webhook_digest_each_with_a_link_and_audited(people, mail_and_hooks):
    smtp, webhook = mail_and_hooks
    confirmed_preference(actor=people.bob, channel="email",
                                    target="bob@example.com")
    confirmed_preference(actor=people.carol, channel="webhook",
                                    target=webhook.url, mode="digest")
    first = escalated(people, "payouts-agent")[0]
    second = escalated(people, "billing-agent")[0]

    assert inbox_notices.sweep()["sent"] == 2  # bob: one email per item; carol waits
    assert [to for to, _ in smtp.messages] == [["bob@example.com"], ["bob@example.com"]]
    bodies = "\n".join(body for _, body in smtp.messages)
    for escalation in (first, second):
        assert f"https://governance.example/escalations/#esc-{escalation.pk}" in bodies
    assert webhook.received == []
    assert inbox_notices.sweep()["sent"] == 0  # nobody hears twice

    later = timezone.now() + timedelta(minutes=61)
    assert inbox_notices.sweep(later)["sent"] == 1
    (digest,) = webhook.received
    assert set(digest) == {"text"} and digest["text"].count("\n") == 1  # two lines, one post
    assert "payouts-agent" in digest["text"] and "billing-agent" in digest["text"]
    sent = AuditEntry.objects.filter(action="notification.sent")
    assert sent.count() == 3
    assert {tuple(e.after["items"]) for e in sent if e.after["digest"]} == {
        (f"escalation-{first.pk}", f"escalation-{second.pk}")}


@pytest.mark.django_db
def test_a_sweep_over_items_already_heard_of_costs_the_same_for_two_items_or_six(people,
                                                                                 settings):
    from django.db import connection
    from django.test.utils import CaptureQueriesContext

    settings.EMAIL_BACKEND = "django.core.mail.backends.locmem.EmailBackend"
    confirmed_preference(actor=people.bob, channel="email", target="bob@example.com",
                                    mode="digest")
    confirmed_preference(actor=people.admin, channel="email",
                                    target="team@example.com", mode="digest", team="payments")

    def heard_sweep() -> int:
        now = timezone.now()
        assert inbox_notices.notice_new_items(now) > 0  # the new ones queued once
        with CaptureQueriesContext(connection) as queries:
            assert inbox_notices.notice_new_items(now) == 0  # nothing new: nothing drawn
        return len(queries)

    for i in range(2):
        escalated(people, f"agent-{i}", team="payments")
    two = heard_sweep()
    for i in range(2, 6):
        escalated(people, f"agent-{i}", team="payments")
    assert heard_sweep() == two
    assert Notification.objects.count() == 12  # six items, each to bob and to the team


@pytest.mark.django_db
def test_an_owner_who_is_not_an_approver_hears_nothing_of_the_inbox(people, mail_and_hooks):
    smtp, _ = mail_and_hooks
    oscar = make_person("oscar", "owner")  # owns nothing here: alice's agents are not his
    confirmed_preference(actor=oscar, channel="email", target="oscar@example.com")
    escalated(people)
    inbox_notices.sweep()
    assert smtp.messages == [] and not Notification.objects.exists()


@pytest.mark.django_db
def test_a_team_hears_about_its_agents_only(people, mail_and_hooks):
    smtp, webhook = mail_and_hooks
    confirmed_preference(actor=people.admin, channel="webhook", target=webhook.url,
                                    team="payments")
    escalated(people, "payouts-agent", team="payments")
    escalated(people, "billing-agent", team="billing")
    inbox_notices.sweep()
    assert len(webhook.received) == 1 and "payouts-agent" in webhook.received[0]["text"]


@pytest.mark.django_db
def test_preferences_are_checked_and_kept_to_their_owner(people, mail_and_hooks, api_as,
                                                         client):
    smtp, webhook = mail_and_hooks
    bob = api_as(people.bob)
    before = AuditEntry.objects.count()
    for body, status in (
            ({"channel": "webhook", "target": "http://evil.example/hook"}, 422),
            ({"channel": "webhook", "target": "http://127.0.0.1:1/x"}, 422),
            ({"channel": "email", "target": "not-an-address"}, 422),
            ({"channel": "pager", "target": "x"}, 400),
            ({"channel": "email", "target": "b@example.com", "team": "payments"}, 403)):
        answer = bob.post("/api/v1/notifications/preferences", body, format="json")
        assert answer.status_code == status and "error" in answer.json(), body
    assert AuditEntry.objects.count() == before
    made = bob.post("/api/v1/notifications/preferences",
                    {"channel": "email", "target": "bob@example.com", "mode": "digest"},
                    format="json")
    assert made.status_code == 201
    assert AuditEntry.objects.filter(action="notification.preference_set").count() == 1
    carol = api_as(people.carol)
    assert carol.get("/api/v1/notifications/preferences").json()["preferences"] == []
    pk = made.json()["id"]
    assert carol.delete(f"/api/v1/notifications/preferences/{pk}").status_code == 404
    client.force_login(people.bob)
    page = client.get("/account/notifications/").content.decode()
    assert "bob@example.com" in page and "digest" in page
    client.post(f"/account/notifications/{pk}/delete")
    assert bob.get("/api/v1/notifications/preferences").json()["preferences"] == []


@pytest.mark.django_db
def test_a_failed_webhook_is_recorded_and_audited_not_lost_silently(people, settings):
    settings.NOTIFY_WEBHOOK_HOSTS = ["127.0.0.1:9"]  # discard port: nothing listens
    confirmed_preference(actor=people.bob, channel="webhook",
                                    target="http://127.0.0.1:9/hook")
    escalated(people)
    inbox_notices.sweep()
    failed = Notification.objects.get()
    assert failed.sent_at is None and failed.error
    assert AuditEntry.objects.filter(action="notification.failed").count() == 1


def test_an_sla_breach_on_a_real_worker_alerts_once_and_notifies_the_next_approver(
        people, smtp, start_worker):
    confirmed_preference(actor=people.carol, channel="email",
                                    target="carol@example.com")
    first = escalated(people)[0]
    actions.triage_escalation(first.pk, actor=people.bob, assign=True)  # bob has it
    import django_rq

    from reconciliation.jobs import inbox_sweep

    start_worker("default", INBOX_SLA_ESCALATION_SECONDS="4", INBOX_SWEEP_SECONDS="3600",
                 EMAIL_BACKEND="django.core.mail.backends.smtp.EmailBackend",
                 EMAIL_HOST="127.0.0.1", EMAIL_PORT=str(smtp.port),
                 SITE_URL="https://governance.example")
    django_rq.get_queue("default", commit_mode="auto").enqueue(inbox_sweep)
    breach = eventually(lambda: SlaBreach.objects.filter(item=f"escalation-{first.pk}").first(),
                        timeout=90, message="the sweep scheduled at the deadline never ran")
    assert breach.notified == "carol"  # bob is the assignee: the next approver is told
    eventually(lambda: any("SLA BREACHED" in body and ["carol@example.com"] == to
                           for to, body in smtp.messages), timeout=60)
    django_rq.get_queue("default", commit_mode="auto").enqueue(inbox_sweep)
    eventually(lambda: AuditEntry.objects.filter(action="notification.sent").count() >= 2
               or None, timeout=60)  # carol's "new item" and breach emails
    assert AlertEvent.objects.filter(event="inbox.sla_breached").count() == 1
    assert AuditEntry.objects.filter(action="inbox.sla_breached").count() == 1
