"""The approver's queue over the API: `GET /api/v1/inbox` (counts and the lines, most urgent
first), `POST /api/v1/inbox/triage` (assign or acknowledge many at once) and
`POST /api/v1/incidents/{id}/resolve` (one decision for every escalation of an incident)."""

from typing import Any

from django.utils import timezone
from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import OpenApiParameter, extend_schema
from rest_framework import serializers
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from config.errors import DomainError
from config.pagination import Page
from config.permissions import IsPerson
from config.strict_input import Serializer
from reconciliation import actions, inbox
from reconciliation.choices import Resolution
from registry.choices import Role
from registry.roles import HasRole


class ApproverOnly:
    permission_classes = [IsPerson, HasRole]
    required_roles = (Role.APPROVER,)


class InboxView(APIView):
    """`GET /api/v1/inbox[?kind=decision|incident|escalation|proposal|recertification]`: what
    waits for this approver to decide (not their own proposals, not ones they approved, not
    what four eyes keeps from them) and, for an owner, their agents to recertify by the review
    date; most urgent first (least time left to its SLA, deadline or review date), 50 to a
    page (`page`, `page_size` up to 500; an incident is one item, never split). The counts
    are the whole queue's, whatever the kind and page."""

    permission_classes = [IsPerson, HasRole]
    required_roles = (Role.APPROVER, Role.OWNER)

    @extend_schema(parameters=[OpenApiParameter("kind", str), OpenApiParameter("page", int),
                               OpenApiParameter("page_size", int)],
                   responses=OpenApiTypes.OBJECT)
    def get(self, request: Request) -> Response:
        kind = request.query_params.get("kind", "")
        if kind and kind not in inbox.KINDS:
            raise DomainError(f"Unknown kind {kind[:40]!r}.", details=[
                {"pointer": "/kind", "message": f"one of {', '.join(inbox.KINDS)}"}])
        now = timezone.now()
        queue = inbox.queue_for(request.user, now)
        pages = Page()
        page = pages.paginate_queryset([e for e in queue if not kind or e.kind == kind],
                                       request, view=self)
        return Response({**inbox.tally(queue), "count": pages.page.paginator.count,
                         "next": pages.get_next_link(), "previous": pages.get_previous_link(),
                         "items": [item.to_dict(now) for item in inbox.items(page)]})


class BulkTriageSerializer(Serializer):
    """Escalation ids (an incident's first is enough: its siblings come with it)."""

    escalations = serializers.ListField(child=serializers.IntegerField(min_value=1),
                                        allow_empty=False, max_length=actions.incidents.MAX_BULK)
    assign = serializers.BooleanField(default=False)
    acknowledge = serializers.BooleanField(default=False)


class BulkTriageView(ApproverOnly, APIView):
    """`POST /api/v1/inbox/triage`: assign to me and/or acknowledge many items, all or none."""

    @extend_schema(request=BulkTriageSerializer, responses=OpenApiTypes.OBJECT)
    def post(self, request: Request) -> Response:
        body = BulkTriageSerializer(data=request.data)
        body.is_valid(raise_exception=True)
        data = body.validated_data
        done = actions.triage_many(data["escalations"], actor=request.user,
                                   assign=data["assign"], acknowledge=data["acknowledge"])
        return Response({"escalations": sorted(e.pk for e in done)})


class IncidentResolveSerializer(Serializer):
    resolution = serializers.ChoiceField(choices=Resolution.choices)
    comment = serializers.CharField(max_length=2000, allow_blank=True, default="")


class IncidentResolveView(ApproverOnly, APIView):
    """`POST /api/v1/incidents/{id}/resolve`: one resolution and comment for every open
    escalation of the incident escalation `id` belongs to."""

    @extend_schema(request=IncidentResolveSerializer, responses=OpenApiTypes.OBJECT)
    def post(self, request: Request, pk: int) -> Response:
        actions.authorise_escalation(pk, actor=request.user)
        body = IncidentResolveSerializer(data=request.data)
        body.is_valid(raise_exception=True)
        resolved = actions.resolve_incident(pk, actor=request.user, **body.validated_data)
        return Response(_resolved(resolved))


def _resolved(escalations: list[Any]) -> dict[str, Any]:
    return {"escalations": [{"id": e.pk, "status": e.status, "resolution": e.resolution}
                            for e in escalations]}
