"""Cross-call rules end to end on real workers: the customer-database scenario, refunds with
and without sign-off, decisions that time out, and replays (the backtest of a proposal is in
test_backtest.py)."""

import uuid
from datetime import UTC, datetime, timedelta

import pytest
from rest_framework.test import APIClient

from config.errors import Conflict
from reconciliation import actions
from reconciliation.models import Escalation, Finding
from registry.models import Agent
from runtime import actions as runtime_actions
from runtime.models import Decision
from tests.conftest import approved_with_client, eventually, shadow_on

SUPPORT = {
    "data": [{"resource": "customers_db", "access": "read"},
             {"resource": "orders_db", "access": "read"},
             {"resource": "payments", "access": "write"}],
    "limits": [{"resource": "customers_db", "max_calls": 40, "per": "1h"},
               {"resource": "customers_db", "max_same_record": 3, "per": "1h"}],
}


def register(people, **spec) -> tuple[Agent, APIClient]:
    return approved_with_client(people, **{**SUPPORT, **spec})


def read(record: str, minutes_ago: int = 0) -> dict:
    ts = (datetime.now(UTC) - timedelta(minutes=minutes_ago)).isoformat()
    return {"id": uuid.uuid4().hex, "agent": "refund-agent", "ts": ts, "kind": "data_access",
            "resource": "customers_db", "record": record}


def refund(amount: float, **extra) -> dict:
    return {"id": uuid.uuid4().hex, "agent": "refund-agent", "ts": datetime.now(UTC).isoformat(),
            "kind": "action", "action": "payments.refund", "amount": amount, **extra}


@pytest.mark.parametrize("mode, status", [("block", "blocked"), ("log", "logged")])
def test_nine_reads_of_one_record_are_one_finding_and_the_configured_enforcement(
        people, start_worker, redis_client, mode, status):
    agent, client = register(people, enforcement={"default": "correct", "behaviour": mode})
    worker = start_worker("ingest", "reconcile", "default")
    reads = [read("customer-42", minutes_ago=50 - i) for i in range(9)]
    assert client.post("/api/v1/events", reads[:5], format="json").json()["accepted"] == 5
    assert client.post("/api/v1/events", reads[5:], format="json").json()["accepted"] == 4
    assert client.post("/api/v1/events", reads, format="json").json()["duplicates"] == 9
    window = f"bw:{agent.pk}:customers_db:record:customer-42:3600"
    assert redis_client.zcard(window) == 9  # the replay added nothing to the window
    finding = eventually(lambda: Finding.objects.filter(agent=agent, behaviour=True).first(),
                         message="no behaviour finding")
    eventually(lambda: Finding.objects.get(pk=finding.pk).status == status,
               message=lambda: f"not {status}; worker said:\n{worker.output()}")
    assert Finding.objects.filter(agent=agent, behaviour=True).count() == 1
    assert (finding.kind, finding.pointer) == ("same_record_exceeded",
                                               "/limits/customers_db/max_same_record")
    agent.refresh_from_db()
    assert agent.lifecycle == ("suspended" if mode == "block" else "active")
    # Nine reads is within forty calls an hour: no rate-limit finding.
    assert not Finding.objects.filter(kind="rate_limit_exceeded").exists()


@pytest.mark.parametrize("hold", ["shadow", "breaker"])
def test_a_behaviour_block_under_shadow_or_the_breaker_is_recorded_not_applied(people, hold):
    from audit.models import AuditEntry
    from reconciliation.models import ControlState
    from runtime.actions.behaviour import record_violations
    from runtime.behaviour import Violation

    agent, _ = register(people, enforcement={"default": "correct", "behaviour": "block"})
    if hold == "shadow":
        shadow_on(people, agent)
    else:
        control = ControlState.load()
        control.breaker_tripped_at = datetime.now(UTC)
        control.save()
    violation = Violation("same_record_exceeded", "/limits/customers_db/max_same_record", 3, 9,
                          "behaviour", uuid.uuid4().hex, "9 reads of one record in 1h")
    (finding,) = record_violations(agent.pk, [{**violation.to_dict(), "window": 1}])
    finding.refresh_from_db()
    agent.refresh_from_db()
    assert agent.lifecycle == "active" and finding.status == "logged"
    assert "not applied" in finding.reason
    assert AuditEntry.objects.filter(action="correction.shadowed",
                                     agent="refund-agent").count() == 1


def test_a_700_refund_without_sign_off_is_caught_and_with_a_decision_it_is_not(people,
                                                                               start_worker):
    agent, client = register(people, enforcement={"default": "correct", "actions": "escalate"})
    start_worker("ingest", "reconcile", "default")
    client.post("/api/v1/events", [refund(700)], format="json")
    caught = eventually(lambda: Finding.objects.filter(kind="action_without_signoff").first())
    eventually(lambda: Escalation.objects.filter(finding=caught).exists())

    asked = client.post("/api/v1/agents/refund-agent/decisions",
                        {"action": "payments.refund", "amount": 650}, format="json").json()
    assert asked["outcome"] == "pending" and "above $500" in asked["rule"]
    escalation = Escalation.objects.get(decision_id=asked["id"])
    actions.resolve_escalation(escalation.pk, actor=people.bob, resolution="allow",
                               comment="damaged order confirmed")
    answer = client.get(f"/api/v1/decisions/{asked['id']}").json()
    assert (answer["outcome"], answer["status"], answer["decided_by"]) == (
        "allow", "approved", "bob")
    client.post("/api/v1/events", [refund(650, decision_id=asked["id"])], format="json")
    assert Decision.objects.get(pk=asked["id"]).status == "used"
    # Single use: the same sign-off cannot cover a second refund.
    client.post("/api/v1/events", [refund(600, decision_id=asked["id"])], format="json")
    eventually(lambda: Finding.objects.filter(kind="decision_reused").exists())
    assert Finding.objects.filter(kind="action_without_signoff").count() == 1


def test_decisions_allow_deny_and_a_pending_one_times_out_to_deny(people, start_worker,
                                                                  settings):
    agent, client = register(people)
    ask = lambda body: client.post("/api/v1/agents/refund-agent/decisions", body,  # noqa: E731
                                   format="json").json()
    assert ask({"action": "payments.refund", "amount": 100})["outcome"] == "allow"
    over = ask({"action": "payments.refund", "amount": 9000})
    assert over["outcome"] == "deny" and "above the maximum $5,000" in over["rule"]
    assert ask({"tool": "crm.search"})["outcome"] == "deny"
    settings.DECISION_TIMEOUT_SECONDS = 2
    pending = ask({"action": "payments.refund", "amount": 800})
    assert pending["outcome"] == "pending"
    # Nobody answers: the expiry job, scheduled at the deadline, turns it into a deny.
    start_worker("default")
    eventually(lambda: Decision.objects.get(pk=pending["id"]).status == "expired", timeout=30)
    expired = client.get(f"/api/v1/decisions/{pending['id']}").json()
    assert (expired["outcome"], expired["status"]) == ("deny", "expired")
    assert Escalation.objects.get(decision_id=pending["id"]).status == "resolved"


def test_an_expiry_job_that_runs_early_comes_back_at_the_deadline(people, redis_client):
    # RQ's scheduler counts whole seconds, so the job may run just before the deadline.
    import django_rq
    from rq.registry import ScheduledJobRegistry

    from runtime.jobs import expire_decision_job

    agent, client = register(people)
    pending = client.post("/api/v1/agents/refund-agent/decisions",
                          {"action": "payments.refund", "amount": 800}, format="json").json()
    deadline = Decision.objects.get(pk=pending["id"]).expires_at
    queue = django_rq.get_queue("default")
    assert ScheduledJobRegistry(queue=queue).get_job_ids() == []  # on-commit never ran here
    assert expire_decision_job(pending["id"]) is False
    assert Decision.objects.get(pk=pending["id"]).status == "pending"
    (job_id,) = ScheduledJobRegistry(queue=queue).get_job_ids()
    again = queue.fetch_job(job_id)
    assert again.func_name.endswith("expire_decision_job") and again.args == (pending["id"],)
    when = ScheduledJobRegistry(queue=queue).get_scheduled_time(job_id)
    assert deadline < when <= deadline + timedelta(seconds=2)
    # Once answered there is nothing to come back for.
    runtime_actions.decide_pending(pending["id"], actor=people.bob, allow=True, comment="fine")
    assert expire_decision_job(pending["id"]) is False
    assert ScheduledJobRegistry(queue=queue).get_job_ids() == [job_id]


def test_the_sweep_expires_decisions_whose_scheduled_expiry_was_lost(people, redis_client):
    from audit.models import AuditEntry
    from runtime.jobs import expire_overdue_decisions

    agent, client = register(people)
    ask = lambda amount: client.post(  # noqa: E731
        "/api/v1/agents/refund-agent/decisions",
        {"action": "payments.refund", "amount": amount}, format="json").json()["id"]
    overdue, waiting = ask(800), ask(900)
    Decision.objects.filter(pk=overdue).update(
        expires_at=datetime.now(UTC) - timedelta(minutes=5))
    assert expire_overdue_decisions() == 1
    assert Decision.objects.get(pk=overdue).status == "expired"
    assert Decision.objects.get(pk=waiting).status == "pending"
    assert Escalation.objects.get(decision_id=overdue).status == "resolved"
    assert AuditEntry.objects.filter(target=f"decision:{overdue}",
                                     action="decision.expired").count() == 1
    assert expire_overdue_decisions() == 0  # the second sweep changes nothing


def test_the_rate_window_denies_a_decision_once_it_is_full(people, redis_client):
    agent, client = register(people, limits=[
        {"resource": "customers_db", "max_calls": 3, "per": "1h"}])
    client.post("/api/v1/events", [read(f"c{i}") for i in range(3)], format="json")
    answer = client.post("/api/v1/agents/refund-agent/decisions",
                         {"resource": "customers_db", "record": "c9"}, format="json").json()
    assert answer["outcome"] == "deny" and "window is full" in answer["rule"]


class Hook:
    """A local HTTP server standing in for the agent's webhook receiver."""

    def __init__(self, status: int = 204, location: str = "") -> None:
        import threading
        from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

        self.received: list[tuple[bytes, dict[str, str]]] = []
        hook = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self):  # noqa: N802
                body = self.rfile.read(int(self.headers["Content-Length"]))
                hook.received.append((body, dict(self.headers)))
                self.send_response(status)
                if location:
                    self.send_header("Location", location)
                self.end_headers()

            def log_message(self, *args):
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.port = self.server.server_address[1]
        self.allowed = f"127.0.0.1:{self.port}"  # its DECISION_WEBHOOK_HOSTS entry
        self.url = f"http://127.0.0.1:{self.port}/decided"
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()


def answer_and_send(people, client, url: str) -> str:
    """The agent asks with a webhook, carol denies, the default queue runs; the decision id."""
    import django_rq
    from rq import SimpleWorker

    asked = client.post("/api/v1/agents/refund-agent/decisions",
                        {"action": "payments.refund", "amount": 900, "callback_url": url},
                        format="json").json()
    escalation = Escalation.objects.get(decision_id=asked["id"])
    actions.resolve_escalation(escalation.pk, actor=people.carol, resolution="deny",
                               comment="no receipt")
    queue = django_rq.get_queue("default")
    SimpleWorker([queue], connection=queue.connection).work(burst=True)
    return asked["id"]


def test_a_human_answer_is_posted_signed_to_the_agents_webhook(people, transactional_db,
                                                               redis_client, settings):
    import json

    from agentgov.webhooks import BadSignature, verify

    settings.DECISION_WEBHOOK_SECRET = "hook-secret"
    hook = Hook()
    settings.DECISION_WEBHOOK_HOSTS = [hook.allowed]
    try:
        agent, client = register(people)
        decision_id = answer_and_send(people, client, hook.url)
    finally:
        hook.close()
    ((body, headers),) = hook.received
    sent = verify(body, headers, "hook-secret")  # what the agent does with the client library
    assert (sent["id"], sent["outcome"], sent["status"], sent["decided_by"]) == (
        decision_id, "deny", "rejected", "carol")
    with pytest.raises(BadSignature):
        verify(body, headers, "another-secret")
    with pytest.raises(BadSignature):
        verify(body.replace(b'"deny"', b'"allow"'), headers, "hook-secret")
    assert json.loads(body) == sent


def test_a_webhook_that_redirects_is_not_followed(people, transactional_db, redis_client,
                                                  settings):
    elsewhere = Hook()
    hook = Hook(status=302, location=elsewhere.url)
    settings.DECISION_WEBHOOK_HOSTS = [hook.allowed, elsewhere.allowed]
    try:
        agent, client = register(people)
        answer_and_send(people, client, hook.url)
    finally:
        hook.close()
        elsewhere.close()
    assert len(hook.received) == 1 and elsewhere.received == []


def test_a_webhook_name_that_resolves_inside_is_not_called(people, transactional_db,
                                                          redis_client, settings, monkeypatch):
    """hooks.corp.test is allowed by name; at send time it resolves to loopback, which the
    allow-list does not name: nothing is sent there."""
    import socket

    hook = Hook()
    real = socket.getaddrinfo
    monkeypatch.setattr(socket, "getaddrinfo", lambda host, *rest, **kw: real(
        "127.0.0.1" if host == "hooks.corp.test" else host, *rest, **kw))
    settings.DECISION_WEBHOOK_HOSTS = [f"*.corp.test:{hook.port}"]
    try:
        agent, client = register(people)
        decision_id = answer_and_send(people, client, f"http://hooks.corp.test:{hook.port}/x")
    finally:
        hook.close()
    assert hook.received == []
    assert Decision.objects.get(pk=decision_id).status == "rejected"


@pytest.mark.parametrize("allowed, url, message", [
    ([], "http://127.0.0.1:9/decided", "webhooks are off here"),
    (["127.0.0.1"], "http://127.0.0.1:6379/decided", "DECISION_WEBHOOK_HOSTS"),  # any port
    (["hooks.corp.example:8443"], "https://hooks.corp.example:9200/x", "DECISION_WEBHOOK_HOSTS"),
    (["hooks.corp.example"], "http://hooks.corp.example:22/x", "DECISION_WEBHOOK_HOSTS"),
    (["hooks.corp.example"], "http://169.254.169.254/latest/meta-data", "DECISION_WEBHOOK_HOSTS"),
    (["*.corp.example"], "http://corp.example.evil.test/x", "DECISION_WEBHOOK_HOSTS"),
    (["*.corp.example"], "ftp://a.corp.example/x", "http(s) to a host"),
])
def test_a_callback_to_a_host_not_allowed_is_refused_and_nothing_is_asked(
        people, redis_client, settings, allowed, url, message):
    settings.DECISION_WEBHOOK_HOSTS = allowed
    agent, client = register(people)
    answer = client.post("/api/v1/agents/refund-agent/decisions",
                         {"action": "payments.refund", "amount": 900, "callback_url": url},
                         format="json")
    assert answer.status_code == 400, answer.content
    error = answer.json()["error"]
    assert error["code"] == "malformed"
    assert any(d["pointer"] == "/callback_url" and message in d["message"]
               for d in error["details"]), error
    assert not Decision.objects.exists() and not Escalation.objects.exists()


def test_approvers_resolve_a_pending_decision_from_the_escalations_page(people, client,
                                                                        redis_client, db):
    agent, agent_client = register(people)
    asked = agent_client.post("/api/v1/agents/refund-agent/decisions",
                              {"action": "payments.refund", "amount": 700}, format="json").json()
    escalation = Escalation.objects.get(decision_id=asked["id"])
    client.force_login(people.bob)
    page = client.get("/escalations/").content.decode()
    assert "Allow once" in page and "above $500" in page
    refused = client.post("/escalations/", {"escalation": escalation.pk, "resolution": "allow",
                                            "comment": ""}, follow=True)
    assert "needs a comment" in refused.content.decode()
    client.post("/escalations/", {"escalation": escalation.pk, "resolution": "allow",
                                  "comment": "ok"})
    assert Decision.objects.get(pk=asked["id"]).status == "approved"
    client.force_login(people.alice)
    assert client.get("/escalations/").status_code == 403


def test_a_refund_reported_without_an_amount_its_rule_can_read_is_a_finding(people,
                                                                             start_worker):
    """Ingest judges an action by the same reader as decisions: a refund reported with no
    amount or a misspelled one cannot be shown to be within the $500 rule, so it is a finding;
    one with a readable amount under the rule is not."""
    _, client = register(people, enforcement={"default": "correct", "actions": "log"})
    start_worker("ingest", "reconcile", "default")
    missing = refund(100)
    del missing["amount"]
    misspelled = refund(100)
    misspelled["attributes"] = {"Amount": 900}
    del misspelled["amount"]
    answer = client.post("/api/v1/events", [refund(120), missing, misspelled], format="json")
    assert answer.json()["accepted"] == 3, answer.json()
    found = eventually(lambda: Finding.objects.filter(kind="action_amount_unreadable").first())
    assert found.pointer == "/actions/payments.refund"
    assert not Finding.objects.filter(kind__in=["action_without_signoff",
                                                "action_above_max"]).exists()


@pytest.mark.django_db(transaction=True)
@pytest.mark.parametrize("where", ["escalation", "incident", "decision"])
def test_an_answer_after_the_expiry_is_refused_and_the_expiry_it_found_stays(
        people, redis_client, api_as, where):
    """The approver answers a decision whose expiry job has not run yet: refused as too late
    (409 expired), and the decision is expired for good (deny, its audit row, the escalation
    closed), not rolled back with the refusal; the agent reads deny at once."""
    from audit.models import AuditEntry
    from reconciliation.actions.incidents import resolve_incident

    agent, client = register(people)
    asked = client.post("/api/v1/agents/refund-agent/decisions",
                        {"action": "payments.refund", "amount": 800}, format="json").json()
    Decision.objects.filter(pk=asked["id"]).update(
        expires_at=datetime.now(UTC) - timedelta(seconds=1))
    escalation = Escalation.objects.get(decision_id=asked["id"])
    if where == "escalation":  # the API, as the inbox and the escalation page send it
        answer = api_as(people.bob).post(f"/api/v1/escalations/{escalation.pk}/resolve",
                                         {"resolution": "allow", "comment": "fine"},
                                         format="json")
        assert answer.status_code == 409
        assert answer.json()["error"]["code"] == "expired"
        assert "stopped waiting" in answer.json()["error"]["message"]
    else:
        answering = {"incident": lambda: resolve_incident(
            escalation.pk, actor=people.bob, resolution="allow", comment="fine"),
            "decision": lambda: runtime_actions.decide_pending(
                asked["id"], actor=people.bob, allow=True, comment="fine")}[where]
        with pytest.raises(Conflict) as refused:
            answering()
        assert refused.value.code == "expired"
    decision = Decision.objects.get(pk=asked["id"])
    assert (decision.status, decision.outcome) == ("expired", "deny")
    assert Escalation.objects.get(pk=escalation.pk).status == "resolved"
    assert AuditEntry.objects.filter(target=f"decision:{asked['id']}",
                                     action="decision.expired").count() == 1
    read = client.get(f"/api/v1/decisions/{asked['id']}").json()
    assert (read["outcome"], read["status"]) == ("deny", "expired")
