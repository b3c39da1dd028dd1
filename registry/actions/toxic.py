"""Compliance's toxic combinations: every change is audited, re-judges the pending proposals
and re-checks the fleet's observed paths after commit."""

from typing import Any

from django.db import IntegrityError, transaction
from django.utils import timezone

import audit
from audit.choices import AuditAction
from config.errors import Conflict, Invalid, NotAllowed, NotFound
from registry import signals
from registry.actions.proposals import reevaluate_pending
from registry.choices import Role, ToxicEffect
from registry.models import ToxicCombination
from registry.roles import has_role
from registry.signals import announce
from registry.toxic import Capability

EDITABLE = ("description", "left", "right", "effect", "required_approvals", "enabled")


def _check_role(actor: Any) -> None:
    if not has_role(actor, Role.COMPLIANCE):
        raise NotAllowed("Only compliance staff manage toxic combinations.")


def _validate(fields: dict[str, Any]) -> None:
    details = []
    for side in ("left", "right"):
        try:
            fields[side] = str(Capability.parse(fields[side]))
        except ValueError as error:
            details.append({"pointer": f"/{side}", "message": str(error)})
    if fields["effect"] not in ToxicEffect.values:
        details.append({"pointer": "/effect",
                        "message": f"expected one of {', '.join(ToxicEffect.values)}"})
    elif (fields["effect"] == ToxicEffect.REQUIRE_APPROVALS
          and not 2 <= fields["required_approvals"] <= 5):
        details.append({"pointer": "/required_approvals", "message": "expected 2 to 5"})
    if details:
        raise Invalid(f"The toxic combination is not valid: {details[0]['message']}",
                      details=details)


def _after_change(actor: Any) -> None:
    reevaluate_pending(actor=actor)
    announce(signals.toxic_rules_changed)
    announce(signals.fleet_changed)  # the fleet view's rows and the toxic page's paths


@transaction.atomic
def create_toxic_combination(*, actor: Any, name: str, left: str, right: str,
                             effect: str = ToxicEffect.DENY, description: str = "",
                             required_approvals: int = 2,
                             enabled: bool = True) -> ToxicCombination:
    """Declare two capabilities that must not meet."""
    _check_role(actor)
    fields = {"description": description, "left": left, "right": right, "effect": effect,
              "required_approvals": required_approvals, "enabled": enabled}
    _validate(fields)
    try:
        with transaction.atomic():
            rule = ToxicCombination.objects.create(name=name, created_by=actor, **fields)
    except IntegrityError:
        raise Conflict(f"A toxic combination named {name!r} exists.", code="exists") from None
    audit.record(actor=actor, action=AuditAction.TOXIC_RULE_CREATED, target=f"toxic:{name}",
                 after=rule.to_dict())
    _after_change(actor)
    return rule


@transaction.atomic
def update_toxic_combination(rule: ToxicCombination, *, actor: Any,
                             **changes: Any) -> ToxicCombination:
    """Change a toxic combination (its name stays)."""
    _check_role(actor)
    rule = ToxicCombination.objects.select_for_update(no_key=True).filter(pk=rule.pk).first()
    if rule is None:
        raise NotFound("The toxic combination was deleted meanwhile.")
    before = rule.to_dict()
    fields = {name: changes.get(name, getattr(rule, name)) for name in EDITABLE}
    _validate(fields)
    for name, value in fields.items():
        setattr(rule, name, value)
    rule.updated_at = timezone.now()
    rule.save()
    audit.record(actor=actor, action=AuditAction.TOXIC_RULE_UPDATED, target=f"toxic:{rule.name}",
                 before=before, after=rule.to_dict())
    _after_change(actor)
    return rule


@transaction.atomic
def delete_toxic_combination(rule: ToxicCombination, *, actor: Any) -> None:
    """Remove a toxic combination; the paths it found are cleared by the next check."""
    _check_role(actor)
    before, name = rule.to_dict(), rule.name
    rule.delete()
    audit.record(actor=actor, action=AuditAction.TOXIC_RULE_DELETED, target=f"toxic:{name}",
                 before=before)
    _after_change(actor)
