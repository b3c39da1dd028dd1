"""The refund-agent story with the CRM access granted by hand in a real PostgreSQL role, on a
real RQ worker: the agent keeps reporting read-only, the periodic resync reads the role at the
database, finds the write grant, revokes it there and verifies it; the audit trail and the
evidence bundle show what each witness saw, and the bundle verifies offline."""

import json
import re
import subprocess

from django.test import Client
from psycopg import sql

from config.permission_sources import parse_sources
from reconciliation.jobs import resync
from reconciliation.models import Finding, ReconcileRun
from registry import actions as registry_actions
from registry.models import Agent
from tests.conftest import assert_trail_whole, eventually, refund_manifest, token_client
from tests.sources.conftest import AGENT_ROLE

SECRET = "CONN35_CRM_DSN"
CRM_READ = [{"resource": "orders_db", "access": "read"},
            {"resource": "payments", "access": "write"},
            {"resource": "crm", "access": "read"}]


def test_write_access_granted_by_hand_is_found_at_the_database_and_revoked(
        people, crm_database, start_worker, settings, monkeypatch, api_as, auditor_agentctl,
        tmp_path):
    declared = json.dumps({"crm-db": {
        "type": "postgres", "secret": SECRET, "resources": {"crm": {"schema": "crm"}},
        "agents": {"refund-agent": AGENT_ROLE}}})
    monkeypatch.setenv(SECRET, crm_database.dsn)
    settings.CONNECTOR_SECRETS = [SECRET]
    settings.PERMISSION_SOURCES = parse_sources(declared, [SECRET])
    worker = start_worker(PERMISSION_SOURCES=declared, CONNECTOR_SECRETS=SECRET,
                          **{SECRET: crm_database.dsn})

    manifest = refund_manifest(connector={"type": "push"}, data=CRM_READ,
                               enforcement={"default": "correct"})
    (outcome,) = registry_actions.apply_manifests([manifest], actor=people.alice, source="yaml")
    registry_actions.approve_proposal(outcome.version.pk, actor=people.bob)
    agent = Agent.objects.get(name="refund-agent")
    client = token_client(people, agent)
    read_only = {**{k: v for k, v in manifest.spec.items() if k != "enforcement"},
                 "running": True}
    assert client.put("/api/v1/agents/refund-agent/observed-state", read_only,
                      format="json").status_code == 202
    eventually(lambda: ReconcileRun.objects.filter(agent=agent, result="converged").exists(),
               message=lambda: f"no converged pass; worker said:\n{worker.output()}")

    # A DBA grants the agent's role write access to the CRM by hand; the agent, asked, would
    # still say read (its report does not change).
    crm_database.run(sql.SQL("GRANT INSERT, UPDATE ON crm.customers TO {}").format(
        sql.Identifier(AGENT_ROLE)))
    assert resync() == 1  # the periodic backstop: a bound agent always gets its pass
    eventually(lambda: Finding.objects.filter(agent=agent, status="corrected").exists(),
               message=lambda: f"not corrected; worker said:\n{worker.output()}")

    assert not crm_database.can(AGENT_ROLE, "INSERT")
    assert not crm_database.can(AGENT_ROLE, "UPDATE")
    assert crm_database.can(AGENT_ROLE, "SELECT")
    finding = Finding.objects.get(agent=agent)
    assert (finding.pointer, finding.expected, finding.actual) == ("/data/crm", "read", "write")

    said = "the agent reported read; crm-db (the source of record) says write"
    (shown,) = api_as(people.bob).get("/api/v1/findings?agent=refund-agent").json()["results"]
    assert shown["cause"]["witnesses"]["said"] == said
    browser = Client()
    browser.force_login(people.alice)
    page = " ".join(re.sub(r"<[^>]+>", " ", browser.get("/agents/refund-agent/")
                           .content.decode()).split())
    assert said in page
    browser.force_login(people.dana)  # compliance reads the trail
    trail = " ".join(re.sub(r"<[^>]+>", " ", browser.get(
        "/audit/?agent=refund-agent&action=finding.opened").content.decode()).split())
    assert re.search(r"refund-agent [^;]*crm[^;]*; finding opened[^()]*\(" + re.escape(said)
                     + r"\)", trail), trail[trail.rfind("finding.opened") - 200:][:900]

    response = api_as(people.alice).get("/api/v1/agents/refund-agent/evidence")
    assert response.status_code == 200
    bundle = tmp_path / "evidence.json"
    bundle.write_bytes(response.content)
    (key,) = [k["public_key"] for k in api_as(people.dana).get("/api/v1/audit/keys")
              .json()["keys"] if k["retired_at"] is None]
    verified = subprocess.run([str(auditor_agentctl), "audit", "verify", str(bundle),
                               "--public-key", key], capture_output=True, text=True,
                              timeout=120)
    assert verified.returncode == 0, verified.stdout + verified.stderr
    assert verified.stdout.startswith("OK ")  # offline, with only the client installed
    entries = [item["entry"] for item in json.loads(response.content)["entries"]]
    by_action = {}
    for entry in entries:
        by_action.setdefault(entry["action"], []).append(entry)
    (opened,) = by_action["finding.opened"]
    assert opened["after"]["cause"]["witnesses"] == {
        "agent": "read", "crm-db": "write", "of_record": "crm-db", "agree": False,
        "said": "the agent reported read; crm-db (the source of record) says write"}
    (corrected,) = by_action["source.corrected"]
    assert corrected["after"]["statements"] == [
        f'REVOKE INSERT ON TABLE "crm"."customers" FROM "{AGENT_ROLE}"',
        f'REVOKE UPDATE ON TABLE "crm"."customers" FROM "{AGENT_ROLE}"']
    assert {g["what"] for g in corrected["after"]["revoked"]} == {
        "INSERT on crm.customers", "UPDATE on crm.customers"}
    assert "finding.corrected" in by_action
    assert {corrected["target"], *(e["target"] for e in by_action["source.known"])} == {
        "source:crm-db"}
    seen = [e["after"]["access"] for e in by_action["source.known"]]
    assert seen[-2:] == [{"crm": "write"}, {"crm": "read"}]
    (written,) = [e for e in by_action["source.known"] if e["after"]["access"] == {
        "crm": "write"}]
    assert {(g["what"], g["via"]) for g in written["after"]["grants"]} >= {
        ("INSERT on crm.customers", "direct"), ("UPDATE on crm.customers", "direct")}
    reported = [e for e in entries if e["action"] == "observation.recorded"]
    assert reported and all(e["actor"] == "agent:refund-agent" for e in reported)
    assert_trail_whole()
