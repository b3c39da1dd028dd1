"""The stop button's API: `GET/POST /api/v1/stops`, `POST /api/v1/stops/{id}/lift` (the first
person asks) and `POST /api/v1/stops/{id}/lift/approve` (a second person approves)."""

from django.utils import timezone
from drf_spectacular.utils import extend_schema, inline_serializer
from rest_framework import serializers, status
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from compliance import actions
from compliance.choices import StopScope
from compliance.models import MaintenanceWindow, Stop
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


WINDOW_FIELDS = {
    "id": serializers.IntegerField(), "selector": serializers.DictField(),
    "reaches": serializers.CharField(), "starts_at": serializers.DateTimeField(),
    "ends_at": serializers.DateTimeField(),
    "allowed": serializers.ListField(child=serializers.CharField()),
    "reason": serializers.CharField(), "created_by": serializers.CharField(),
    "created_at": serializers.DateTimeField(),
    "cancelled_by": serializers.CharField(allow_null=True),
    "cancelled_at": serializers.DateTimeField(allow_null=True),
    "ended_at": serializers.DateTimeField(allow_null=True)}
WindowSerializer = inline_serializer("MaintenanceWindow", WINDOW_FIELDS)
WindowListSerializer = inline_serializer("MaintenanceWindowList", WINDOW_FIELDS, many=True)


class ScheduleWindowSerializer(serializers.Serializer):
    # read as sent: the action parses the times and checks every label and kind
    starts_at = serializers.JSONField(help_text="ISO 8601 with its offset")
    ends_at = serializers.JSONField(help_text="ISO 8601 with its offset; at most 7 days later")
    reason = serializers.JSONField()
    selector = serializers.JSONField(required=False, help_text="labels; {} is every agent")
    allowed = serializers.JSONField(required=False, help_text=(
        "correction kinds that still run in the window (e.g. [\"suspend\"]); none by default"))


class MaintenanceWindowsView(APIView):
    """`GET /api/v1/maintenance-windows` lists windows not over yet (`?all=true`: every one);
    `POST` schedules one (compliance or admin)."""

    permission_classes = [IsPerson, HasRole]
    required_roles = (Role.COMPLIANCE, Role.APPROVER)

    @extend_schema(responses=WindowListSerializer)
    def get(self, request: Request) -> Response:
        windows = MaintenanceWindow.objects.select_related("created_by", "cancelled_by")
        if request.query_params.get("all") not in ("true", "1"):
            windows = windows.filter(ends_at__gt=timezone.now(), cancelled_at__isnull=True)
        return Response([w.to_dict() for w in windows.order_by("-starts_at", "-pk")[:200]])

    @extend_schema(request=ScheduleWindowSerializer, responses={201: WindowSerializer})
    def post(self, request: Request) -> Response:
        body = ScheduleWindowSerializer(data=request.data)
        body.is_valid(raise_exception=True)
        window = actions.schedule_window(actor=request.user, **body.validated_data)
        return Response(window.to_dict(), status=status.HTTP_201_CREATED)

    def check_permissions(self, request: Request) -> None:
        if request.method == "POST":
            self.required_roles = (Role.COMPLIANCE,)
        super().check_permissions(request)


class MaintenanceWindowCancelView(APIView):
    """`POST /api/v1/maintenance-windows/{id}/cancel`: end a window early, with a reason."""

    permission_classes = [IsPerson, HasRole]
    required_roles = (Role.COMPLIANCE,)

    @extend_schema(request=LiftSerializer, responses=WindowSerializer)
    def post(self, request: Request, pk: int) -> Response:
        body = LiftSerializer(data=request.data)
        body.is_valid(raise_exception=True)
        return Response(actions.cancel_window(pk, actor=request.user,
                                              **body.validated_data).to_dict())
