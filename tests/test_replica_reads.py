"""Reads that tolerate lag go to a real PostgreSQL streaming replica (made with pg_basebackup by
the test) while it is in sync, and to the primary while it lags past the bound or is gone;
sign-in records and writes never touch it."""

import json
import subprocess
import sys

import pytest
from django.contrib.sessions.models import Session
from django.db import connection, transaction

from config import replica_reads
from config.replica_reads import ReplicaRouter
from registry.models import Agent, ApiToken
from tests.conftest import ROOT, child_env
from tests.replicated_postgres import ReplicatedPostgres, ReplicationUnavailable

pytestmark = pytest.mark.long(minutes=2)


@pytest.fixture
def replicated():
    if connection.vendor != "postgresql":
        pytest.skip("streaming replicas are PostgreSQL's: run with DATABASE_URL on PostgreSQL")
    try:
        clusters = ReplicatedPostgres()
    except ReplicationUnavailable as reason:
        pytest.skip(str(reason))
    yield clusters
    clusters.close()


def run(clusters: ReplicatedPostgres, *argv: str, **env: str) -> subprocess.CompletedProcess:
    environment = child_env(DATABASE_URL=clusters.primary.url(),
                            DATABASE_REPLICA_URLS=clusters.replica.url(),
                            DATABASE_REPLICA_MAX_LAG_SECONDS="1", **env)
    result = subprocess.run([sys.executable, *argv], cwd=ROOT, env=environment,
                            capture_output=True, text=True, timeout=900)
    assert result.returncode == 0, result.stderr[-4000:]
    return result


def test_lag_tolerant_reads_follow_the_replica_while_it_keeps_up(replicated):
    run(replicated, "manage.py", "migrate", "--no-input")
    out = run(replicated, "tests/replica_scenario.py",
              SCENARIO_REPLICA_URL=replicated.replica.url("agentgov"),
              SCENARIO_REPLICA_DATA=str(replicated.replica.data),
              SCENARIO_PG_CTL=str(replicated.bin / "pg_ctl")).stdout
    result = json.loads(out.strip().splitlines()[-1])

    in_sync = result["in_sync"]
    assert (in_sync["status"], in_sync["names"]) == (200, ["first-agent"])
    assert in_sync["agents_from_replica"] and not in_sync["agents_from_primary"]
    # The token that signs the request in is read on the primary, never the replica.
    assert in_sync["primary_auth_reads"] and not in_sync["replica_auth_reads"]

    assert result["write"] == {"status": 202, "replica_queries": 0}

    lagging = result["lagging"]  # replay paused: the replica does not have second-agent yet
    assert lagging["names"] == ["first-agent", "second-agent"]
    assert lagging["agents_from_primary"] and not lagging["agents_from_replica"]

    caught_up = result["caught_up"]
    assert caught_up["names"] == ["first-agent", "second-agent"]
    assert caught_up["agents_from_replica"] and not caught_up["agents_from_primary"]

    down = result["replica_down"]
    assert (down["status"], down["names"]) == (200, ["first-agent", "second-agent"])
    assert down["agents_from_primary"]


@pytest.fixture
def lag_tolerant():
    token = replica_reads._tolerates_lag.set(True)
    yield
    replica_reads._tolerates_lag.reset(token)


def test_without_a_lag_tolerant_request_every_read_is_the_primarys(monkeypatch):
    monkeypatch.setattr(replica_reads, "replica_aliases", lambda: ["replica_0"])
    monkeypatch.setattr(replica_reads, "_usable", lambda alias, now: True)
    assert ReplicaRouter().db_for_read(Agent) is None


@pytest.mark.django_db
def test_sign_in_records_are_never_read_from_a_replica(lag_tolerant, monkeypatch):
    monkeypatch.setattr(replica_reads, "replica_aliases", lambda: ["replica_0"])
    monkeypatch.setattr(replica_reads, "_usable", lambda alias, now: True)
    router = ReplicaRouter()
    assert router.db_for_read(ApiToken) is None
    assert router.db_for_read(Session) is None


@pytest.mark.django_db(transaction=True)
def test_reads_inside_a_transaction_stay_on_the_primary(lag_tolerant, monkeypatch):
    monkeypatch.setattr(replica_reads, "replica_aliases", lambda: ["replica_0"])
    monkeypatch.setattr(replica_reads, "_usable", lambda alias, now: True)
    router = ReplicaRouter()
    assert router.db_for_read(Agent) == "replica_0"
    with transaction.atomic():
        assert router.db_for_read(Agent) is None
