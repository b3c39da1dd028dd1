"""What people see: the stop panel on the overview (the button only for compliance and
admins), a stopped agent's banner, and maintenance windows on the fleet page and the agent's
page; the overview's forms do what the API does."""

from datetime import timedelta

import pytest
from django.test import Client
from django.utils import timezone

from compliance import actions
from compliance.models import Stop
from registry.models import Agent

pytestmark = pytest.mark.django_db


def signed_in(user) -> Client:
    client = Client()
    client.force_login(user)
    return client


def test_compliance_presses_stop_on_the_overview_and_a_second_person_lifts_it(people,
                                                                              refund_agent):
    dana, admin = signed_in(people.dana), signed_in(people.admin)
    assert "Stop now" in dana.get("/").content.decode()
    assert "Stop now" not in signed_in(people.alice).get("/").content.decode()
    dana.post("/stops/", {"scope": "team", "target": "payments", "reason": "refund loop"})
    stop = Stop.objects.get()
    assert Agent.objects.get(name="refund-agent").lifecycle == "suspended"
    page = signed_in(people.bob).get("/").content.decode()
    assert f"Stop {stop.pk}</strong>: team payments stopped by dana" in page
    assert "refund loop" in signed_in(people.alice).get(
        "/agents/refund-agent/").content.decode()
    dana.post(f"/stops/{stop.pk}/lift", {"reason": "fixed"})
    assert "Approve the lift" not in dana.get("/").content.decode()  # a second person does
    assert "Approve the lift" in admin.get("/").content.decode()
    admin.post(f"/stops/{stop.pk}/lift/approve")
    assert not Stop.objects.get().active
    assert Agent.objects.get(name="refund-agent").lifecycle == "active"
    assert "Nothing is stopped." in dana.get("/").content.decode()


def test_maintenance_windows_show_on_the_fleet_page_and_the_agent_page(people, refund_agent):
    now = timezone.now()
    actions.schedule_window(actor=people.dana, starts_at=(now - timedelta(minutes=1)).isoformat(),
                            ends_at=(now + timedelta(hours=2)).isoformat(),
                            reason="payments database upgrade", selector={"team": "payments"},
                            allowed=["suspend"])
    fleet = signed_in(people.bob).get("/fleet/").content.decode()
    assert "Open now</strong>: agents labelled team=payments" in fleet
    assert "payments database upgrade" in fleet
    agent = signed_in(people.alice).get("/agents/refund-agent/").content.decode()
    assert "In a maintenance window" in agent and "except suspend" in agent
