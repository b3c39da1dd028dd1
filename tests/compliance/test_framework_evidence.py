"""Framework evidence: a history made through the real actions (approvals, a drift corrected by
a reconcile pass, decisions held for a human, a recertification on time and one missed, a
signed tree head) gives exactly the expected colour per control; compliance's own controls
are versioned and audited; the report's bundle is verified offline by the auditor's
agentctl, and a changed colour or entry is refused."""

import json
import subprocess
from datetime import timedelta

import pytest
from django.utils import timezone

from audit.actions import checkpoint_head
from audit.models import AuditEntry
from compliance import actions
from compliance.framework_report import report
from compliance.models import FrameworkControl
from reconciliation import actions as reconciliation
from registry import actions as registry
from registry.actions.recertification import mark_overdue, propose_recertification
from registry.models import Agent
from runtime import actions as runtime
from sandbox import actions as sandbox
from tests.audit.conftest import key_file  # noqa: F401 (each test signs with its own key)
from tests.compliance.personas import labelled_agent
from tests.conftest import BAD_DEPLOYMENT

pytestmark = pytest.mark.django_db


def colours(body: dict) -> dict[str, str]:
    return {c["id"]: c["colour"] for c in body["controls"]}


def held_for_a_human(agent: Agent):
    decision = runtime.request_decision(agent, {"action": "payments.refund", "amount": 900},
                                        actor=agent.owner)
    assert decision.status == "pending"
    return decision


@pytest.fixture
def history(people):
    """refund-agent: proposed by alice and approved by bob twice (registration and an on-time
    recertification), a bad deployment found and corrected by a pass, one decision carol
    signed off and one that expired unanswered; review-agent: its review date missed.
    Returns the period's start and the moment after the on-time part."""
    start = timezone.now() - timedelta(seconds=1)
    agent = labelled_agent(people, "refund-agent", {"team": "payments"},
                           enforcement={"default": "correct"})
    reconciliation.reconcile_agent(agent.pk, trigger="approved")
    sandbox.sandbox_deploy(agent, actor="system:test", changes=BAD_DEPLOYMENT,
                           reason="bad deployment")
    assert reconciliation.reconcile_agent(agent.pk, trigger="observation").result == "corrected"
    runtime.decide_pending(str(held_for_a_human(agent).pk), actor=people.carol, allow=True,
                           comment="damaged parcel, photo attached")
    expired = held_for_a_human(agent)
    assert runtime.expire_decision(str(expired.pk), now=expired.expires_at + timedelta(seconds=1))
    outcome = propose_recertification("refund-agent", actor=people.alice, comment="still right")
    registry.approve_proposal(outcome.version.pk, actor=people.bob)
    checkpoint_head()
    on_time = timezone.now()
    late = labelled_agent(people, "review-agent", {"team": "support"})
    late.refresh_from_db()
    assert mark_overdue(late.pk, now=late.review_due_at + timedelta(seconds=1))
    return start, on_time


def test_a_seeded_history_gives_exactly_the_expected_colour_per_control(history):
    start, on_time = history
    body = report("eu-ai-act", "refund-agent", start, on_time)
    assert colours(body) == {
        "art-12": "green",  # a signed head in the period, its signature verified
        "art-14": "amber",  # one decision signed off by carol, one expired unanswered
        "art-26.1": "green",  # every approval by someone else; every drift corrected in time
        "art-26.2": "amber",  # the expired decision again; the recertification was on time
        "art-26.5": "green",
        "art-26.6": "green"}
    assert body["counts"] == {"green": 4, "amber": 2, "red": 0}
    art14 = next(c for c in body["controls"] if c["id"] == "art-14")
    decisions = {q["query"]: q for q in art14["queries"]}["decisions_signed_off"]
    assert (decisions["status"], decisions["met"], decisions["total"]) == ("partial", 1, 2)
    assert [i["ok"] for i in decisions["items"]] == [True, False]
    assert "allow by carol" in decisions["items"][0]["summary"]
    assert "expired unanswered" in decisions["items"][1]["summary"]
    # each item names the entries that show it, and they say what the item says
    signed = AuditEntry.objects.get(seq=decisions["items"][0]["entries"][-1])
    assert (signed.action, signed.actor) == ("decision.decided", "carol")
    drift = next(c for c in body["controls"] if c["id"] == "art-26.5")["queries"][0]
    assert (drift["status"], drift["total"]) == ("met", 3)
    assert all(" s)" in item["summary"] and len(item["entries"]) == 2
               for item in drift["items"])

    # An agent with none of this in the period: only the trail's signed heads (one log for
    # every agent) show anything.
    quiet = colours(report("nist-ai-rmf", "review-agent", start, on_time))
    assert quiet == {"GOVERN-1.5": "red", "GOVERN-2.1": "red", "MAP-3.5": "red",
                     "MEASURE-2.4": "red", "MEASURE-3.1": "green", "MANAGE-2.4": "red",
                     "MANAGE-4.1": "amber"}


def test_a_missed_recertification_turns_its_controls_amber_for_the_fleet_and_red_alone(
        history):
    start, on_time = history
    before = colours(report("nist-ai-rmf", "", start, on_time))
    assert before["GOVERN-1.5"] == "green"  # the one review of the period was on time
    after = colours(report("nist-ai-rmf", "", start, timezone.now()))
    assert after["GOVERN-1.5"] == "amber"  # refund-agent on time, review-agent missed
    assert after["MANAGE-4.1"] == "amber"
    alone = report("nist-ai-rmf", "review-agent", start, timezone.now())
    govern = next(c for c in alone["controls"] if c["id"] == "GOVERN-1.5")
    assert govern["colour"] == "red"
    (missed,) = govern["queries"][0]["items"]
    assert not missed["ok"] and "passed without recertification" in missed["summary"]
    assert AuditEntry.objects.get(seq=missed["entries"][0]).action == "recertification.overdue"


def test_compliance_adds_and_remaps_controls_as_audited_versions(history, people, api_as):
    start, on_time = history
    dana = api_as(people.dana)
    response = dana.post("/api/v1/frameworks/eu-ai-act/controls", {
        "control_id": "ours-1", "title": "Every agent is reviewed on time",
        "queries": ["recertifications_on_time"], "reason": "board asked"}, format="json")
    assert response.status_code == 201, response.content
    # a shipped control re-mapped: art-12 shown by the signed heads and the recertifications
    response = dana.post("/api/v1/frameworks/eu-ai-act/controls", {
        "control_id": "art-12", "title": "Logs kept, and reviews on record",
        "queries": ["audit_signed_heads", "recertifications_on_time"],
        "reason": "our reading"}, format="json")
    assert response.status_code == 201 and response.json()["version"] == 1
    body = report("eu-ai-act", "", start, timezone.now())
    found = {c["id"]: c for c in body["controls"]}
    assert (found["ours-1"]["origin"], found["ours-1"]["colour"]) == ("custom v1", "amber")
    assert found["art-12"]["title"] == "Logs kept, and reviews on record"
    assert found["art-12"]["colour"] == "amber"  # the missed review is evidence against it now
    assert list(found)[:1] == ["art-12"] and list(found)[-1] == "ours-1"

    retired = dana.post("/api/v1/frameworks/eu-ai-act/controls/ours-1/retire",
                        {"reason": "merged into art-12"}, format="json")
    assert retired.status_code == 201 and retired.json()["version"] == 2
    after = report("eu-ai-act", "", start, timezone.now())
    assert "ours-1" not in colours(after)
    assert after["retired_from_library"] == []  # ours-1 was compliance's own, not shipped
    # A shipped control retired is named in the report (and so in its signed bundle).
    assert dana.post("/api/v1/frameworks/eu-ai-act/controls/art-26.2/retire",
                     {"reason": "covered by our own review"}, format="json").status_code == 201
    after = report("eu-ai-act", "", start, timezone.now())
    assert "art-26.2" not in colours(after)
    assert after["retired_from_library"] == ["art-26.2 (custom v1)"]
    trail = list(AuditEntry.objects.filter(target__startswith="control:").order_by("seq")
                 .values_list("action", "target", "actor"))
    assert trail == [("control.saved", "control:eu-ai-act/ours-1", "dana"),
                     ("control.saved", "control:eu-ai-act/art-12", "dana"),
                     ("control.retired", "control:eu-ai-act/ours-1", "dana"),
                     ("control.retired", "control:eu-ai-act/art-26.2", "dana")]

    # Refused without a trace: an owner, an unknown query, a missing reason.
    assert api_as(people.alice).post("/api/v1/frameworks/eu-ai-act/controls", {
        "control_id": "x", "title": "x", "queries": ["audit_signed_heads"], "reason": "r"},
        format="json").status_code == 403
    bad = dana.post("/api/v1/frameworks/eu-ai-act/controls", {
        "control_id": "x", "title": "x", "queries": ["vibes"], "reason": "r"}, format="json")
    assert bad.status_code == 422 and bad.json()["error"]["details"][0]["pointer"] == "/queries"
    with pytest.raises(Exception, match="Say why"):
        actions.save_control(actor=people.dana, framework="eu-ai-act", control_id="x",
                             title="x", queries=["audit_signed_heads"], reason=" ")
    assert FrameworkControl.objects.count() == 4
    assert dana.get("/api/v1/frameworks/nope/report").status_code == 404
    assert dana.get("/api/v1/frameworks/eu-ai-act/report?agent=nobody").status_code == 404
    assert dana.get("/api/v1/frameworks/eu-ai-act/report?from=yesterday").status_code == 400
    assert api_as(people.alice).get("/api/v1/frameworks/eu-ai-act/report").status_code == 403


@pytest.fixture
def verify(auditor_agentctl):
    def run(path, *args: str) -> tuple[int, str, str]:
        done = subprocess.run([str(auditor_agentctl), "audit", "verify", str(path), *args],
                              capture_output=True, text=True, timeout=120)
        return done.returncode, done.stdout, done.stderr

    return run


def test_the_report_bundle_verifies_offline_and_a_tampered_one_does_not(
        history, people, api_as, tmp_path, verify):
    start, on_time = history
    dana = api_as(people.dana)
    (key,) = [k["public_key"] for k in dana.get("/api/v1/audit/keys").json()["keys"]
              if k["retired_at"] is None]
    query = {"agent": "refund-agent", "from": start.isoformat(), "to": on_time.isoformat()}
    response = dana.get("/api/v1/frameworks/eu-ai-act/evidence", query)
    assert response.status_code == 200, response.content
    document = response.json()
    assert colours(document["report"]) == colours(
        report("eu-ai-act", "refund-agent", start, on_time))
    fetched = AuditEntry.objects.filter(action="audit.exported", actor="dana").latest("seq")
    assert fetched.after["digest"] == document["digest"]
    path = tmp_path / "report.json"
    path.write_text(json.dumps(document), encoding="utf-8")
    status, out, err = verify(path, "--public-key", key)
    assert status == 0, err
    assert out.startswith("OK ") and "4 green, 2 amber, 0 red" in out

    def tampered(change) -> tuple[int, str]:
        copy = json.loads(json.dumps(document))
        change(copy)
        path.write_text(json.dumps(copy), encoding="utf-8")
        status, _, err = verify(path, "--public-key", key)
        return status, err

    def greener(copy):  # the amber control shown green, digest and all
        copy["report"]["controls"][1]["colour"] = "green"

    status, err = tampered(greener)
    assert status == 1 and "edited: no entry of the signed trail records this report" in err

    def cover_up(copy):  # the expired decision's entry edited to say carol answered it
        for item in copy["entries"]:
            if item["entry"]["action"] == "decision.expired":
                item["entry"]["actor"] = "carol"
    status, err = tampered(cover_up)
    assert status == 1 and ": edited: " in err

    def dropped(copy):  # an entry the report cites left out
        copy["entries"] = [i for i in copy["entries"]
                           if i["entry"]["action"] != "decision.decided"]
    status, err = tampered(dropped)
    assert status == 1 and "deleted: entry" in err and "cites as evidence" in err


def test_the_page_shows_the_report_and_says_what_is_wrong_with_a_request(history, people,
                                                                          client):
    client.force_login(people.dana)
    page = client.get("/frameworks/", {"framework": "iso-42001", "agent": "review-agent"})
    assert page.status_code == 200
    body = page.content.decode()
    assert 'data-control="A.6.2.6" data-colour="red"' in body
    assert "passed without recertification" in body and 'id="report-bundle"' in body
    unknown = client.get("/frameworks/", {"framework": "iso-42001", "agent": "nobody"})
    assert "No agent named &#x27;nobody&#x27;." in unknown.content.decode()
    assert 'id="report-bundle"' not in unknown.content.decode()
    backwards = client.get("/frameworks/", {"start": "2026-12-02", "end": "2026-11-01"})
    assert "The period starts after it ends." in backwards.content.decode()
    client.force_login(people.bob)
    assert client.get("/frameworks/").status_code == 403
