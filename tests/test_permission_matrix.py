"""Who may do what: every API endpoint and method, every page and every form behind a page,
for each role, an anonymous client, an owner of another agent, an approver facing their own
proposal, the agent's own token and another agent's token. One table, exact outcomes.

The principals (the WHO columns):
  anonymous    no credentials at all
  alice        owner of refund-agent (and other-agent)
  oscar        an owner, but not of any agent here: owners act on their own agents only
  bob          approver
  erin         owner and approver: owns erin-agent, proposed {erins} and owns {erins_esc}
  dana         compliance
  admin        admin (staff and superuser, as `grant_role admin` makes them)
  own_agent    refund-agent's own token
  other_agent  other-agent's token

People call the API with `Authorization: Token` and open pages signed in; agent tokens are
tried on both. Each cell runs in a savepoint that is rolled back, so every principal meets the
same scene. A route (and, for the API, each of its methods) missing from the table fails
`test_every_route_and_api_method_is_in_the_table`.
"""

import re
import uuid
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
import redis
from django.conf import settings
from django.contrib.auth.models import User
from django.db import transaction
from django.test import Client, override_settings
from django.urls import URLPattern, URLResolver, get_resolver, resolve
from django.utils import timezone
from rest_framework.test import APIClient
from rest_framework.views import APIView

from audit.models import AuditEntry
from compliance import actions as compliance_actions
from reconciliation import actions
from reconciliation.models import ControlState, Escalation, Finding
from registry import actions as registry_actions
from registry.choices import Role
from registry.models import Agent
from runtime import actions as runtime_actions
from sandbox import actions as sandbox_actions
from tests.conftest import BAD_DEPLOYMENT, PASSWORD, REFUND_AGENT_YAML, refund_manifest

WHO = ("anonymous", "alice", "oscar", "bob", "erin", "dana", "admin", "own_agent",
       "other_agent")

# Outcomes that are not a bare status code.
LOGIN = "→ sign-in page"            # redirected to /login/: pages are for signed-in people
ADMIN_LOGIN = "→ admin sign-in"     # redirected to the admin's sign-in: staff only
REJECTED = "200, nothing accepted"  # the batch is read, each event refused for this principal
DONE = "done"                       # a page's form did its work (its audit row is written)
REFUSED = "refused"                 # the form was taken, the action refused: nothing changed


@dataclass(frozen=True)
class Row:
    """One endpoint (or form) and what each principal in WHO gets from it."""

    request: str                     # "METHOD /path", placeholders filled from the scene
    outcomes: tuple
    body: Any = None                 # JSON for the API, form fields for pages
    audited: tuple[str, ...] = ()    # pages' POST forms: the audit actions their work writes
    content_type: str = ""
    label: str = ""                  # tells rows on one path apart

    @property
    def page(self) -> bool:
        """Pages (and everything outside the API) see people signed in, not their tokens."""
        return not self.request.split(" ", 1)[1].startswith(("/api/", "/v1/"))


def events(agent: str = "refund-agent") -> list[dict]:
    return [{"id": uuid.uuid4().hex, "agent": agent, "kind": "tool_call",
             "ts": datetime.now(UTC).isoformat(), "tool": "orders.lookup"}]


def spans(agent: str = "refund-agent") -> dict:
    attribute = [{"key": "service.name", "value": {"stringValue": agent}}]
    span = {"traceId": uuid.uuid4().hex, "spanId": uuid.uuid4().hex[:16], "name": "tool",
            "startTimeUnixNano": str(int(datetime.now(UTC).timestamp() * 1e9)),
            "attributes": [
                {"key": "gen_ai.operation.name", "value": {"stringValue": "execute_tool"}},
                {"key": "gen_ai.tool.name", "value": {"stringValue": "orders.lookup"}}]}
    return {"resourceSpans": [{"resource": {"attributes": attribute},
                               "scopeSpans": [{"spans": [span]}]}]}


def new_spec(**changes) -> dict:
    return {"spec": {**refund_manifest(**changes).spec}}


# What refund-agent was seen doing and what was done about it: a tool its platform reported
# (in its observed state, findings, corrections and alerts) and the reason on the audit row
# of that deployment. Another owner must find neither anywhere (issue 12 item 6).
OBSERVED_MARKER = "observed.tool-7f3a"
AUDIT_MARKER = "deployment-reason-3d9e"
GUARDRAIL = {"name": "g-existing", "expression": "true", "effect": "warn", "message": "changed"}
TOXIC = {"name": "t-existing", "left": "tool:x.never", "right": "tool:y.never",
         "effect": "deny", "required_approvals": 2}
GROUP_RULE = {"name": "gr-existing", "measure": "events", "limit": 50, "per": "1h",
              "per_record": True, "match": {"kind": "data_access", "resource": "customers_db"}}
NEW_AGENT = REFUND_AGENT_YAML.replace("name: refund-agent", "name: billing-agent")
MODEL_CHANGE = REFUND_AGENT_YAML.replace("model: gpt-4.1", "model: gpt-5.1")
YAML = "application/yaml"

#     anonymous  alice   oscar   bob     erin    dana    admin   own_agent other_agent
API = [
    # agents and manifests
    Row("GET /api/v1/agents",
        (401,     200,    200,    200,    200,    200,    200,    403,    403)),
    Row("GET /api/v1/agents/refund-agent",
        (401,     200,    200,    200,    200,    200,    200,    403,    403)),
    Row("POST /api/v1/manifests?dry_run=1",
        (401,     200,    403,    403,    403,    403,    200,    403,    403),
        body=REFUND_AGENT_YAML, content_type=YAML),
    Row("POST /api/v1/manifests",
        (401,     201,    403,    403,    403,    403,    201,    403,    403),
        body=NEW_AGENT, content_type=YAML, label="register billing-agent owned by alice"),
    Row("POST /api/v1/manifests",
        (401,     201,    403,    403,    403,    403,    201,    403,    403),
        body=MODEL_CHANGE, content_type=YAML, label="propose a change to refund-agent"),
    Row("POST /api/v1/agents/refund-agent/proposals",
        (401,     201,    403,    403,    403,    403,    201,    201,    403),
        body=new_spec(version="2.4.0")),
    # refund-agent is at generation 1: its owner is told so (409), nobody else learns it
    Row("POST /api/v1/agents/refund-agent/rollback",
        (401,     409,    403,    403,    403,    403,    409,    403,    403),
        body={"generation": 1}),
    Row("POST /api/v1/agents/refund-agent/rollback",
        (401,     422,    403,    403,    403,    403,    422,    403,    403),
        body={"generation": 5}, label="a generation never approved"),
    # alice proposes retiring refund-agent; {retirement} is other-agent's, also alice's
    Row("POST /api/v1/agents/refund-agent/retirement",
        (401,     201,    403,    403,    403,    403,    201,    403,    403),
        body={"reason": "replaced"}),
    Row("POST /api/v1/retirements/{retirement}/approve",
        (401,     403,    403,    200,    200,    403,    200,    403,    403), body={}),
    # as its findings: its owner and the reviewers, not another owner (issue 29 item 13)
    Row("GET /api/v1/agents/refund-agent/waivers",
        (401,     200,    403,    200,    200,    200,    200,    403,    403)),
    # approvers and compliance waive; never the agent's owner (alice; admin owns nothing here)
    Row("POST /api/v1/agents/refund-agent/waivers",
        (401,     403,    403,    201,    201,    201,    201,    403,    403),
        body={"pointer": "/tools/crm.search", "reason": "migration", "ticket": "CHG-1",
              "duration": "1h"}),
    # recertification (issue 16): {waiver} is bob's on refund-agent
    Row("POST /api/v1/retirements/{retirement}/reject",
        (401,     403,    403,    200,    200,    403,    200,    403,    403),
        body={"comment": "not yet"}),
    Row("POST /api/v1/waivers/{waiver}/withdraw",
        (401,     200,    403,    403,    403,    200,    200,    403,    403),
        body={"reason": "done early"}),
    # {pending_waiver} needs two approvers; bob granted it, so he cannot be the second
    Row("POST /api/v1/waivers/{pending_waiver}/approve",
        (401,     403,    403,    403,    200,    200,    200,    403,    403), body={}),
    Row("POST /api/v1/agents/refund-agent/recertify",
        (401,     201,    403,    403,    403,    403,    201,    403,    403), body={}),
    Row("GET /api/v1/recertification",
        (401,     200,    200,    200,    200,    200,    200,    403,    403)),
    Row("GET /api/v1/review-intervals",
        (401,     200,    200,    200,    200,    200,    200,    403,    403)),
    Row("PUT /api/v1/review-intervals/high",
        (401,     403,    403,    403,    403,    200,    200,    403,    403),
        body={"interval": "30d"}),
    # proposals
    Row("GET /api/v1/proposals",
        (401,     200,    200,    200,    200,    200,    200,    403,    403)),
    Row("GET /api/v1/proposals/{pending}",
        (401,     200,    200,    200,    200,    200,    200,    403,    403)),
    Row("GET /api/v1/proposals/{pending}/backtest",  # replays the agent's events
        (401,     200,    403,    200,    200,    200,    200,    403,    403)),
    Row("POST /api/v1/proposals/{pending}/approve",
        (401,     403,    403,    200,    200,    403,    200,    403,    403), body={}),
    # the review thread: the people involved read it and comment; approvers who may decide
    # request changes
    Row("GET /api/v1/proposals/{pending}/thread",
        (401,     200,    403,    200,    200,    200,    200,    403,    403)),
    Row("POST /api/v1/proposals/{pending}/thread",
        (401,     201,    403,    201,    201,    201,    201,    403,    403),
        body={"body": "why crm?"}),
    Row("POST /api/v1/proposals/{pending}/thread",
        (401,     403,    403,    201,    201,    403,    201,    403,    403),
        body={"body": "scope it", "verdict": "request_changes"}, label="request changes"),
    Row("POST /api/v1/proposals/{erins}/thread",  # erin's own proposal: four eyes
        (401,     403,    403,    201,    403,    403,    201,    403,    403),
        body={"body": "scope it", "verdict": "request_changes"}, label="erin's own"),
    Row("POST /api/v1/proposals/{pending}/reject",
        (401,     403,    403,    200,    200,    403,    200,    403,    403),
        body={"comment": "no"}),
    Row("POST /api/v1/proposals/{erins}/approve",  # erin's own proposal
        (401,     403,    403,    200,    403,    403,    200,    403,    403), body={}),
    Row("POST /api/v1/proposals/{erins}/reject",
        (401,     403,    403,    200,    403,    403,    200,    403,    403),
        body={"comment": "no"}),
    Row("POST /api/v1/proposals/{pending}/withdraw",  # alice proposed it
        (401,     200,    403,    403,    403,    403,    403,    403,    403)),
    # guardrails
    Row("GET /api/v1/guardrails",
        (401,     200,    200,    200,    200,    200,    200,    403,    403)),
    Row("POST /api/v1/guardrails",
        (401,     403,    403,    403,    403,    201,    201,    403,    403),
        body={**GUARDRAIL, "name": "g-new"}),
    Row("GET /api/v1/guardrails/g-existing",
        (401,     200,    200,    200,    200,    200,    200,    403,    403)),
    Row("PUT /api/v1/guardrails/g-existing",
        (401,     403,    403,    403,    403,    200,    200,    403,    403), body=GUARDRAIL),
    Row("PATCH /api/v1/guardrails/g-existing",
        (401,     403,    403,    403,    403,    200,    200,    403,    403),
        body={"message": "patched"}),
    Row("DELETE /api/v1/guardrails/g-existing",
        (401,     403,    403,    403,    403,    204,    204,    403,    403)),
    # toxic combinations: read by people, written by compliance
    Row("GET /api/v1/toxic-combinations",
        (401,     200,    200,    200,    200,    200,    200,    403,    403)),
    Row("POST /api/v1/toxic-combinations",
        (401,     403,    403,    403,    403,    201,    201,    403,    403),
        body={**TOXIC, "name": "t-new"}),
    Row("GET /api/v1/toxic-combinations/t-existing",
        (401,     200,    200,    200,    200,    200,    200,    403,    403)),
    Row("PUT /api/v1/toxic-combinations/t-existing",
        (401,     403,    403,    403,    403,    200,    200,    403,    403), body=TOXIC),
    Row("PATCH /api/v1/toxic-combinations/t-existing",
        (401,     403,    403,    403,    403,    200,    200,    403,    403),
        body={"description": "patched"}),
    Row("DELETE /api/v1/toxic-combinations/t-existing",
        (401,     403,    403,    403,    403,    204,    204,    403,    403)),
    # the approved fleet's paths for people; the observed ones only for reviewers
    Row("GET /api/v1/toxic-combinations/paths",
        (401,     200,    200,    200,    200,    200,    200,    403,    403)),
    Row("GET /api/v1/fleet",
        (401,     403,    403,    200,    200,    200,    200,    403,    403)),
    # guardrail what-if: compliance (and admin) only, before the body is read
    Row("POST /api/v1/guardrails/what-if",
        (401,     403,    403,    403,    403,    200,    200,    403,    403),
        body={"expression": "true", "effect": "warn", "message": "m"}),
    Row("GET /api/v1/guardrails/g-existing/what-if",
        (401,     403,    403,    403,    403,    200,    200,    403,    403)),
    # Git sources: people read them; owners add their own (the URL here is outside every
    # allowed root: 422 once the role passes); its owner (alice) or admin polls; the webhook
    # answers only a body signed with the source's secret (payments has none)
    Row("GET /api/v1/git/sources",
        (401,     200,    200,    200,    200,    200,    200,    403,    403)),
    Row("POST /api/v1/git/sources",
        (401,     422,    422,    403,    422,    403,    422,    403,    403),
        body={"name": "new-source", "url": "/etc/no-repo.git"}),
    Row("POST /api/v1/git/sources/payments/poll",
        (401,     202,    403,    403,    403,    403,    202,    403,    403)),
    Row("POST /api/v1/git/sources/payments/webhook",
        (401,     401,    401,    401,    401,    401,    401,    401,    401), body={}),
    Row("GET /api/v1/git/signing-keys",
        (401,     200,    200,    200,    200,    200,    200,    403,    403)),
    Row("POST /api/v1/git/signing-keys",
        (401,     422,    422,    422,    422,    422,    422,    403,    403),
        body={"public_key": "ssh-ed25519 not-a-key"}),
    Row("GET /api/v1/agents/refund-agent/git",
        (401,     200,    200,    200,    200,    200,    200,    403,    403)),
    # policy changes from Git: people read them; a compliance person other than the one who
    # committed it (dana here) decides; policy tests judge files and store nothing
    Row("GET /api/v1/git/policy-changes",
        (401,     200,    200,    200,    200,    200,    200,    403,    403)),
    Row("GET /api/v1/git/policy-changes/{policy}",
        (401,     200,    200,    200,    200,    200,    200,    403,    403)),
    Row("POST /api/v1/git/policy-changes/{policy}/approve",
        (401,     403,    403,    403,    403,    403,    200,    403,    403), body={}),
    Row("POST /api/v1/git/policy-changes/{policy}/reject",
        (401,     403,    403,    403,    403,    403,    200,    403,    403),
        body={"comment": "no"}),
    Row("POST /api/v1/policy-tests",
        (401,     422,    422,    422,    422,    422,    422,    403,    403),
        body={"files": {"a.yaml": "kind: Agent\nmetadata: {name: x}\nspec: {}\n"}}),
    # group rules: every person reads them; compliance writes; the what-if is compliance's
    Row("GET /api/v1/group-rules",
        (401,     200,    200,    200,    200,    200,    200,    403,    403)),
    Row("POST /api/v1/group-rules",
        (401,     403,    403,    403,    403,    201,    201,    403,    403),
        body={**GROUP_RULE, "name": "gr-new"}),
    Row("GET /api/v1/group-rules/gr-existing",
        (401,     200,    200,    200,    200,    200,    200,    403,    403)),
    Row("PUT /api/v1/group-rules/gr-existing",
        (401,     403,    403,    403,    403,    200,    200,    403,    403), body=GROUP_RULE),
    Row("PATCH /api/v1/group-rules/gr-existing",
        (401,     403,    403,    403,    403,    200,    200,    403,    403),
        body={"limit": 60}),
    Row("DELETE /api/v1/group-rules/gr-existing",
        (401,     403,    403,    403,    403,    204,    204,    403,    403)),
    Row("POST /api/v1/group-rules/what-if",
        (401,     403,    403,    403,    403,    200,    200,    403,    403), body=GROUP_RULE),
    Row("GET /api/v1/group-rules/gr-existing/what-if",
        (401,     403,    403,    403,    403,    200,    200,    403,    403)),
    # tokens: each person sees their own and their agents' (admin every one); others get 404
    Row("GET /api/v1/tokens",
        (401,     200,    200,    200,    200,    200,    200,    403,    403)),
    Row("POST /api/v1/tokens/{token}/revoke",  # a token alice holds for refund-agent
        (401,     200,    404,    404,    404,    404,    200,    403,    403), body={}),
    Row("POST /api/v1/tokens/{token}/keep",  # only a token suspended by a hand-over is kept
        (401,     409,    404,    404,    404,    404,    403,    403,    403), body={}),
    # desired and observed state
    Row("GET /api/v1/agents/refund-agent/desired-state",
        (401,     200,    200,    200,    200,    200,    200,    200,    403)),
    # where its grants are read (permission sources): what was done to it, like its findings
    Row("GET /api/v1/agents/refund-agent/permission-sources",
        (401,     200,    403,    200,    200,    200,    200,    403,    403)),
    Row("PUT /api/v1/agents/refund-agent/observed-state",
        (401,     202,    403,    403,    403,    403,    202,    202,    403),
        body={"running": True}),
    Row("PUT /api/v1/agents/ghost-agent/observed-state",  # a platform reports an unknown agent
        (401,     202,    202,    404,    202,    404,    202,    403,    403),
        body={"running": True}),
    Row("POST /api/v1/agents/refund-agent/reconcile",
        (401,     202,    403,    403,    403,    202,    202,    403,    403)),
    # the owner only asks (202) for shadow; compliance switches it on for a time (200)
    Row("POST /api/v1/agents/refund-agent/shadow",
        (401,     202,    403,    403,    403,    200,    200,    403,    403),
        body={"enabled": True, "duration": "1h", "reason": "migration"}),
    # {shadow} is the owner's request on other-agent: approvers and compliance (not alice)
    Row("POST /api/v1/agents/other-agent/shadow/approve",
        (401,     403,    403,    200,    200,    200,    200,    403,    403), body={}),
    # the control plane
    Row("GET /api/v1/control",
        (401,     200,    200,    200,    200,    200,    200,    403,    403)),
    Row("POST /api/v1/control/shadow",
        (401,     403,    403,    403,    403,    200,    200,    403,    403),
        body={"enabled": False}),
    Row("POST /api/v1/control/breaker/reset",
        (401,     403,    403,    403,    403,    200,    200,    403,    403),
        body={"reason": "looked at it"}),
    # The stop button: compliance or admin press it and lift it, a second person approves.
    Row("GET /api/v1/stops",
        (401,     403,    403,    200,    200,    200,    200,    403,    403)),
    Row("POST /api/v1/stops",
        (401,     403,    403,    403,    403,    201,    201,    403,    403),
        body={"scope": "selector", "selector": {"stop-drill": "yes"}, "reason": "drill"}),
    Row("POST /api/v1/stops/{stop}/lift",
        (401,     403,    403,    403,    403,    200,    200,    403,    403),
        body={"reason": "drill over"}),
    Row("POST /api/v1/stops/{lifting}/lift/approve",  # dana asked: she may not approve it
        (401,     403,    403,    403,    403,    403,    200,    403,    403)),
    Row("GET /api/v1/maintenance-windows",
        (401,     403,    403,    200,    200,    200,    200,    403,    403)),
    Row("POST /api/v1/maintenance-windows",
        (401,     403,    403,    403,    403,    201,    201,    403,    403),
        body=lambda: {"starts_at": timezone.now().isoformat(), "reason": "upgrade",
                      "ends_at": (timezone.now() + timedelta(hours=1)).isoformat(),
                      "selector": {"stop-drill": "yes"}}),
    Row("POST /api/v1/maintenance-windows/{window}/cancel",
        (401,     403,    403,    403,    403,    200,    200,    403,    403),
        body={"reason": "done early"}),
    # Framework evidence: compliance (and admins) read reports and keep their own controls.
    Row("GET /api/v1/frameworks",
        (401,     403,    403,    403,    403,    200,    200,    403,    403)),
    Row("GET /api/v1/frameworks/eu-ai-act/report",
        (401,     403,    403,    403,    403,    200,    200,    403,    403)),
    Row("GET /api/v1/frameworks/eu-ai-act/evidence",
        (401,     403,    403,    403,    403,    200,    200,    403,    403)),
    Row("POST /api/v1/frameworks/eu-ai-act/controls",
        (401,     403,    403,    403,    403,    201,    201,    403,    403),
        body={"control_id": "ours-1", "title": "Reviewed on time",
              "queries": ["recertifications_on_time"], "reason": "board asked"}),
    Row("POST /api/v1/frameworks/eu-ai-act/controls/art-12/retire",
        (401,     403,    403,    403,    403,    201,    201,    403,    403),
        body={"reason": "covered elsewhere"}),
    Row("GET /api/v1/dashboard",
        (401,     200,    200,    200,    200,    200,    200,    403,    403)),
    Row("GET /api/v1/inbox",  # an owner's: their own agents to recertify
        (401,     200,    200,    200,    200,    403,    200,    403,    403)),
    Row("POST /api/v1/inbox/triage",
        (401,     403,    403,    200,    200,    403,    200,    403,    403),
        body={"escalations": ["{escalation}"], "assign": True}),
    # notification preferences: each person their own (an admin any, and teams')
    Row("GET /api/v1/notifications/preferences",
        (401,     200,    200,    200,    200,    200,    200,    403,    403)),
    Row("POST /api/v1/notifications/preferences",
        (401,     201,    201,    201,    201,    201,    201,    403,    403),
        body={"channel": "email", "target": "me@example.com"}),
    Row("POST /api/v1/notifications/preferences",
        (401,     403,    403,    403,    403,    403,    201,    403,    403),
        body={"channel": "email", "target": "team@example.com", "team": "payments"},
        label="a team's"),
    Row("DELETE /api/v1/notifications/preferences/999999",
        (401,     404,    404,    404,    404,    404,    404,    403,    403)),
    Row("POST /api/v1/notifications/preferences/999999/verify",
        (401,     404,    404,    404,    404,    404,    404,    403,    403),
        body={"token": "guessed"}),
    # SIEM sinks: admins configure them, compliance reads where delivery stands
    Row("GET /api/v1/siem/sinks",
        (401,     403,    403,    403,    403,    200,    200,    403,    403)),
    Row("POST /api/v1/siem/sinks",
        (401,     403,    403,    403,    403,    403,    201,    403,    403),
        body={"name": "soc", "kind": "http", "url": "http://127.0.0.1:9/"}),
    Row("GET /api/v1/siem/sinks/999999",
        (401,     403,    403,    403,    403,    404,    404,    403,    403)),
    Row("PATCH /api/v1/siem/sinks/999999",
        (401,     403,    403,    403,    403,    403,    404,    403,    403),
        body={"enabled": False}),
    Row("DELETE /api/v1/siem/sinks/999999",
        (401,     403,    403,    403,    403,    403,    404,    403,    403)),
    # chat accounts: every person links their own; an admin sees and removes any
    Row("POST /api/v1/chat/link-codes",
        (401,     201,    201,    201,    201,    201,    201,    403,    403)),
    Row("GET /api/v1/chat/accounts",
        (401,     200,    200,    200,    200,    200,    200,    403,    403)),
    Row("DELETE /api/v1/chat/accounts/999999",
        (401,     404,    404,    404,    404,    404,    404,    403,    403)),
    # Slack's own requests: only a valid signature gets in, whoever is signed in
    Row("POST /chat/slack/interactions",
        (401,     401,    401,    401,    401,    401,    401,    401,    401),
        body={"payload": "{}"}),
    Row("POST /chat/slack/commands",
        (401,     401,    401,    401,    401,    401,    401,    401,    401),
        body={"text": "link ABC"}),
    Row("POST /api/v1/inbox/triage",  # erin's own agent: four eyes
        (401,     403,    403,    200,    403,    403,    200,    403,    403),
        body={"escalations": ["{erins_esc}"], "acknowledge": True}, label="erin's own agent"),
    Row("POST /api/v1/incidents/{escalation}/resolve",
        (401,     403,    403,    200,    200,    403,    200,    403,    403),
        body={"resolution": "revert", "comment": "put it back"}),
    Row("POST /api/v1/incidents/{erins_esc}/resolve",  # erin's own agent: four eyes
        (401,     403,    403,    200,    403,    403,    200,    403,    403),
        body={"resolution": "revert", "comment": "put it back"}),
    # behaviour: events, traces, decisions, unregistered agents
    Row("POST /api/v1/events",
        (401,     200, REJECTED,  403, REJECTED,  403,    200,    200,    403), body=events),
    Row("POST /v1/traces",
        (401,     200, REJECTED,  403, REJECTED,  403,    200,    200,    403), body=spans),
    Row("POST /api/v1/agents/refund-agent/decisions",
        (401,     201,    403,    403,    403,    403,    201,    201,    403),
        body={"action": "payments.refund", "amount": 10}),
    Row("GET /api/v1/decisions/{decision}",
        (401,     200,    403,    200,    200,    200,    200,    200,    404)),
    # what the agent did: itself, its owner, reviewers; never another owner or agent
    Row("GET /api/v1/agents/refund-agent/events",
        (401,     200,    403,    200,    200,    200,    200,    200,    403)),
    Row("GET /api/v1/unregistered",
        (401,     403,    403,    200,    200,    200,    200,    403,    403)),
    Row("POST /api/v1/unregistered/shadow-agent/assign",
        (401,     403,    403,    403,    403,    200,    200,    403,    403),
        body={"owner": "oscar"}),
    # findings and escalations
    Row("GET /api/v1/findings",
        (401,     403,    403,    200,    200,    200,    200,    403,    403)),
    Row("GET /api/v1/findings/{finding}",
        (401,     403,    403,    200,    200,    200,    200,    403,    403)),
    Row("GET /api/v1/findings/causes",
        (401,     403,    403,    200,    200,    200,    200,    403,    403)),
    Row("POST /api/v1/findings/{finding}/acknowledge",
        (401,     403,    403,    403,    403,    200,    200,    403,    403),
        body={"reason": "known"}),
    Row("GET /api/v1/escalations",
        (401,     403,    403,    200,    200,    200,    200,    403,    403)),
    Row("GET /api/v1/escalations/{escalation}",
        (401,     403,    403,    200,    200,    200,    200,    403,    403)),
    Row("POST /api/v1/escalations/{escalation}/resolve",
        (401,     403,    403,    200,    200,    403,    200,    403,    403),
        body={"resolution": "revert", "comment": "put it back"}),
    Row("POST /api/v1/escalations/{erins_esc}/resolve",  # drift on erin's own agent
        (401,     403,    403,    200,    403,    403,    200,    403,    403),
        body={"resolution": "revert", "comment": "put it back"}),
    Row("POST /api/v1/escalations/{decision_esc}/resolve",  # a refund waiting for a human
        (401,     403,    403,    200,    200,    403,    200,    403,    403),
        body={"resolution": "allow", "comment": "the customer called"}),
    Row("POST /api/v1/escalations/{escalation}/triage",
        (401,     403,    403,    200,    200,    403,    200,    403,    403),
        body={"assign": True, "snooze_minutes": 60}),
    Row("POST /api/v1/escalations/{erins_esc}/triage",  # erin's own agent: four eyes
        (401,     403,    403,    200,    403,    403,    200,    403,    403),
        body={"acknowledge": True}),
    # the audit trail
    Row("GET /api/v1/audit",
        (401,     403,    403,    403,    403,    200,    200,    403,    403)),
    Row("GET /api/v1/audit/entries",
        (401,     403,    403,    403,    403,    200,    200,    403,    403)),
    Row("GET /api/v1/audit/entries/1",
        (401,     403,    403,    403,    403,    200,    200,    403,    403)),
    Row("GET /api/v1/audit/verify",
        (401,     403,    403,    403,    403,    200,    200,    403,    403)),
    Row("GET /api/v1/audit/export?format=jsonl",
        (401,     403,    403,    403,    403,    200,    200,    403,    403)),
    Row("GET /api/v1/agents/refund-agent/evidence",  # the owner, compliance, admin; no agent
        (401,     200,    403,    403,    403,    200,    200,    403,    403)),
    Row("GET /api/v1/audit/keys",
        (401,     403,    403,    403,    403,    200,    200,    403,    403)),
    Row("GET /api/v1/audit/checkpoints",
        (401,     403,    403,    403,    403,    200,    200,    403,    403)),
    Row("GET /api/v1/audit/trusted-keys",
        (401,     403,    403,    403,    403,    200,    200,    403,    403)),
    Row("GET /api/v1/audit/proofs/inclusion?seq=1",
        (401,     403,    403,    403,    403,    200,    200,    403,    403)),
    Row("GET /api/v1/audit/proofs/consistency?first=1&second=2",
        (401,     403,    403,    403,    403,    200,    200,    403,    403)),
    # open by design: the API's description, probes, Prometheus (DESIGN.md §6)
    Row("GET /api/schema",
        (200,     200,    200,    200,    200,    200,    200,    200,    200)),
    Row("GET /api/docs",
        (200,     200,    200,    200,    200,    200,    200,    200,    200)),
    Row("GET /healthz",
        (200,     200,    200,    200,    200,    200,    200,    200,    200)),
    Row("GET /readyz",
        (200,     200,    200,    200,    200,    200,    200,    200,    200)),
    Row("GET /metrics",
        (200,     200,    200,    200,    200,    200,    200,    200,    200)),
    # django-rq's JSON and metrics: staff only (no RQ_API_TOKEN is configured)
    Row("GET /django-rq/stats.json",
        (401,     401,    401,    401,    401,    401,    200,    401,    401)),
    Row("GET /django-rq/stats.json/guessed",
        (401,     401,    401,    401,    401,    401,    200,    401,    401)),
    Row("GET /django-rq/metrics",
        (401,     401,    401,    401,    401,    401,    200,    401,    401)),
]

L = LOGIN
#     anonymous  alice   oscar   bob     erin    dana    admin   own_agent other_agent
PAGES = [
    Row("GET /",                        (L, 200, 200, 200, 200, 200, 200, L, L)),
    Row("GET /agents/",                 (L, 200, 200, 200, 200, 200, 200, L, L)),
    Row("GET /agents/refund-agent/",    (L, 200, 200, 200, 200, 200, 200, L, L)),
    Row("GET /agents/refund-agent/status", (L, 200, 200, 200, 200, 200, 200, L, L)),
    Row("GET /git/policy-changes/{policy}/", (L, 200, 200, 200, 200, 200, 200, L, L)),
    Row("GET /manifests/new",           (L, 200, 200, 403, 200, 403, 200, L, L)),
    Row("GET /approvals/",              (L, 403, 403, 200, 200, 403, 200, L, L)),
    Row("GET /inbox/",                  (L, 200, 200, 200, 200, 403, 200, L, L)),
    Row("GET /account/notifications/",  (L, 200, 200, 200, 200, 200, 200, L, L)),
    Row("GET /account/notifications/999999/verify", (L, 404, 404, 404, 404, 404, 404, L, L)),
    Row("GET /proposals/{pending}/",    (L, 200, 200, 200, 200, 200, 200, L, L)),
    Row("GET /escalations/",            (L, 403, 403, 200, 200, 200, 200, L, L)),
    # owners read their own agents' findings (oscar: none)
    Row("GET /findings/",               (L, 200, 200, 200, 200, 200, 200, L, L)),
    Row("GET /lab/",                    (L, 403, 403, 403, 403, 200, 200, L, L)),
    Row("GET /guardrails/",             (L, 200, 200, 200, 200, 200, 200, L, L)),
    Row("GET /guardrails/new",          (L, 403, 403, 403, 403, 200, 200, L, L)),
    Row("GET /guardrails/g-existing/edit", (L, 403, 403, 403, 403, 200, 200, L, L)),
    Row("GET /guardrails/g-existing/delete", (L, 403, 403, 403, 403, 200, 200, L, L)),
    Row("GET /group-rules/",            (L, 200, 200, 200, 200, 200, 200, L, L)),
    Row("GET /group-rules/gr-existing/", (L, 200, 200, 200, 200, 200, 200, L, L)),
    Row("GET /audit/",                  (L, 403, 403, 403, 403, 200, 200, L, L)),
    Row("GET /audit/verify/",           (L, 403, 403, 403, 403, 200, 200, L, L)),
    Row("GET /frameworks/",             (L, 403, 403, 403, 403, 200, 200, L, L)),
    # the demo's mail sink: only with the file email backend (tests use locmem), then
    # compliance and admins (tests/test_console_polish_browser.py)
    Row("GET /mail/",                   (L, 404, 404, 404, 404, 404, 404, L, L)),
    Row("GET /toxic/",                  (L, 200, 200, 200, 200, 200, 200, L, L)),
    Row("GET /fleet/",                  (L, 403, 403, 200, 200, 200, 200, L, L)),
    Row("GET /tokens/",                 (L, 200, 200, 200, 200, 200, 200, L, L)),
    Row("GET /account/two-factor/",     (L, 200, 200, 200, 200, 200, 200, L, L)),
    Row("GET /recertification/",        (L, 200, 200, 200, 200, 200, 200, L, L)),
    Row("GET /login/",                  (200, 200, 200, 200, 200, 200, 200, 200, 200)),
    # Single sign-on is off here (no OIDC_CLIENT_ID); tests/registry/test_single_sign_on.py.
    Row("GET /sso/start/",              (404, 404, 404, 404, 404, 404, 404, 404, 404)),
    Row("GET /sso/callback/",           (404, 404, 404, 404, 404, 404, 404, 404, 404)),
    Row("GET /vendor/plotly-basic-4.1.1.min.js", (200, 200, 200, 200, 200, 200, 200, 200, 200)),
    # The Django admin (read-only, see tests/registry/test_people.py) and the RQ dashboard.
    Row("GET /admin/",
        (ADMIN_LOGIN,) + (ADMIN_LOGIN,) * 5 + (200, ADMIN_LOGIN, ADMIN_LOGIN)),
    Row("GET /django-rq/",
        (ADMIN_LOGIN,) + (ADMIN_LOGIN,) * 5 + (200, ADMIN_LOGIN, ADMIN_LOGIN)),
]

D, R = DONE, REFUSED
#     anonymous  alice   oscar   bob     erin    dana    admin   own_agent other_agent
FORMS = [
    Row("POST /git/policy-changes/{policy}/approve", (L, 403, 403, 403, 403, R, D, L, L),
        body={}, audited=("git_policy.applied",)),
    Row("POST /git/policy-changes/{policy}/reject", (L, 403, 403, 403, 403, R, D, L, L),
        body={"comment": "no"}, audited=("git_policy.rejected",)),
    Row("POST /logout/",                (L, D, D, D, D, D, D, L, L), body={},
        audited=("user.signed_out",)),
    Row("POST /manifests/new",          (L, D, R, 403, R, 403, D, L, L),
        body={"manifest": NEW_AGENT}, audited=("agent.registered",),
        label="register billing-agent owned by alice"),
    Row("POST /manifests/new",          (L, D, R, 403, R, 403, D, L, L),
        body={"manifest": MODEL_CHANGE}, audited=("proposal.created", "proposal.updated"),
        label="propose a change to refund-agent"),
    Row("POST /proposals/{pending}/comment", (L, D, R, D, D, D, D, L, L),
        body={"body": "why crm?", "verdict": "comment"}, audited=("proposal.commented",)),
    Row("POST /proposals/{pending}/approve", (L, 403, 403, D, D, 403, D, L, L),
        body={"comment": "fine"}, audited=("proposal.approved",)),
    Row("POST /proposals/{pending}/reject", (L, 403, 403, D, D, 403, D, L, L),
        body={"comment": "no"}, audited=("proposal.rejected",)),
    Row("POST /proposals/{erins}/approve", (L, 403, 403, D, R, 403, D, L, L),
        body={"comment": "fine"}, audited=("proposal.approved",)),
    Row("POST /proposals/{erins}/reject", (L, 403, 403, D, R, 403, D, L, L),
        body={"comment": "no"}, audited=("proposal.rejected",)),
    Row("POST /proposals/{pending}/withdraw", (L, D, R, R, R, R, R, L, L),
        body={}, audited=("proposal.withdrawn",)),
    Row("POST /tokens/{token}/revoke",  (L, D, 404, 404, 404, 404, D, L, L),
        body={"reason": "rotated"}, audited=("token.revoked",)),
    Row("POST /tokens/{token}/keep",    (L, R, 404, 404, 404, 404, R, L, L),
        body={}, audited=("token.kept",)),
    Row("POST /account/two-factor/",    (L, D, D, D, D, D, D, L, L),
        body={"start": "1"}, audited=("stepup.enrolment_started",)),
    Row("POST /agents/refund-agent/rollback", (L, R, R, R, R, R, R, L, L),
        body={"generation": 1}, audited=("rollback.proposed",)),
    Row("POST /agents/refund-agent/retirement", (L, D, R, R, R, R, D, L, L),
        body={"reason": "replaced"}, audited=("retirement.proposed",)),
    Row("POST /retirements/{retirement}/approve", (L, R, R, D, D, R, D, L, L),
        body={}, audited=("agent.retired",)),
    Row("POST /agents/refund-agent/waivers", (L, R, R, D, D, D, D, L, L),
        body={"pointer": "/tools/crm.search", "reason": "migration", "ticket": "CHG-1",
              "duration": "1h"}, audited=("waiver.granted",)),
    Row("POST /waivers/{waiver}/withdraw", (L, D, R, R, R, D, D, L, L),
        body={"reason": "done early"}, audited=("waiver.withdrawn",)),
    Row("POST /waivers/{pending_waiver}/approve", (L, R, R, R, D, D, D, L, L),
        body={}, audited=("waiver.confirmed",)),
    # an owner issues her own agent's token (admin any agent's)
    Row("POST /tokens/issue",           (L, D, R, R, R, R, D, L, L),
        body={"agent": "refund-agent"}, audited=("agent.token_issued",)),
    # only the owner asks for a waiver on her agent; a second person decides it
    Row("POST /agents/refund-agent/waiver-requests", (L, D, R, R, R, R, R, L, L),
        body={"pointer": "/tools/crm.search", "reason": "pilot", "ticket": "CHG-4",
              "duration": "1h"}, audited=("waiver.requested",)),
    Row("POST /waiver-requests/{waiver_request}/decide", (L, R, R, D, D, D, D, L, L),
        body={"decision": "decline", "comment": "not now"},
        audited=("waiver.request_declined",)),
    # the inbox's form for the owner's shadow request on other-agent
    Row("POST /agents/other-agent/shadow/approve", (L, R, R, D, D, D, D, L, L),
        body={}, audited=("shadow.changed",)),
    Row("POST /retirements/{retirement}/reject", (L, R, R, D, D, R, D, L, L),
        body={"comment": "not yet"}, audited=("retirement.rejected",)),
    Row("POST /agents/refund-agent/recertify", (L, D, R, R, R, R, D, L, L),
        body={"comment": "still right"}, audited=("recertification.proposed",)),
    Row("POST /recertification/intervals/high", (L, R, R, R, R, D, D, L, L),
        body={"interval": "30d"}, audited=("review_interval.changed",)),
    Row("POST /guardrails/new",         (L, 403, 403, 403, 403, D, D, L, L),
        body={**GUARDRAIL, "name": "g-new", "required_approvals": 2},
        audited=("guardrail.created",)),
    Row("POST /guardrails/g-existing/edit", (L, 403, 403, 403, 403, D, D, L, L),
        body={**GUARDRAIL, "required_approvals": 2}, audited=("guardrail.updated",)),
    Row("POST /guardrails/g-existing/delete", (L, 403, 403, 403, 403, D, D, L, L),
        body={}, audited=("guardrail.deleted",)),
    Row("POST /toxic/",                 (L, 403, 403, 403, 403, D, D, L, L),
        body={**TOXIC, "name": "t-new"}, audited=("toxic_rule.created",)),
    Row("POST /toxic/t-existing/delete", (L, 403, 403, 403, 403, D, D, L, L),
        body={}, audited=("toxic_rule.deleted",)),
    Row("POST /frameworks/controls",    (L, R, R, R, R, D, D, L, L),
        body={"framework": "eu-ai-act", "control_id": "ours-1", "title": "Reviewed on time",
              "queries": "recertifications_on_time", "reason": "board asked"},
        audited=("control.saved",)),
    # The overview's stop panel.
    Row("POST /stops/",                 (L, R, R, R, R, D, D, L, L),
        body={"scope": "selector", "target": "stop-drill=yes", "reason": "drill"},
        audited=("stop.placed",)),
    Row("POST /stops/{stop}/lift",      (L, R, R, R, R, D, D, L, L),
        body={"reason": "drill over"}, audited=("stop.lift_requested",)),
    Row("POST /stops/{lifting}/lift/approve", (L, R, R, R, R, R, D, L, L),
        body={}, audited=("stop.lifted",)),
    # The cards on /approvals/ and /escalations/ post to one escalation's triage and resolve.
    Row("POST /escalations/{escalation}/resolve", (L, 403, 403, D, D, R, D, L, L),
        body={"resolution": "revert", "comment": "back"}, audited=("escalation.resolved",)),
    Row("POST /escalations/{erins_esc}/resolve", (L, 403, 403, D, R, R, D, L, L),
        body={"resolution": "revert", "comment": "back"}, audited=("escalation.resolved",),
        label="erin's own agent"),
    Row("POST /escalations/{decision_esc}/resolve", (L, 403, 403, D, D, R, D, L, L),
        body={"resolution": "deny", "comment": "no"}, audited=("decision.decided",),
        label="a pending decision"),
    Row("POST /escalations/{escalation}/triage", (L, 403, 403, D, D, R, D, L, L),
        body={"triage": "assign"}, audited=("escalation.triaged",)),
    Row("POST /escalations/{escalation}/triage", (L, 403, 403, D, D, R, D, L, L),
        body={"triage": "acknowledge"}, audited=("escalation.triaged",)),
    Row("POST /escalations/{escalation}/triage", (L, 403, 403, D, D, R, D, L, L),
        body={"triage": "snooze_4h"}, audited=("escalation.triaged",)),
    Row("POST /escalations/{erins_esc}/triage", (L, 403, 403, D, R, R, D, L, L),
        body={"triage": "snooze_4h"}, audited=("escalation.triaged",),
        label="erin's own agent"),
    Row("POST /account/notifications/", (L, D, D, D, D, D, D, L, L),
        body={"channel": "email", "target": "me@example.com"},
        audited=("notification.preference_set",)),
    Row("POST /account/notifications/999999/delete", (L, R, R, R, R, R, R, L, L),
        body={}, audited=("notification.preference_deleted",)),
    Row("POST /account/notifications/999999/verify", (L, 404, 404, 404, 404, 404, 404, L, L),
        body={"token": "guessed"}, audited=("notification.preference_verified",)),
    # The inbox queue: bulk triage and one decision for an incident.
    Row("POST /inbox/triage",           (L, 403, 403, D, D, 403, D, L, L),
        body={"escalation": "{escalation}", "bulk": "assign"}, audited=("escalation.triaged",)),
    Row("POST /inbox/triage",           (L, 403, 403, D, R, 403, D, L, L),
        body={"escalation": "{erins_esc}", "bulk": "acknowledge"},
        audited=("escalation.triaged",), label="erin's own agent"),
    Row("POST /inbox/incidents/{escalation}/resolve", (L, 403, 403, D, D, 403, D, L, L),
        body={"resolution": "revert", "comment": "back"}, audited=("escalation.resolved",)),
    Row("POST /inbox/incidents/{erins_esc}/resolve", (L, 403, 403, D, R, 403, D, L, L),
        body={"resolution": "revert", "comment": "back"}, audited=("escalation.resolved",),
        label="erin's own agent"),
    # The older form post to the list page still works.
    Row("POST /escalations/",           (L, 403, 403, D, D, R, D, L, L),
        body={"escalation": "{escalation}", "resolution": "revert", "comment": "back"},
        audited=("escalation.resolved",)),
    Row("POST /escalations/",           (L, 403, 403, D, D, R, D, L, L),
        body={"escalation": "{escalation}", "triage": "snooze_1h"},
        audited=("escalation.triaged",)),
    Row("POST /findings/",              (L, R, R, R, R, D, D, L, L),
        body={"finding": "{finding}", "reason": "known"}, audited=("finding.acknowledged",)),
    Row("POST /lab/",                   (L, 403, 403, 403, 403, D, D, L, L),
        body={"agent": "refund-agent", "what": "drift"}, audited=("sandbox.changed",)),
    Row("POST /lab/",                   (L, 403, 403, 403, 403, D, D, L, L),
        body={"what": "mass", "count": "1"}, audited=("sandbox.changed",)),
]

# Routes the table leaves out, and why. Everything else in the URL conf must have a row.
NOT_IN_THE_TABLE = (
    # The rest of the Django admin: its own staff sign-in (the table checks its index), and
    # read-only for people and roles (tests/registry/test_people.py).
    "admin/",
    # The rest of django-rq's dashboard: every one of these views is @staff_member_required in
    # django-rq itself; the table checks the dashboard, its JSON and its metrics.
    "django-rq/queues/", "django-rq/workers/", "django-rq/schedulers/",
    "django-rq/cron-schedulers/",
)


# --- the scene ---------------------------------------------------------------------------------


@dataclass
class Scene:
    """The principals' clients and the ids the rows' placeholders name."""

    api: dict[str, Any] = field(default_factory=dict)
    sessions: dict[str, str] = field(default_factory=dict)
    agent_clients: dict[str, Any] = field(default_factory=dict)
    ids: dict[str, Any] = field(default_factory=dict)

    def page_client(self, who: str) -> Any:
        """A browser for `who`: signed in for people, only the token for agents. New for each
        cell: cookies live outside the savepoint (a sign-out would clear them for good)."""
        if who in self.agent_clients:
            return self.agent_clients[who]
        client = Client()
        if who in self.sessions:
            client.cookies[settings.SESSION_COOKIE_NAME] = self.sessions[who]
        return client


def person(username: str, *roles: Role) -> User:
    user, _ = registry_actions.create_person(username, actor="system:test", password=PASSWORD)
    for role in roles:
        registry_actions.grant_role(user, role, actor="system:test")
    return user


def register(name: str, owner: User, approver: User) -> Agent:
    manifest = refund_manifest()
    object.__setattr__(manifest, "name", name)
    object.__setattr__(manifest, "owner", owner.username)
    (outcome,) = registry_actions.apply_manifests([manifest], actor=owner, source="yaml")
    registry_actions.approve_proposal(outcome.version.pk, actor=approver)
    return Agent.objects.get(name=name)


def build_scene() -> Scene:
    people = {
        "alice": person("alice", Role.OWNER), "oscar": person("oscar", Role.OWNER),
        "bob": person("bob", Role.APPROVER), "carol": person("carol", Role.APPROVER),
        "erin": person("erin", Role.OWNER, Role.APPROVER),
        "dana": person("dana", Role.COMPLIANCE), "admin": person("admin", Role.ADMIN)}
    User.objects.filter(username="admin").update(is_staff=True, is_superuser=True)
    people["admin"].refresh_from_db()
    alice, bob, erin = people["alice"], people["bob"], people["erin"]
    refund = register("refund-agent", alice, bob)
    other = register("other-agent", alice, bob)
    erins_agent = register("erin-agent", erin, bob)

    actions.reconcile_agent(refund.pk, trigger="approved")
    sandbox_actions.sandbox_deploy(refund, actor="system:test", changes={
        **BAD_DEPLOYMENT, "tools": [*BAD_DEPLOYMENT["tools"], OBSERVED_MARKER]},
        reason=AUDIT_MARKER)
    actions.reconcile_agent(refund.pk, trigger="observation")  # drops the $500 rule: escalated
    escalation = Escalation.objects.get(agent=refund, status="open", finding__isnull=False)
    pending = registry_actions.propose(refund, refund_manifest(model="gpt-5").spec,
                                       refund.active_version.metadata, actor=alice,
                                       source="api").version
    erins = registry_actions.propose(erins_agent, refund_manifest(model="gpt-5").spec,
                                     erins_agent.active_version.metadata, actor=erin,
                                     source="api").version
    erins_esc = actions.open_escalation(erins_agent, None, reason="drift on erin-agent")
    asked = runtime_actions.request_decision(refund, {"action": "payments.refund", "amount": 900},
                                     actor=alice)
    decided = runtime_actions.request_decision(refund, {"action": "payments.refund", "amount": 10},
                                       actor=alice)
    actions.note_unregistered_observation("shadow-agent", {"running": True},
                                          actor="system:test")
    registry_actions.create_guardrail(actor=people["dana"], name="g-existing",
                                      expression="true", effect="warn", message="m")
    registry_actions.create_toxic_combination(actor=people["dana"], **TOXIC)
    from runtime.actions.group_rules import create_group_rule

    create_group_rule(actor=people["dana"], **GROUP_RULE)
    ControlState.objects.update_or_create(pk=1, defaults={
        "breaker_tripped_at": timezone.now(), "breaker_reason": "tripped for the test"})

    from gitsource.actions import create_source

    with override_settings(GIT_SOURCE_LOCAL_ROOTS=[str(settings.VAR_DIR)]):
        source = create_source(actor=alice, name="payments",
                               url=str(settings.VAR_DIR / "no-repo.git"))
    from gitsource.models import PolicyChange

    policy = PolicyChange.objects.create(  # a policy commit dana made, as a poll records it
        source=source, commit="a" * 40, author="Dana <dana@example.com>",
        proposed_by=people["dana"], signer="dana", state="pending")
    retirement = registry_actions.propose_retirement("other-agent", actor=people["alice"],
                                                     reason="replaced")
    waiver = registry_actions.grant_waiver("refund-agent", actor=bob, pointer="/tools/crm.search",
                                           reason="migration", ticket="CHG-0", duration="1h")
    # a waiver whose area cannot be put as a spec change needs two approvers: bob is the first
    pending_waiver = registry_actions.grant_waiver(
        "refund-agent", actor=bob, pointer="/mcp_servers/files", reason="migration",
        ticket="CHG-2", duration="1h")
    actions.set_shadow(actor=alice, agent=other, enabled=True, duration="1h",
                       reason="migration")  # alice asks; a second person approves
    waiver_request = registry_actions.request_waiver(  # alice asks; a second person decides
        "other-agent", actor=alice, pointer="/tools/crm.search", reason="pilot",
        ticket="CHG-3", duration="1h")
    # two stops that reach no agent of the scene: one standing, one dana asked to lift
    drill = {"scope": "selector", "selector": {"stop-drill": "yes"}, "reason": "drill"}
    stop = compliance_actions.place_stop(actor=people["dana"], **drill)
    lifting = compliance_actions.place_stop(actor=people["dana"], **drill)
    compliance_actions.request_lift(lifting.pk, actor=people["dana"], reason="drill over")
    window = compliance_actions.schedule_window(
        actor=people["dana"], starts_at=timezone.now().isoformat(), reason="upgrade",
        ends_at=(timezone.now() + timedelta(hours=1)).isoformat(),
        selector={"stop-drill": "yes"})
    scene = Scene(ids={
        "pending_waiver": pending_waiver.pk, "stop": stop.pk, "lifting": lifting.pk,
        "waiver_request": waiver_request.pk,
        "window": window.pk, "policy": policy.pk,
        "retirement": retirement.pk, "waiver": waiver.pk, "pending": pending.pk, "erins": erins.pk,
        "escalation": escalation.pk,
        "erins_esc": erins_esc.pk, "decision_esc": Escalation.objects.get(decision=asked).pk,
        "decision": decided.pk, "finding": Finding.objects.filter(agent=refund).first().pk,
        "token": registry_actions.issue_agent_token(refund, actor=alice, name="spare")[0].pk})
    scene.api["anonymous"] = APIClient()
    for name, user in people.items():
        _, key = registry_actions.issue_api_token(user, actor="system:test")
        scene.api[name] = APIClient()
        scene.api[name].credentials(HTTP_AUTHORIZATION=f"Token {key}")
        browser = Client()
        browser.force_login(user)
        scene.sessions[name] = browser.session.session_key
    for name, agent in (("own_agent", refund), ("other_agent", other)):
        _, key = registry_actions.issue_agent_token(agent, actor=alice)
        client = APIClient()
        client.credentials(HTTP_AUTHORIZATION=f"Token {key}")
        scene.api[name] = scene.agent_clients[name] = client
    return scene


@pytest.fixture(scope="module")
def scene(django_db_setup, django_db_blocker):
    """Built once for the module inside a transaction that is rolled back at its end; each
    test then runs in its own savepoint (pytest-django's db fixture) within it."""
    hashers = override_settings(
        PASSWORD_HASHERS=["django.contrib.auth.hashers.MD5PasswordHasher"])
    with django_db_blocker.unblock(), hashers:
        client = redis.Redis.from_url(settings.REDIS_URL)
        client.flushdb()
        client.close()
        outer = transaction.atomic()
        outer.__enter__()
        try:
            yield build_scene()
        finally:
            transaction.set_rollback(True)
            outer.__exit__(None, None, None)


# --- running a row -----------------------------------------------------------------------------


PLACEHOLDER = re.compile(r"\{(\w+)\}")


def fill(value: Any, ids: dict[str, Any]) -> Any:
    if callable(value):
        return value()
    if isinstance(value, str) and (whole := PLACEHOLDER.fullmatch(value)) and whole[1] in ids:
        return ids[whole[1]]  # an id alone is sent as it is (a number in JSON, text in a form)
    if isinstance(value, str):
        return PLACEHOLDER.sub(lambda match: str(ids.get(match[1], match[0])), value)
    if isinstance(value, dict):
        return {key: fill(item, ids) for key, item in value.items()}
    if isinstance(value, list):
        return [fill(item, ids) for item in value]
    return value


def written(row: Row) -> int:
    return AuditEntry.objects.filter(action__in=row.audited).count() if row.audited else 0


def judge(row: Row, response: Any, audited_before: int) -> Any:
    location = response.get("Location", "") if response.status_code == 302 else ""
    if row.audited and written(row) > audited_before:
        return DONE
    if location.startswith("/login/"):
        return LOGIN
    if location.startswith("/admin/login/"):
        return ADMIN_LOGIN
    if row.audited and response.status_code in (200, 302):
        return REFUSED  # shown the refusal (on the page, or as a message after a redirect)
    path = row.request.split(" ", 1)[1]
    if response.status_code == 200 and path.startswith("/api/v1/events"):
        return REJECTED if response.json()["accepted"] == 0 else 200
    if response.status_code == 200 and path.startswith("/v1/traces"):
        return REJECTED if response.json().get("partialSuccess") else 200
    return response.status_code


def outcome(scene: Scene, row: Row, who: str) -> Any:
    before = written(row)
    return judge(row, send(scene, row, who), before)


def send(scene: Scene, row: Row, who: str) -> Any:
    method, path = row.request.split(" ", 1)
    path = fill(path, scene.ids)
    client = scene.page_client(who) if row.page else scene.api[who]
    body = fill(row.body, scene.ids)
    if row.content_type:
        response = client.generic(method, path, body, content_type=row.content_type)
    elif row.page:
        response = client.post(path, body or {}) if method == "POST" else client.get(path)
    elif body is None:
        response = getattr(client, method.lower())(path)
    else:
        response = getattr(client, method.lower())(path, body, format="json")
    return response


def run(scene: Scene, row: Row) -> None:
    seen = {}
    for who in WHO:
        with transaction.atomic():  # every principal meets the same scene
            seen[who] = outcome(scene, row, who)
            transaction.set_rollback(True)
    assert seen == dict(zip(WHO, row.outcomes, strict=True))


def ids(rows: list[Row]) -> list[str]:
    made = []
    for row in rows:
        fields = row.body if isinstance(row.body, dict) else {}
        detail = row.label or ",".join(f"{key}={value}" for key, value in fields.items()
                                       if key in ("escalation", "triage", "what", "resolution"))
        made.append(f"{row.request} {detail}".strip())
    return made


@pytest.mark.django_db
@pytest.mark.parametrize("row", API, ids=ids(API))
def test_api(scene, row):
    run(scene, row)


@pytest.mark.django_db
@pytest.mark.parametrize("row", PAGES, ids=ids(PAGES))
def test_pages(scene, row):
    run(scene, row)


@pytest.mark.django_db
@pytest.mark.parametrize("row", FORMS, ids=ids(FORMS))
def test_forms_behind_the_pages(scene, row):
    run(scene, row)


# --- what each one sees ------------------------------------------------------------------------

READS = [row for row in API + PAGES if row.request.startswith("GET ")]
# Who sees what refund-agent does and what was done to it (README, "Roles"): its owner and the
# reviewers; not another owner, and not another agent's token.
SEES_OPERATIONS = {"alice", "bob", "erin", "dana", "admin"}


def shown(scene: Scene, row: Row, who: str) -> str:
    with transaction.atomic():
        response = send(scene, row, who)
        transaction.set_rollback(True)
    if getattr(response, "streaming", False):
        return b"".join(response.streaming_content).decode(errors="replace")
    return response.content.decode(errors="replace")


@pytest.mark.django_db
@pytest.mark.parametrize("row", READS, ids=ids(READS))
def test_what_an_owner_of_another_agent_sees(scene, row):
    """Every page and endpoint oscar (an owner, not of refund-agent) may open shows nothing of
    refund-agent's observed state, findings, corrections, alerts or audit rows."""
    leaked = {who: [marker for marker in (OBSERVED_MARKER, AUDIT_MARKER)
                    if marker in shown(scene, row, who)]
              for who in WHO if who not in SEES_OPERATIONS}
    assert leaked == {who: [] for who in leaked}


@pytest.mark.django_db
def test_the_owner_and_the_reviewers_see_it_on_the_agents_page(scene):
    row = next(row for row in PAGES if row.request == "GET /agents/refund-agent/")
    for who in SEES_OPERATIONS:
        page = shown(scene, row, who)
        assert OBSERVED_MARKER in page and AUDIT_MARKER in page, who
    assert "shown to alice (its owner), approvers and compliance" in shown(scene, row, "oscar")


# --- nothing slips by --------------------------------------------------------------------------


def _join(prefix: str, pattern: str) -> str:
    # How Django joins the routes of nested patterns in ResolverMatch.route.
    return prefix + (pattern[1:] if prefix and pattern.startswith("^") else pattern)


def every_route(patterns: list | None = None, prefix: str = ""):
    """(route, view callback) for every pattern of the URL conf, as ResolverMatch.route names
    it."""
    for pattern in get_resolver().url_patterns if patterns is None else patterns:
        route = _join(prefix, str(pattern.pattern))
        if isinstance(pattern, URLResolver):
            yield from every_route(pattern.url_patterns, route)
        elif isinstance(pattern, URLPattern):
            yield route, pattern.callback


def api_methods(callback: Any) -> set[str]:
    """The HTTP methods a DRF view answers (besides HEAD and OPTIONS); empty for others."""
    cls = getattr(callback, "cls", None)
    if cls is None or not issubclass(cls, APIView):
        return set()
    if getattr(callback, "actions", None):
        offered = set(callback.actions)
    else:
        offered = {method for method in cls.http_method_names if hasattr(cls, method)}
    return {method.upper() for method in offered - {"head", "options"}}


def test_every_route_and_api_method_is_in_the_table():
    covered: set[tuple[str, str]] = set()
    for row in API + PAGES + FORMS:
        method, path = row.request.split(" ", 1)
        path = path.split("?")[0].format(pending=1, erins=1, escalation=1, erins_esc=1,
                                         decision_esc=1, finding=1, decision=uuid.uuid4(),
                                         token=1, retirement=1, waiver=1,
                                         pending_waiver=1, stop=1, lifting=1,
                                         window=1, policy=1, waiver_request=1)
        covered.add((method, resolve(path).route))
    missing = []
    for route, callback in every_route():
        if route.startswith(NOT_IN_THE_TABLE) and route not in {r for _, r in covered}:
            continue
        methods = api_methods(callback)
        if methods:
            missing += [f"{m} {route}" for m in sorted(methods) if (m, route) not in covered]
        elif route not in {r for _, r in covered}:
            missing.append(f"any {route}")
    assert missing == [], "add these to the permission matrix (or, with a reason, to "\
                          "NOT_IN_THE_TABLE)"
