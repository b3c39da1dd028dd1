"""Maintenance windows: dana schedules one for the payments team; drift found in it is
recorded and its correction waits (audited), unless the window allows that kind; it ends on
time by itself (a real worker runs the pass that the holding pass asked for at the end), and
bad input is the documented error with nothing scheduled."""

from datetime import timedelta

import pytest
from django.utils import timezone

from audit.models import AuditEntry
from compliance import actions
from compliance.models import MaintenanceWindow
from config.errors import NotAllowed
from reconciliation import actions as reconciliation
from reconciliation.models import Correction, Finding
from sandbox import actions as sandbox
from sandbox.models import SandboxAgent
from tests.compliance.personas import labelled_agent
from tests.conftest import eventually

CRM = ["crm.search", "orders.lookup", "payments.refund"]


def iso(moment) -> str:
    return moment.isoformat()


def window(people, *, seconds: float, allowed=None, selector=None):
    now = timezone.now()
    return actions.schedule_window(
        actor=people.dana, starts_at=iso(now - timedelta(seconds=1)),
        ends_at=iso(now + timedelta(seconds=seconds)), reason="payments database upgrade",
        selector={"team": "payments"} if selector is None else selector, allowed=allowed)


def tools_on_platform(agent) -> list[str]:
    return SandboxAgent.objects.get(agent=agent).state["tools"]


@pytest.mark.django_db
def test_drift_in_a_window_is_recorded_and_its_correction_waits(people, refund_agent):
    reconciliation.reconcile_agent(refund_agent.pk, trigger="approved")
    held = window(people, seconds=3600)
    sandbox.sandbox_deploy(refund_agent, actor="system:test", changes={"tools": CRM},
                           reason="hotfix")
    reconciliation.reconcile_agent(refund_agent.pk, trigger="observation")
    finding = Finding.objects.get(agent=refund_agent, pointer="/tools/crm.search")
    assert finding.status == "open"
    assert "crm.search" in tools_on_platform(refund_agent)
    assert not Correction.objects.filter(agent=refund_agent, result="applied").exists()
    (row,) = AuditEntry.objects.filter(action="maintenance.held", agent="refund-agent")
    assert row.target == f"finding:{finding.pk}" and row.after["window"] == held.pk
    # the next pass holds it again without another row
    reconciliation.reconcile_agent(refund_agent.pk, trigger="resync")
    assert AuditEntry.objects.filter(action="maintenance.held").count() == 1
    # an agent outside the selector is corrected as always
    other = labelled_agent(people, "support-agent", {"team": "support"})
    reconciliation.reconcile_agent(other.pk, trigger="approved")
    sandbox.sandbox_deploy(other, actor="system:test", changes={"tools": CRM}, reason="x")
    reconciliation.reconcile_agent(other.pk, trigger="observation")
    assert "crm.search" not in tools_on_platform(other)


@pytest.mark.django_db
def test_a_window_runs_the_corrections_it_allows(people, refund_agent):
    reconciliation.reconcile_agent(refund_agent.pk, trigger="approved")
    window(people, seconds=3600, allowed=["remove_tool"])
    sandbox.sandbox_deploy(refund_agent, actor="system:test", changes={"tools": CRM},
                           reason="hotfix")
    reconciliation.reconcile_agent(refund_agent.pk, trigger="observation")
    assert "crm.search" not in tools_on_platform(refund_agent)
    assert not AuditEntry.objects.filter(action="maintenance.held").exists()


def test_the_window_ends_on_time_by_itself_and_the_next_pass_corrects(
        people, refund_agent, start_worker):
    start_worker("reconcile", "default", RECONCILE_VERIFY_DELAY_SECONDS="1")
    reconciliation.reconcile_agent(refund_agent.pk, trigger="approved")
    held = window(people, seconds=20)
    sandbox.sandbox_deploy(refund_agent, actor="system:test", changes={"tools": CRM},
                           reason="hotfix")  # its pass runs on the worker
    eventually(lambda: AuditEntry.objects.filter(action="maintenance.held").exists(),
               timeout=60, message="the drift was not held by the window")
    assert "crm.search" in tools_on_platform(refund_agent)
    ends_at = MaintenanceWindow.objects.get(pk=held.pk).ends_at
    eventually(lambda: "crm.search" not in tools_on_platform(refund_agent), timeout=120,
               message="the window ended and the drift was not corrected")
    # (the platform changes inside the pass; the correction's row says so when it commits)
    correction = eventually(lambda: Correction.objects.filter(
        agent=refund_agent, operation__op="remove_tool", applied_at__isnull=False).first(),
        timeout=60)
    assert correction.applied_at >= ends_at  # not a moment before the window ended
    # (the correction comes from the held pass's own requeue, the record from the window's end
    # job: either may commit first)
    ended = eventually(lambda: AuditEntry.objects.filter(
        action="maintenance.ended", target=f"maintenance:{held.pk}").first(), timeout=60,
        message="the window's end was not recorded")
    assert ended.at >= ends_at
    assert MaintenanceWindow.objects.get(pk=held.pk).ended_at is not None


@pytest.mark.django_db
def test_only_compliance_or_admin_schedule_and_cancel(people, refund_agent, api_as):
    now = timezone.now()
    body = {"starts_at": iso(now), "ends_at": iso(now + timedelta(hours=1)),
            "reason": "upgrade", "selector": {"team": "payments"}}
    for who in (people.alice, people.bob):
        with pytest.raises(NotAllowed):
            actions.schedule_window(actor=who, **body)
        assert api_as(who).post("/api/v1/maintenance-windows", body,
                                format="json").status_code == 403
    made = api_as(people.dana).post("/api/v1/maintenance-windows", body, format="json")
    assert made.status_code == 201, made.content
    assert made.json()["reaches"] == "agents labelled team=payments"
    listed = api_as(people.bob).get("/api/v1/maintenance-windows").json()
    assert [w["id"] for w in listed] == [made.json()["id"]]
    cancelled = api_as(people.admin).post(
        f"/api/v1/maintenance-windows/{made.json()['id']}/cancel", {"reason": "done early"},
        format="json")
    assert cancelled.status_code == 200 and cancelled.json()["cancelled_by"] == "admin"
    assert AuditEntry.objects.filter(action="maintenance.cancelled").count() == 1


@pytest.mark.django_db
@pytest.mark.parametrize(("change", "pointer"), [
    ({"starts_at": "tomorrow"}, "/starts_at"),
    ({"ends_at": "2026-01-01T00:00:00"}, "/ends_at"),  # no offset
    ({"ends_at": "2020-01-01T00:00:00Z"}, "/ends_at"),  # over already
    ({"ends_at": "2999-01-01T00:00:00Z"}, "/ends_at"),  # longer than a week
    ({"reason": ""}, "/reason"),
    ({"selector": {"team": 3}}, "/selector/team"),
    ({"selector": ["team"]}, "/selector"),
    ({"allowed": ["drop_database"]}, "/allowed"),
])
def test_bad_input_is_the_documented_error_and_nothing_is_scheduled(people, api_as, change,
                                                                    pointer):
    now = timezone.now()
    body = {"starts_at": iso(now), "ends_at": iso(now + timedelta(hours=1)),
            "reason": "upgrade", **change}
    answer = api_as(people.dana).post("/api/v1/maintenance-windows", body, format="json")
    assert answer.status_code in (400, 422), answer.content
    assert any(d["pointer"] == pointer for d in answer.json()["error"]["details"])
    assert not MaintenanceWindow.objects.exists()
