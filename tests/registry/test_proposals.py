"""Proposals and approvals through the actions: four-eyes, re-edits, supersession, generations,
agent-made proposals, and the audit row each step leaves."""

import pytest
from django.db import transaction

from audit.models import AuditEntry
from config.errors import Conflict, Invalid, NotAllowed
from reconciliation.controller.work_queue import QUEUED_KEY
from registry import actions
from registry.choices import VersionSource
from registry.models import Agent, DesiredStateVersion
from registry.principals import AgentPrincipal
from tests.conftest import refund_manifest

pytestmark = pytest.mark.django_db


def audit_actions(**filters) -> list[str]:
    return list(AuditEntry.objects.filter(**filters).order_by("seq")
                .values_list("action", flat=True))


def state_snapshot() -> tuple:
    return (list(Agent.objects.values_list("name", "generation", "active_version_id")),
            list(DesiredStateVersion.objects.values_list("id", "state", "revision")),
            AuditEntry.objects.count())


def test_registering_creates_the_agent_and_a_pending_first_version(people):
    (outcome,) = actions.apply_manifests([refund_manifest()], actor=people.alice,
                                         source=VersionSource.YAML)
    assert outcome.action == "created"
    agent = Agent.objects.get(name="refund-agent")
    assert (agent.owner, agent.generation, agent.active_version) == (people.alice, 0, None)
    version = outcome.version
    assert (version.state, version.base_generation, version.source) == ("pending", 0, "yaml")
    assert "+ tool payments.refund" in [c["text"] for c in outcome.assessment.changes]
    assert audit_actions(agent="refund-agent") == ["agent.registered", "proposal.created"]


def test_approving_activates_generation_one_and_queues_a_reconcile(people, redis_client,
                                                                    django_capture_on_commit_callbacks):
    (outcome,) = actions.apply_manifests([refund_manifest()], actor=people.alice,
                                         source=VersionSource.YAML)
    with django_capture_on_commit_callbacks(execute=True):
        actions.approve_proposal(outcome.version.pk, actor=people.bob, comment="looks right")
    agent = Agent.objects.get(name="refund-agent")
    assert agent.generation == 1 and agent.active_version_id == outcome.version.pk
    version = DesiredStateVersion.objects.get(pk=outcome.version.pk)
    assert (version.state, version.generation, version.decided_by) == ("approved", 1, people.bob)
    assert audit_actions(agent="refund-agent")[-3:] == ["proposal.approved", "version.activated",
                                                        "agent.review_date_set"]
    activated = AuditEntry.objects.filter(action="version.activated").get()
    assert activated.before is None and activated.after == version.spec
    assert redis_client.get(QUEUED_KEY.format(agent_id=agent.pk)).split()[0] == b"approved"


@pytest.mark.parametrize("approver, code", [("alice", "four_eyes"), ("dana", "forbidden")])
def test_owners_cannot_approve_their_own_agents_and_non_approvers_cannot_approve(
        people, approver, code):
    actions.grant_role(people.alice, "approver", actor="system:test")  # alice is both
    (outcome,) = actions.apply_manifests([refund_manifest()], actor=people.alice,
                                         source=VersionSource.YAML)
    before = state_snapshot()
    with pytest.raises(NotAllowed) as refused:
        actions.approve_proposal(outcome.version.pk, actor=getattr(people, approver))
    assert refused.value.code == code
    assert state_snapshot() == before


def test_an_approver_cannot_approve_a_proposal_they_made(people, refund_agent):
    actions.grant_role(people.bob, "owner", actor="system:test")
    outcome = actions.propose(refund_agent, refund_manifest(model="gpt-5").spec,
                              refund_agent.active_version.metadata, actor=people.admin,
                              source=VersionSource.API)
    before = state_snapshot()
    with pytest.raises(NotAllowed, match="you made"):
        actions.approve_proposal(outcome.version.pk, actor=people.admin)
    assert state_snapshot() == before


def test_owners_propose_only_for_their_own_agents(people, refund_agent):
    erin = actions.create_person("erin", actor="system:test")[0]
    actions.grant_role(erin, "owner", actor="system:test")
    before = state_snapshot()
    with pytest.raises(NotAllowed, match="own agents only"):
        actions.propose(refund_agent, refund_manifest(model="x").spec,
                        refund_agent.active_version.metadata, actor=erin,
                        source=VersionSource.API)
    assert state_snapshot() == before


@pytest.mark.parametrize("new_owner", ["nobody", "dana"])  # unknown; a person, not an owner
def test_a_hand_over_must_name_a_real_owner_and_changes_nothing_otherwise(people, refund_agent,
                                                                           new_owner):
    before = state_snapshot()
    metadata = {**refund_agent.active_version.metadata, "owner": new_owner}
    with pytest.raises(Invalid, match="is not an owner") as refused:
        actions.propose(refund_agent, refund_agent.active_version.spec, metadata,
                        actor=people.alice, source=VersionSource.API)
    assert refused.value.details[0]["pointer"] == "/metadata/owner"
    assert state_snapshot() == before


def test_an_approver_cannot_approve_a_hand_over_to_themselves(people, refund_agent):
    actions.grant_role(people.bob, "owner", actor="system:test")
    metadata = {**refund_agent.active_version.metadata, "owner": "bob"}
    version = actions.propose(refund_agent, refund_agent.active_version.spec, metadata,
                              actor=people.alice, source=VersionSource.API).version
    with pytest.raises(NotAllowed, match="hand it to you"):
        actions.approve_proposal(version.pk, actor=people.bob)
    actions.approve_proposal(version.pk, actor=people.carol)
    assert Agent.objects.get(pk=refund_agent.pk).owner == people.bob


def test_re_editing_a_pending_proposal_resets_its_approvals(people, refund_agent):
    actions.create_guardrail(actor=people.dana, name="model-changes-need-two",
                             expression='spec.model == "gpt-4.1"', effect="require_approvals",
                             required_approvals=2, message="Model changes need two approvers",
                             selector={"team": "payments"})
    metadata = refund_agent.active_version.metadata
    first = actions.propose(refund_agent, refund_manifest(model="gpt-5").spec, metadata,
                            actor=people.alice, source=VersionSource.API).version
    assert first.required_approvals == 2
    actions.approve_proposal(first.pk, actor=people.bob)
    edited = actions.propose(refund_agent, refund_manifest(model="gpt-5.1").spec, metadata,
                             actor=people.alice, source=VersionSource.API)
    assert edited.action == "updated" and edited.version.pk == first.pk
    version = DesiredStateVersion.objects.get(pk=first.pk)
    assert version.revision == 2 and version.spec["model"] == "gpt-5.1"
    updated = AuditEntry.objects.filter(action="proposal.updated").get()
    assert (updated.actor, updated.before["model"], updated.after["model"]) == (
        "alice", "gpt-5", "gpt-5.1")
    # bob's approval was for revision 1: carol's alone is not enough; bob must approve again.
    actions.approve_proposal(first.pk, actor=people.carol)
    assert DesiredStateVersion.objects.get(pk=first.pk).state == "pending"
    actions.approve_proposal(first.pk, actor=people.bob)
    assert Agent.objects.get(pk=refund_agent.pk).generation == 2


def test_proposing_the_active_spec_again_changes_nothing(people, refund_agent):
    before = state_snapshot()
    outcome = actions.propose(refund_agent, refund_agent.active_version.spec,
                              refund_agent.active_version.metadata, actor=people.alice,
                              source=VersionSource.API)
    assert outcome.action == "unchanged"
    assert state_snapshot() == before


def test_approving_supersedes_older_pending_proposals_and_stale_newer_ones_get_409(
        people, refund_agent):
    metadata = refund_agent.active_version.metadata
    older = actions.propose(refund_agent, refund_manifest(model="a").spec, metadata,
                            actor=people.alice, source=VersionSource.API).version
    agent_made = actions.propose(refund_agent, refund_manifest(model="b").spec, metadata,
                                 actor=AgentPrincipal(refund_agent, None),
                                 source=VersionSource.API).version
    newer = actions.propose(refund_agent, refund_manifest(model="c").spec, metadata,
                            actor=people.admin, source=VersionSource.API).version
    actions.approve_proposal(agent_made.pk, actor=people.bob)
    states = dict(DesiredStateVersion.objects.filter(
        pk__in=[older.pk, agent_made.pk, newer.pk]).values_list("pk", "state"))
    assert states == {older.pk: "superseded", agent_made.pk: "approved", newer.pk: "pending"}
    (superseded,) = AuditEntry.objects.filter(action="proposal.superseded")
    assert superseded.target == f"proposal:{older.pk}" and superseded.agent == "refund-agent"
    before = state_snapshot()
    with pytest.raises(Conflict) as stale:
        actions.approve_proposal(newer.pk, actor=people.carol)
    assert stale.value.code == "stale_generation"
    assert state_snapshot() == before


def test_agent_made_proposals_are_marked_and_need_a_human(people, refund_agent):
    outcome = actions.propose(refund_agent, refund_manifest(version="2.4.0").spec,
                              refund_agent.active_version.metadata,
                              actor=AgentPrincipal(refund_agent, None), source=VersionSource.API)
    version = outcome.version
    assert version.source == "agent" and version.is_agent_made and version.proposed_by is None
    entry = AuditEntry.objects.filter(action="proposal.created").last()
    assert entry.actor == "agent:refund-agent"
    with pytest.raises(NotAllowed):
        actions.approve_proposal(version.pk, actor=AgentPrincipal(refund_agent, None))
    actions.approve_proposal(version.pk, actor=people.carol)
    assert Agent.objects.get(pk=refund_agent.pk).generation == 2


def test_an_agent_cannot_propose_for_another_agent(people, refund_agent):
    other = refund_manifest()
    object.__setattr__(other, "name", "other-agent")
    actions.apply_manifests([other], actor=people.alice, source=VersionSource.API)
    other_agent = Agent.objects.get(name="other-agent")
    with pytest.raises(NotAllowed):
        actions.propose(refund_agent, refund_agent.active_version.spec, {},
                        actor=AgentPrincipal(other_agent, None), source=VersionSource.API)


def test_reject_needs_a_comment_and_withdraw_is_the_proposers(people, refund_agent):
    metadata = refund_agent.active_version.metadata
    version = actions.propose(refund_agent, refund_manifest(model="z").spec, metadata,
                              actor=people.alice, source=VersionSource.API).version
    with pytest.raises(Invalid):
        actions.reject_proposal(version.pk, actor=people.bob, comment="  ")
    with pytest.raises(NotAllowed):
        actions.withdraw_proposal(version.pk, actor=people.bob)
    actions.reject_proposal(version.pk, actor=people.bob, comment="model not approved")
    rejected = DesiredStateVersion.objects.get(pk=version.pk)
    assert (rejected.state, rejected.decision_comment) == ("rejected", "model not approved")
    refusal = AuditEntry.objects.filter(action="proposal.rejected").get()
    assert (refusal.actor, refusal.reason) == ("bob", "model not approved")
    with pytest.raises(Conflict):
        actions.withdraw_proposal(version.pk, actor=people.alice)
    again = actions.propose(refund_agent, refund_manifest(model="y").spec, metadata,
                            actor=people.alice, source=VersionSource.API).version
    actions.withdraw_proposal(again.pk, actor=people.alice)
    assert DesiredStateVersion.objects.get(pk=again.pk).state == "withdrawn"
    assert audit_actions(agent="refund-agent")[-2:] == ["proposal.created", "proposal.withdrawn"]


def test_a_dry_run_reports_what_would_happen_and_changes_nothing(people, refund_agent):
    before = state_snapshot()
    with transaction.atomic():
        (outcome,) = actions.apply_manifests([refund_manifest(tools=["crm.search"])],
                                             actor=people.alice, source=VersionSource.API,
                                             dry_run=True)
    assert outcome.action == "proposed"
    assert {c["text"] for c in outcome.assessment.changes} >= {"+ tool crm.search"}
    assert state_snapshot() == before


def test_expected_generation_must_match(people, refund_agent):
    version = actions.propose(refund_agent, refund_manifest(model="q").spec,
                              refund_agent.active_version.metadata, actor=people.alice,
                              source=VersionSource.API).version
    with pytest.raises(Conflict):
        actions.approve_proposal(version.pk, actor=people.bob, expected_generation=0)
    actions.approve_proposal(version.pk, actor=people.bob, expected_generation=1)
    assert version.agent.versions.get(pk=version.pk).generation == 2
