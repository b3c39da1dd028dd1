"""`GET /api/v1/agents/{name}/permission-sources`: what each source of record last said about
the agent's grants, and whether that is known now or the last known state of a source that is
down (`unknown`)."""

from drf_spectacular.utils import extend_schema, inline_serializer
from rest_framework import serializers
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from config.permissions import IsPerson
from reconciliation.api import agent_for
from registry.choices import Role
from sources.choices import ReadingStatus
from sources.readings import readings_for

Reading = inline_serializer("PermissionSourceReading", {
    "source": serializers.CharField(), "type": serializers.CharField(),
    "role": serializers.CharField(), "status": serializers.ChoiceField(ReadingStatus.values),
    "access": serializers.DictField(), "tools": serializers.DictField(
        help_text="aws_iam: each mapped spec tool, allowed, partial or null (not allowed)"),
    "grants": serializers.ListField(
        child=serializers.DictField()),
    "read_at": serializers.DateTimeField(allow_null=True), "error": serializers.CharField()})


class PermissionSourcesView(APIView):
    """`GET /api/v1/agents/{name}/permission-sources`: what each source of record last read of
    the agent's grants, `known` or `unknown` (a source down: its last known state). For the
    agent's owner, approvers, compliance and admin."""

    permission_classes = [IsPerson]

    @extend_schema(responses={200: inline_serializer("PermissionSources", {
        "agent": serializers.CharField(), "sources": serializers.ListField(child=Reading)})})
    def get(self, request: Request, name: str) -> Response:
        agent = agent_for(request, name, people=(Role.APPROVER, Role.COMPLIANCE, Role.ADMIN))
        sources = readings_for(agent)
        return Response({"agent": agent.name, "sources": sources})
