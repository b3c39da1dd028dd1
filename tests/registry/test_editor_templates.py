"""The editor opens with something to edit: a starter for a new agent (valid as it stands,
owned by whoever opens it) or a copy of an existing agent under a new name."""

import html
import re

import pytest

from registry.models import Agent, DesiredStateVersion
from tests.conftest import approved_agent

pytestmark = pytest.mark.django_db


def editor_text(body: str) -> str:
    match = re.search(r'<textarea id="manifest"[^>]*>\n?(.*?)</textarea>', body, re.S)
    return html.unescape(match.group(1))


def test_new_agent_opens_a_starter_that_applies_as_it_stands(people, client):
    client.force_login(people.alice)
    assert 'href="/manifests/new" class="new-agent">New agent<' in client.get(
        "/agents/").content.decode()
    text = editor_text(client.get("/manifests/new").content.decode())
    assert "owner: alice" in text and "name: new-agent" in text
    client.post("/manifests/new", {"manifest": text, "reason": "a new helper"})
    version = DesiredStateVersion.objects.get(agent__name="new-agent")
    assert version.state == "pending" and version.comment == "a new helper"


def test_copy_opens_the_agent_as_a_new_one_owned_by_the_copier(people, client):
    approved_agent(people, "refund-agent")
    client.force_login(people.alice)
    page = client.get("/agents/refund-agent/").content.decode()
    assert 'href="/manifests/new?copy=refund-agent"' in page
    text = editor_text(client.get("/manifests/new?copy=refund-agent").content.decode())
    assert "name: refund-agent-copy" in text and "payments.refund" in text
    client.post("/manifests/new", {"manifest": text})
    copy = Agent.objects.get(name="refund-agent-copy")
    assert copy.owner == people.alice
    assert DesiredStateVersion.objects.get(agent=copy).spec["tools"] == Agent.objects.get(
        name="refund-agent").active_version.spec["tools"]
