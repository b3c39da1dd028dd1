"""The Git API: a signed webhook queues a poll that a real worker runs; a bad signature is a
401 with nothing queued; sources, keys and an agent's sync status over the API."""

import hashlib
import hmac
import json

import pytest
from rest_framework.test import APIClient

from gitsource.models import GitSource
from registry import actions
from registry.models import DesiredStateVersion
from tests.conftest import eventually
from tests.gitsource.repos import manifest, signing_key

SECRET = "a-webhook-secret-long-enough-0123456789"


def signed(body: bytes, secret: str = SECRET) -> str:
    return "sha256=" + hmac.new(secret.encode(), body, hashlib.sha256).hexdigest()


@pytest.fixture
def hook_secret(settings, monkeypatch, people):
    settings.CONNECTOR_SECRETS = ["GIT_HOOK_SECRET"]
    monkeypatch.setenv("GIT_HOOK_SECRET", SECRET)
    actions.grant_connector_secret("GIT_HOOK_SECRET", people.alice, actor=people.admin)


def test_a_signed_webhook_has_a_worker_turn_the_push_into_a_proposal(
        people, repo, api_as, hook_secret, git_settings, start_worker, redis_client):
    answer = api_as(people.alice).post("/api/v1/git/sources", {
        "name": "payments", "url": f"file://{repo.bare}", "folder": "agents",
        "webhook_secret_env": "GIT_HOOK_SECRET"}, format="json")
    assert answer.status_code == 201, answer.json()
    redis_client.flushdb()  # the first poll queued at creation: the webhook must do it
    sha = repo.commit({"agents/refund.yaml": manifest()}, "Add the refund agent")
    repo.push()

    body = json.dumps({"ref": "refs/heads/main", "after": sha}).encode()
    hook = APIClient()
    bad = hook.post("/api/v1/git/sources/payments/webhook", body,
                    content_type="application/json",
                    HTTP_X_HUB_SIGNATURE_256=signed(body, "another-secret"))
    assert (bad.status_code, bad.json()["error"]["code"]) == (401, "bad_signature")
    unknown = hook.post("/api/v1/git/sources/nothing-here/webhook", body,
                        content_type="application/json", HTTP_X_HUB_SIGNATURE_256=signed(body))
    assert unknown.status_code == 401
    assert redis_client.llen("rq:queue:default") == 0

    good = hook.post("/api/v1/git/sources/payments/webhook", body,
                     content_type="application/json", HTTP_X_HUB_SIGNATURE_256=signed(body))
    assert good.status_code == 202
    start_worker("default", GIT_SOURCE_LOCAL_ROOTS=str(repo.root),
                 GIT_CACHE_DIR=git_settings.GIT_CACHE_DIR)
    proposal = eventually(lambda: DesiredStateVersion.objects.filter(source="git").first(),
                          timeout=120)
    assert sha[:12] in proposal.comment and proposal.state == "pending"
    status = api_as(people.bob).get("/api/v1/agents/refund-agent/git").json()
    assert (status["sync"], status["source"], status["path"]) == (
        "ahead", "payments", "agents/refund.yaml")


@pytest.mark.django_db
def test_sources_are_checked_before_they_are_kept(people, api_as, repo, tmp_path):
    alice = api_as(people.alice)
    outside = alice.post("/api/v1/git/sources", {"name": "etc", "url": "/etc"}, format="json")
    assert (outside.status_code, outside.json()["error"]["details"][0]["pointer"]) == (
        422, "/url")
    for url in ("ext::sh -c id", "--upload-pack=touch /tmp/x", "http://user:pw@127.0.0.1/x",
                "http://10.0.0.1/x.git"):
        answer = alice.post("/api/v1/git/sources", {"name": "x", "url": url}, format="json")
        assert answer.status_code == 422, url
    stranger = api_as(people.bob).post("/api/v1/git/sources", {
        "name": "x", "url": str(repo.bare)}, format="json")
    assert stranger.status_code == 403
    assert not GitSource.objects.exists()


@pytest.mark.django_db
def test_people_register_their_own_signing_keys(people, api_as, tmp_path):
    _, public = signing_key(tmp_path, "carol")
    carol = api_as(people.carol)
    made = carol.post("/api/v1/git/signing-keys", {"public_key": public}, format="json")
    assert made.status_code == 201 and made.json()["person"] == "carol"
    again = api_as(people.bob).post("/api/v1/git/signing-keys", {"public_key": public},
                                    format="json")
    assert again.status_code == 400
    assert [k["person"] for k in carol.get("/api/v1/git/signing-keys").json()["results"]] == [
        "carol"]
    assert api_as(people.bob).get("/api/v1/git/signing-keys").json()["results"] == []
