"""The demo cluster: the example agents, a few dozen generated ones across frameworks and
owners, and the three guardrails compliance ships. Everything goes through the real actions."""

import json
import random
import time
from pathlib import Path
from typing import Any

from django.conf import settings
from django.contrib.auth.models import User
from django_otp.oath import TOTP

from config.private_files import write_private
from reconciliation import actions
from reconciliation.choices import Trigger
from reconciliation.models import ReconcileRun
from registry import actions as registry_actions
from registry.actions.stepup import confirm_device, start_enrolment
from registry.choices import VersionSource
from registry.intake import read_manifests
from registry.manifest import validate_manifest
from registry.models import Agent, DesiredStateVersion, Guardrail
from registry.stepup import confirmed_device, proposal_reasons
from sandbox.lab import inject

EXAMPLES = Path(settings.BASE_DIR) / "examples" / "manifests"

GUARDRAILS = [
    {"name": "crm-write-needs-two-approvers", "effect": "require_approvals",
     "required_approvals": 2, "message": "write or admin on crm needs two approvers",
     "description": "Customer data is sensitive: widening it takes four eyes and then two.",
     "expression": '!spec.data.exists(d, d.resource == "crm" && d.access in ["write", "admin"])'
                   ' && !spec.grants.exists(g, g.resource == "crm" && '
                   'g.access in ["write", "admin"])'},
    {"name": "refund-threshold-at-most-1000", "effect": "deny",
     "message": "refunds above $1,000 always need a human sign-off",
     "description": "The approval threshold of payments.refund may not exceed $1,000.",
     "expression": '!("payments.refund" in spec.actions) || '
                   '(spec.actions["payments.refund"].approval_above != null && '
                   'spec.actions["payments.refund"].approval_above <= 1000)'},
    {"name": "grants-expire-within-90-days", "effect": "warn",
     "message": "time-bounded grants should expire within 90 days",
     "description": "Long grants are permanent access in disguise.",
     "expression": 'spec.grants.all(g, timestamp(g.expires_at) <= now + duration("2160h"))'},
]

FRAMEWORKS = ["langgraph", "crewai", "openai-agents", "autogen", "custom"]
TEAMS = {"payments": ["payments.refund", "orders.lookup"], "support": ["tickets.read"],
         "sales": ["crm.search"], "finance": ["invoices.read", "ledger.post"],
         "ops": ["inventory.read", "shipping.book"]}


def generated_manifest(index: int, owner: str, rng: random.Random) -> dict[str, Any]:
    team = rng.choice(sorted(TEAMS))
    tools = sorted(set(TEAMS[team]) | {rng.choice(["docs.search", "email.draft", "web.fetch"])})
    spec: dict[str, Any] = {
        "framework": rng.choice(FRAMEWORKS), "connector": {"type": "sandbox"},
        "model": rng.choice(["gpt-4.1", "gpt-4.1-mini", "claude-sonnet", "llama-3.3-70b"]),
        "version": f"1.{rng.randint(0, 9)}.{rng.randint(0, 20)}", "tools": tools,
        "data": [{"resource": f"{team}_db", "access": rng.choice(["read", "write"])}],
        "limits": [{"resource": f"{team}_db", "max_calls": rng.choice([40, 100, 500]),
                    "per": "1h"}],
        "enforcement": {"default": rng.choice(["correct", "correct", "correct", "escalate"])},
    }
    if "payments.refund" in tools:
        spec["actions"] = {"payments.refund": {"approval_above": 500, "max": 5000}}
    return {"apiVersion": "governance/v1", "kind": "Agent",
            "metadata": {"name": f"{team}-agent-{index:02d}", "owner": owner,
                         "labels": {"team": team, "env": rng.choice(["prod", "staging"])},
                         "description": f"Generated demo agent for the {team} team"},
            "spec": spec}


def seed_cluster(*, generated: int = 37) -> list[str]:
    """Register and approve the demo agents (idempotent); returns the names created."""
    dana = User.objects.get(username="dana")
    for guardrail in GUARDRAILS:
        if not Guardrail.objects.filter(name=guardrail["name"]).exists():
            registry_actions.create_guardrail(actor=dana, **guardrail)
    manifests = []
    for path in sorted(EXAMPLES.glob("*.yaml")):
        manifests.extend(read_manifests(path.read_text()))
    rng = random.Random(7)  # the same demo every time
    owners = ["alice", "erin", "frank"]
    manifests += [validate_manifest(generated_manifest(i, owners[i % 3], rng))
                  for i in range(generated)]
    bob, carol = User.objects.get(username="bob"), User.objects.get(username="carol")
    sessions: dict[int, dict] = {}
    created = []
    for manifest in manifests:
        if Agent.objects.filter(name=manifest.name).exists():
            continue
        owner = User.objects.get(username=manifest.owner)
        (outcome,) = registry_actions.apply_manifests([manifest], actor=owner,
                                                      source=VersionSource.YAML)
        for approver in (bob, carol)[:outcome.version.required_approvals]:
            approve_as_demo(outcome.version.pk, approver, sessions)
        created.append(manifest.name)
    return created


def approve_as_demo(version_id: int, approver: User, sessions: dict[int, dict]) -> None:
    """Approve as a demo approver; when step-up is asked for (STEPUP_RISK_THRESHOLD, a step_up
    guardrail) the approver has a demo authenticator (its key under var/, to add to an app) and
    gives a real code from it once, which their seeding session then remembers."""
    version = DesiredStateVersion.objects.get(pk=version_id)
    session = sessions.setdefault(approver.pk, {})
    otp = ""
    if proposal_reasons(version.risk, version.guardrail_results) and not session:
        otp = demo_code(demo_authenticator(approver), steps_ahead=1)
    registry_actions.approve_proposal(version_id, actor=approver, otp=otp, session=session)


def demo_authenticator(user: User) -> Any:
    """The demo person's confirmed TOTP device, enrolled through the real actions the first
    time (its key is kept in var/demo-totp.json, private, for an authenticator app)."""
    device = confirmed_device(user)
    if device is None:
        pending = start_enrolment(actor=user)
        device = confirm_device(pending.pk, actor=user, code=demo_code(pending))
        store = Path(settings.VAR_DIR) / "demo-totp.json"
        keys = json.loads(store.read_text()) if store.exists() else {}
        keys[user.username] = device.key
        write_private(store, json.dumps(keys, indent=2))
    return device


def demo_code(device: Any, *, steps_ahead: int = 0) -> str:
    """The code the device's app shows now (or `steps_ahead` periods later: a code is single
    use, and the device accepts the next period's too)."""
    totp = TOTP(device.bin_key, device.step, device.t0, device.digits, device.drift)
    totp.time = time.time() + steps_ahead * device.step
    return f"{totp.token():0{device.digits}d}"


# What the demo has already lived through when a new user first looks. Kept below the breaker's
# share (20% of 40 agents) together with the simulator's drifts in the same five minutes.
HISTORY_CORRECTED = ["support-triage", "payments-agent-00", "support-agent-02"]
HISTORY_ESCALATED = "finance-agent-01"  # enforcement escalate: an approver decides
HISTORY_PROPOSAL = ("refund-agent", "orders.cancel")


def seed_history() -> bool:
    """Real passes, once, on a freshly seeded cluster: a bad deployment on three agents is
    corrected and verified, one drift waits in the approvers' inbox, and an owner's proposal
    waits for approval. Nothing is backdated: the audit trail is the truth. The other agents
    converge in the worker, by the pass each approval queued (a pass here would be done
    twice, and the URL would wait for it). False when the cluster already has history."""
    if ReconcileRun.objects.exists():
        return False
    agents = {agent.name: agent for agent in Agent.objects.filter(
        active_version__isnull=False).select_related("active_version", "owner").order_by("name")}
    actor = "system:demo-history"
    for name in [*HISTORY_CORRECTED, HISTORY_ESCALATED]:
        if name in agents:
            actions.reconcile_agent(agents[name].pk, trigger=Trigger.APPROVED)
            inject(agents[name], "drift", actor=actor)
            actions.reconcile_agent(agents[name].pk, trigger=Trigger.OBSERVATION)
    name, tool = HISTORY_PROPOSAL
    if name in agents:
        agent = agents[name]
        spec = {**agent.active_version.spec,
                "tools": sorted({*agent.active_version.spec["tools"], tool})}
        registry_actions.propose(agent, spec, agent.active_version.metadata, actor=agent.owner,
                                 source=VersionSource.API,
                                 comment=f"Let the agent cancel orders it refunds ({tool}).")
    return True
