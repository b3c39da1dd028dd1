"""The audit API for compliance: list, verify, export."""

from typing import Any

from django.db import transaction
from django.http import StreamingHttpResponse
from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import OpenApiParameter, extend_schema, inline_serializer
from rest_framework import pagination, serializers, viewsets
from rest_framework.exceptions import ValidationError
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

import audit
from audit.chain import format_time
from audit.choices import AuditAction
from audit.export import FORMATS, export_chunks_async
from audit.filters import AuditFilterSerializer, filter_entries
from audit.models import AuditEntry
from audit.verify import verify_trail
from registry.choices import Role
from registry.roles import HasRole


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
    """The whole trail as JSONL or CSV, streamed; the export itself is audited first."""

    @extend_schema(
        parameters=[OpenApiParameter("format", OpenApiTypes.STR, enum=sorted(FORMATS))],
        responses={(200, "application/x-ndjson"): OpenApiTypes.STR,
                   (200, "text/csv"): OpenApiTypes.STR},
    )
    def get(self, request: Request) -> StreamingHttpResponse:
        fmt = request.query_params.get("format", "jsonl")
        if fmt not in FORMATS:
            raise ValidationError({"format": f"expected one of {', '.join(sorted(FORMATS))}"})
        with transaction.atomic():
            audit.record(actor=request.user, action=AuditAction.AUDIT_EXPORTED,
                         target="audit:trail", after={"format": fmt})
        response = StreamingHttpResponse(export_chunks_async(fmt), content_type=FORMATS[fmt])
        response["Content-Disposition"] = f'attachment; filename="audit-trail.{fmt}"'
        return response
