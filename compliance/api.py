"""The stop button's API: `GET/POST /api/v1/stops`, `POST /api/v1/stops/{id}/lift` (the first
person asks) and `POST /api/v1/stops/{id}/lift/approve` (a second person approves); the
maintenance windows; the framework reports and compliance's own controls."""

from datetime import timedelta

from django.utils import timezone
from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import OpenApiParameter, extend_schema, inline_serializer
from rest_framework import serializers, status
from rest_framework.exceptions import NotFound, ValidationError
from rest_framework.renderers import JSONRenderer
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from audit.api import SigningRefusedError, sign_for_export
from audit.evidence import TooManyEntries, WitnessContradicts
from compliance import actions, framework_report
from compliance.choices import EvidenceQuery, StopScope
from compliance.evidence_queries import TooMuchEvidence
from compliance.models import MaintenanceWindow, Stop
from config.permissions import IsPerson
from config.strict_input import QuerySerializer, Serializer
from registry.choices import Role
from registry.models import Agent
from registry.roles import HasRole

DEFAULT_PERIOD_DAYS = 30

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


class PlaceStopSerializer(Serializer):
    scope = serializers.ChoiceField(choices=StopScope.choices)
    reason = serializers.CharField(max_length=1000)
    # read as sent: the action refuses a number where a label value belongs
    team = serializers.JSONField(required=False, help_text="scope team: the `team` label value")
    selector = serializers.JSONField(required=False, help_text=(
        "scope selector: the labels an agent must all carry, e.g. {\"env\": \"prod\"}"))
    owner = serializers.JSONField(required=False, help_text="scope owner: the username")


class LiftSerializer(Serializer):
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


class ScheduleWindowSerializer(Serializer):
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


class ReportPeriodSerializer(QuerySerializer):
    """`agent` (empty: the fleet), `from` and `to` (ISO 8601; by default the last 30 days)."""

    agent = serializers.CharField(required=False, allow_blank=True, max_length=63)

    def validate(self, attrs: dict) -> dict:
        end = attrs.get("to") or timezone.now()
        start = attrs.get("from") or end - timedelta(days=DEFAULT_PERIOD_DAYS)
        if start > end:
            raise serializers.ValidationError({"from": "must not be after 'to'."})
        agent = attrs.get("agent") or ""
        if agent and not Agent.objects.filter(name=agent).exists():
            raise NotFound(f"No agent named {agent!r}.")
        return {"agent": agent, "from": start, "to": end}


# `from` is a Python keyword: the fields are added rather than declared.
ReportPeriodSerializer._declared_fields.update({
    "from": serializers.DateTimeField(required=False, allow_null=True),
    "to": serializers.DateTimeField(required=False, allow_null=True)})

PERIOD_PARAMETERS = [OpenApiParameter("agent", OpenApiTypes.STR),
                     OpenApiParameter("from", OpenApiTypes.DATETIME),
                     OpenApiParameter("to", OpenApiTypes.DATETIME)]


def report_period(request: Request) -> dict:
    """The validated period of a report request (a page's empty field means no bound)."""
    period = ReportPeriodSerializer(data={k: v for k, v in request.query_params.items() if v})
    period.is_valid(raise_exception=True)
    return period.validated_data


class ComplianceOnly(APIView):
    permission_classes = [IsPerson, HasRole]
    required_roles = (Role.COMPLIANCE,)


class FrameworksView(ComplianceOnly):
    """`GET /api/v1/frameworks`: every framework with its controls and the evidence queries
    mapped to each (the shipped library with compliance's own controls over it)."""

    @extend_schema(responses={200: OpenApiTypes.OBJECT})
    def get(self, request: Request) -> Response:
        return Response({"queries": dict(EvidenceQuery.choices), "frameworks": [
            {"id": f.id, "title": f.title, "controls": [
                {"id": c.id, "title": c.title, "queries": list(c.queries), "origin": c.origin}
                for c in f.controls]} for f in framework_report.frameworks().values()]})


class FrameworkReportView(ComplianceOnly):
    """`GET /api/v1/frameworks/{id}/report?agent=&from=&to=`: each control green, amber or
    red for one agent or the fleet, with the audit entries that show it."""

    @extend_schema(parameters=PERIOD_PARAMETERS, responses={200: OpenApiTypes.OBJECT})
    def get(self, request: Request, framework: str) -> Response:
        framework_report.framework(framework)
        period = report_period(request)
        try:
            body = framework_report.report(framework, period["agent"], period["from"],
                                           period["to"])
        except TooMuchEvidence as error:
            raise ValidationError({"from": str(error)}) from error
        return Response(body)


class FrameworkEvidenceView(ComplianceOnly):
    """`GET /api/v1/frameworks/{id}/evidence?agent=&from=&to=`: the report as a signed bundle
    (its digest in the fetch's audit entry, every cited entry with its inclusion proof) for
    `agentctl audit verify` offline."""

    renderer_classes = [JSONRenderer]  # a file to keep, from a browser too: never the HTML view

    @extend_schema(parameters=PERIOD_PARAMETERS, responses={200: OpenApiTypes.OBJECT})
    def get(self, request: Request, framework: str) -> Response:
        framework_report.framework(framework)
        period = report_period(request)
        agent = period["agent"]
        try:
            body = framework_report.report(framework, agent, period["from"], period["to"])
            sha256 = framework_report.digest(body)
            size = sign_for_export(
                actor=request.user, target=f"framework:{framework}", agent=agent,
                after={"format": "framework-report", "framework": framework,
                       "scope": body["scope"], "from": body["from"], "to": body["to"],
                       "digest": sha256})
            document = framework_report.bundle(body, size, sha256)
        except (TooMuchEvidence, TooManyEntries) as error:
            raise ValidationError({"from": str(error)}) from error
        except WitnessContradicts as error:  # never serve a head a witness contradicts
            raise SigningRefusedError(str(error)) from error
        response = Response(document)
        response["Content-Disposition"] = (
            f'attachment; filename="{framework}-{body["scope"]}-report.json"')
        return response


class ControlSerializer(Serializer):
    control_id = serializers.JSONField(help_text="the control's id, e.g. A.6.2.6 or ours-1")
    title = serializers.JSONField(help_text="a short title in your own words")
    queries = serializers.JSONField(help_text="the evidence queries that show it")
    reason = serializers.JSONField(help_text="why (audited)")


class FrameworkControlsView(ComplianceOnly):
    """`POST /api/v1/frameworks/{id}/controls`: add a control or change a control's title and
    evidence queries (a new version, audited); a new framework id starts your own framework."""

    @extend_schema(request=ControlSerializer, responses={201: OpenApiTypes.OBJECT})
    def post(self, request: Request, framework: str) -> Response:
        body = ControlSerializer(data=request.data)
        body.is_valid(raise_exception=True)
        row = actions.save_control(actor=request.user, framework=framework,
                                   **body.validated_data)
        return Response(row.to_dict(), status=status.HTTP_201_CREATED)


class FrameworkControlRetireView(ComplianceOnly):
    """`POST /api/v1/frameworks/{id}/controls/{control}/retire`: drop a control from the
    framework's reports (a new version, audited)."""

    @extend_schema(request=LiftSerializer, responses={201: OpenApiTypes.OBJECT})
    def post(self, request: Request, framework: str, control: str) -> Response:
        body = LiftSerializer(data=request.data)
        body.is_valid(raise_exception=True)
        row = actions.retire_control(actor=request.user, framework=framework,
                                     control_id=control, reason=body.validated_data["reason"])
        return Response(row.to_dict(), status=status.HTTP_201_CREATED)
