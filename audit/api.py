"""The audit API for compliance: list, verify, export, keys, checkpoints and Merkle proofs;
evidence bundles per agent for its owner too."""

import logging
from typing import Any

from agentgov import checkpoints
from django.core.handlers.asgi import ASGIRequest
from django.http import StreamingHttpResponse
from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import OpenApiParameter, extend_schema, inline_serializer
from rest_framework import generics, pagination, serializers, viewsets
from rest_framework.exceptions import APIException, ValidationError
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from audit import keys, signer, tree
from audit.actions import PENDING_FIELDS, refuse_signing
from audit.actions import sign_for_export as sign_trail_for_export
from audit.chain import format_time
from audit.choices import BreakReason
from audit.export import FORMATS, export_chunks, export_chunks_async
from audit.filters import AuditFilterSerializer, filter_entries
from audit.models import (
    AuditChainHead,
    AuditCheckpoint,
    AuditEntry,
    AuditKey,
    AuditPendingEntry,
)
from audit.verify import verify_trail
from config.roles import HasRole, Role
from config.strict_input import ModelSerializer, QuerySerializer, Serializer

log = logging.getLogger(__name__)


class AuditEntrySerializer(ModelSerializer):
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


class SigningRefusedError(APIException):
    """The signer would not sign the head (audit/signer.py): no file is served unsigned."""

    status_code = 409
    default_code = "signing_refused"


def sign_for_export(**kwargs: Any) -> int:
    """sign_trail_for_export, with a refusal made loud (alert, /readyz, an entry) and answered
    409: a file signed over a rewritten trail is never served."""
    try:
        return sign_trail_for_export(**kwargs)
    except signer.SigningRefused as error:
        refuse_signing(error)
        raise SigningRefusedError(error.message) from error


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
        return filter_entries(AuditEntry.objects.all(), self._filters())

    def _filters(self) -> dict:
        params = AuditFilterSerializer(data=self.request.query_params)
        params.is_valid(raise_exception=True)
        return params.validated_data

    def list(self, request: Request, *args: Any, **kwargs: Any) -> Response:
        """The page, and on the first page the matching entries written but not yet placed
        (`pending`, newest first, `seq` null): a write is readable right after it returns,
        even when another writer held the placing lock, never hidden."""
        response = super().list(request, *args, **kwargs)
        filters = self._filters()
        if not request.query_params.get("cursor") and not filters.get("before"):
            queued = filter_entries(AuditPendingEntry.objects.all(), filters).order_by("-id")
            limit = self.paginator.get_page_size(request)
            response.data["pending"] = [
                {"seq": None, "pending": True, "at": format_time(entry.at),
                 **{name: getattr(entry, name) for name in PENDING_FIELDS if name != "at"}}
                for entry in queued[:limit]]
        return response


VerifyReport = inline_serializer(
    "AuditVerifyReport",
    {
        "ok": serializers.BooleanField(),
        "count": serializers.IntegerField(),
        "head_hash": serializers.CharField(),
        "first_broken_seq": serializers.IntegerField(allow_null=True),
        "problem": serializers.CharField(allow_null=True),
        "checkpoints": serializers.IntegerField(),
        "reason": serializers.ChoiceField(choices=BreakReason.choices, allow_null=True),
        "root": serializers.CharField(),
        "pending": serializers.IntegerField(),
    },
)


class AuditVerifyView(ComplianceOnly, APIView):
    """Walk the chain and its signed checkpoints; name the first broken seq. `?tree=full` also
    checks every stored tree node, not only those roots are made from."""

    @extend_schema(
        parameters=[OpenApiParameter("tree", OpenApiTypes.STR, enum=["roots", "full"])],
        responses=VerifyReport,
    )
    def get(self, request: Request) -> Response:
        scope = request.query_params.get("tree", "roots")
        if scope not in ("roots", "full"):
            raise ValidationError({"tree": "expected 'roots' or 'full'"})
        return Response(verify_trail(full_tree=scope == "full").to_dict())


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
        # Each server's own kind of iterator: Django buffers the whole body in a list when it
        # serves an async iterator under WSGI, or a sync one under ASGI.
        served_async = isinstance(request._request, ASGIRequest)
        chunks = export_chunks_async(fmt, size) if served_async else export_chunks(fmt, size)
        response = StreamingHttpResponse(chunks, content_type=FORMATS[fmt])
        response["Content-Disposition"] = f'attachment; filename="audit-trail.{fmt}"'
        return response


def _period_in_order(attrs: dict) -> dict:
    if attrs.get("from") and attrs.get("to") and attrs["from"] > attrs["to"]:
        raise serializers.ValidationError({"from": "must not be after 'to'."})
    return attrs


# `from` is a Python keyword, so the class is built rather than declared.
EvidencePeriod = type("EvidencePeriod", (QuerySerializer,), {
    "__doc__": "`from` and `to` (ISO 8601), both optional.",
    "from": serializers.DateTimeField(required=False, allow_null=True),
    "to": serializers.DateTimeField(required=False, allow_null=True),
    "validate": lambda self, attrs: _period_in_order(attrs),
})


class AuditKeySerializer(ModelSerializer):
    """A signing key's public half, as docs/audit-format.md publishes it."""

    created_at = serializers.SerializerMethodField()
    retired_at = serializers.SerializerMethodField()

    class Meta:
        model = AuditKey
        fields = ["key_id", "algorithm", "public_key", "created_at", "retired_at"]

    def get_created_at(self, key: AuditKey) -> str:
        return format_time(key.created_at)

    def get_retired_at(self, key: AuditKey) -> str | None:
        return format_time(key.retired_at) if key.retired_at else None


class AuditKeysView(ComplianceOnly, APIView):
    """Every key that ever signed a checkpoint, current and retired, with its id."""

    @extend_schema(responses=inline_serializer(
        "AuditKeys", {"keys": AuditKeySerializer(many=True)}))
    def get(self, request: Request) -> Response:
        return Response({"keys": AuditKeySerializer(AuditKey.objects.all(), many=True).data})


class AuditCheckpointSerializer(Serializer):
    """A signed tree head (legacy HMAC ones carry head_hash instead of root and key_id)."""

    size = serializers.IntegerField()
    root = serializers.CharField(required=False)
    head_hash = serializers.CharField(required=False)
    at = serializers.CharField()
    key_id = serializers.CharField(required=False)
    algorithm = serializers.CharField()
    signature = serializers.CharField()

    def to_representation(self, checkpoint: AuditCheckpoint) -> dict[str, Any]:
        return checkpoint.to_dict()


class AuditTrustedKeysView(ComplianceOnly, APIView):
    """The trusted key list verify uses (configuration, never the database): each key with
    the tree sizes it may sign, to save and give `agentctl audit verify --public-key`."""

    @extend_schema(responses=OpenApiTypes.OBJECT)
    def get(self, request: Request) -> Response:
        listed, ranges = keys.trusted()
        return Response(checkpoints.key_list(listed, ranges))


class AuditCheckpointList(ComplianceOnly, generics.ListAPIView):
    """Signed tree heads, newest first."""

    serializer_class = AuditCheckpointSerializer
    pagination_class = NewestFirst
    queryset = AuditCheckpoint.objects.all()


def tree_size() -> int:
    """How many entries the stored tree covers (the sequenced head)."""
    return AuditChainHead.objects.filter(pk=1).values_list("seq", flat=True).first() or 0


class InclusionQuery(QuerySerializer):
    """seq, and the tree size to prove it in (default: the newest checkpoint covering it)."""

    seq = serializers.IntegerField(min_value=1)
    size = serializers.IntegerField(min_value=1, required=False)

    def validate(self, attrs: dict) -> dict:
        size = tree_size()
        if attrs["seq"] > size:
            raise ValidationError({"seq": f"the tree holds {size} entries"})
        if "size" not in attrs:
            newest = AuditCheckpoint.objects.order_by("-seq").values_list("seq", flat=True).first()
            attrs["size"] = newest if newest and newest >= attrs["seq"] else size
        if not attrs["seq"] <= attrs["size"] <= size:
            raise ValidationError({"size": f"must be between seq and {size}, the tree's size"})
        return attrs


class ConsistencyQuery(QuerySerializer):
    """Two tree sizes, first <= second <= the tree's size."""

    first = serializers.IntegerField(min_value=1)
    second = serializers.IntegerField(min_value=1)

    def validate(self, attrs: dict) -> dict:
        size = tree_size()
        if attrs["second"] > size:
            raise ValidationError({"second": f"the tree holds {size} entries"})
        if attrs["first"] > attrs["second"]:
            raise ValidationError({"first": "must not be larger than second"})
        return attrs


class AuditInclusionProofView(ComplianceOnly, APIView):
    """RFC 6962 audit path of one entry in the tree of a given size."""

    @extend_schema(parameters=[InclusionQuery], responses=inline_serializer(
        "AuditInclusionProof", {
            "seq": serializers.IntegerField(), "leaf_index": serializers.IntegerField(),
            "tree_size": serializers.IntegerField(), "leaf_hash": serializers.CharField(),
            "proof": serializers.ListField(child=serializers.CharField())}))
    def get(self, request: Request) -> Response:
        query = InclusionQuery(data=request.query_params)
        query.is_valid(raise_exception=True)
        seq, size = query.validated_data["seq"], query.validated_data["size"]
        return Response({"seq": seq, "leaf_index": seq - 1, "tree_size": size,
                         "leaf_hash": tree.leaf(seq - 1),
                         "proof": tree.inclusion_proof(seq - 1, size)})


class AuditConsistencyProofView(ComplianceOnly, APIView):
    """RFC 6962 proof that the tree of `first` entries is a prefix of the tree of `second`."""

    @extend_schema(parameters=[ConsistencyQuery], responses=inline_serializer(
        "AuditConsistencyProof", {
            "first": serializers.IntegerField(), "second": serializers.IntegerField(),
            "proof": serializers.ListField(child=serializers.CharField())}))
    def get(self, request: Request) -> Response:
        query = ConsistencyQuery(data=request.query_params)
        query.is_valid(raise_exception=True)
        first, second = query.validated_data["first"], query.validated_data["second"]
        return Response({"first": first, "second": second,
                         "proof": tree.consistency_proof(first, second)})
