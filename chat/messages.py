"""What a chat message says: a proposal's permission changes or an escalation's reason, with
the buttons the console offers for it (Slack Block Kit; Teams cards carry the same fields)."""

from typing import Any

from django.conf import settings

from chat.choices import Button, Subject
from reconciliation.choices import EscalationKind

MAX_LINES = 10


def _actions(subject: str, pk: int, buttons: list[tuple[str, str, str]],
             link: str) -> dict[str, Any]:
    elements: list[dict[str, Any]] = [
        {"type": "button", "action_id": action, "value": f"{subject}:{pk}",
         "text": {"type": "plain_text", "text": label}, **({"style": style} if style else {})}
        for action, label, style in buttons]
    elements.append({"type": "button", "action_id": "open", "url": link,
                     "text": {"type": "plain_text", "text": "Open in the console"}})
    return {"type": "actions", "block_id": f"{subject}:{pk}", "elements": elements}


def proposal_message(version: Any) -> dict[str, Any]:
    """A pending proposal: agent, who proposed it, risk, and its permission diff in words."""
    link = f"{settings.SITE_URL}/proposals/{version.pk}/"
    changes = version.permission_changes or []
    lines = [f"• {c.get('text', '')} ({c.get('risk', '')})" for c in changes[:MAX_LINES]]
    if len(changes) > MAX_LINES:
        lines.append(f"• … and {len(changes) - MAX_LINES} more in the console")
    proposer = version.proposed_by.username if version.proposed_by_id else "an agent"
    title = (f"Proposal #{version.pk} for *{version.agent.name}* by {proposer}, "
             f"risk {version.risk}")
    diff = "\n".join(lines) or "No permission changes."
    return {
        "text": f"Proposal #{version.pk} for {version.agent.name} waits for approval",
        "blocks": [
            {"type": "section", "text": {"type": "mrkdwn", "text": title}},
            {"type": "section", "text": {"type": "mrkdwn", "text": diff}},
            _actions(Subject.PROPOSAL, version.pk,
                     [(Button.APPROVE, "Approve", "primary"), (Button.REJECT, "Reject", "danger")],
                     link),
        ],
    }


def escalation_message(escalation: Any) -> dict[str, Any]:
    """An open escalation: a pending decision (allow or deny), drift (revert) or behaviour
    (acknowledge); what else it allows is in the console."""
    link = f"{settings.SITE_URL}/escalations/#escalation-{escalation.pk}"
    if escalation.decision_id is not None:
        buttons = [(Button.ALLOW, "Allow", "primary"), (Button.DENY, "Deny", "danger")]
        request = escalation.decision.request or {}
        what = f"Pending decision: {request.get('action', 'an action')}"
        if request.get("amount") is not None:
            what += f" of {request['amount']}"
    elif escalation.kind == EscalationKind.DRIFT:
        buttons, what = [(Button.REVERT, "Revert", "primary")], "Drift escalated"
    else:
        buttons, what = [(Button.ACKNOWLEDGE, "Acknowledge", "")], "Behaviour escalated"
    agent = escalation.agent.name if escalation.agent_id else "an agent"
    text = f"{what} for *{agent}*: {escalation.reason}"
    return {
        "text": f"Escalation #{escalation.pk} for {agent} waits for an approver",
        "blocks": [
            {"type": "section", "text": {"type": "mrkdwn", "text": text}},
            _actions(Subject.ESCALATION, escalation.pk, buttons, link),
        ],
    }
