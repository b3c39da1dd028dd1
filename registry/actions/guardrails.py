"""Compliance's guardrails: saved only when their CEL expression is sound; every change
re-evaluates the pending proposals."""

from typing import Any

from django.db import IntegrityError, transaction
from django.utils import timezone

import audit
from audit.choices import AuditAction
from config.errors import Conflict, Invalid, NotAllowed, NotFound
from registry import signals
from registry.actions.proposals import reevaluate_pending
from registry.choices import GuardrailEffect, OverdueEffect, Role
from registry.guardrails import ExpressionError, ExpressionTooCostly, check_expression
from registry.models import Guardrail
from registry.roles import has_role
from registry.signals import announce

EDITABLE = ("description", "expression", "selector", "effect", "required_approvals", "message",
            "enabled", "overdue_effect", "safe_tools")


def _check_role(actor: Any) -> None:
    if not has_role(actor, Role.COMPLIANCE):
        raise NotAllowed("Only compliance staff manage guardrails.")


def _validate(fields: dict[str, Any]) -> None:
    try:
        check_expression(fields["expression"], timezone.now())
    except ExpressionTooCostly as error:
        raise Invalid(error.message[:1].upper() + error.message[1:] + ".",
                      code="expression_too_costly",
                      details=[{"pointer": "/expression", "message": error.message}]) from None
    except ExpressionError as error:
        position = f" (line {error.line}, column {error.column})" if error.line else ""
        raise Invalid(f"The expression is not valid CEL: {error.message}{position}",
                      code="invalid_expression",
                      details=[{"pointer": "/expression", "message": error.message,
                                "line": error.line, "column": error.column}]) from None
    effect = GuardrailEffect(fields["effect"])
    if effect == GuardrailEffect.REQUIRE_APPROVALS and not 2 <= fields["required_approvals"] <= 5:
        raise Invalid("require_approvals needs between 2 and 5 approvers.",
                      details=[{"pointer": "/required_approvals", "message": "expected 2 to 5"}])
    safe = fields.get("safe_tools", [])
    if not isinstance(safe, list) or not all(isinstance(t, str) and t for t in safe):
        raise Invalid("safe_tools is a list of tool names.",
                      details=[{"pointer": "/safe_tools", "message": "expected tool names"}])
    if fields.get("overdue_effect") == OverdueEffect.RESTRICT and not safe:
        raise Invalid("An overdue effect of restrict needs the safe tools it keeps.",
                      details=[{"pointer": "/safe_tools",
                                "message": "expected at least one tool name"}])


@transaction.atomic
def create_guardrail(*, actor: Any, name: str, expression: str, effect: str, message: str,
                     description: str = "", selector: dict | None = None,
                     required_approvals: int = 2, enabled: bool = True,
                     overdue_effect: str = "", safe_tools: list | None = None) -> Guardrail:
    """Save a new guardrail and re-evaluate pending proposals against it."""
    _check_role(actor)
    fields = {"description": description, "expression": expression, "selector": selector or {},
              "effect": effect, "required_approvals": required_approvals, "message": message,
              "enabled": enabled, "overdue_effect": overdue_effect,
              "safe_tools": safe_tools or []}
    _validate(fields)
    try:
        with transaction.atomic():
            guardrail = Guardrail.objects.create(name=name, created_by=actor, **fields)
    except IntegrityError:
        raise Conflict(f"A guardrail named {name!r} exists.", code="exists") from None
    audit.record(actor=actor, action=AuditAction.GUARDRAIL_CREATED,
                 target=f"guardrail:{name}", after=guardrail.to_dict())
    reevaluate_pending(actor=actor)
    announce(signals.fleet_changed)  # the fleet view judges every agent by it
    return guardrail


@transaction.atomic
def update_guardrail(guardrail: Guardrail, *, actor: Any, **changes: Any) -> Guardrail:
    """Change a guardrail's fields and re-evaluate pending proposals."""
    _check_role(actor)
    guardrail = Guardrail.objects.select_for_update(no_key=True).filter(pk=guardrail.pk).first()
    if guardrail is None:
        raise NotFound("The guardrail was deleted meanwhile.")
    before = guardrail.to_dict()
    fields = {name: changes.get(name, getattr(guardrail, name)) for name in EDITABLE}
    _validate(fields)
    for name, value in fields.items():
        setattr(guardrail, name, value)
    guardrail.updated_at = timezone.now()
    guardrail.save()
    audit.record(actor=actor, action=AuditAction.GUARDRAIL_UPDATED,
                 target=f"guardrail:{guardrail.name}", before=before, after=guardrail.to_dict())
    reevaluate_pending(actor=actor)
    announce(signals.fleet_changed)  # the fleet view judges every agent by it
    return guardrail


@transaction.atomic
def delete_guardrail(guardrail: Guardrail, *, actor: Any) -> None:
    """Remove a guardrail and re-evaluate pending proposals without it."""
    _check_role(actor)
    before = guardrail.to_dict()
    name = guardrail.name
    guardrail.delete()
    audit.record(actor=actor, action=AuditAction.GUARDRAIL_DELETED, target=f"guardrail:{name}",
                 before=before)
    reevaluate_pending(actor=actor)
    announce(signals.fleet_changed)  # the fleet view judges every agent by it
