"""The drift lab: faults and drift to inject into sandbox agents (command line and pages)."""

import random
import uuid
from typing import Any

from django.utils import timezone

from config.errors import Invalid
from reconciliation.reconciler.diff import effective_desired
from registry.models import Agent
from sandbox import actions


def widened(agent: Agent) -> dict[str, Any]:
    """A "bad deployment": CRM access granted, an extra tool, the refund threshold dropped."""
    state = effective_desired(agent.active_version.spec, timezone.now())
    changes: dict[str, Any] = {
        "tools": sorted({*state["tools"], "crm.search"}),
        "data": [d for d in state["data"] if d["resource"] != "crm"]
        + [{"resource": "crm", "access": "write"}],
    }
    if state["actions"]:
        changes["actions"] = {name: {k: v for k, v in limits.items() if k != "approval_above"}
                              for name, limits in state["actions"].items()}
    return changes


def inject(agent: Agent, what: str, *, actor: Any, after_changes: int = 1,
           lag_seconds: int = 20, deployment_id: str = "") -> str:
    """Inject one kind of trouble into a sandbox agent; returns what was done."""
    if (agent.connector or {}).get("type") != "sandbox" or agent.active_version is None:
        raise Invalid(f"{agent.name} is not an approved sandbox agent.")
    if what == "drift":
        actions.sandbox_deploy(agent, actor=actor, changes=widened(agent),
                               reason="drift lab: a bad deployment widened access",
                               deployment_id=deployment_id)
        return f"{agent.name}: bad deployment (crm write, crm.search, refund threshold dropped)"
    if what in ("crash", "fail"):
        actions.sandbox_faults(agent, actor=actor, fault=what, after_changes=after_changes)
        actions.sandbox_deploy(agent, actor=actor, changes=widened(agent),
                               reason=f"drift lab: drift with a {what} after {after_changes} "
                                      "change(s)")
        return f"{agent.name}: drift, and a {what} after {after_changes} change(s)"
    if what == "lag":
        actions.sandbox_faults(agent, actor=actor, lag_seconds=lag_seconds)
        actions.sandbox_deploy(agent, actor=actor, changes=widened(agent),
                               reason=f"drift lab: drift with reads lagging {lag_seconds} s")
        return f"{agent.name}: drift, with reads lagging {lag_seconds} s"
    raise Invalid(f"unknown lab action {what!r}; expected drift, crash, fail or lag")


def mass_drift(count: int, *, actor: Any) -> list[str]:
    """A bad deployment across many agents at once, one deployment id for all (one incident):
    the breaker should trip."""
    agents = (Agent.objects.filter(connector__type="sandbox", lifecycle="active",
                                   active_version__isnull=False)
              .select_related("active_version").order_by("name")[:count])
    one = uuid.uuid4().hex[:12]
    return [inject(agent, "drift", actor=actor, deployment_id=one) for agent in agents]


def simulate(*, actor: Any = "system:demo-simulator", rng: Any = None) -> str:
    """The demo's background simulator: now and then a random sandbox agent drifts (a bad
    deployment, sometimes with a lagging platform), so a new user sees the loop at work."""
    rng = rng or random.Random()
    agents = list(Agent.objects.filter(connector__type="sandbox", lifecycle="active",
                                       active_version__isnull=False)
                  .select_related("active_version"))
    if not agents:
        return "no sandbox agents"
    agent = rng.choice(agents)
    return inject(agent, "lag" if rng.random() < 0.2 else "drift", actor=actor,
                  lag_seconds=8)
