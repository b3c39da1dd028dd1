"""The overview's stop panel: the stops in force for everyone; the button for compliance."""

from typing import Any

from django import template

from compliance.choices import StopScope
from compliance.stops import active_stops
from registry.choices import Role
from registry.roles import has_role

register = template.Library()


@register.inclusion_tag("compliance/_stop_panel.html", takes_context=True)
def stop_panel(context: dict[str, Any]) -> dict[str, Any]:
    user = context["request"].user
    return {"stops": active_stops(), "can_stop": has_role(user, Role.COMPLIANCE),
            "scopes": StopScope.choices, "user": user, "csrf_token": context.get("csrf_token")}
