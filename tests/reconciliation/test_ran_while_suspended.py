"""A call the agent made after its suspension committed (its gate let it through while the
suspension was on its way) is a behaviour finding, judged by the event's own time; a call
from before the suspension, sent late, is not."""

import uuid
from datetime import UTC, datetime, timedelta

from audit.models import AuditEntry
from reconciliation import actions
from reconciliation.models import Finding
from tests.conftest import approved_with_client, eventually


def refund_call(ts: datetime) -> dict:
    return {"id": uuid.uuid4().hex, "agent": "refund-agent", "ts": ts.isoformat(),
            "kind": "tool_call", "tool": "payments.refund", "resource": "payments"}


def test_a_call_after_the_suspension_is_a_finding(people, start_worker):
    agent, client = approved_with_client(people, enforcement={"default": "correct"})
    start_worker("ingest", "reconcile", "default")
    before = datetime.now(UTC) - timedelta(seconds=30)
    actions.suspend_agent(agent, actor=people.bob, reason="refund loop")
    # sent late, made before: not a finding; made after: one
    late, made_after = refund_call(before), refund_call(datetime.now(UTC) + timedelta(seconds=1))
    assert client.post("/api/v1/events", [late, made_after],
                       format="json").json()["accepted"] == 2
    finding = eventually(lambda: Finding.objects.filter(agent=agent,
                                                        kind="ran_while_suspended").first(),
                         message="no finding for the call after the suspension")
    assert finding.pointer == "/running" and finding.behaviour
    assert "payments.refund ran after the agent was suspended" in finding.reason
    assert Finding.objects.filter(agent=agent, kind="ran_while_suspended").count() == 1
    opened = AuditEntry.objects.get(action="finding.opened", target=f"finding:{finding.pk}")
    assert opened.after["event"] == made_after["id"]  # the late one did not open it
