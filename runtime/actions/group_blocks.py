"""A group rule with effect `block`: when its window goes over the limit, each agent involved is
blocked as a per-agent budget's `block` enforcement blocks it (suspended through its connector,
its finding `blocked`; recorded only under the cluster's shadow mode or its tripped breaker:
an agent's own shadow mode or its owner's or team's breaker does not shield it from a block
that reaches others), and the agents of the group whose owners filled the window have their
decisions denied while it is over (every agent of the group when compliance chose the rule to
reach across owners; actions.group_rules.decision_block). Unlike a per-agent block, no human
needs to clear it: a job checks the window when it can have fallen back and lifts the block
(audited), or looks again later."""

import logging
from datetime import datetime, timedelta

from django.db import transaction
from django.utils import timezone

import audit
from audit.actors import RECONCILER as SYSTEM
from audit.choices import AuditAction
from config import queues
from config.scheduled_time import not_before
from reconciliation.actions.common import cluster_held, suspend_agent
from reconciliation.actions.findings import move_finding
from reconciliation.agent_status import refresh_status
from reconciliation.choices import FindingStatus, Trigger
from reconciliation.connectors import connector_for
from reconciliation.connectors.base import ConnectorError
from reconciliation.controller.triggers import request_reconcile
from reconciliation.fleet_snapshot import request_refresh
from reconciliation.models import Finding
from reconciliation.reconciler.diff import Operation, OperationKind
from reconciliation.reconciler.plan import idempotency_key
from registry import holds
from registry.choices import Lifecycle
from registry.models import Agent
from runtime import group_windows
from runtime.actions.group_rules import BREACH_KIND, RULE_POINTER, _fingerprint
from runtime.group_rules import window_key
from runtime.models import GroupBreach

log = logging.getLogger(__name__)

LIFTED_KIND = "group_block_lifted"
RECHECK_MIN_SECONDS = 15


def block_involved(breach_id: int, finding_ids: list[int]) -> None:
    """Block each agent holding one of these findings of a block rule's breach that is still
    open (call after the breach's transaction committed: the connector is outside the
    database). A finding blocked, recorded or resolved already is left as it is: the job
    runs again when its breach is recorded again (its batch counted again after a Redis
    that lost this job), and two such jobs may meet."""
    breach = GroupBreach.objects.select_related("rule").filter(pk=breach_id).first()
    if breach is None:  # its rule was deleted meanwhile
        return
    findings = list(Finding.objects.select_related("agent").filter(
        pk__in=finding_ids, status=FindingStatus.OPEN))
    for finding in findings:
        agent = finding.agent
        operation = Operation(OperationKind.SUSPEND, "agent")
        key = idempotency_key(agent.name, agent.generation, operation, finding.pk)
        held = cluster_held()
        if held:  # recorded, not applied, as for every agent of the cluster alike
            with transaction.atomic():
                if not _still_open(finding):
                    continue
                move_finding(
                    finding, FindingStatus.LOGGED, agent=agent,
                    reason=f"{finding.reason}; enforcement mode block, not applied: {held}")
                audit.record(actor=SYSTEM, action=AuditAction.CORRECTION_SHADOWED,
                             target=f"agent:{agent.name}", agent=agent.name,
                             after={**operation.to_dict(), "key": key}, reason=held)
            continue
        if agent.lifecycle != Lifecycle.SUSPENDED:
            connector_for(agent).apply(agent, operation.to_dict(), key)
        with transaction.atomic():
            if not _still_open(finding):
                continue
            was_reason = finding.reason
            move_finding(
                finding, FindingStatus.BLOCKED, agent=agent,
                reason=f"{finding.reason}; blocked until the group's window falls back under "
                       "the limit")
            suspend_agent(agent, actor=SYSTEM, reason=was_reason[:1000])
            refresh_status(agent, now=timezone.now())
    schedule_lift(breach_id, falls_back(breach, timezone.now()))


def _still_open(finding: Finding) -> bool:
    """The finding is still open, locked until the caller's transaction ends (another block
    job of the same breach may have moved it since this one read it)."""
    return Finding.objects.select_for_update(no_key=True).filter(
        pk=finding.pk, status=FindingStatus.OPEN).exists()


def falls_back(breach: GroupBreach, now: datetime) -> datetime:
    """When the breach's window can first be back at or under its rule's limit: once the
    oldest events that pushed it over have left it (its events' own times, not the breach's:
    events sent late leave it sooner)."""
    spec = breach.rule.to_spec()
    return group_windows.falls_back_at(window_key(spec, "all"), spec.seconds, breach.rule.limit,
                                       now)


def schedule_lift(breach_id: int, when: datetime) -> None:
    """Look at the breach's window at `when` (the earliest it can have fallen back)."""
    queues.queue("default").enqueue_at(
        not_before(when), "runtime.jobs.lift_group_block_job", breach_id)


def lift_group_block(breach_id: int, now: datetime | None = None, *,
                     look_again: bool = True) -> bool:
    """Lift a block rule's breach when its window is back under the limit (or the rule was
    disabled or changed): its blocked findings resolved, its agents resumed through their
    connectors unless something else still blocks them, all audited. False (and a later look
    scheduled, unless not `look_again`) while the window is still over. Raises RedisError
    (the job retries)."""
    now = now or timezone.now()
    breach = GroupBreach.objects.select_related("rule").filter(pk=breach_id).first()
    if breach is None:
        return True
    rule = breach.rule
    spec = rule.to_spec()
    total = group_windows.peek_total(window_key(spec, "all"), spec.seconds, spec.measure, now)
    if rule.enabled and rule.effect == "block" and total > rule.limit:
        # events arrived since: look again when those leave, at least RECHECK_MIN_SECONDS on
        if look_again:
            schedule_lift(breach_id, max(falls_back(breach, now),
                                         now + timedelta(seconds=RECHECK_MIN_SECONDS)))
        return False

    reason = (f"group rule {rule.name}: {total:,.6g} {spec.measure} in the last {rule.per}, "
              f"back under {rule.limit:,.6g}: the group block is lifted"
              if rule.enabled and rule.effect == "block" else
              f"group rule {rule.name} no longer blocks: the group block is lifted")
    resumed = []
    with transaction.atomic():
        findings = list(Finding.objects.select_for_update(no_key=True, of=("self",)).select_related(
            "agent").filter(
            fingerprint=_fingerprint(rule, breach), status=FindingStatus.BLOCKED))
        for finding in findings:
            move_finding(finding, FindingStatus.RESOLVED, reason=reason, last_seen=now)
        for agent in {f.agent.pk: f.agent for f in findings}.values():
            still = (Finding.objects.filter(agent=agent, status=FindingStatus.BLOCKED).exists()
                     or holds.held_by_stop(agent))  # a stop holds it until lifted
            if still or not Agent.objects.filter(
                    pk=agent.pk, lifecycle=Lifecycle.SUSPENDED).update(
                    lifecycle=Lifecycle.ACTIVE, updated_at=now):
                continue
            agent.lifecycle = Lifecycle.ACTIVE
            request_refresh()  # the fleet view's compliance timeline shows suspensions
            audit.record(actor=SYSTEM, action=AuditAction.AGENT_RESUMED,
                         target=f"agent:{agent.name}", agent=agent.name,
                         before={"lifecycle": "suspended"}, after={"lifecycle": "active"},
                         reason=reason)
            resumed.append(agent)
        audit.record(actor=SYSTEM, action=AuditAction.GROUP_RULE_LIFTED,
                     target=f"group_rule:{rule.name}",
                     before={"group": breach.group_key, "total": breach.total},
                     after={"total": total, "limit": rule.limit,
                            "agents": sorted(f.agent.name for f in findings),
                            "resumed": sorted(a.name for a in resumed)},
                     reason=reason)
        for agent in {f.agent.pk: f.agent for f in findings}.values():
            refresh_status(agent, now=now)
    for agent in resumed:
        operation = Operation(OperationKind.RESUME, "agent")
        try:
            connector_for(agent).apply(agent, operation.to_dict(), idempotency_key(
                agent.name, agent.generation, operation, breach.pk))
        except ConnectorError:  # active here; its next pass brings the platform along
            log.exception("resuming %s through its connector failed", agent.name)
        request_reconcile(agent.pk, Trigger.MANUAL)
    return True


def lift_overdue_group_blocks(now: datetime | None = None) -> int:
    """Cron: lift every group block whose window is back under its limit, whether or not its
    scheduled look ran (a Redis that failed over or restarted from disk can lose it, and the
    agents stayed suspended until a person resumed them); returns how many were lifted. A
    block still over is left to its scheduled look, or to this sweep's next run. One query
    when nothing is blocked; otherwise the breaches read are those of the blocked findings'
    rules seen since the oldest of them was opened (a finding holds only a hash of its
    breach; the breach was seen when the finding was opened, and breaches stay for history)."""
    now = now or timezone.now()
    blocked = list(Finding.objects.filter(kind=BREACH_KIND, status=FindingStatus.BLOCKED)
                   .values_list("fingerprint", "pointer", "first_seen"))
    if not blocked:
        return 0
    fingerprints = {fingerprint for fingerprint, _, _ in blocked}
    rules = {pointer.removeprefix(RULE_POINTER) for _, pointer, _ in blocked}
    candidates = GroupBreach.objects.filter(
        rule__name__in=rules, last_seen__gte=min(seen for _, _, seen in blocked))
    lifted = 0
    for breach in candidates.select_related("rule").iterator(chunk_size=500):
        if _fingerprint(breach.rule, breach) in fingerprints and lift_group_block(
                breach.pk, now, look_again=False):
            lifted += 1
    return lifted

