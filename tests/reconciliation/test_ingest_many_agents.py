"""Ingest across many agents: a batch costs the same queries however many agents it names
(the agents are read in one query of the columns the rules need, each version's spec kept by
the process), and what is kept is never stale: a new approved version, a grant that expired
between two batches and a suspension are all judged by the next batch."""

import json
import time
import uuid
from datetime import UTC, datetime, timedelta

import django_rq
import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext
from rq import SimpleWorker

from audit.actors import RECONCILER as SYSTEM
from reconciliation.actions.common import suspend_agent
from reconciliation.models import Finding
from registry.models import Agent
from runtime import actions as runtime_actions
from runtime import windows
from runtime.actions import behaviour, group_rules
from runtime.actions.behaviour import AGENT_ROWS, AGENTS_PER_JOB, _batch_agents, _rules_spec
from runtime.actions.group_rules import create_group_rule
from runtime.behaviour import window_checks
from runtime.events import Event
from runtime.models import UncountedBatch
from tests.conftest import approved_agent, decision_of, postgresql_only

LIMITED = {"data": [{"resource": "customers_db", "access": "read"},
                    {"resource": "orders_db", "access": "read"}],
           "limits": [{"resource": "customers_db", "max_calls": 1000, "per": "1h"}],
           "enforcement": {"default": "correct", "behaviour": "log"}}


def read(agent: str, resource: str = "customers_db", at: datetime | None = None) -> dict:
    return {"id": uuid.uuid4().hex, "agent": agent, "kind": "data_access",
            "ts": (at or datetime.now(UTC)).isoformat(), "resource": resource,
            "record": uuid.uuid4().hex}


def ingest(actor, events, capture, now=None) -> dict:
    with capture(execute=True):
        return runtime_actions.ingest_events(events, actor=actor, now=now).to_dict()


def run_ingest_worker(max_jobs: int | None = None) -> None:
    queue = django_rq.get_queue("ingest")
    SimpleWorker([queue], connection=queue.connection).work(burst=True, max_jobs=max_jobs)


def test_a_batch_naming_30_agents_costs_the_queries_of_one_naming_3(
        people, redis_client, django_capture_on_commit_callbacks):
    names = [f"fleet-{i:02d}" for i in range(30)]
    for name in names:
        approved_agent(people, name, **LIMITED)
    # First sight of each agent fills its windows from the database (once per generation).
    ingest(people.admin, [read(name) for name in names], django_capture_on_commit_callbacks)
    counts = {}
    for size in (3, 30):  # 120 events either way: only the number of agents differs
        with CaptureQueriesContext(connection) as captured:
            body = ingest(people.admin, [read(name) for name in names[:size]
                                         for _ in range(120 // size)],
                          django_capture_on_commit_callbacks)
        assert body["accepted"] == 120
        counts[size] = len(captured.captured_queries)
    assert counts[30] == counts[3], counts
    # Every event was counted in its agent's window, and none is left in the outbox.
    assert redis_client.zcard(f"bw:{_batch_agents({'fleet-29'})['fleet-29'].pk}:"
                              "customers_db:calls:3600") == 5


def test_a_new_approved_version_is_judged_by_the_next_batch(
        people, redis_client, django_capture_on_commit_callbacks):
    agent = approved_agent(people, "crm-reader", **{
        **LIMITED, "data": [*LIMITED["data"], {"resource": "crm", "access": "read"}]})
    ingest(people.admin, [read("crm-reader", "crm")], django_capture_on_commit_callbacks)
    run_ingest_worker()
    assert not Finding.objects.filter(agent=agent, behaviour=True).exists()
    approved_agent(people, "crm-reader", **LIMITED)  # version 2 no longer reads the CRM
    ingest(people.admin, [read("crm-reader", "crm")], django_capture_on_commit_callbacks)
    run_ingest_worker()
    (finding,) = Finding.objects.filter(agent=agent, behaviour=True)
    assert "/data" in finding.pointer and "crm" in finding.pointer


def test_a_grant_that_expired_between_two_batches_is_judged_by_the_next(
        people, redis_client, django_capture_on_commit_callbacks):
    expiry = datetime.now(UTC) + timedelta(days=2)
    agent = approved_agent(people, "granted", **LIMITED, grants=[
        {"resource": "crm", "access": "read", "reason": "audit",
         "expires_at": expiry.strftime("%Y-%m-%dT%H:%M:%SZ")}])
    before = expiry - timedelta(minutes=1)
    ingest(people.admin, [read("granted", "crm", before)], django_capture_on_commit_callbacks,
           now=before)
    run_ingest_worker()
    assert not Finding.objects.filter(agent=agent, behaviour=True).exists()
    after = expiry + timedelta(minutes=1)
    ingest(people.admin, [read("granted", "crm", after)], django_capture_on_commit_callbacks,
           now=after)
    run_ingest_worker()
    (finding,) = Finding.objects.filter(agent=agent, behaviour=True)
    assert "crm" in finding.pointer


def test_a_suspension_is_seen_by_the_next_batch(people, redis_client):
    agent = approved_agent(people, "to-suspend", **LIMITED)
    now = datetime.now(UTC)
    assert _rules_spec(_batch_agents({"to-suspend"})["to-suspend"], now)["running"] is True
    suspend_agent(agent, actor=SYSTEM, reason="test")
    assert _rules_spec(_batch_agents({"to-suspend"})["to-suspend"], now)["running"] is False


def test_counting_an_agents_events_keeps_its_windows_filled_without_a_refill(
        people, redis_client, django_capture_on_commit_callbacks, monkeypatch):
    agent = approved_agent(people, "steady", **LIMITED)
    marker = f"bw:filled:{agent.pk}"
    ingest(people.admin, [read("steady")], django_capture_on_commit_callbacks)
    epoch = redis_client.get(windows.EPOCH_KEY).decode()
    assert redis_client.get(marker).decode() == f"{agent.generation}@{epoch}"
    redis_client.expire(marker, 5)  # as if filled almost an hour ago
    later = time.monotonic() + windows.CONFIRMED_SECONDS  # this process reads it again
    monkeypatch.setattr(windows.time, "monotonic", lambda: later)
    with CaptureQueriesContext(connection) as captured:
        ingest(people.admin, [read("steady")], django_capture_on_commit_callbacks)
    assert redis_client.ttl(marker) > 3600  # kept for its longest window again by the use
    assert not [q for q in captured.captured_queries if q["sql"].startswith("SELECT")
                and "ORDER BY" in q["sql"] and "behaviourevent" in q["sql"].lower()
                ]  # and nothing was read back
    assert redis_client.zcard(f"bw:{agent.pk}:customers_db:calls:3600") == 2


def test_a_process_reads_an_agents_fill_marker_once_in_a_while_and_redis_losing_it_shows_at_once(
        people, redis_client, django_capture_on_commit_callbacks):
    """A thousand agents' markers were read by every batch: a process now trusts one it read
    or set for CONFIRMED_SECONDS. Redis's epoch is read every time, so a Redis that lost its
    windows is refilled by the very next batch, confirmed or not."""
    names = [f"busy-{i}" for i in range(5)]
    agents = {name: approved_agent(people, name, **LIMITED) for name in names}
    ingest(people.admin, [read(name) for name in names], django_capture_on_commit_callbacks)

    markers = [f"bw:filled:{agent.pk}" for agent in agents.values()]
    for marker in markers:
        redis_client.expire(marker, 1000)  # reading one (GETEX) would keep it an hour again
    ingest(people.admin, [read(name) for name in names], django_capture_on_commit_callbacks)
    assert all(0 < redis_client.ttl(m) <= 1000 for m in markers)  # confirmed: not read again
    redis_client.flushdb()  # a Redis restart: every window, marker and the epoch gone
    ingest(people.admin, [read(name) for name in names], django_capture_on_commit_callbacks)
    for agent in agents.values():  # the three stored events are back in the window
        assert redis_client.zcard(f"bw:{agent.pk}:customers_db:calls:3600") == 3


@postgresql_only  # SQLite takes a batch in statements of 30 rows (its parameter limit)
def test_a_batch_costs_the_same_queries_however_many_events_it_holds(
        people, redis_client, django_capture_on_commit_callbacks):
    names = [f"busy-{i:02d}" for i in range(10)]
    for name in names:
        approved_agent(people, name, **LIMITED)
    ingest(people.admin, [read(name) for name in names], django_capture_on_commit_callbacks)
    counts = {}
    for size in (10, 300):  # the same ten agents, 1 or 30 events each
        with CaptureQueriesContext(connection) as captured:
            body = ingest(people.admin, [read(names[i % 10]) for i in range(size)],
                          django_capture_on_commit_callbacks)
        assert body["accepted"] == size
        counts[size] = len(captured.captured_queries)
    assert counts[300] == counts[10], counts


def test_a_decision_right_after_redis_lost_the_windows_sees_every_stored_event(
        people, redis_client, django_capture_on_commit_callbacks):
    """A batch's window script checks Redis's epoch itself, so ingest does not read it first
    when every agent's marker was confirmed lately. A decision only peeks at the windows: it
    still reads the epoch, so right after a restart, with the agent's marker confirmed a
    moment ago, a read that the stored events already fill the window for is denied."""
    capped = approved_agent(people, "capped", **{**LIMITED, "limits": [
        {"resource": "customers_db", "max_calls": 3, "per": "1h"}]})
    ingest(people.admin, [read("capped") for _ in range(3)], django_capture_on_commit_callbacks)
    ingest(people.admin, [read("capped", "orders_db")], django_capture_on_commit_callbacks)
    redis_client.flushdb()  # a Redis restart: the window, its marker and the epoch gone
    answer = decision_of(people, capped, {"resource": "customers_db", "record": "c-1"})
    assert answer["outcome"] == "deny" and "the window is full" in answer["rule"], answer


def test_a_budget_counted_right_after_redis_lost_the_windows_holds_every_stored_spend(
        people, redis_client, django_capture_on_commit_callbacks):
    """An agent with budgets and no limits: its batches run no per-agent window script to
    check Redis's epoch, so ingest still reads the epoch first, and the budget window the
    next batch after a restart counts in holds what was spent before it."""
    spender = approved_agent(people, "spender", limits=[],
                             budgets=[{"tokens": 10000, "per": "1h"}])

    def spend(tokens: int) -> dict:
        return {"id": uuid.uuid4().hex, "agent": "spender", "kind": "model_call",
                "ts": datetime.now(UTC).isoformat(), "model": "gpt-4.1",
                "input_tokens": tokens, "output_tokens": 0}

    ingest(people.admin, [spend(3000)], django_capture_on_commit_callbacks)
    ingest(people.admin, [spend(3000)], django_capture_on_commit_callbacks)
    redis_client.flushdb()  # a Redis restart: the budget window, its marker and the epoch
    ingest(people.admin, [spend(3000)], django_capture_on_commit_callbacks)
    assert float(redis_client.get(f"bb:{spender.pk}:tokens:3600:sum")) == 9000


def test_redis_lost_after_the_group_windows_were_checked_refills_them_before_counting(
        people, redis_client, django_capture_on_commit_callbacks, monkeypatch):
    """Redis restarts after the batch checked its group windows and before it counts: the
    window script sees the epoch moved and counts nothing, and both the agent's windows and
    the group windows are filled again before the batch is counted once more."""
    approved_agent(people, "grouped", **LIMITED)
    rule = create_group_rule(actor=people.dana, name="one-customer", measure="events",
                             limit=1000, per="1h", per_record=True,
                             match={"kind": "data_access", "resource": "customers_db"})
    reads = [{**read("grouped"), "record": "c-1"} for _ in range(3)]
    ingest(people.admin, reads[:2], django_capture_on_commit_callbacks)
    checked = group_rules.ensure_group_windows
    restarted = []

    def then_redis_restarts(rules, now):
        checked(rules, now)
        if not restarted:
            restarted.append(True)
            redis_client.flushdb()

    monkeypatch.setattr(group_rules, "ensure_group_windows", then_redis_restarts)
    ingest(people.admin, reads[2:], django_capture_on_commit_callbacks)
    assert restarted
    (window,) = [key for key in redis_client.keys(f"gw:{rule.id}:*")
                 if not key.endswith((b":sum", b":agents")) and b"filled" not in key]
    assert redis_client.zcard(window) == 3  # the two stored reads and the new one


def test_a_batch_whose_agents_were_confirmed_makes_one_redis_call_when_nothing_was_lost(
        people, snapshot_redis, django_capture_on_commit_callbacks):
    """In steady state a batch's windows cost Redis one call (the window script, which checks
    the epoch itself); the epoch is read on its own only when a marker needs reading. Counted
    on a redis-server of the test's own: a server's command counts are its every client's."""
    names = [f"steady-{i}" for i in range(3)]
    for name in names:
        approved_agent(people, name, **LIMITED)
    ingest(people.admin, [read(name) for name in names], django_capture_on_commit_callbacks)
    before = snapshot_redis.client().info("commandstats")
    ingest(people.admin, [read(name) for name in names], django_capture_on_commit_callbacks)
    after = snapshot_redis.client().info("commandstats")
    calls = {name: after[name]["calls"] - before.get(name, {}).get("calls", 0)
             for name in after if name in ("cmdstat_evalsha", "cmdstat_eval")}
    assert sum(calls.values()) == 1, calls


def test_windows_lost_for_30_agents_are_refilled_with_the_queries_of_3(
        people, redis_client, django_capture_on_commit_callbacks):
    names = [f"lost-{i:02d}" for i in range(33)]
    agents = {name: approved_agent(people, name, **LIMITED) for name in names}
    ingest(people.admin, [read(name) for name in names for _ in range(2)],
           django_capture_on_commit_callbacks)
    redis_client.flushdb()  # a Redis restart: every window and fill marker gone
    counts = {}
    for group in (names[:3], names[3:]):
        with CaptureQueriesContext(connection) as captured:
            ingest(people.admin, [read(name) for name in group],
                   django_capture_on_commit_callbacks)
        counts[len(group)] = len(captured.captured_queries)
    assert counts[30] == counts[3], counts
    # Each agent's window holds its two stored events again, and the one just sent.
    for name in (names[0], names[32]):
        assert redis_client.zcard(f"bw:{agents[name].pk}:customers_db:calls:3600") == 3
        epoch = redis_client.get(windows.EPOCH_KEY).decode()
        assert redis_client.get(f"bw:filled:{agents[name].pk}").decode() == (
            f"{_batch_agents({name})[name].generation}@{epoch}")


def test_a_process_first_seeing_30_agents_judges_them_with_the_queries_of_3(
        people, redis_client, django_capture_on_commit_callbacks):
    """A web process just started (or one that never saw these agents) reads nothing more
    per agent to judge their events: the spec the rules judge by is made from the agent's
    row (a stop's reach, read per agent, is the reconciler's business, not the rules')."""
    names = [f"new-{i:02d}" for i in range(34)]
    for name in names:
        approved_agent(people, name, **LIMITED)
    # What a process reads once whatever the agents (its first batch's), read before.
    ingest(people.admin, [read(names[33])], django_capture_on_commit_callbacks)
    counts = {}
    for group in (names[:3], names[3:33]):
        behaviour._rule_specs.clear()  # as a new process has them
        with CaptureQueriesContext(connection) as captured:
            body = ingest(people.admin, [read(name) for name in group],
                          django_capture_on_commit_callbacks)
        assert body["accepted"] == len(group)
        counts[len(group)] = len(captured.captured_queries)
    assert counts[30] == counts[3], counts


BLOCKING = {**LIMITED, "limits": [{"resource": "customers_db", "max_calls": 1, "per": "1h"}],
            "enforcement": {"default": "correct", "behaviour": "block"}}


def test_a_storm_of_broken_rules_is_queued_a_few_agents_a_job_and_each_agent_is_enforced_once(
        people, redis_client, django_capture_on_commit_callbacks):
    """Every agent of a batch over its limit: its broken rules go to the ingest workers
    AGENTS_PER_JOB agents a job (RQ making a job per agent cost the batch more than counting
    its events), and each agent is still enforced on its own: one whose platform refuses the
    suspension is retried in a job of its own, the others are not enforced twice. The batch's
    outbox row waits for every one of those jobs, the retried agent's own too."""
    from registry.models import Agent
    from sandbox.actions import sandbox_faults
    from sandbox.models import SandboxAgent

    names = [f"storm-{i:02d}" for i in range(2 * AGENTS_PER_JOB + 5)]
    for name in names:
        approved_agent(people, name, **BLOCKING)
    refusing = Agent.objects.get(name=names[7])
    sandbox_faults(refusing, actor=people.admin, fault="fail", after_changes=0)
    body = ingest(people.admin, [read(name) for name in names for _ in range(2)],
                  django_capture_on_commit_callbacks)
    assert body["accepted"] == 2 * len(names)
    queue = django_rq.get_queue("ingest")
    assert [job.func_name for job in queue.jobs] == ["runtime.jobs.record_violations_of"] * 3
    # What RQ's dashboards show: the job's agents and how many rules they broke.
    first = queue.jobs[0]
    assert first.description == (
        "runtime.jobs.record_violations_of(agents "
        f"{', '.join(str(a) for a in first.args[0])}: {AGENTS_PER_JOB} broken rules)")

    assert UncountedBatch.objects.get().jobs == 3
    run_ingest_worker(max_jobs=3)  # the batch's three jobs; the refusing agent's own waits
    assert UncountedBatch.objects.get().jobs == 1
    run_ingest_worker()
    assert not UncountedBatch.objects.exists()
    agents = Agent.objects.filter(name__in=names)
    assert {a.name: a.lifecycle for a in agents} == {name: "suspended" for name in names}
    assert {a.name: Finding.objects.filter(agent=a, behaviour=True, status="blocked").count()
            for a in agents} == {name: 1 for name in names}
    # The platform applied each suspension once; the refusing one on its own job's run.
    assert set(SandboxAgent.objects.filter(agent__in=agents)
               .values_list("apply_count", flat=True)) == {1}
    alone = [queue.fetch_job(job_id) for job_id in queue.finished_job_registry.get_job_ids()]
    assert [job.args[0] for job in alone
            if job.func_name == "runtime.jobs.record_violations"] == [refusing.pk]


def test_a_name_holding_a_comma_is_never_read_as_two_agents(people):
    """The batch's names go to PostgreSQL as one comma-separated text (a list is formatted in
    Python an element at a time): a name that held a comma would be read as two agents, so
    it is refused, not split. Ingest's names are slugs, which never hold one."""
    approved_agent(people, "fleet-a", **LIMITED)
    approved_agent(people, "fleet-b", **LIMITED)
    assert set(_batch_agents({"fleet-a", "fleet-b"})) == {"fleet-a", "fleet-b"}
    if connection.vendor == "postgresql":
        with pytest.raises(ValueError, match="comma"):
            _batch_agents({"fleet-a,fleet-b"})
    else:  # SQLite reads them through the ORM: the whole name, which no agent holds
        assert _batch_agents({"fleet-a,fleet-b"}) == {}


def _plan_nodes(plan: dict) -> list[dict]:
    return [plan, *(node for child in plan.get("Plans", []) for node in _plan_nodes(child))]


@postgresql_only
def test_the_batchs_agents_are_read_splitting_its_names_once_whatever_plan_is_kept(people):
    """After a few runs PostgreSQL may keep one generic plan for a prepared statement, made
    without the parameters' values. Under such a plan the agents' read must still split the
    batch's names once and never compare every agent with every name: with the names in a
    filter, a kept plan scanned every agent and split the whole list again for each (a
    1,000-agent batch cost ~50 ms of the database's CPU instead of ~2). Here all agents share
    one lifecycle, as in a fleet where none is retired, which is what misled the planner."""
    names = [f"fleet-{i:02d}" for i in range(30)]
    for name in names:
        approved_agent(people, name, **LIMITED)
    named = names[:20]
    with connection.cursor() as cursor:
        cursor.execute(f"ANALYZE {Agent._meta.db_table}")
        cursor.execute("SET LOCAL plan_cache_mode = force_generic_plan")
        cursor.execute("PREPARE agent_rows_probe(text) AS " + AGENT_ROWS.replace("%s", "$1"))
        try:
            cursor.execute("EXPLAIN (ANALYZE, FORMAT JSON) EXECUTE agent_rows_probe(%s)",
                           [",".join(named)])
            explained = cursor.fetchone()[0]
        finally:
            cursor.execute("DEALLOCATE agent_rows_probe")
    plan = (json.loads(explained) if isinstance(explained, str) else explained)[0]["Plan"]
    nodes = _plan_nodes(plan)
    assert plan["Actual Rows"] == len(named)
    assert not [node for node in nodes if "string_to_array" in node.get("Filter", "")
                + node.get("Join Filter", "")], "the names are split again for every agent"
    assert all(node["Actual Loops"] == 1 for node in nodes if node["Node Type"] == "Function Scan")
    assert sum(node.get("Rows Removed by Join Filter", 0) * node["Actual Loops"]
               for node in nodes) <= len(names) + len(named)


def test_a_record_of_any_text_counts_in_the_window_a_decision_reads(
        people, redis_client, django_capture_on_commit_callbacks):
    """The window script gets its keys inside its JSON arguments: a record with quotes, a
    backslash, a slash, a newline and letters beyond ASCII names the same window that
    windows.peek (a decision about an action not taken yet) reads by its key."""
    agent = approved_agent(people, "records", data=LIMITED["data"], limits=[
        {"resource": "customers_db", "max_same_record": 2, "per": "1h"}],
        enforcement=LIMITED["enforcement"])
    record = 'Zoë "the" \\ / \n 客户'
    events = [{**read("records"), "record": record} for _ in range(3)]
    assert ingest(people.admin, events, django_capture_on_commit_callbacks)["accepted"] == 3
    (check,) = windows_of(agent, record)
    assert windows.peek(check, datetime.now(UTC) + timedelta(seconds=1)) == 3
    run_ingest_worker()
    (finding,) = Finding.objects.filter(agent=agent, behaviour=True)
    assert (finding.kind, finding.actual) == ("same_record_exceeded", 3)


def windows_of(agent, record: str) -> list:
    probe = Event(id="probe", agent=agent.name, ts=datetime.now(UTC), kind="data_access",
                  resource="customers_db", record=record)
    return window_checks(agent.active_version.spec, probe, agent.pk, {})


def test_expired_members_never_count_and_are_trimmed_within_a_few_uses(
        people, redis_client, django_capture_on_commit_callbacks, monkeypatch):
    """A window's count reads only its own span, so members past it never count; trimming
    them (memory) happens on about one use of the window in TRIM_EVERY, not on every one."""
    seeds = iter(range(windows.TRIM_EVERY))
    monkeypatch.setattr(windows, "_trim_seed", lambda: next(seeds))
    agent = approved_agent(people, "trimmed", data=LIMITED["data"], limits=[
        {"resource": "customers_db", "max_same_record": 2, "per": "1h"}],
        enforcement=LIMITED["enforcement"])
    window = f"bw:{agent.pk}:customers_db:record:r-1:3600"

    def one_read() -> None:
        body = ingest(people.admin, [{**read("trimmed"), "record": "r-1"}],
                      django_capture_on_commit_callbacks)
        assert body["accepted"] == 1

    one_read()  # seed 0 (its first use also fills the window from what is stored)
    two_hours_ago = (datetime.now(UTC) - timedelta(hours=2)).timestamp()
    redis_client.zadd(window, {f"old-{n}": two_hours_ago for n in range(5)})
    one_read()  # seed 1: not trimmed this time, and the five past the hour do not count
    assert redis_client.zcard(window) == 7
    run_ingest_worker()
    assert not Finding.objects.filter(agent=agent, behaviour=True).exists()
    one_read()  # seed 2: the third read of r-1 within the hour breaks the limit of 2
    run_ingest_worker()
    (finding,) = Finding.objects.filter(agent=agent, behaviour=True)
    assert (finding.kind, finding.actual) == ("same_record_exceeded", 3)
    for _ in range(3, windows.TRIM_EVERY):  # seeds 3..7: the window is first in its batch,
        one_read()                          # so seed 7 trims it
    assert redis_client.zcard(window) == windows.TRIM_EVERY
