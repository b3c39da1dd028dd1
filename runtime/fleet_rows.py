"""runtime's rows in the fleet view (reconciliation/fleet.py), registered from runtime's
AppConfig.ready: each enabled group rule or group budget, and the agents' own budgets."""

from typing import Any

from reconciliation.fleet import TREND_DAYS, Fleet, FleetRow, open_and_found
from runtime.group_rules import BUDGET_MEASURES, AgentFacts, selects
from runtime.models import GroupRule

GROUP_BREACH_KIND = "group_limit_exceeded"
BUDGET_KIND = "budget_exceeded"


def _facts(name: str, agent: dict[str, Any]) -> AgentFacts:
    return AgentFacts(0, name, agent["owner"], agent["labels"],
                      (agent["spec"] or {}).get("framework", ""))


def group_rule_rows(fleet: Fleet) -> list[FleetRow]:
    """Each enabled group rule (a group budget when it sums tokens or cost): the agents it
    selects, the agents with an open finding of a window over its limit, and those found per
    day (two queries)."""
    rules = list(GroupRule.objects.filter(enabled=True).order_by("name"))
    if not rules:
        return []
    open_, found = open_and_found(fleet, GROUP_BREACH_KIND)
    facts = [_facts(name, agent) for name, agent in fleet.agents.items()]
    rows = []
    for rule in rules:
        spec, pointer = rule.to_spec(), f"/group-rules/{rule.name}"
        covers = sorted(agent.name for agent in facts if selects(spec, agent))
        what = (f"{rule.measure} at most {rule.limit:g} per {rule.per} across the group"
                + (", per record" if rule.per_record else ""))
        effect = rule.effect + (f"; decisions need {rule.required_approvals} sign-offs"
                                if rule.required_approvals > 1 else "")
        rows.append(FleetRow(
            "group_budget" if rule.measure in BUDGET_MEASURES else "group_rule", rule.name,
            effect, "; ".join(filter(None, [rule.description, what])), covers,
            sorted(open_[pointer]), found[pointer], f"/group-rules/{rule.name}/",
            {"selector": rule.selector}))
    return rows


def budget_rows(fleet: Fleet) -> list[FleetRow]:
    """The agents' own token and cost budgets (their specs' `budgets`), as one row: the
    agents that have one and those over one now (one query)."""
    covers = sorted(name for name, agent in fleet.agents.items()
                    if (agent["spec"] or {}).get("budgets"))
    if not covers:
        return []
    open_, found = open_and_found(fleet, BUDGET_KIND)
    trend = [sum(day) for day in zip(*found.values(), strict=True)] or [0] * TREND_DAYS
    return [FleetRow("budget", "agent budgets", "warn at 80%, then the spec's behaviour "
                     "enforcement", "each agent's own tokens or cost per window (spec.budgets)",
                     covers, sorted(set().union(*open_.values())), trend, "/agents/")]
