"""Registering agents, proposing desired states, approving and rejecting them (four-eyes)."""

from collections.abc import MutableMapping
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from django.conf import settings
from django.contrib.auth.models import User
from django.db import transaction
from django.utils import timezone

import audit
from audit.alert_kinds import AlertKind
from audit.choices import AuditAction
from audit.jsondiff import flat_changes
from config.errors import Conflict, Invalid, NotAllowed, NotFound
from config.outbound import listed
from registry import signals
from registry.actions.grants import start_grant_clocks
from registry.actions.review_clock import start_review_clock
from registry.actions.stepup import verify_step_up
from registry.actions.tokens import suspend_for_handover
from registry.choices import GuardrailOutcome, Lifecycle, Role, VersionSource, VersionState
from registry.connector_secrets import granted
from registry.desired_push import announce_desired_change
from registry.grant_clocks import start_clocks
from registry.guardrails import GuardrailResult, evaluate, selector_matches
from registry.manifest import Manifest, spec_hash
from registry.models import Agent, Approval, DesiredStateVersion, Guardrail
from registry.permission_diff import permission_diff, review_change, risk_score
from registry.principals import AgentPrincipal, acting_agent
from registry.proposal_gates import Judge, check_gates, loaded_judges
from registry.recertification import ReviewOverride, override_seconds, policy_seconds
from registry.roles import has_role
from registry.signals import announce
from registry.stepup import StepUp, proposal_reasons, required_error
from registry.toxic_fleet import ToxicJudge, judge_proposal, record_meeting_points


@dataclass
class Assessment:
    """What a proposed spec changes and what the guardrails say about it."""

    changes: list[dict[str, Any]]
    diff: list[dict[str, Any]]
    risk: int
    guardrails: list[GuardrailResult]
    required_approvals: int
    held: bool

    @property
    def denials(self) -> list[GuardrailResult]:
        return [r for r in self.guardrails if r.outcome == GuardrailOutcome.DENIED]


@dataclass
class ProposalOutcome:
    """The result of applying one manifest or proposing one spec."""

    agent: str
    action: str  # created | proposed | updated | unchanged
    version: DesiredStateVersion | None
    assessment: Assessment | None = None
    warnings: list[str] = field(default_factory=list)

    def to_dict(self, *, dry_run: bool = False) -> dict[str, Any]:
        a = self.assessment
        return {
            "agent": self.agent,
            "action": self.action,
            "proposal": None if dry_run or self.version is None else self.version.pk,
            "state": None if self.version is None else self.version.state,
            "changes": a.changes if a else [],
            "diff": a.diff if a else [],
            "risk": a.risk if a else 0,
            "guardrails": [r.to_dict() for r in a.guardrails] if a else [],
            "required_approvals": a.required_approvals if a else 0,
            "held": a.held if a else False,
        }


def _announce(event: AlertKind, version: DesiredStateVersion, agent: Agent) -> None:
    """A live alert so approvers' inbox counts and feeds update (sent after commit)."""
    announce(signals.alert_raised, event=event, payload={
        "agent": agent.name, "owner_id": agent.owner_id, "proposal": version.pk,
        "state": version.state, "risk": version.risk, "link": f"/proposals/{version.pk}/"})


def _raw_diff(before: dict | None, after: dict) -> list[dict[str, Any]]:
    return [{"pointer": c.pointer, "kind": c.kind, "before": c.before, "after": c.after}
            for c in flat_changes(before, after)]


# How bad a verdict is: the worse of the agent as it is and as it would be counts.
_VERDICT_RANK = {GuardrailOutcome.PASSED: 0, GuardrailOutcome.WARNED: 1,
                 GuardrailOutcome.REQUIRES_STEP_UP: 2, GuardrailOutcome.REQUIRES_APPROVALS: 2,
                 GuardrailOutcome.DENIED: 3,
                 GuardrailOutcome.ERROR: 4}


def _verdict(guardrail: Guardrail, spec: dict, contexts: list[dict],
             now: datetime) -> GuardrailResult | None:
    """The proposed spec judged under every metadata (as it is, as it would be) the guardrail
    selects; the worst verdict, or None when it selects neither."""
    results = [evaluate(guardrail, spec, context, now) for context in contexts
               if selector_matches(guardrail.selector, context.get("labels") or {})]
    return max(results, key=lambda r: _VERDICT_RANK[GuardrailOutcome(r.outcome)],
               default=None)


def current_metadata(agent: Agent) -> dict[str, Any] | None:
    """The agent as it is (owner, labels, description), once it has an approved version."""
    if not agent.active_version_id:
        return None
    return {"owner": agent.owner.username, "labels": agent.labels,
            "description": agent.description}


def assess(agent_name: str, active_spec: dict | None, spec: dict, metadata: dict,
           now: datetime, current: dict | None = None, *,
           guardrails: list[Guardrail] | None = None,
           toxic: ToxicJudge | None = None,
           review: ReviewOverride | None = None,
           judges: list[tuple[Judge, Any]] | None = None) -> Assessment:
    """Diff against the active spec (and `current`, the agent's metadata as it is) and
    evaluate every guardrail that selects the agent as it is or as it would be: relabelling
    an agent never takes it out of a guardrail in the same proposal. `guardrails` (the enabled
    ones, by name), `toxic` and the registered `judges` (registry/proposal_gates.py, with what
    they read) are read here unless a caller judging many passes them."""
    changes = permission_diff(active_spec, spec, metadata_before=current,
                              metadata_after=metadata if current is not None else None)
    if review is not None:  # a review date of its own is part of what is approved
        changes += review_change(policy_seconds(spec), override_seconds(review, now))
    contexts = [{**metadata, "name": agent_name}]
    if current is not None and current != {k: metadata.get(k) for k in current}:
        contexts.append({**current, "name": agent_name})
    judged, _ = start_clocks(spec, now)  # grants counted from approval: as if approved now
    if guardrails is None:
        guardrails = list(Guardrail.objects.filter(enabled=True).order_by("name"))
    results: list[Any] = [
        verdict for guardrail in guardrails
        if (verdict := _verdict(guardrail, judged, contexts, now)) is not None
    ]
    # toxic paths it would create
    results += (toxic.judge(agent_name, judged) if toxic is not None
                else judge_proposal(agent_name, judged))
    if current is not None:  # a relabel (or hand-over) that moves it across group rules
        for judge, loaded in (loaded_judges() if judges is None else judges):
            results += judge.judge(agent_name, active_spec, spec, current, metadata, loaded)
    return Assessment(
        changes=[c.to_dict() for c in changes],
        diff=_raw_diff(active_spec, spec),
        risk=risk_score(changes),
        guardrails=results,
        required_approvals=max([1, *(r.required_approvals for r in results)]),
        held=any(r.outcome == GuardrailOutcome.ERROR for r in results),
    )


def _refuse_denied(agent_name: str, assessment: Assessment) -> None:
    if assessment.denials:
        raise Invalid(
            f"{agent_name}: refused by guardrail {assessment.denials[0].guardrail}: "
            f"{assessment.denials[0].message}",
            code="guardrail_denied",
            details=[{"pointer": "/spec", "message": f"{r.guardrail}: {r.message}",
                      "guardrail": r.guardrail, **({"path": r.path} if getattr(
                          r, "path", None) else {})} for r in assessment.denials],
        )


def _metadata(manifest: Manifest) -> dict[str, Any]:
    return {"owner": manifest.owner, "labels": manifest.labels,
            "description": manifest.description}


def check_can_propose(agent: Agent, actor: Any, *, from_escalation: bool = False) -> None:
    """Refuse (403) a principal who may not propose for `agent`; views call it before they
    read the proposed spec, so a stranger learns nothing from validation."""
    if from_escalation and has_role(actor, Role.APPROVER):
        return  # an approver accepting observed drift proposes it for someone else to approve
    agent_principal = acting_agent(actor)
    if agent_principal is not None:
        if agent_principal.pk != agent.pk:
            raise NotAllowed("An agent's token may only propose for its own agent.")
        return
    if not has_role(actor, Role.OWNER):
        raise NotAllowed("Only owners propose desired states.")
    if agent.owner_id != actor.pk and not has_role(actor, Role.ADMIN):
        raise NotAllowed(f"{agent.name} is owned by {agent.owner.username}; owners act on "
                         "their own agents only.")


def _proposer_filter(actor: Any) -> dict[str, Any]:
    if isinstance(actor, AgentPrincipal):
        return {"source": VersionSource.AGENT}
    return {"proposed_by": actor}


def _provenance(actor: Any, origin: str) -> tuple[User | None, str]:
    """Who holds the token behind an agent-made proposal, and how the proposal arrived."""
    if isinstance(actor, AgentPrincipal) and actor.token is not None:
        holder = actor.token.user
        return holder, f"agent token {actor.token.key_prefix}… held by {holder.username}"
    return None, origin


def _reason(origin: str, comment: str) -> str:
    return "; ".join(part for part in (origin, comment) if part)


@transaction.atomic
def propose(agent: Agent, spec: dict, metadata: dict, *, actor: Any, source: str,
            base_generation: int | None = None, comment: str = "",
            from_escalation: bool = False, origin: str = "", recertify: bool = False,
            review: ReviewOverride | None = None) -> ProposalOutcome:
    """Propose a canonical spec for an agent; re-editing the proposer's pending proposal resets
    its approvals. Unchanged specs change nothing (except a recertification, which proposes
    the active spec again on purpose); a guardrail denial refuses with 422."""
    agent = (Agent.objects.select_for_update(no_key=True, of=("self",))
             .select_related("owner", "active_version").get(pk=agent.pk))
    check_can_propose(agent, actor, from_escalation=from_escalation)
    if agent.lifecycle == Lifecycle.RETIRED:
        raise Conflict(f"{agent.name} is retired; its history stays, it takes no new version.",
                       code="retired")
    if isinstance(actor, AgentPrincipal):
        source = VersionSource.AGENT  # always marked agent-made, always needs a human
        if review is not None:
            raise NotAllowed("An agent's token cannot set its own review date; its owner "
                             "proposes one.", code="review_date_not_allowed")
    if base_generation is not None and base_generation != agent.generation:
        raise Conflict(f"{agent.name} is at generation {agent.generation}, not "
                       f"{base_generation}; reload and propose again", code="stale_generation")
    check_gates(agent, spec, metadata, source=source)
    owner = agent.owner
    if metadata.get("owner", agent.owner.username) != agent.owner.username:
        owner = _owner_named(agent.name, metadata["owner"])  # a hand-over goes to a real owner
    _check_connector(agent.name, spec.get("connector"), owner)
    digest = spec_hash(spec)
    active = agent.active_version
    if not recertify and active and active.spec_sha256 == digest and (
            active.metadata == metadata):
        return ProposalOutcome(agent.name, "unchanged", active)
    mine = None if recertify else (
        agent.versions.select_for_update(no_key=True).filter(state=VersionState.PENDING,
                                                  recertifies=False, **_proposer_filter(actor))
        .order_by("-created_at").first())
    if mine and mine.spec_sha256 == digest and mine.metadata == metadata:
        return ProposalOutcome(agent.name, "unchanged", mine)
    now = timezone.now()
    assessment = assess(agent.name, active.spec if active else None, spec, metadata, now,
                        current_metadata(agent), review=review)
    _refuse_denied(agent.name, assessment)
    token_holder, origin = _provenance(actor, origin)
    fields = {
        "token_holder": token_holder, "origin": origin[:200],
        "spec": spec, "spec_sha256": digest, "metadata": metadata,
        "base_generation": agent.generation, "guardrail_results": [
            r.to_dict() for r in assessment.guardrails],
        "permission_changes": assessment.changes, "risk": assessment.risk,
        "required_approvals": assessment.required_approvals, "held": assessment.held,
        "updated_at": now, "recertifies": recertify,
        "review_after_seconds": review.after_seconds if review else None,
        "review_by": review.by if review else None,
    }
    if mine:
        before = mine.spec
        for name, value in fields.items():
            setattr(mine, name, value)
        mine.revision += 1
        mine.comment = comment or mine.comment
        mine.save()
        audit.record(actor=actor, action=AuditAction.PROPOSAL_UPDATED,
                     target=f"proposal:{mine.pk}", agent=agent.name, before=before, after=spec,
                     reason=_reason(origin, _with_review(
                         f"revision {mine.revision}; earlier approvals no longer count",
                         assessment)))
        _announce(AlertKind.PROPOSAL_PENDING, mine, agent)
        return ProposalOutcome(agent.name, "updated", mine, assessment)
    version = DesiredStateVersion.objects.create(
        agent=agent, source=source, comment=comment, created_at=now,
        proposed_by=None if isinstance(actor, AgentPrincipal) else actor, **fields)
    audit.record(actor=actor, action=AuditAction.PROPOSAL_CREATED,
                 target=f"proposal:{version.pk}", agent=agent.name,
                 before=active.spec if active else None, after=spec,
                 reason=_reason(origin, _with_review(comment, assessment)))
    _announce(AlertKind.PROPOSAL_PENDING, version, agent)
    return ProposalOutcome(agent.name, "proposed", version, assessment)


def _with_review(comment: str, assessment: Assessment) -> str:
    """The comment, and the proposal's own review date when it sets one (the trail shows it)."""
    review = [c["text"] for c in assessment.changes if c["area"] == "review"]
    return "; ".join(part for part in (comment, *review) if part)


def _owner_named(agent_name: str, username: str) -> User:
    """The active person with the owner role that metadata.owner names (422 otherwise)."""
    owner = User.objects.filter(username=username, is_active=True).first()
    if owner is None or not has_role(owner, Role.OWNER):
        raise Invalid(f"{agent_name}: {username!r} is not an owner", details=[
            {"pointer": "/metadata/owner", "message": "expected the username of an owner"}])
    return owner


def _check_connector(agent_name: str, connector: dict | None, owner: User) -> None:
    """An http connector goes to an allowed platform host with a secret granted to the agent's
    (new) owner: a grant never moves with the agent. One answer whether or not the secret exists,
    so the manifest cannot probe the control plane's environment."""
    if not connector or connector.get("type") != "http":
        return
    details = []
    if not listed(connector["url"], settings.CONNECTOR_ALLOWED_HOSTS):
        details.append({"pointer": "/spec/connector/url", "message": (
            "expected a platform whose host and port CONNECTOR_ALLOWED_HOSTS lists")})
    if not granted(owner, connector["secret_env"]):
        details.append({"pointer": "/spec/connector/secret_env", "message": (
            f"expected a connector secret an admin granted to {owner.username}")})
    if details:
        raise Invalid(f"{agent_name}: {details[0]['message']}", code="invalid_connector",
                      details=details)


def check_can_apply(documents: list[Any], *, actor: Any) -> None:
    """Before an upload is validated, refuse (403) one whose documents name an agent the actor
    may not propose for, or register an agent for someone else: a stranger's invalid manifest
    for alice's agent is refused, not told what is wrong with it."""
    for data in documents:
        metadata = data.get("metadata") if isinstance(data, dict) else None
        name = metadata.get("name") if isinstance(metadata, dict) else None
        if not isinstance(name, str):
            continue
        agent = Agent.objects.select_related("owner").filter(name=name).first()
        if agent is not None:
            check_can_propose(agent, actor)
            continue
        owner = metadata.get("owner")
        if isinstance(owner, str) and owner != getattr(actor, "username", None) and not (
                has_role(actor, Role.ADMIN)):
            raise NotAllowed(f"{name}: owners register agents they own; metadata.owner "
                             f"is {owner!r}", details=[
                                 {"pointer": "/metadata/owner", "message": "must be you"}])


def _register(manifest: Manifest, *, actor: Any, source: str, origin: str,
              comment: str = "") -> ProposalOutcome:
    if isinstance(actor, AgentPrincipal) or not has_role(actor, Role.OWNER):
        raise NotAllowed("Only owners register agents.")
    if manifest.owner != actor.username and not has_role(actor, Role.ADMIN):
        raise NotAllowed(f"{manifest.name}: owners register agents they own; metadata.owner "
                         f"is {manifest.owner!r}", details=[
                             {"pointer": "/metadata/owner", "message": "must be you"}])
    owner = _owner_named(manifest.name, manifest.owner)
    agent = Agent.objects.create(
        name=manifest.name, owner=owner, labels=manifest.labels,
        description=manifest.description, framework=manifest.spec["framework"],
        connector=manifest.spec["connector"])
    audit.record(actor=actor, action=AuditAction.AGENT_REGISTERED, target=f"agent:{agent.name}",
                 agent=agent.name, after={"owner": owner.username, "labels": agent.labels},
                 reason=origin)
    # a shadow agent's earlier events count from now (runtime adopts them)
    announce(signals.agent_registered, agent=agent, actor=actor)
    outcome = propose(agent, manifest.spec, _metadata(manifest), actor=actor, source=source,
                      origin=origin, comment=comment)
    outcome.action = "created"
    return outcome


@transaction.atomic
def apply_manifests(manifests: list[Manifest], *, actor: Any, source: str,
                    dry_run: bool = False, origin: str = "",
                    comment: str = "") -> list[ProposalOutcome]:
    """Register new agents and propose new versions for known ones, all or nothing; `comment`
    is the proposer's reason, the first entry of each proposal's review thread.

    A dry run does exactly the same work and then rolls it back, so it reports exactly what a
    real run would do (including guardrail refusals) and changes nothing.
    """
    outcomes = []
    for manifest in manifests:
        agent = Agent.objects.filter(name=manifest.name).first()
        if agent is None:
            outcomes.append(_register(manifest, actor=actor, source=source, origin=origin,
                                      comment=comment))
        else:
            outcomes.append(propose(agent, manifest.spec, _metadata(manifest), actor=actor,
                                    source=source, origin=origin, comment=comment))
    if dry_run:
        transaction.set_rollback(True)
    return outcomes


def _locked_version(version_id: int) -> tuple[DesiredStateVersion, Agent]:
    version = DesiredStateVersion.objects.filter(pk=version_id).only("agent_id").first()
    if version is None:
        raise NotFound(f"No proposal {version_id}.")
    agent = (Agent.objects.select_for_update(no_key=True, of=("self",)).select_related("owner")
             .get(pk=version.agent_id))
    version = DesiredStateVersion.objects.select_for_update(no_key=True).get(pk=version_id)
    return version, agent


def _check_pending(version: DesiredStateVersion) -> None:
    if version.state != VersionState.PENDING:
        raise Conflict(f"Proposal {version.pk} is {version.state}, not pending.",
                       code="not_pending")


def _check_four_eyes(version: DesiredStateVersion, agent: Agent, actor: Any) -> None:
    if isinstance(actor, AgentPrincipal) or not has_role(actor, Role.APPROVER):
        raise NotAllowed("Only approvers decide on proposals.")
    if actor.pk in (version.proposed_by_id, version.token_holder_id):
        raise NotAllowed("Four eyes: you cannot approve a proposal you made, yourself or "
                         "through an agent token you hold.", code="four_eyes")
    if agent.owner_id == actor.pk or version.metadata.get("owner") == actor.username:
        raise NotAllowed("Four eyes: you cannot approve a proposal for an agent you own "
                         "or that would hand it to you.", code="four_eyes")


def approve_proposal(version_id: int, *, actor: Any, comment: str = "",
                     expected_generation: int | None = None, otp: str = "",
                     session: MutableMapping | None = None) -> DesiredStateVersion:
    """Add one approver's approval (after a fresh second factor when it needs step-up); with
    enough distinct approvals, activate the version."""
    step_up = None
    peek = DesiredStateVersion.objects.filter(pk=version_id).values(
        "state", "held", "risk", "guardrail_results").first()
    if peek and peek["state"] == VersionState.PENDING and not peek["held"]:
        reasons = proposal_reasons(peek["risk"], peek["guardrail_results"])
        if reasons:
            check_can_decide(version_id, actor=actor)  # a stranger is refused, not asked a code
            step_up = verify_step_up(actor=actor, code=otp, reasons=reasons, session=session)
    return _approve(version_id, actor=actor, comment=comment,
                    expected_generation=expected_generation, step_up=step_up)


@transaction.atomic
def _approve(version_id: int, *, actor: Any, comment: str, expected_generation: int | None,
             step_up: StepUp | None) -> DesiredStateVersion:
    version, agent = _locked_version(version_id)
    _check_four_eyes(version, agent, actor)
    _check_pending(version)
    reasons = proposal_reasons(version.risk, version.guardrail_results)
    if reasons and step_up is None:  # marked for step-up since it was first read
        raise required_error(reasons, actor, problem="approve again with a current code.")
    if version.held:
        raise Conflict("A guardrail could not be evaluated for this proposal; it is held until "
                       "the guardrail is fixed.", code="held")
    if expected_generation is not None and expected_generation != agent.generation:
        raise Conflict(f"{agent.name} is at generation {agent.generation}, not "
                       f"{expected_generation}.", code="stale_generation")
    if version.base_generation != agent.generation:
        raise Conflict(f"{agent.name} moved to generation {agent.generation} after this was "
                       "proposed; it must be proposed again.", code="stale_generation")
    if version.approvals.filter(approver=actor, revision=version.revision).exists():
        raise Conflict("You already approved this revision.", code="already_approved")
    Approval.objects.create(version=version, approver=actor, revision=version.revision,
                            comment=comment)
    count = version.approvals.filter(revision=version.revision).count()
    after = {"approvals": count, "required": version.required_approvals,
             "revision": version.revision}
    if step_up is not None:
        after["step_up"] = {**step_up.to_dict(), "reasons": reasons}
    audit.record(actor=actor, action=AuditAction.PROPOSAL_APPROVED,
                 target=f"proposal:{version.pk}", agent=agent.name, reason=comment,
                 after=after)
    if count >= version.required_approvals and _toxic_now_allows(version, agent, actor, count):
        _activate(version, agent, actor)
        _announce(AlertKind.PROPOSAL_DECIDED, version, agent)
    return version


def _toxic_now_allows(version: DesiredStateVersion, agent: Agent, actor: Any,
                      count: int) -> bool:
    """The fleet may have moved since the proposal was judged. A toxic path it would create
    today under a denying rule refuses the approval that would activate it (422); one under a
    rule asking for more approvals than it has raises its required approvals (audited, kept
    pending, this approval counts)."""
    results = judge_proposal(agent.name, version.spec)
    denials = [r for r in results if r.outcome == GuardrailOutcome.DENIED]
    if denials:
        raise Invalid(f"{agent.name}: refused by {denials[0].guardrail}: {denials[0].message}",
                      code="guardrail_denied", details=[
                          {"pointer": "/spec", "message": f"{r.guardrail}: {r.message}",
                           "guardrail": r.guardrail, "path": r.path} for r in denials])
    needed = max([version.required_approvals, *(r.required_approvals for r in results)])
    if needed <= count:
        return True
    before = {"guardrails": version.guardrail_results,
              "required_approvals": version.required_approvals}
    known = {r.get("guardrail") for r in version.guardrail_results}
    version.guardrail_results = [*version.guardrail_results,
                                 *(r.to_dict() for r in results if r.guardrail not in known)]
    version.required_approvals = needed
    version.save(update_fields=["guardrail_results", "required_approvals"])
    audit.record(actor=actor, action=AuditAction.PROPOSAL_REEVALUATED,
                 target=f"proposal:{version.pk}", agent=agent.name, before=before,
                 after={"guardrails": version.guardrail_results, "required_approvals": needed},
                 reason="a toxic path it would create now needs more approvals")
    return False


def _activate(version: DesiredStateVersion, agent: Agent, actor: Any) -> None:
    now = timezone.now()
    start_grant_clocks(version, actor=actor, now=now)
    before = agent.active_version.spec if agent.active_version_id else None
    version.state = VersionState.APPROVED
    version.generation = agent.generation + 1
    version.decided_by = actor
    version.decided_at = now
    version.save(update_fields=["state", "generation", "decided_by", "decided_at"])
    owner = User.objects.filter(username=version.metadata.get("owner")).first() or agent.owner
    agent.generation = version.generation
    agent.active_version = version
    announce_desired_change(agent.name)
    old_owner, agent.owner = agent.owner, owner
    agent.labels = version.metadata.get("labels", {})
    agent.description = version.metadata.get("description", "")
    agent.framework = version.spec["framework"]
    agent.connector = version.spec["connector"]
    agent.updated_at = now
    agent.save()
    record_meeting_points(agent, version.spec)  # where proposals' judges find it from now on
    audit.record(actor=actor, action=AuditAction.VERSION_ACTIVATED, target=f"agent:{agent.name}",
                 agent=agent.name, before=before, after=version.spec,
                 reason=f"generation {version.generation} from proposal {version.pk}")
    if old_owner.pk != owner.pk:
        audit.record(actor=actor, action=AuditAction.AGENT_HANDED_OVER,
                     target=f"agent:{agent.name}", agent=agent.name,
                     before={"owner": old_owner.username}, after={"owner": owner.username},
                     reason=f"proposal {version.pk}")
        suspend_for_handover(agent, old_owner, actor=actor)
        supersede_retirements(agent, old_owner, actor=actor, now=now)
    older = agent.versions.select_for_update(no_key=True).filter(
        state=VersionState.PENDING, created_at__lte=version.created_at).exclude(pk=version.pk)
    for stale in older:
        stale.state = VersionState.SUPERSEDED
        stale.decided_at = now
        stale.save(update_fields=["state", "decided_at"])
        audit.record(actor=actor, action=AuditAction.PROPOSAL_SUPERSEDED,
                     target=f"proposal:{stale.pk}", agent=agent.name,
                     reason=f"superseded by proposal {version.pk} (generation "
                            f"{version.generation})")
    start_review_clock(version, agent, actor=actor, now=now)
    # its pass asks its controller for the one at the soonest grant's end
    announce(signals.reconcile_requested, agent_id=agent.pk, trigger="approved")
    announce(signals.fleet_changed)  # the fleet view judges the approved specs


def supersede_retirements(agent: Agent, old_owner: User, *, actor: Any,
                          now: datetime) -> list[int]:
    """A hand-over ends the old owner's say: a retirement she proposed and nobody decided yet
    would otherwise retire the new owner's agent. Each is superseded, audited."""
    pending = list(agent.retirements.select_for_update(no_key=True).filter(
        state=VersionState.PENDING, proposed_by=old_owner))
    for retirement in pending:
        retirement.state, retirement.decided_at = VersionState.SUPERSEDED, now
        retirement.save(update_fields=["state", "decided_at"])
        audit.record(actor=actor, action=AuditAction.RETIREMENT_SUPERSEDED,
                     target=f"retirement:{retirement.pk}", agent=agent.name,
                     after=retirement.to_dict(),
                     reason=f"{agent.name} was handed over from {old_owner.username} to "
                            f"{agent.owner.username}; the old owner's retirement no longer "
                            "stands")
    return [r.pk for r in pending]


def check_can_decide(version_id: int, *, actor: Any) -> None:
    """Refuse a principal who may not approve or reject this proposal (403), or name a missing
    one (404), before the decision's body is read."""
    version = (DesiredStateVersion.objects.select_related("agent").filter(pk=version_id)
               .first())
    if version is None:
        if isinstance(actor, AgentPrincipal) or not has_role(actor, Role.APPROVER):
            raise NotAllowed("Only approvers decide on proposals.")
        raise NotFound(f"No proposal {version_id}.")
    _check_four_eyes(version, version.agent, actor)


@transaction.atomic
def reject_proposal(version_id: int, *, actor: Any, comment: str) -> DesiredStateVersion:
    """Refuse a pending proposal, with the reason the proposer will read."""
    version, agent = _locked_version(version_id)
    _check_four_eyes(version, agent, actor)
    if not comment.strip():
        raise Invalid("A rejection needs a comment.", details=[
            {"pointer": "/comment", "message": "required"}])
    _check_pending(version)
    version.state = VersionState.REJECTED
    version.decided_by = actor
    version.decided_at = timezone.now()
    version.decision_comment = comment
    version.save(update_fields=["state", "decided_by", "decided_at", "decision_comment"])
    audit.record(actor=actor, action=AuditAction.PROPOSAL_REJECTED,
                 target=f"proposal:{version.pk}", agent=agent.name, reason=comment)
    _announce(AlertKind.PROPOSAL_DECIDED, version, agent)
    return version


@transaction.atomic
def withdraw_proposal(version_id: int, *, actor: Any) -> DesiredStateVersion:
    """The proposer takes back a pending proposal."""
    version, agent = _locked_version(version_id)
    mine = (version.source == VersionSource.AGENT and acting_agent(actor) == agent) or (
        version.proposed_by_id is not None and version.proposed_by_id == getattr(actor, "pk", -1))
    if not mine:
        raise NotAllowed("Only the proposer may withdraw a proposal.")
    _check_pending(version)
    version.state = VersionState.WITHDRAWN
    version.decided_at = timezone.now()
    version.save(update_fields=["state", "decided_at"])
    audit.record(actor=actor, action=AuditAction.PROPOSAL_WITHDRAWN,
                 target=f"proposal:{version.pk}", agent=agent.name)
    _announce(AlertKind.PROPOSAL_DECIDED, version, agent)
    return version


def reevaluate_pending(*, actor: Any) -> int:
    """Re-run the guardrails over every pending proposal (after a guardrail changed); a proposal
    a guardrail now denies is rejected. Call inside the guardrail change's transaction."""
    changed = 0
    lowered: list[int] = []
    now = timezone.now()
    pending = list(DesiredStateVersion.objects.select_for_update(no_key=True, of=("self",))
                   .filter(state=VersionState.PENDING)
                   .select_related("agent__active_version", "agent__owner"))
    # Read once for all of them: the guardrails, the toxic rules and the approved specs
    # around every pending proposal (not the fleet once per proposal).
    guardrails = list(Guardrail.objects.filter(enabled=True).order_by("name"))
    toxic = ToxicJudge((version.agent.name, version.spec) for version in pending)
    judges = loaded_judges()
    for version in pending:
        agent = version.agent
        active = agent.active_version.spec if agent.active_version_id else None
        assessment = assess(agent.name, active, version.spec, version.metadata, now,
                            current_metadata(agent), guardrails=guardrails, toxic=toxic,
                            judges=judges)
        results = [r.to_dict() for r in assessment.guardrails]
        if assessment.denials:
            version.state = VersionState.REJECTED
            version.decided_at = now
            version.decision_comment = "; ".join(
                f"refused by guardrail {r.guardrail}: {r.message}" for r in assessment.denials)
            version.guardrail_results = results
            version.save(update_fields=["state", "decided_at", "decision_comment",
                                        "guardrail_results"])
            audit.record(actor=actor, action=AuditAction.PROPOSAL_REJECTED,
                         target=f"proposal:{version.pk}", agent=agent.name,
                         reason=version.decision_comment)
            changed += 1
            continue
        before = {"guardrails": version.guardrail_results,
                  "required_approvals": version.required_approvals, "held": version.held}
        after = {"guardrails": results, "required_approvals": assessment.required_approvals,
                 "held": assessment.held}
        if before != after:
            version.guardrail_results = results
            version.required_approvals = assessment.required_approvals
            version.held = assessment.held
            version.save(update_fields=["guardrail_results", "required_approvals", "held"])
            audit.record(actor=actor, action=AuditAction.PROPOSAL_REEVALUATED,
                         target=f"proposal:{version.pk}", agent=agent.name, before=before,
                         after=after)
            changed += 1
            if assessment.required_approvals < before["required_approvals"]:
                lowered.append(version.pk)
    if lowered:  # in their own transactions, locking agent then proposal as approvals do
        transaction.on_commit(lambda: [activate_if_approved(pk) for pk in lowered])
    return changed


@transaction.atomic
def activate_if_approved(version_id: int) -> DesiredStateVersion | None:
    """A proposal whose required approvals were lowered by a guardrail change, and that already
    holds enough for its current revision, is activated as if its last approval had just been
    given (otherwise nobody could complete it: its approvers cannot approve twice)."""
    version, agent = _locked_version(version_id)
    if version.state != VersionState.PENDING or version.held or (
            version.base_generation != agent.generation):
        return None
    if proposal_reasons(version.risk, version.guardrail_results):
        return None  # no one gave a fresh second factor just now: an approver must step up
    approvals = list(version.approvals.filter(revision=version.revision)
                     .select_related("approver").order_by("pk"))
    if not approvals or len(approvals) < version.required_approvals:
        return None
    _activate(version, agent, approvals[-1].approver)
    _announce(AlertKind.PROPOSAL_DECIDED, version, agent)
    return version
