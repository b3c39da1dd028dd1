"""What-if of a policy proposal before compliance approves it: each step of its plan replayed
over the last week by the replay that rule's own what-if uses (guardrails over the stored
proposals and observed states, reconciliation/guardrail_whatif.py; group rules over the stored
behaviour events, runtime/whatif.py). A deleted rule shows what it flagged and will stop
flagging. Toxic combinations and review intervals are not replayed, and it says so."""

from types import SimpleNamespace
from typing import Any

from gitsource.models import PolicyChange
from gitsource.policies import describe
from reconciliation.guardrail_whatif import guardrail_what_if
from runtime.group_rules import GroupRuleSpec
from runtime.whatif import what_if

DAYS = 7
NOT_REPLAYED = {
    "toxic_combination": "not replayed: a toxic combination is judged on the fleet's paths "
                         "as they are (the toxic page), not on past events",
    "review_interval": "not replayed: a review interval dates approvals from now on"}


def _guardrail(step: dict[str, Any], fields: dict[str, Any]) -> tuple[str, dict[str, Any]]:
    result = guardrail_what_if(SimpleNamespace(name=step["name"], **fields))
    proposals, observed = result["proposals"], result["observations"]
    flagged = proposals["judged"] - proposals["outcomes"]["passed"]
    seen = observed["judged"] - observed["outcomes"]["passed"]
    outcomes = ", ".join(f"{n} {o}" for o, n in proposals["outcomes"].items()
                         if n and o != "passed")
    summary = (f"{flagged} of {proposals['judged']} proposals flagged"
               f"{f' ({outcomes})' if outcomes else ''}, {seen} of {observed['judged']} "
               "observed states")
    return summary, result


def _group_rule(step: dict[str, Any], fields: dict[str, Any]) -> tuple[str, dict[str, Any]]:
    spec = GroupRuleSpec(id=0, name=step["name"], selector=fields["selector"] or {},
                         match=fields["match"] or {}, measure=fields["measure"],
                         limit=fields["limit"], per=fields["per"],
                         per_record=fields["per_record"], effect=fields["effect"],
                         required_approvals=fields["required_approvals"],
                         across_owners=fields["across_owners"])
    result = what_if(spec)
    return (f"breaches {result['breaches']}, findings {result['findings']} (events "
            f"replayed {result['events']}, agents covered {len(result['agents_covered'])})"
            ), result


REPLAYS = {"guardrail": _guardrail, "group_rule": _group_rule}


def policy_what_if(change: PolicyChange) -> dict[str, Any]:
    """Each step of the change's plan and what it would have flagged over the last week."""
    steps = []
    for step in change.plan:
        replay = REPLAYS.get(step["kind"])
        row = {"step": describe(step), "kind": step["kind"], "name": step["name"],
               "op": step["op"], "replayed": replay is not None}
        if replay is None:
            row.update(summary=NOT_REPLAYED[step["kind"]], result=None)
        elif step["op"] == "delete":
            summary, result = replay(step, step["before"])
            row.update(summary=f"would stop flagging: {summary}", result=result)
        else:
            fields = step["after"]
            if not fields.get("enabled", True):
                row.update(summary="disabled: flags nothing", result=None)
            else:
                summary, result = replay(step, fields)
                row.update(summary=f"would have flagged: {summary}", result=result)
        steps.append(row)
    return {"days": DAYS, "steps": steps}
