"""Who may see, revoke and keep API tokens, and what happens to an agent's tokens when the agent
changes owner. Each change writes its audit row."""

from typing import Any

from django.contrib.auth.models import User
from django.db import transaction
from django.db.models import Q, QuerySet
from django.utils import timezone

import audit
from audit.choices import AuditAction
from config.errors import Conflict, NotAllowed, NotFound
from registry.choices import Role
from registry.desired_push import announce_desired_change
from registry.models import Agent, ApiToken
from registry.principals import AgentPrincipal
from registry.roles import has_role


def _is_operator(actor: Any) -> bool:
    """The command line and the system act with every right (they hold the machine)."""
    return isinstance(actor, str) and actor.startswith("system:")


def visible_tokens(actor: Any) -> QuerySet[ApiToken]:
    """Tokens a person may see and revoke: their own, their agents', or every one for admin."""
    tokens = ApiToken.objects.select_related("user", "agent__owner").order_by("-created_at")
    if _is_operator(actor) or has_role(actor, Role.ADMIN):
        return tokens
    if isinstance(actor, AgentPrincipal) or not getattr(actor, "pk", None):
        return tokens.none()
    return tokens.filter(Q(user=actor) | Q(agent__owner=actor))


def _token_for(token_id: int, actor: Any) -> ApiToken:
    token = (visible_tokens(actor).select_for_update(no_key=True, of=("self",))
             .filter(pk=token_id).first())
    if token is None:
        raise NotFound(f"No token {token_id}.")
    return token


def _label(token: ApiToken) -> dict[str, Any]:
    return {"token": token.key_prefix, "holder": token.user.username,
            "agent": token.agent.name if token.agent_id else None}


@transaction.atomic
def revoke_api_token(token: ApiToken | int, *, actor: Any, reason: str = "") -> ApiToken:
    """Revoke a token at once (its holder, its agent's owner, or an admin); later requests
    with it get 401. Revoking a revoked token changes nothing."""
    token = _token_for(token.pk if isinstance(token, ApiToken) else token, actor)
    if token.revoked_at is not None:
        return token
    token.revoked_at = timezone.now()
    token.save(update_fields=["revoked_at"])
    if token.agent_id:
        announce_desired_change(token.agent.name)  # its held long-poll answers 401 at once
    audit.record(actor=actor, action=AuditAction.TOKEN_REVOKED,
                 target=f"user:{token.user.username}",
                 agent=token.agent.name if token.agent_id else "",
                 before={**_label(token), "status": "active"}, after={"status": "revoked"},
                 reason=reason)
    return token


@transaction.atomic
def keep_agent_token(token_id: int, *, actor: Any) -> ApiToken:
    """The agent's new owner takes over a token suspended by a hand-over: it works again, now
    held by them (so four eyes counts them for what the agent proposes with it)."""
    token = _token_for(token_id, actor)
    if token.agent_id is None or token.agent.owner_id != getattr(actor, "pk", None):
        raise NotAllowed("Only the agent's owner keeps its tokens.")
    if token.revoked_at is not None or token.suspended_at is None:
        raise Conflict(f"Token {token.key_prefix}… is {token.status}; only a token suspended "
                       "by a hand-over can be kept.", code="not_suspended")
    before = _label(token)
    token.user, token.suspended_at = actor, None
    token.save(update_fields=["user", "suspended_at"])
    audit.record(actor=actor, action=AuditAction.TOKEN_KEPT, target=f"user:{actor.username}",
                 agent=token.agent.name, before=before, after=_label(token))
    return token


def suspend_for_handover(agent: Agent, old_owner: User, *, actor: Any) -> int:
    """Inside the hand-over's transaction: every live token of the agent that the old owner
    holds stops working until the new owner keeps it."""
    now = timezone.now()
    tokens = list(agent.tokens.select_for_update(no_key=True).filter(
        user=old_owner, revoked_at__isnull=True, suspended_at__isnull=True))
    for token in tokens:
        token.suspended_at = now
        token.save(update_fields=["suspended_at"])
        audit.record(actor=actor, action=AuditAction.TOKEN_SUSPENDED,
                     target=f"user:{old_owner.username}", agent=agent.name,
                     before={**_label(token), "status": "active"},
                     after={"status": "suspended"},
                     reason=f"{agent.name} was handed to {agent.owner.username}; the new owner "
                            "keeps the token or it stays suspended")
    return len(tokens)
