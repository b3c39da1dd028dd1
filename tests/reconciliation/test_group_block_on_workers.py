"""A group token budget with effect `block`, end to end on a real worker: model calls of two
payments agents push the team's window over the limit; a decision for a third payments agent
is denied naming the rule, one for an agent outside the team is not; the two agents involved
are suspended with their findings blocked (audited), the 80% warning is one finding per agent
however many events crossed it, and the block lifts by itself (audited) once the window falls
back under the limit."""

import uuid
from datetime import UTC, datetime

import pytest

from audit.models import AuditEntry
from reconciliation.models import Finding
from registry.models import Agent
from runtime.actions.group_rules import create_group_rule
from runtime.models import GroupBreach
from tests.conftest import approved_agent, eventually, token_client

pytestmark = pytest.mark.long(minutes=1)

SPEC = {"data": [{"resource": "payments", "access": "write"}], "limits": [],
        "actions": {"payments.refund": {"max": 50000}}}
ASK = {"action": "payments.refund", "amount": 100}


def calls(name: str, count: int, tokens: int) -> list[dict]:
    now = datetime.now(UTC).isoformat()
    return [{"id": uuid.uuid4().hex, "agent": name, "ts": now, "kind": "model_call",
             "model": "gpt-4.1", "input_tokens": tokens, "output_tokens": 0}
            for _ in range(count)]


@pytest.mark.timeout(400)
def test_a_team_over_its_token_budget_is_blocked_until_the_window_falls_back(
        people, start_worker, api_as):
    for name in ("pay-a", "pay-b", "pay-c", "support"):
        approved_agent(people, name, **SPEC)
    Agent.objects.exclude(name="support").update(labels={"team": "payments"})
    Agent.objects.filter(name="support").update(labels={"team": "support"})
    create_group_rule(actor=people.dana, name="payments-tokens", measure="tokens",
                      limit=10000, per="1m", selector={"team": "payments"},
                      match={"kind": "model_call"}, effect="block")
    worker = start_worker("ingest", "default")
    admin = api_as(people.admin)
    pay_c = token_client(people, Agent.objects.get(name="pay-c"))
    support = token_client(people, Agent.objects.get(name="support"))
    # 9,000 tokens, the last three events at 8,000 or more (80%): warnings, nothing blocked.
    events = [e for pair in zip(calls("pay-a", 9, 500), calls("pay-b", 9, 500), strict=True)
              for e in pair]
    for start in range(0, len(events), 3):
        assert admin.post("/api/v1/events", events[start:start + 3],
                          format="json").json()["accepted"] == 3
    assert pay_c.post("/api/v1/agents/pay-c/decisions", ASK,
                      format="json").json()["outcome"] == "allow"
    # 10,200: over the limit.
    assert admin.post("/api/v1/events", calls("pay-a", 2, 600) + calls("pay-b", 1, 100),
                      format="json").json()["accepted"] == 3
    denied = pay_c.post("/api/v1/agents/pay-c/decisions", ASK, format="json").json()
    assert denied["outcome"] == "deny"
    assert denied["rule"].startswith("group rule payments-tokens: 10,300 tokens across the "
                                     "group per 1m, above 10,000: the group is blocked")
    free = support.post("/api/v1/agents/support/decisions", ASK, format="json").json()
    assert free["outcome"] == "allow"

    blocked = eventually(lambda: list(Finding.objects.filter(
        kind="group_limit_exceeded", status="blocked").order_by("agent__name"))
        if Finding.objects.filter(kind="group_limit_exceeded", status="blocked").count() == 2
        else None, timeout=180, message=worker.output())
    assert [f.agent.name for f in blocked] == ["pay-a", "pay-b"]
    assert set(Agent.objects.filter(lifecycle="suspended").values_list("name", flat=True)) == {
        "pay-a", "pay-b"}
    assert {e.target for e in AuditEntry.objects.filter(action="agent.suspended")} == {
        "agent:pay-a", "agent:pay-b"}
    warnings = Finding.objects.filter(kind="group_budget_warning")
    assert sorted(w.agent.name for w in warnings) == ["pay-a", "pay-b"]  # one each
    assert not Finding.objects.filter(agent__name__in=("pay-c", "support")).exists()
    (breach,) = GroupBreach.objects.exclude(group_key__startswith="warning|")

    # The window is 1 minute: the worker's scheduled look finds it back under and lifts.
    lifted = eventually(lambda: AuditEntry.objects.filter(action="group_rule.lifted").first(),
                        timeout=240, message=worker.output())
    assert lifted.target == "group_rule:payments-tokens"
    assert lifted.after["resumed"] == ["pay-a", "pay-b"]
    assert lifted.actor.startswith("system")
    assert not Agent.objects.filter(lifecycle="suspended").exists()
    assert set(Finding.objects.filter(kind="group_limit_exceeded").values_list(
        "status", flat=True)) == {"resolved"}
    assert AuditEntry.objects.filter(action="finding.resolved").count() == 2
    assert AuditEntry.objects.filter(action="agent.resumed").count() == 2
    again = pay_c.post("/api/v1/agents/pay-c/decisions", ASK, format="json").json()
    assert again["outcome"] == "allow"
    assert GroupBreach.objects.get(pk=breach.pk).total >= 10200
