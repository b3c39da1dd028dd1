"""The group rules a proposal takes an agent into or out of, judged beside the guardrails
(registry.actions.proposals.assess asks the judges registered in registry/proposal_gates.py;
runtime registers this one from its AppConfig.ready)."""

from dataclasses import dataclass

from registry.choices import GuardrailOutcome
from registry.guardrails import GuardrailResult
from registry.proposal_gates import Judge
from runtime.group_rules import AgentFacts, selects
from runtime.models import GroupRule


@dataclass(frozen=True)
class GroupRuleResult(GuardrailResult):
    """A group rule the proposal takes the agent into or out of: named on the proposal, and
    the sign-offs the rule requires are the proposal's to collect (as a guardrail's are)."""

    group_rule: str = ""
    change: str = ""  # joins | leaves


def enabled_rules() -> list[GroupRule]:
    """The enabled group rules, by name (read once for many proposals)."""
    return list(GroupRule.objects.filter(enabled=True).order_by("name"))


def group_rule_results(agent_name: str, active_spec: dict | None, spec: dict,
                       current: dict, metadata: dict,
                       rules: list[GroupRule] | None = None) -> list[GroupRuleResult]:
    """The enabled group rules that select the agent as it is and not as it would be, or the
    other way round (labels, team, owner, framework). A group rule's selector matches by
    equality, so a relabel is the lighter path out of a rule that needs two sign-offs."""

    def facts(meta: dict, framework: str) -> AgentFacts:
        return AgentFacts(0, agent_name, meta.get("owner") or "", meta.get("labels") or {},
                          framework)

    before = facts(current, (active_spec or spec).get("framework", ""))
    after = facts(metadata, spec.get("framework", ""))
    if before == after:
        return []  # nothing a selector reads changes: no rule is joined or left
    found = []
    for rule in enabled_rules() if rules is None else rules:
        was, now = selects(rule.to_spec(), before), selects(rule.to_spec(), after)
        if was == now:
            continue
        change = "leaves" if was else "joins"
        signoffs = rule.required_approvals
        outcome = (GuardrailOutcome.REQUIRES_APPROVALS if signoffs > 1
                   else GuardrailOutcome.WARNED)
        found.append(GroupRuleResult(
            guardrail=f"group rule {rule.name}", effect=rule.effect, outcome=outcome,
            message=(f"{agent_name} {change} group rule {rule.name} ({rule.effect}, "
                     f"{signoffs} sign-off{'s' if signoffs != 1 else ''}): this change needs "
                     f"the {max(signoffs, 1)} approver{'s' if signoffs > 1 else ''} the rule "
                     "requires"),
            required_approvals=signoffs if signoffs > 1 else 0,
            group_rule=rule.name, change=change))
    return found


GROUP_RULES = Judge(load=enabled_rules, judge=group_rule_results)
