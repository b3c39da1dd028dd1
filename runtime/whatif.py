"""What-if for a group rule before it is turned on: replay it over the last week of the whole
fleet's stored events (group_rules.replay, judged as live counting judges them). Bounded: the
events are read in pages of PAGE in time order, at most WHATIF_MAX_EVENTS of them, and the
result says when it stopped early."""

from collections import Counter
from collections.abc import Iterator
from datetime import datetime, timedelta
from typing import Any

from django.conf import settings
from django.utils import timezone

from registry.models import Agent
from runtime.actions.group_rules import EVENT_COLUMNS, facts_of, stored_event
from runtime.group_rules import AgentFacts, GroupRuleSpec, replay, selects
from runtime.models import BehaviourEvent

DAYS = 7
PAGE = 2000
EXAMPLES = 5


def _pages(agent_ids: list[int], since: datetime, until: datetime, cap: int,
           seen: list[int]) -> Iterator[tuple[int, Any]]:
    """Stored events of these agents in time order, a page at a time (keyset on ts, pk);
    `seen[0]` counts what was read."""
    after: tuple[datetime, int] | None = None
    while seen[0] < cap:
        rows = BehaviourEvent.objects.filter(agent_id__in=agent_ids, foreign=False,
                                             ts__gte=since, ts__lte=until)
        if after is not None:
            rows = rows.filter(ts__gte=after[0]).exclude(ts=after[0], pk__lte=after[1])
        page = list(rows.order_by("ts", "pk").values_list("pk", *EVENT_COLUMNS)
                    [:min(PAGE, cap - seen[0])])
        if not page:
            return
        for _pk, agent_id, *values in page:
            seen[0] += 1
            yield agent_id, stored_event(values)
        after = (page[-1][3], page[-1][0])


def what_if(rule: GroupRuleSpec, *, now: datetime | None = None) -> dict[str, Any]:
    """Which agents and windows the rule would have flagged over the last week: breaches
    (each one escalation when the effect is escalate), findings per agent, and examples."""
    now = now or timezone.now()
    since = now - timedelta(days=DAYS)
    cap = settings.WHATIF_MAX_EVENTS
    agents = list(Agent.objects.filter(active_version__isnull=False)
                  .select_related("active_version"))
    facts: dict[int, AgentFacts] = facts_of(agents, [rule])
    covered = [a for a in facts.values() if selects(rule, a)]
    seen = [0]
    stream = ((facts[agent_id], event) for agent_id, event in
              _pages([a.id for a in covered], since, now, cap, seen))
    breaches = replay(rule, stream)
    findings = Counter(name for breach in breaches for name in breach.agents)
    capped = seen[0] >= cap and BehaviourEvent.objects.filter(
        agent_id__in=[a.id for a in covered], foreign=False, ts__gte=since,
        ts__lte=now).count() > cap
    return {
        "days": DAYS, "since": since, "events": seen[0], "capped": capped, "cap": cap,
        "agents_covered": sorted(a.name for a in covered),
        "breaches": len(breaches),
        "escalations": len(breaches) if rule.effect == "escalate" else 0,
        "findings": sum(findings.values()),
        "agents": [{"agent": name, "findings": n} for name, n in sorted(findings.items())],
        "examples": [{"group": b.group_key, "at": b.at, "total": b.total, "agents": b.agents,
                      "first_event": b.first_event, "events_over": b.events}
                     for b in breaches[:EXAMPLES]],
    }
