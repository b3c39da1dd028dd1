"""`GET /api/v1/fleet`: the fleet view for compliance as JSON, read from the snapshot the
workers keep (reconciliation/fleet_snapshot.py; reconciliation/fleet.py computes it)."""

from drf_spectacular.utils import extend_schema, inline_serializer
from rest_framework import serializers
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from config.permissions import IsPerson
from reconciliation import fleet_snapshot
from registry.choices import Role
from registry.roles import HasRole

READERS = (Role.COMPLIANCE, Role.APPROVER, Role.ADMIN)


def _names() -> serializers.ListField:
    """At most MAX_NAMES agent names (the whole count is the field beside it)."""
    return serializers.ListField(child=serializers.CharField())


FLEET_SCHEMA = inline_serializer("Fleet", {
    "as_of": serializers.DateTimeField(help_text="when the workers computed this view"),
    "age_seconds": serializers.IntegerField(),
    "refreshing": serializers.BooleanField(help_text="a newer view is being computed"),
    "at": serializers.DateTimeField(),
    "agents": serializers.IntegerField(help_text="approved agents, not retired"),
    "rules": serializers.ListField(child=inline_serializer("FleetRule", {
        "kind": serializers.ChoiceField(choices=["guardrail", "toxic_combination", "group_rule",
                                                 "group_budget", "budget"]),
        "name": serializers.CharField(), "effect": serializers.CharField(),
        "description": serializers.CharField(), "covers_count": serializers.IntegerField(),
        "covers": _names(), "violations_count": serializers.IntegerField(),
        "violations": _names(), "trend": serializers.ListField(child=serializers.IntegerField()),
        "requirement": serializers.BooleanField(
            help_text="step-up or more approvers: met by approval, never a violation"),
        "met_by_approval_count": serializers.IntegerField(),
        "met_by_approval": _names(), "link": serializers.CharField()})),
    "uncovered": _names(), "uncovered_count": serializers.IntegerField(),
    "open_findings": serializers.DictField(child=serializers.IntegerField()),
    "open_findings_agents": serializers.IntegerField(),
    "silent": serializers.ListField(child=serializers.JSONField()),
    "silent_count": serializers.IntegerField(),
    "compliance": serializers.DictField(child=serializers.IntegerField()),
    "charts": serializers.JSONField()})


class FleetView(APIView):
    """`GET /api/v1/fleet`: every rule with the agents it covers, its current violations and
    trend, the agents no rule covers, and the agents silent now; each list of names at most
    50 long beside its whole count; `as_of` says when the workers computed it."""

    permission_classes = [IsPerson, HasRole]
    required_roles = READERS

    @extend_schema(responses=FLEET_SCHEMA)
    def get(self, request: Request) -> Response:
        snapshot = fleet_snapshot.current()
        return Response({**fleet_snapshot.freshness(snapshot), **snapshot.fleet})
