"""Step-up: approving a high-risk proposal (risk over the threshold compliance set, or marked by
a `step_up` guardrail) or a retirement needs a fresh code from the approver's own enrolled
authenticator, on every path that approves; a code works once and wrong codes are throttled."""

import hmac
import json
import re
import struct
import time
from base64 import b32decode
from datetime import timedelta

import pytest
from django.test import Client
from django.utils import timezone
from django_otp.plugins.otp_totp.models import TOTPDevice

from audit.models import AuditEntry
from registry import actions
from registry.models import Agent, DesiredStateVersion
from tests.conftest import approved_agent, refund_manifest

pytestmark = pytest.mark.django_db

RAISED_LIMIT = {"payments.refund": {"approval_above": 2000, "max": 5000}}  # risk 20


def totp(secret: bytes, *, at: float | None = None, step: int = 30) -> str:
    """RFC 6238 with SHA-1 and six digits, as an authenticator app computes it."""
    counter = int((time.time() if at is None else at) // step)
    digest = hmac.new(secret, struct.pack(">Q", counter), "sha1").digest()
    offset = digest[-1] & 0x0F
    number = struct.unpack(">I", digest[offset:offset + 4])[0] & 0x7FFFFFFF
    return f"{number % 1_000_000:06d}"


def next_code(secret: bytes) -> str:
    """The code of the next 30-second step (accepted now: one step of clock drift is allowed)."""
    return totp(secret, at=time.time() + 30)


def signed_in(user) -> Client:
    client = Client()
    client.force_login(user)
    return client


def start_enrolment(client: Client, username: str) -> tuple[bytes, str]:
    """Start enrolling an authenticator on `username`'s signed-in page: the secret as the page
    shows it, and the new device's id."""
    assert client.post("/account/two-factor/", {"start": "1"}).status_code == 302
    page = client.get("/account/two-factor/").content.decode()
    secret = b32decode(re.search(r'id="totp-secret">([A-Z2-7=]+)<', page).group(1))
    assert f"otpauth://totp/Agent%20governance%3A{username}?secret=" in page
    return secret, re.search(r'name="device" value="(\d+)"', page).group(1)


def enrol(user) -> bytes:
    """Enrol an authenticator through the person's own page; the secret as the page shows it."""
    client = signed_in(user)
    secret, device = start_enrolment(client, user.username)
    # The previous step's code (one step of drift is allowed), so the current one is still
    # unused when the test approves. A step that ends while the request runs (a loaded
    # machine) leaves that code two steps old: typed again, as a person would.
    for _ in range(2):
        began = time.time()
        confirmed = client.post("/account/two-factor/", {
            "device": device, "code": totp(secret, at=began - 30), "confirm": "1"})
        if confirmed.status_code == 302 or time.time() // 30 == began // 30:
            break
    assert confirmed.status_code == 302, confirmed.content.decode()
    return secret


def raise_limit(people, agent) -> DesiredStateVersion:
    return actions.propose(agent, refund_manifest(actions=RAISED_LIMIT).spec,
                           agent.active_version.metadata, actor=people.alice,
                           source="api").version


def lock_passed() -> None:
    """Move every device's last failure back two hours, as if its throttle lock had passed."""
    TOTPDevice.objects.exclude(throttling_failure_timestamp=None).update(
        throttling_failure_timestamp=timezone.now() - timedelta(hours=2))


def error(response) -> dict:
    return response.json()["error"]


@pytest.fixture
def threshold(settings):
    """Compliance sets the threshold (after the agents' first versions were approved)."""
    settings.OTP_TOTP_THROTTLE_FACTOR = 3600  # a wrong code locks the device for an hour

    def set_it() -> None:
        settings.STEPUP_RISK_THRESHOLD = 15

    return set_it


def test_a_proposal_over_the_threshold_needs_a_fresh_code_over_the_api(people, api_as,
                                                                          threshold):
    agent = approved_agent(people, "refund-agent")
    version = raise_limit(people, agent)
    threshold()
    assert version.risk == 20
    bob = api_as(people.bob)
    url = f"/api/v1/proposals/{version.pk}/approve"

    # Without an authenticator, bob is told to enrol.
    response = bob.post(url, {"comment": "ok"}, format="json")
    assert response.status_code == 403
    assert error(response)["code"] == "step_up_required"
    assert "/account/two-factor/" in error(response)["message"]
    assert error(response)["details"][0]["pointer"] == "/otp"
    # Four eyes is still refused first, whatever code is sent.
    mine = api_as(people.alice).post(url, {"otp": "123456"}, format="json")
    assert error(mine)["code"] in ("four_eyes", "forbidden")

    secret = enrol(people.bob)
    missing = bob.post(url, {"comment": "ok"}, format="json")
    assert (missing.status_code, error(missing)["code"]) == (403, "step_up_required")
    assert "risk 20 is above the step-up threshold 15" in error(missing)["message"]
    for bad in ("000000", "１２３４５６", "12345678901", " "):
        refused = bob.post(url, {"otp": bad}, format="json")
        assert refused.status_code in (400, 403, 429), bad
        if refused.status_code != 400:
            assert error(refused)["code"] in ("step_up_required", "step_up_throttled")
    assert DesiredStateVersion.objects.get(pk=version.pk).state == "pending"
    assert not version.approvals.exists()

    TOTPDevice.objects.update(throttling_failure_count=0, throttling_failure_timestamp=None)
    code = totp(secret)
    approved = bob.post(url, {"comment": "ok", "otp": code}, format="json")
    assert approved.status_code == 200, approved.json()
    assert approved.json()["state"] == "approved"
    entry = AuditEntry.objects.get(action="proposal.approved", target=f"proposal:{version.pk}")
    device = TOTPDevice.objects.get(user=people.bob, confirmed=True)
    assert entry.after["step_up"]["method"] == "totp"
    assert entry.after["step_up"]["device"] == device.pk
    assert entry.after["step_up"]["reasons"] == ["its risk 20 is above the step-up threshold 15"]
    assert code not in json.dumps(entry.after) and code not in entry.reason


def test_a_proposal_under_the_threshold_needs_no_code(people, api_as, threshold):
    agent = approved_agent(people, "refund-agent")
    threshold()
    version = actions.propose(agent, refund_manifest(model="gpt-5", tools=[
        "orders.lookup", "payments.refund", "orders.notes"]).spec,
        agent.active_version.metadata, actor=people.alice, source="api").version
    assert version.risk == 10
    response = api_as(people.bob).post(f"/api/v1/proposals/{version.pk}/approve", {},
                                       format="json")
    assert response.status_code == 200 and response.json()["state"] == "approved"
    assert "step_up" not in AuditEntry.objects.get(
        action="proposal.approved", target=f"proposal:{version.pk}").after


def test_a_code_works_once(people, api_as, threshold):
    first = raise_limit(people, approved_agent(people, "refund-agent"))
    second = raise_limit(people, approved_agent(people, "refund-agent-2"))
    threshold()
    secret = enrol(people.bob)
    bob = api_as(people.bob)
    code = totp(secret)
    assert bob.post(f"/api/v1/proposals/{first.pk}/approve", {"otp": code},
                    format="json").status_code == 200
    replayed = bob.post(f"/api/v1/proposals/{second.pk}/approve", {"otp": code},
                        format="json")
    assert (replayed.status_code, error(replayed)["code"]) == (403, "step_up_required")
    assert "already used" in error(replayed)["message"]
    assert DesiredStateVersion.objects.get(pk=second.pk).state == "pending"
    # The next code is accepted (the device's steps only move forward) once the lock the
    # replay earned has passed.
    lock_passed()
    later = bob.post(f"/api/v1/proposals/{second.pk}/approve", {"otp": next_code(secret)},
                     format="json")
    assert later.status_code == 200, later.json()


def test_wrong_codes_are_throttled_and_audited(people, api_as, threshold):
    version = raise_limit(people, approved_agent(people, "refund-agent"))
    threshold()
    secret = enrol(people.bob)
    bob = api_as(people.bob)
    url = f"/api/v1/proposals/{version.pk}/approve"
    wrong = bob.post(url, {"otp": "000000" if totp(secret) != "000000" else "111111"},
                     format="json")
    assert (wrong.status_code, error(wrong)["code"]) == (403, "step_up_required")
    failed = AuditEntry.objects.get(action="stepup.failed")
    assert failed.actor == "bob" and failed.after["device"] > 0
    # Even the right code is refused while the device is locked.
    locked = bob.post(url, {"otp": totp(secret)}, format="json")
    assert (locked.status_code, error(locked)["code"]) == (429, "step_up_throttled")
    assert DesiredStateVersion.objects.get(pk=version.pk).state == "pending"
    # When the lock has passed (its start moved back an hour), the right code works.
    lock_passed()
    assert bob.post(url, {"otp": totp(secret)}, format="json").status_code == 200


def test_the_page_form_asks_for_a_code_and_the_session_keeps_it_fresh(people, api_as,
                                                                       threshold, settings):
    first = raise_limit(people, approved_agent(people, "refund-agent"))
    second = raise_limit(people, approved_agent(people, "refund-agent-2"))
    third = raise_limit(people, approved_agent(people, "refund-agent-3"))
    threshold()
    bob = signed_in(people.bob)
    page = bob.get(f"/proposals/{first.pk}/").content.decode()
    assert "Step-up" in page and "enrol one" in page and 'name="otp"' not in page
    secret = enrol(people.bob)
    page = bob.get("/approvals/").content.decode()  # the inbox, approving in place
    assert f'id="approve-otp-{first.pk}"' in page

    refused = bob.post(f"/proposals/{first.pk}/approve", {"next": "/approvals/"}, follow=True)
    assert "needs step-up" in refused.content.decode()
    assert DesiredStateVersion.objects.get(pk=first.pk).state == "pending"
    bob.post(f"/proposals/{first.pk}/approve", {"next": "/approvals/", "otp": totp(secret)})
    assert DesiredStateVersion.objects.get(pk=first.pk).state == "approved"
    # Within the window the same signed-in session approves again without a new code...
    bob.post(f"/proposals/{second.pk}/approve", {"otp": ""})
    assert DesiredStateVersion.objects.get(pk=second.pk).state == "approved"
    # ...but not another session or an API token of the same person.
    other = signed_in(people.bob)
    other.post(f"/proposals/{third.pk}/approve", {})
    token = api_as(people.bob).post(f"/api/v1/proposals/{third.pk}/approve", {},
                                    format="json")
    assert error(token)["code"] == "step_up_required"
    # Once the window has passed the session is asked again.
    settings.STEPUP_MAX_AGE_SECONDS = 0
    bob.post(f"/proposals/{third.pk}/approve", {})
    assert DesiredStateVersion.objects.get(pk=third.pk).state == "pending"
    entries = AuditEntry.objects.filter(action="proposal.approved",
                                        target__in=[f"proposal:{first.pk}",
                                                    f"proposal:{second.pk}"])
    assert {e.after["step_up"]["verified_at"] for e in entries} == {
        entries[0].after["step_up"]["verified_at"]}  # the second rode on the first's code


def test_a_step_up_guardrail_marks_proposals_whatever_their_risk(people, api_as, settings):
    assert settings.STEPUP_RISK_THRESHOLD is None
    agent = approved_agent(people, "refund-agent")
    created = api_as(people.dana).post("/api/v1/guardrails", {
        "name": "model-changes", "expression": 'spec.model == "gpt-4.1"', "effect": "step_up",
        "message": "changing the model needs a second factor"}, format="json")
    assert created.status_code == 201, created.json()
    version = actions.propose(agent, refund_manifest(model="gpt-5").spec,
                              agent.active_version.metadata, actor=people.alice,
                              source="api").version
    assert version.risk == 0
    assert version.guardrail_results[0]["outcome"] == "requires_step_up"
    secret = enrol(people.bob)
    bob = api_as(people.bob)
    url = f"/api/v1/proposals/{version.pk}/approve"
    refused = bob.post(url, {}, format="json")
    assert "guardrail model-changes asks for step-up" in error(refused)["message"]
    assert bob.post(url, {"otp": totp(secret)}, format="json").status_code == 200
    entry = AuditEntry.objects.get(action="proposal.approved", target=f"proposal:{version.pk}")
    assert entry.after["step_up"]["reasons"] == ["guardrail model-changes asks for step-up"]


def test_a_rollback_that_widens_again_needs_step_up(people, api_as, threshold):
    narrow = {"payments.refund": {"approval_above": 100, "max": 5000}}
    agent = approved_agent(people, "refund-agent")
    version = actions.propose(agent, refund_manifest(actions=narrow).spec,
                              agent.active_version.metadata, actor=people.alice,
                              source="api").version
    assert version.risk == 0
    actions.approve_proposal(version.pk, actor=people.bob)
    threshold()
    rollback = api_as(people.alice).post("/api/v1/agents/refund-agent/rollback",
                                         {"generation": 1}, format="json").json()
    secret = enrol(people.carol)
    carol = api_as(people.carol)
    url = f"/api/v1/proposals/{rollback['proposal']}/approve"
    assert error(carol.post(url, {}, format="json"))["code"] == "step_up_required"
    assert carol.post(url, {"otp": totp(secret)}, format="json").status_code == 200
    assert Agent.objects.get(name="refund-agent").generation == 3


def test_retirement_needs_step_up_over_the_api_and_the_page(people, api_as, threshold):
    approved_agent(people, "refund-agent")
    approved_agent(people, "refund-agent-2")
    threshold()
    alice = api_as(people.alice)
    one = alice.post("/api/v1/agents/refund-agent/retirement", {"reason": "v2"},
                     format="json").json()["id"]
    two = alice.post("/api/v1/agents/refund-agent-2/retirement", {"reason": "v2"},
                     format="json").json()["id"]
    secret = enrol(people.bob)
    bob = api_as(people.bob)
    refused = bob.post(f"/api/v1/retirements/{one}/approve", {}, format="json")
    assert (refused.status_code, error(refused)["code"]) == (403, "step_up_required")
    assert "cannot be undone" in error(refused)["message"]
    assert Agent.objects.get(name="refund-agent").lifecycle == "active"
    code = totp(secret)
    assert bob.post(f"/api/v1/retirements/{one}/approve", {"otp": code},
                    format="json").status_code == 200
    retired = AuditEntry.objects.get(action="agent.retired", agent="refund-agent")
    assert retired.after["step_up"]["device"] == TOTPDevice.objects.get(user=people.bob).pk

    page = signed_in(people.bob)
    assert 'id="retirement-otp"' in page.get("/agents/refund-agent-2/").content.decode()
    page.post(f"/retirements/{two}/approve", {"otp": code})  # replayed: refused
    assert Agent.objects.get(name="refund-agent-2").lifecycle == "active"
    lock_passed()
    page.post(f"/retirements/{two}/approve", {"otp": next_code(secret)})
    assert Agent.objects.get(name="refund-agent-2").lifecycle == "retired"


def test_a_stolen_session_cannot_swap_the_authenticator(people, api_as, threshold):
    version = raise_limit(people, approved_agent(people, "refund-agent"))
    threshold()
    secret = enrol(people.bob)
    thief = signed_in(people.bob)
    stolen, device = start_enrolment(thief, "bob")
    # An unconfirmed device counts for nothing.
    bob = api_as(people.bob)
    url = f"/api/v1/proposals/{version.pk}/approve"
    assert error(bob.post(url, {"otp": totp(stolen)}, format="json"))["code"] == (
        "step_up_required")
    TOTPDevice.objects.update(throttling_failure_count=0, throttling_failure_timestamp=None)
    swap = thief.post("/account/two-factor/", {"device": device, "code": totp(stolen),
                                               "current_code": "000000"})
    assert swap.status_code in (422, 429)
    assert TOTPDevice.objects.get(user=people.bob, confirmed=True).pk != int(device)
    TOTPDevice.objects.update(throttling_failure_count=0, throttling_failure_timestamp=None)
    assert bob.post(url, {"otp": totp(secret)}, format="json").status_code == 200
    assert AuditEntry.objects.filter(action="stepup.device_confirmed", actor="bob").count() == 1


def test_a_guardrail_turned_to_step_up_does_not_activate_on_earlier_approvals(
        people, api_as, django_capture_on_commit_callbacks):
    agent = approved_agent(people, "refund-agent")
    dana = api_as(people.dana)
    dana.post("/api/v1/guardrails", {
        "name": "model-changes", "expression": 'spec.model == "gpt-4.1"',
        "effect": "require_approvals", "required_approvals": 2, "message": "two approvers"},
        format="json")
    version = actions.propose(agent, refund_manifest(model="gpt-5").spec,
                              agent.active_version.metadata, actor=people.alice,
                              source="api").version
    assert api_as(people.bob).post(f"/api/v1/proposals/{version.pk}/approve", {},
                                   format="json").status_code == 200  # one of two
    # Compliance now asks for one approver with step-up instead of two: bob's approval had
    # no second factor, so it does not activate the proposal by itself.
    with django_capture_on_commit_callbacks(execute=True):
        changed = dana.patch("/api/v1/guardrails/model-changes", {"effect": "step_up"},
                             format="json")
    assert changed.status_code == 200, changed.json()
    assert DesiredStateVersion.objects.get(pk=version.pk).state == "pending"
    secret = enrol(people.carol)
    carol = api_as(people.carol)
    url = f"/api/v1/proposals/{version.pk}/approve"
    assert error(carol.post(url, {}, format="json"))["code"] == "step_up_required"
    assert carol.post(url, {"otp": totp(secret)}, format="json").status_code == 200
    assert DesiredStateVersion.objects.get(pk=version.pk).state == "approved"


def test_a_lost_authenticator_is_reset_from_the_command_line_never_in_the_admin(
        people, api_as, threshold):
    from django.core.management import call_command

    version = raise_limit(people, approved_agent(people, "refund-agent"))
    threshold()
    secret = enrol(people.bob)
    device = TOTPDevice.objects.get(user=people.bob)
    people.admin.is_staff = people.admin.is_superuser = True  # as `grant_role admin` makes them
    people.admin.save(update_fields=["is_staff", "is_superuser"])
    admin = signed_in(people.admin)
    assert admin.get("/admin/otp_totp/totpdevice/add/").status_code == 403
    assert admin.post(f"/admin/otp_totp/totpdevice/{device.pk}/delete/",
                      {"post": "yes"}).status_code == 403
    assert secret.hex() not in admin.get(
        f"/admin/otp_totp/totpdevice/{device.pk}/change/").content.decode()
    call_command("reset_two_factor", "bob", "--reason", "lost phone")
    assert not TOTPDevice.objects.filter(user=people.bob).exists()
    reset = AuditEntry.objects.get(action="stepup.reset")
    assert (reset.target, reset.reason, reset.before) == ("user:bob", "lost phone",
                                                          {"devices": [device.pk]})
    refused = api_as(people.bob).post(f"/api/v1/proposals/{version.pk}/approve",
                                      {"otp": totp(secret)}, format="json")
    assert "enrol" in error(refused)["message"]


def test_wrong_current_codes_to_swap_the_authenticator_are_throttled_and_audited(
        people, threshold):
    """Replacing an authenticator asks a current code of the old one: a stolen session trying
    codes there meets the same throttle and audit as one trying codes on an approval (the
    refusal rolled the count back, so the codes could be tried without end)."""
    threshold()
    secret = enrol(people.bob)
    thief = signed_in(people.bob)
    stolen, device = start_enrolment(thief, "bob")
    wrong = "000000" if totp(secret) != "000000" else "111111"
    first = thief.post("/account/two-factor/", {"device": device, "code": totp(stolen),
                                                "current_code": wrong})
    assert first.status_code == 422
    failed = AuditEntry.objects.get(action="stepup.failed")
    assert failed.actor == "bob" and failed.after["device"] != int(device)
    # Even the right current code is refused while the old device is locked.
    again = thief.post("/account/two-factor/", {"device": device, "code": next_code(stolen),
                                                "current_code": totp(secret)})
    assert again.status_code == 429
    old = TOTPDevice.objects.get(user=people.bob, confirmed=True)
    assert old.pk != int(device)
    # Once the lock has passed, Bob himself (the right code of each) replaces it, audited.
    lock_passed()
    swapped = thief.post("/account/two-factor/", {"device": device, "code": next_code(stolen),
                                                  "current_code": totp(secret)})
    assert swapped.status_code == 302, swapped.content.decode()
    assert TOTPDevice.objects.get(user=people.bob, confirmed=True).pk == int(device)
    assert [(e.before, e.after) for e in AuditEntry.objects.filter(
        action="stepup.device_confirmed") if e.before] == [
        ({"device": old.pk}, {"device": int(device), "method": "totp"})]
