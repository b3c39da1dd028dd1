"""The toxic judge on the database reads only the agents around a proposal: on random small
fleets built by the real actions (approvals record where each agent meets others, a retired
agent reaches nobody) it gives the verdicts the old whole-fleet judge gave, and judging one
proposal, or re-judging every pending one, costs the same queries for a small fleet as for a
ten times larger one."""

import random

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext

from bench.cluster import build_cluster
from bench.judge import old_judge_proposal
from registry import actions
from registry.actions.proposals import reevaluate_pending
from registry.choices import VersionState
from registry.models import Agent, DesiredStateVersion
from registry.toxic import meeting_points
from registry.toxic_fleet import (
    ToxicJudge,
    approved_specs_near,
    judge_proposal,
)
from tests.conftest import approved_agent, refund_manifest

pytestmark = pytest.mark.django_db

SERVERS = [{"name": "tools", "transport": "http", "url": "https://mcp.internal/tools",
            "tools": []},
           {"name": "shared", "transport": "http", "url": "https://mcp.internal/tools",
            "tools": []},
           {"name": "local", "transport": "stdio", "command": "run-tools --local", "tools": []}]
NAMES = ["ana", "ben", "cy", "dee", "eve", "fin"]


def old_judge(agent_name: str, spec: dict) -> list[dict]:
    """The judge as it was (bench/judge.py keeps it as its reference): every approved spec of
    the fleet, every path of both fleets."""
    return [result.to_dict() for result in old_judge_proposal(agent_name, spec)]


def random_spec(rng: random.Random) -> dict:
    """A valid spec that may read customers, mail out, call others and share servers."""
    data = [{"resource": "orders_db", "access": "read"}]
    if rng.random() < 0.5:
        data.append({"resource": "customers_db", "access": rng.choice(["read", "write"])})
    tools = ["orders.lookup", *(["email.send_external"] if rng.random() < 0.4 else [])]
    changes = {"data": data, "tools": tools,
               "delegates_to": rng.sample([*NAMES, "ghost"], rng.randint(0, 2))}
    servers = rng.sample(SERVERS, rng.randint(0, 2))
    if servers and not (servers[0]["name"] == "tools" and servers[-1]["name"] == "shared"):
        changes["mcp_servers"] = servers  # (one URL under two names: one agent may not)
    return refund_manifest(**changes).spec


@pytest.mark.parametrize("seed", [1, 2, 3])
def test_the_judge_gives_the_old_verdicts_on_a_random_fleet(people, seed):
    rng = random.Random(seed)
    for name in NAMES:
        spec = random_spec(rng)
        approved_agent(people, name, **{k: spec[k] for k in
                                        ("data", "tools", "delegates_to", "mcp_servers")
                                        if k in spec})
    retiring = rng.choice(NAMES)
    retirement = actions.propose_retirement(retiring, actor=people.alice, reason="gone")
    actions.approve_retirement(retirement.pk, actor=people.bob)
    actions.create_toxic_combination(
        actor=people.dana, name="customers-never-email", left="data:customers_db:read",
        right="tool:email.send_external", effect="deny", description="")
    actions.create_toxic_combination(
        actor=people.dana, name="no-writer-near-orders-mail", left="data:customers_db:write",
        right="tool:orders.lookup", effect="require_approvals", description="")
    shared = ToxicJudge([])  # one judge for many proposals, reading more as it needs
    judged = 0
    for _ in range(12):
        name, spec = rng.choice([*NAMES, "newcomer"]), random_spec(rng)
        expected = old_judge(name, spec)
        assert [r.to_dict() for r in judge_proposal(name, spec)] == expected
        assert [r.to_dict() for r in shared.judge(name, spec)] == expected
        judged += bool(expected)
    assert judged, "the fleet should give some proposal a path to judge"


def queries(call) -> tuple[int, object]:
    with CaptureQueriesContext(connection) as captured:
        result = call()
    return len(captured.captured_queries), result


def test_judging_a_proposal_costs_the_same_queries_beside_3_or_30_agents(people):
    """Every mailer uses the proposal's server, so all of them are read, by the same query;
    agents that share nothing with it are not read at all."""
    actions.create_toxic_combination(
        actor=people.dana, name="customers-never-email", left="data:customers_db:read",
        right="tool:email.send_external", effect="deny", description="")
    mailer = {"tools": ["orders.lookup", "email.send_external"], "mcp_servers": [SERVERS[0]]}
    for i in range(3):
        approved_agent(people, f"mailer-{i}", **mailer)
    reader = refund_manifest(data=[{"resource": "customers_db", "access": "read"}],
                             mcp_servers=[SERVERS[1]]).spec
    few, found = queries(lambda: judge_proposal("support", reader))
    assert len(found) == 3
    for i in range(3, 30):
        approved_agent(people, f"mailer-{i}", **mailer)
    build_cluster(30)  # agents that share nothing with the proposal: never read
    many, found = queries(lambda: judge_proposal("support", reader))
    assert len(found) == 30 and many == few
    assert set(approved_specs_near(meeting_points("support", reader))) == {
        f"mailer-{i}" for i in range(30)}


def pending_proposals(people, count: int, first: int = 0) -> None:
    """`count` agents (approved as build_cluster records them) each with a pending proposal
    that adds external email to its customer data: a path in one agent."""
    for agent in Agent.objects.filter(pk__in=build_cluster(count, first=first)).select_related(
            "active_version"):
        spec = {**agent.active_version.spec,
                "tools": [*agent.active_version.spec["tools"], "email.send_external"]}
        DesiredStateVersion.objects.create(
            agent=agent, base_generation=1, spec=spec, spec_sha256="x" * 64, state="pending",
            source="api", proposed_by=people.alice, metadata=agent.active_version.metadata)


def rejudged(people) -> int:
    count, _ = queries(lambda: reevaluate_pending(actor=people.dana))
    return count


def test_rejudging_3_or_30_pending_proposals_costs_the_same_queries(people):
    actions.create_toxic_combination(
        actor=people.dana, name="customers-never-email", left="data:customers_db:read",
        right="tool:email.send_external", effect="require_approvals", description="")
    pending_proposals(people, 3)
    reevaluate_pending(actor=people.dana)  # each now needs two approvals (audited)
    few = rejudged(people)
    pending_proposals(people, 27, first=3)
    reevaluate_pending(actor=people.dana)
    assert rejudged(people) == few
    pending = DesiredStateVersion.objects.filter(state=VersionState.PENDING)
    assert pending.count() == 30
    assert all(v.required_approvals == 2 and [r["guardrail"] for r in v.guardrail_results]
               == ["toxic:customers-never-email"] for v in pending)
