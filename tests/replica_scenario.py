"""Run by tests/test_replica_reads.py in a process of its own, whose settings name a primary and
a streaming replica the test made: people use the API while the replica is in sync, lagging,
and gone; prints what each request read where, as one JSON object."""

import contextlib
import json
import os
import subprocess
import sys
import time

import django
import psycopg

sys.path.insert(0, os.getcwd())
django.setup()

from django.db import connections  # noqa: E402
from django.test import Client  # noqa: E402
from django.test.utils import CaptureQueriesContext  # noqa: E402

from config import replica_reads  # noqa: E402
from registry import actions  # noqa: E402
from registry.choices import Role, VersionSource  # noqa: E402
from registry.models import Agent  # noqa: E402
from tests.conftest import refund_manifest  # noqa: E402

REPLICA = "replica_0"


class NoQueries:
    captured_queries: list = []
REPLICA_SUPERUSER = os.environ["SCENARIO_REPLICA_URL"]


def person(name: str, role: Role):
    user, _ = actions.create_person(name, actor="system:test", password="x" * 20)
    actions.grant_role(user, role, actor="system:test")
    return user


def register(name: str, alice, bob) -> None:
    manifest = refund_manifest()
    object.__setattr__(manifest, "name", name)
    (outcome,) = actions.apply_manifests([manifest], actor=alice, source=VersionSource.YAML)
    actions.approve_proposal(outcome.version.pk, actor=bob)


def until(check, what: str, timeout: float = 120) -> None:
    deadline = time.monotonic() + timeout
    while not check():
        if time.monotonic() > deadline:
            raise SystemExit(f"timed out waiting for {what}")
        time.sleep(0.2)


def list_agents(client: Client, replica_up: bool = True) -> dict:
    """GET /api/v1/agents: the names it shows and which database read the agents."""
    replica_reads.forget_health()
    # Capturing connects, so a replica that is down is not captured (it has nothing to say).
    with CaptureQueriesContext(connections["default"]) as primary, \
            (CaptureQueriesContext(connections[REPLICA]) if replica_up
             else contextlib.nullcontext(NoQueries())) as replica:
        response = client.get("/api/v1/agents")
    def read_agents(queries) -> bool:
        return any('FROM "registry_agent"' in q["sql"] for q in queries.captured_queries)
    return {"status": response.status_code,
            "names": sorted(agent["name"] for agent in response.json()["results"]),
            "agents_from_replica": read_agents(replica),
            "agents_from_primary": read_agents(primary),
            "primary_auth_reads": any('"registry_apitoken"' in q["sql"]
                                      for q in primary.captured_queries),
            "replica_auth_reads": any('"registry_apitoken"' in q["sql"]
                                      for q in replica.captured_queries)}


def main() -> None:
    alice, bob, dana = (person("alice", Role.OWNER), person("bob", Role.APPROVER),
                        person("dana", Role.COMPLIANCE))
    _, key = actions.issue_api_token(dana, actor="system:test")
    client = Client(HTTP_AUTHORIZATION=f"Token {key}")
    register("first-agent", alice, bob)
    until(lambda: Agent.objects.using(REPLICA).filter(name="first-agent").exists()
          and replica_reads.replica_lag(REPLICA) == 0, "the replica to catch up")
    result = {"in_sync": list_agents(client)}

    with CaptureQueriesContext(connections[REPLICA]) as replica:
        answer = client.post("/api/v1/agents/first-agent/reconcile")
    result["write"] = {"status": answer.status_code, "replica_queries": len(replica)}

    with psycopg.connect(REPLICA_SUPERUSER, autocommit=True) as admin:
        admin.execute("SELECT pg_wal_replay_pause()")
        register("second-agent", alice, bob)
        until(lambda: (replica_reads.replica_lag(REPLICA) or 0) > 1.5, "the replica to lag")
        result["lagging"] = list_agents(client)
        admin.execute("SELECT pg_wal_replay_resume()")
    until(lambda: replica_reads.replica_lag(REPLICA) == 0, "the replica to catch up again")
    result["caught_up"] = list_agents(client)

    subprocess.run(["runuser", "-u", "postgres", "--", os.environ["SCENARIO_PG_CTL"], "-D",
                    os.environ["SCENARIO_REPLICA_DATA"], "-m", "fast", "-w", "stop"],
                   check=True, capture_output=True, timeout=120)
    connections[REPLICA].close()
    result["replica_down"] = list_agents(client, replica_up=False)
    print(json.dumps(result))


if __name__ == "__main__":
    main()
