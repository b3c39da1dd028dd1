"""A write's query string names only what its view reads (config/write_parameters.py): a
misspelled `?dryrun=1`, or `?dry_run=1` where there is no dry run, made the write real; a dry
run asked for in words the server did not read (`?dry_run=True` was read as no) ran for real.
Each is now the documented 400 naming the parameter, and changes nothing."""

import pytest

from audit.models import AuditEntry
from reconciliation.models import ObservedState
from registry.models import Agent, Waiver
from tests.conftest import REFUND_AGENT_YAML

pytestmark = pytest.mark.django_db

SUPPORT_YAML = REFUND_AGENT_YAML.replace("name: refund-agent", "name: support-agent")


def apply(client, query: str):
    return client.generic("POST", f"/api/v1/manifests{query}", SUPPORT_YAML,
                          content_type="application/yaml")


def refused(response) -> dict[str, str]:
    assert response.status_code == 400, response.content
    error = response.json()["error"]
    assert error["code"] == "malformed"
    return {d["pointer"]: d["message"] for d in error["details"]}


def test_a_misspelled_dry_run_no_longer_registers_the_agent(api_as, people):
    alice = api_as(people.alice)
    audited = AuditEntry.objects.count()
    assert refused(apply(alice, "?dryrun=1")) == {
        "/dryrun": "unknown query parameter; expected one of dry_run"}
    for spelling in ("?dry_run", "?dry_run=please", "?dry_run=2"):
        assert list(refused(apply(alice, spelling))) == ["/dry_run"], spelling
    # said twice, which was meant cannot be told (the last one, "no", was read)
    assert refused(apply(alice, "?dry_run=1&dry_run=0")) == {
        "/dry_run": "given more than once; give it once"}
    assert not Agent.objects.filter(name="support-agent").exists()
    assert AuditEntry.objects.count() == audited
    for spelling in ("?dry_run=True", "?dry_run=YES", "?dry_run=1", "?dry_run=on"):  # any case
        answer = apply(alice, spelling)
        assert answer.status_code == 200 and answer.json()["dry_run"] is True, spelling
    assert not Agent.objects.filter(name="support-agent").exists()
    real = apply(alice, "?dry_run=false")
    assert real.status_code == 201 and real.json()["dry_run"] is False
    assert Agent.objects.filter(name="support-agent").exists()


def test_a_write_with_no_dry_run_refuses_one_instead_of_running_for_real(api_as, people,
                                                                         refund_agent):
    bob, alice = api_as(people.bob), api_as(people.alice)
    waiver = {"pointer": "/tools/-", "reason": "incident 7", "ticket": "INC-7",
              "duration": "8h"}
    audited = AuditEntry.objects.count()
    assert refused(bob.post("/api/v1/agents/refund-agent/waivers?dry_run=1", waiver,
                            format="json")) == {
        "/dry_run": "unknown query parameter; this write takes no query parameters"}
    assert refused(alice.post("/api/v1/agents/refund-agent/reconcile?force=1"))
    assert not Waiver.objects.exists() and AuditEntry.objects.count() == audited
    # reads keep their own rules: a list's unknown filter is its filter set's to judge
    assert bob.get("/api/v1/agents?dry_run=1").status_code == 200


def test_the_observed_state_takes_its_part_and_nothing_else(agent_client):
    path = "/api/v1/agents/refund-agent/observed-state"
    before = ObservedState.objects.count()
    assert list(refused(agent_client.put(f"{path}?prat=mcp_servers", {"mcp_servers": []},
                                         format="json"))) == ["/prat"]
    assert ObservedState.objects.count() == before
    taken = agent_client.put(f"{path}?part=mcp_servers", {"mcp_servers": []}, format="json")
    assert taken.status_code == 202, taken.content
