"""The stop button's API: `GET/POST /api/v1/stops`, `POST /api/v1/stops/{id}/lift` (the first
person asks) and `POST /api/v1/stops/{id}/lift/approve` (a second person approves)."""

from drf_spectacular.utils import extend_schema, inline_serializer
from rest_framework import serializers, status
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from compliance import actions
from compliance.choices import StopScope
from compliance.models import Stop
from registry.api import IsPerson
from registry.choices import Role
from registry.roles import HasRole

STOP_FIELDS = {
    "id": serializers.IntegerField(), "scope": serializers.CharField(),
    "selector": serializers.DictField(child=serializers.CharField()),
    "owner": serializers.CharField(allow_null=True), "reaches": serializers.CharField(),
    "reason": serializers.CharField(), "stopped_by": serializers.CharField(),
    "stopped_at": serializers.DateTimeField(),
    "agents": serializers.ListField(child=serializers.CharField(),
                                    help_text="the agents this stop suspended"),
    "active": serializers.BooleanField(),
    "lift_requested_by": serializers.CharField(allow_null=True),
    "lift_requested_at": serializers.DateTimeField(allow_null=True),
    "lift_reason": serializers.CharField(),
    "lifted_by": serializers.CharField(allow_null=True),
    "lifted_at": serializers.DateTimeField(allow_null=True)}
StopSerializer = inline_serializer("Stop", STOP_FIELDS)
StopListSerializer = inline_serializer("StopList", STOP_FIELDS, many=True)


class PlaceStopSerializer(serializers.Serializer):
    scope = serializers.ChoiceField(choices=StopScope.choices)
    reason = serializers.CharField(max_length=1000)
    # read as sent: the action refuses a number where a label value belongs
    team = serializers.JSONField(required=False, help_text="scope team: the `team` label value")
    selector = serializers.JSONField(required=False, help_text=(
        "scope selector: the labels an agent must all carry, e.g. {\"env\": \"prod\"}"))
    owner = serializers.JSONField(required=False, help_text="scope owner: the username")


class LiftSerializer(serializers.Serializer):
    reason = serializers.CharField(max_length=1000)


class StopsView(APIView):
    """`GET /api/v1/stops` lists stops (newest first; `?active=true` only those in force);
    `POST` presses the stop button (compliance or admin)."""

    permission_classes = [IsPerson, HasRole]  # decided before the body is read
    required_roles = (Role.COMPLIANCE, Role.APPROVER)

    @extend_schema(responses=StopListSerializer)
    def get(self, request: Request) -> Response:
        stops = Stop.objects.select_related("owner", "stopped_by", "lift_requested_by",
                                            "lifted_by").order_by("-stopped_at", "-pk")
        if request.query_params.get("active") in ("true", "1"):
            stops = stops.filter(lifted_at__isnull=True)
        return Response([stop.to_dict() for stop in stops[:200]])

    @extend_schema(request=PlaceStopSerializer, responses={201: StopSerializer})
    def post(self, request: Request) -> Response:
        body = PlaceStopSerializer(data=request.data)
        body.is_valid(raise_exception=True)
        stop = actions.place_stop(actor=request.user, **body.validated_data)
        return Response(stop.to_dict(), status=status.HTTP_201_CREATED)

    def check_permissions(self, request: Request) -> None:
        if request.method == "POST":
            self.required_roles = (Role.COMPLIANCE,)
        super().check_permissions(request)


class StopLiftView(APIView):
    """`POST /api/v1/stops/{id}/lift`: the first person asks to lift a stop, with a reason."""

    permission_classes = [IsPerson, HasRole]
    required_roles = (Role.COMPLIANCE,)

    @extend_schema(request=LiftSerializer, responses=StopSerializer)
    def post(self, request: Request, pk: int) -> Response:
        body = LiftSerializer(data=request.data)
        body.is_valid(raise_exception=True)
        return Response(actions.request_lift(pk, actor=request.user,
                                             **body.validated_data).to_dict())


class StopLiftApproveView(APIView):
    """`POST /api/v1/stops/{id}/lift/approve`: a second person approves the lift."""

    permission_classes = [IsPerson, HasRole]
    required_roles = (Role.COMPLIANCE,)

    @extend_schema(request=None, responses=StopSerializer)
    def post(self, request: Request, pk: int) -> Response:
        return Response(actions.approve_lift(pk, actor=request.user).to_dict())
