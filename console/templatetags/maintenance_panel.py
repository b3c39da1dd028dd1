"""Maintenance windows on the fleet page (every window not over) and on an agent's page (the
windows covering it, and the stop holding it, if any)."""

from typing import Any

from django import template
from django.utils import timezone

from compliance.maintenance import windows_about
from compliance.models import MaintenanceWindow
from compliance.stops import stop_covering

register = template.Library()


@register.inclusion_tag("compliance/_maintenance_fleet.html")
def maintenance_fleet() -> dict[str, Any]:
    now = timezone.now()
    windows = list(MaintenanceWindow.objects.select_related("created_by").filter(
        cancelled_at__isnull=True, ends_at__gt=now).order_by("starts_at")[:50])
    return {"windows": windows, "now": now}


@register.inclusion_tag("compliance/_maintenance_agent.html")
def maintenance_agent(agent: Any) -> dict[str, Any]:
    now = timezone.now()
    return {"windows": windows_about(agent, now), "now": now, "stop": stop_covering(agent)}
