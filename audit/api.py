"""The audit API: list, verify and export for compliance; evidence bundles per agent."""

from typing import Any

from django.conf import settings
from django.http import StreamingHttpResponse
from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import OpenApiParameter, extend_schema, inline_serializer
from rest_framework import pagination, serializers, viewsets
from rest_framework.exceptions import NotFound, PermissionDenied, ValidationError
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from audit.actions import sign_for_export
from audit.chain import format_time
from audit.evidence import TooManyEntries, bundle
from audit.export import FORMATS, export_chunks_async
from audit.filters import AuditFilterSerializer, filter_entries
from audit.models import AuditEntry
from audit.verify import verify_trail
from registry.api import IsPerson
from registry.choices import Role
from registry.models import Agent
from registry.roles import HasRole, has_role


class AuditEntrySerializer(serializers.ModelSerializer):
    """One entry exactly as it is hashed and exported."""

    at = serializers.SerializerMethodField()

    class Meta:
        model = AuditEntry
        fields = ["seq", "at", "actor", "action", "target", "agent", "before", "after",
                  "reason", "request_id", "prev_hash", "hash"]

    def get_at(self, entry: AuditEntry) -> str:
        return format_time(entry.at)


class NewestFirst(pagination.CursorPagination):
    ordering = "-seq"
    page_size = 50
    max_page_size = 500
    page_size_query_param = "page_size"


class ComplianceOnly:
    permission_classes = [HasRole]
    required_roles = (Role.COMPLIANCE,)


@extend_schema(parameters=[AuditFilterSerializer])
class AuditEntryViewSet(ComplianceOnly, viewsets.ReadOnlyModelViewSet):
    """The trail, newest first, filtered by agent, actor, action and time range."""

    serializer_class = AuditEntrySerializer
    pagination_class = NewestFirst
    lookup_field = "seq"

    def get_queryset(self) -> Any:
        params = AuditFilterSerializer(data=self.request.query_params)
        params.is_valid(raise_exception=True)
        return filter_entries(AuditEntry.objects.all(), params.validated_data)


VerifyReport = inline_serializer(
    "AuditVerifyReport",
    {
        "ok": serializers.BooleanField(),
        "count": serializers.IntegerField(),
        "head_hash": serializers.CharField(),
        "first_broken_seq": serializers.IntegerField(allow_null=True),
        "problem": serializers.CharField(allow_null=True),
        "checkpoints": serializers.IntegerField(),
    },
)


class AuditVerifyView(ComplianceOnly, APIView):
    """Walk the chain and its signed checkpoints; name the first broken seq."""

    @extend_schema(responses=VerifyReport)
    def get(self, request: Request) -> Response:
        return Response(verify_trail().to_dict())


class AuditExportView(ComplianceOnly, APIView):
    """The whole trail as v1 JSONL (with its signed checkpoints) or CSV, streamed; the export is
    audited first and a checkpoint signed after it, so the file ends at a signed tree head."""

    @extend_schema(
        parameters=[OpenApiParameter("format", OpenApiTypes.STR, enum=sorted(FORMATS))],
        responses={(200, "application/x-ndjson"): OpenApiTypes.STR,
                   (200, "text/csv"): OpenApiTypes.STR},
    )
    def get(self, request: Request) -> StreamingHttpResponse:
        fmt = request.query_params.get("format", "jsonl")
        if fmt not in FORMATS:
            raise ValidationError({"format": f"expected one of {', '.join(sorted(FORMATS))}"})
        size = sign_for_export(actor=request.user, target="audit:trail", after={"format": fmt})
        response = StreamingHttpResponse(export_chunks_async(fmt, size),
                                         content_type=FORMATS[fmt])
        response["Content-Disposition"] = f'attachment; filename="audit-trail.{fmt}"'
        return response


def _period_in_order(attrs: dict) -> dict:
    if attrs.get("from") and attrs.get("to") and attrs["from"] > attrs["to"]:
        raise serializers.ValidationError({"from": "must not be after 'to'."})
    return attrs


# `from` is a Python keyword, so the class is built rather than declared.
EvidencePeriod = type("EvidencePeriod", (serializers.Serializer,), {
    "__doc__": "`from` and `to` (ISO 8601), both optional.",
    "from": serializers.DateTimeField(required=False, allow_null=True),
    "to": serializers.DateTimeField(required=False, allow_null=True),
    "validate": lambda self, attrs: _period_in_order(attrs),
})


class AgentEvidenceView(APIView):
    """`GET /api/v1/agents/{name}/evidence?from=&to=`: the agent's entries in the period, each
    with an inclusion proof to one signed checkpoint, for `agentctl audit verify` offline.
    For the agent's owner, compliance and admin; fetching it is audited."""

    permission_classes = [IsPerson]

    @extend_schema(
        parameters=[OpenApiParameter("from", OpenApiTypes.DATETIME),
                    OpenApiParameter("to", OpenApiTypes.DATETIME)],
        responses={200: OpenApiTypes.OBJECT},
    )
    def get(self, request: Request, name: str) -> Response:
        agent = Agent.objects.filter(name=name).only("name", "owner_id").first()
        if agent is None:
            raise NotFound(f"No agent named {name!r}.")
        user = request.user
        if not ((has_role(user, Role.OWNER) and agent.owner_id == user.pk)
                or has_role(user, Role.COMPLIANCE)):
            raise PermissionDenied(f"You may not fetch the evidence of {name}.")
        # The page's empty date fields mean "no bound", as a missing parameter does.
        period = EvidencePeriod(data={k: v for k, v in request.query_params.items() if v})
        period.is_valid(raise_exception=True)
        start, end = period.validated_data.get("from"), period.validated_data.get("to")
        size = sign_for_export(
            actor=user, target=f"agent:{name}",
            after={"format": "evidence", "from": format_time(start) if start else None,
                   "to": format_time(end) if end else None})
        try:
            document = bundle(name, start, end, size, settings.AUDIT_EVIDENCE_MAX_ENTRIES)
        except TooManyEntries as error:
            raise ValidationError({"to": str(error)}) from error
        response = Response(document)
        response["Content-Disposition"] = f'attachment; filename="evidence-{name}.json"'
        return response
