"""The space between agents on real workers: the scheduled silence check (rqcron and an RQ
worker, short heartbeats) and the observed toxic-path check queued by a changed observation."""

import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest
from django.conf import settings

from reconciliation.models import AgentStatus, AlertEvent, Finding, FleetSnapshot, Silence
from registry import actions
from tests.conftest import ROOT, approved_agent, child_env, eventually, token_client


@pytest.fixture
def start_cron(transactional_db, redis_client):
    processes = []

    def start(**env: str) -> subprocess.Popen:
        Path(settings.VAR_DIR).mkdir(parents=True, exist_ok=True)
        log = open(Path(settings.VAR_DIR) / f"test-cron-{os.getpid()}.log", "w+")  # noqa: SIM115
        process = subprocess.Popen([sys.executable, "manage.py", "cron"],
                                   cwd=ROOT, env=child_env(**env), stdout=log,
                                   stderr=subprocess.STDOUT, start_new_session=True)
        processes.append((process, log))
        return process

    yield start
    for process, log in processes:
        os.killpg(process.pid, signal.SIGTERM)
        process.wait(timeout=15)
        log.close()


def ready(agent):
    status = AgentStatus.objects.filter(agent=agent).first()
    return status.condition("Ready") if status else None


def test_the_scheduled_check_finds_a_silent_agent_and_a_report_clears_it(
        people, start_worker, start_cron):
    env = {"HEARTBEAT_PUSH_SECONDS": "3", "SILENCE_CHECK_SECONDS": "1",
           "RECONCILE_RESYNC_SECONDS": "3600"}
    agent = approved_agent(people, "reporter", connector={"type": "push"})
    client = token_client(people, agent)
    assert client.put("/api/v1/agents/reporter/observed-state",
                      {"tools": ["orders.lookup", "payments.refund"]},
                      format="json").status_code == 202
    worker = start_worker("default", "reconcile", **env)
    start_cron(**env)
    eventually(lambda: Silence.objects.filter(agent=agent, ended_at__isnull=True).exists(),
               message=lambda: f"never found silent; worker said:\n{worker.output()}")
    eventually(lambda: (ready(agent) or {}).get("reason") == "Silent")
    assert ready(agent)["status"] == "Unknown"
    assert client.put("/api/v1/agents/reporter/observed-state",
                      {"tools": ["orders.lookup", "payments.refund"]},
                      format="json").status_code == 202
    first = Silence.objects.filter(agent=agent).order_by("started_at").first()
    first.refresh_from_db()
    assert first.ended_at is not None
    assert AlertEvent.objects.filter(event="agent.heard_again", agent_name="reporter").exists()
    # it stays quiet, so the check finds it again: a second silence, a second alert, never more
    # than one open at a time
    eventually(lambda: Silence.objects.filter(agent=agent).count() == 2)
    assert Silence.objects.filter(agent=agent, ended_at__isnull=True).count() == 1
    assert AlertEvent.objects.filter(event="agent.silent", agent_name="reporter").count() == 2


def test_a_reported_state_that_opens_a_toxic_path_is_a_finding_from_the_worker(
        people, start_worker):
    support = approved_agent(people, "support", connector={"type": "push"},
                             data=[{"resource": "customers_db", "access": "read"}])
    mailer = approved_agent(people, "mailer", connector={"type": "push"},
                            tools=["email.send_external"])
    actions.create_toxic_combination(actor=people.dana, name="customers-never-email",
                                     left="data:customers_db:read",
                                     right="tool:email.send_external")
    worker = start_worker("default")
    assert token_client(people, mailer).put(
        "/api/v1/agents/mailer/observed-state", {"tools": ["email.send_external"]},
        format="json").status_code == 202
    assert token_client(people, support).put(
        "/api/v1/agents/support/observed-state",
        {"data": [{"resource": "customers_db", "access": "read"}], "delegates_to": ["mailer"]},
        format="json").status_code == 202
    eventually(lambda: Finding.objects.filter(kind="toxic_path", status="open").count() == 2,
               message=lambda: f"no toxic-path findings; worker said:\n{worker.output()}")
    assert token_client(people, support).put(
        "/api/v1/agents/support/observed-state",
        {"data": [{"resource": "customers_db", "access": "read"}]},
        format="json").status_code == 202
    eventually(lambda: set(Finding.objects.filter(kind="toxic_path")
                           .values_list("status", flat=True)) == {"resolved"})


def test_a_declared_toxic_pair_reaches_the_fleet_view_through_the_worker(
        people, start_worker, api_as, settings):
    settings.FLEET_SNAPSHOT_DELAY_SECONDS = 1  # the refresh waits a second for a burst
    approved_agent(people, "support", data=[{"resource": "customers_db", "access": "read"}],
                   delegates_to=["mailer"])
    approved_agent(people, "mailer", tools=["email.send_external"])
    dana = api_as(people.dana)
    before = dana.get("/api/v1/fleet").json()  # the first reader computed it
    assert before["rules"] == []
    worker = start_worker("default")
    actions.create_toxic_combination(actor=people.dana, name="customers-never-email",
                                     left="data:customers_db:read",
                                     right="tool:email.send_external")
    eventually(lambda: FleetSnapshot.objects.get().toxic_paths["approved_count"] == 1,
               message=lambda: f"the fleet view was not refreshed; worker said:\n{worker.output()}")
    after = dana.get("/api/v1/fleet").json()
    assert after["as_of"] > before["as_of"]
    (row,) = after["rules"]
    assert (row["name"], row["violations"]) == ("customers-never-email", ["mailer", "support"])
    paths = dana.get("/api/v1/toxic-combinations/paths").json()
    assert [p["agents"] for p in paths["approved"]] == [["support", "mailer"]]
