"""Recertification on the pages: compliance chooses a guardrail's overdue effect and each
level's interval; the report page lists agents by review date; the agent page shows the date,
offers the owner a recertification and lists the lifecycle with who, when and why."""

from datetime import timedelta

from audit.models import AuditEntry
from registry.actions.recertification import mark_overdue
from registry.models import Agent, Guardrail
from registry.recertification import overdue_effect
from tests.conftest import approved_agent

GUARDRAIL = {"name": "prod-review", "description": "", "expression": "true", "selector":
             "env=prod", "effect": "warn", "required_approvals": "2", "message": "reviewed",
             "enabled": "1", "overdue_effect": "restrict", "safe_tools": "orders.lookup, docs"}


def page(response) -> str:
    assert response.status_code == 200, response.status_code
    return response.content.decode()


def test_compliance_sets_a_guardrails_overdue_effect_on_its_page(client, people):
    client.force_login(people.dana)
    assert client.post("/guardrails/new", GUARDRAIL).status_code == 302
    guardrail = Guardrail.objects.get()
    assert (guardrail.overdue_effect, guardrail.safe_tools) == ("restrict",
                                                                ["orders.lookup", "docs"])
    assert "overdue review: restrict (orders.lookup, docs)" in page(client.get("/guardrails/"))
    assert 'value="orders.lookup, docs"' in page(client.get("/guardrails/prod-review/edit"))
    refused = client.post("/guardrails/prod-review/edit", {**GUARDRAIL, "safe_tools": ""})
    assert "expected at least one tool name" in page(refused)
    guardrail.refresh_from_db()
    assert guardrail.safe_tools == ["orders.lookup", "docs"]


def test_the_overdue_effect_follows_the_guardrails_selecting_the_agent(people):
    from registry import actions

    actions.create_guardrail(actor=people.dana, name="prod-restrict", expression="true",
                             effect="warn", message="m", selector={"env": "prod"},
                             overdue_effect="restrict", safe_tools=["a", "b"])
    actions.create_guardrail(actor=people.dana, name="payments-restrict", expression="true",
                             effect="warn", message="m", selector={"team": "payments"},
                             overdue_effect="restrict", safe_tools=["b", "c"])
    actions.create_guardrail(actor=people.dana, name="staging-stop", expression="true",
                             effect="warn", message="m", selector={"env": "staging"},
                             overdue_effect="suspend")
    rows = list(Guardrail.objects.all())
    assert overdue_effect(rows, {"env": "dev"}) == ("warn", [], "")
    assert overdue_effect(rows, {"env": "prod"}) == ("restrict", ["a", "b"], "prod-restrict")
    effect, safe, _ = overdue_effect(rows, {"env": "prod", "team": "payments"})
    assert (effect, safe) == ("restrict", ["b"])  # only what every restricting one allows
    assert overdue_effect(rows, {"env": "staging", "team": "payments"})[0] == "suspend"


def test_the_report_page_and_the_intervals_form(client, people):
    agent = approved_agent(people, "refund-agent")
    mark_overdue(agent.pk, now=agent.review_due_at + timedelta(seconds=1))
    client.force_login(people.bob)
    body = page(client.get("/recertification/"))
    assert 'id="review-refund-agent"' in body and "overdue" in body
    assert "Save high" not in body  # only compliance sets intervals
    csv = client.get("/recertification/?state=overdue&format=csv")
    assert csv["Content-Type"] == "text/csv" and "refund-agent" in csv.content.decode()
    client.post("/recertification/intervals/high", {"interval": "1d"})
    assert not AuditEntry.objects.filter(action="review_interval.changed").exists()
    client.force_login(people.dana)
    client.post("/recertification/intervals/high", {"interval": "45d", "risk_from": "70"})
    assert '<td class="mono" id="interval-high">45d</td>' in page(client.get("/recertification/"))
    client.post("/recertification/intervals/high", {"interval": "forever"})
    assert "45d" in page(client.get("/recertification/"))


def test_the_agent_page_shows_the_review_date_and_the_lifecycle(client, people):
    agent = approved_agent(people, "refund-agent")
    client.force_login(people.alice)
    body = page(client.get("/agents/refund-agent/"))
    assert agent.review_due_at.strftime("%Y-%m-%d %H:%M:%S") in body and "scheduled" in body
    assert 'id="recertify"' in body
    response = client.post("/agents/refund-agent/recertify", {"comment": "still right",
                                                              "review_after": "30d"})
    assert response.status_code == 302 and response["Location"].startswith("/proposals/")
    body = page(client.get("/agents/refund-agent/"))
    assert 'id="recertify"' not in body and "Recertification proposed" in body
    assert "recertification.proposed" in body and "still right" in body
    proposal = page(client.get(response["Location"]))
    assert "Recertification: the active spec again, unchanged" in proposal
    client.force_login(people.bob)  # an approver: no recertify button, the history shown
    body = page(client.get("/agents/refund-agent/"))
    assert 'id="recertify"' not in body and "version.activated" in body
    assert Agent.objects.get(pk=agent.pk).versions.filter(recertifies=True).count() == 1


def test_the_owners_overview_lists_their_reviews_that_are_due(client, people):
    agent = approved_agent(people, "refund-agent")
    client.force_login(people.alice)
    assert 'id="reviews-due"' not in page(client.get("/"))  # 180 days away
    from registry.actions.recertification import remind_owner

    Agent.objects.filter(pk=agent.pk).update(review_due_at=agent.review_due_at
                                             - timedelta(days=170))
    assert remind_owner(agent.pk)
    body = page(client.get("/"))
    assert 'id="reviews-due"' in body and "refund-agent</a>: review due by" in body
    assert "recertification.due" in body  # the reminder in the owner's feed too
    client.force_login(people.bob)  # not bob's agent: not in his list
    assert 'id="reviews-due"' not in page(client.get("/"))
