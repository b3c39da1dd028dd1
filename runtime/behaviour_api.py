"""The behaviour API: events, OTLP traces, runtime decisions, unregistered agents, backtests."""

from datetime import datetime
from typing import Any

from django.conf import settings
from django.contrib.auth.models import User
from django.http import HttpResponse
from django.utils import timezone
from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import OpenApiParameter, extend_schema, inline_serializer
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceResponse
from rest_framework import serializers, status
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.settings import api_settings
from rest_framework.views import APIView

from config.errors import DomainError, Malformed, NotAllowed, NotFound, TooLarge
from config.outbound import listed
from config.pagination import Page
from config.parsers import TextParser
from config.permissions import IsPerson
from config.renderers import FastJSONRenderer
from config.strict_input import ModelSerializer, Serializer
from config.times import parse_timestamp
from reconciliation.api import agent_for
from reconciliation.choices import WebhookStatus
from registry.choices import Role
from registry.models import ApiToken, DesiredStateVersion
from registry.principals import AgentPrincipal, acting_agent
from registry.roles import HasRole, has_role, sees_operations
from runtime import actions
from runtime.backtest import run_backtest
from runtime.decision_request import DecisionRequest, RequestError, parse_request
from runtime.events import KINDS, MAX_EVENTS, BatchError, parse_batch, spans_to_events
from runtime.models import BehaviourEvent, Decision, UnregisteredAgent
from runtime.otlp import decode
from runtime.typed_batch import read_batch


def _check_reporter(user: Any) -> None:
    if not (isinstance(user, AgentPrincipal) or has_role(user, Role.OWNER, Role.ADMIN)):
        raise NotAllowed("Events come from agents, or platforms with an owner's or admin's "
                         "token.")


def _token(request: Request) -> ApiToken | None:
    """The token a request was made with (None for a signed-in browser)."""
    return request.auth if isinstance(request.auth, ApiToken) else None


def _batch_error(error: BatchError) -> DomainError:
    text = str(error)
    if f"at most {MAX_EVENTS}" in text:
        return TooLarge(text)
    pointer = getattr(error, "pointer", None)
    return Malformed(f"The body is not an OTLP export: {text}" if pointer is not None else text,
                     details=[{"pointer": pointer, "message": text}] if pointer is not None
                     else None)


IngestResult = inline_serializer("IngestResult", {
    "accepted": serializers.IntegerField(), "duplicates": serializers.IntegerField(),
    "rejected": serializers.IntegerField(),
    "results": serializers.ListField(child=serializers.DictField())})


class EventsView(APIView):
    """`POST /api/v1/events`: a JSON array or NDJSON of behaviour events; idempotent on id."""

    parser_classes = [TextParser]
    renderer_classes = [FastJSONRenderer, *api_settings.DEFAULT_RENDERER_CLASSES[1:]]

    @extend_schema(request={"application/json": OpenApiTypes.OBJECT,
                            "application/x-ndjson": OpenApiTypes.STR},
                   responses=IngestResult)
    def post(self, request: Request) -> Response:
        _check_reporter(request.user)
        body = request.data if isinstance(request.data, str) else ""
        ndjson = "ndjson" in (request.content_type or "")
        now = timezone.now()
        # A batch whose every event is valid is read in C; anything else, event by event.
        items = None if ndjson else read_batch(body, now)
        if items is None:
            try:
                items = parse_batch(body, ndjson=ndjson)
            except BatchError as error:
                raise _batch_error(error) from None
        report = actions.ingest_events(items, actor=request.user, token=_token(request),
                                       now=now)
        return Response(report.to_dict())


class TracesView(APIView):
    """`POST /v1/traces`: OTLP/HTTP (protobuf or JSON); GenAI tool spans become events."""

    parser_classes = [TextParser]

    @extend_schema(request={"application/x-protobuf": OpenApiTypes.BINARY,
                            "application/json": OpenApiTypes.OBJECT},
                   responses={200: OpenApiTypes.OBJECT})
    def post(self, request: Request) -> HttpResponse | Response:
        _check_reporter(request.user)
        try:
            payload = decode(request._request.body, content_type=request.content_type or "")
            dropped: list[str] = []
            items = spans_to_events(payload, dropped)
        except BatchError as error:
            raise _batch_error(error) from None
        if len(items) > MAX_EVENTS:
            raise TooLarge(f"at most {MAX_EVENTS} spans per export")
        report = actions.ingest_events(items, actor=request.user, token=_token(request),
                                       source="otlp").to_dict()
        rejected = report["rejected"]
        message = _partial_message(report, dropped)
        if "protobuf" in (request.content_type or ""):
            reply = ExportTraceServiceResponse()
            if message:
                reply.partial_success.rejected_spans = rejected
                reply.partial_success.error_message = message
            return HttpResponse(reply.SerializeToString(),
                                content_type="application/x-protobuf")
        body: dict[str, Any] = {}
        if message:
            # OTLP: rejectedSpans counts whole spans refused (0 when only values were dropped,
            # which the spec allows as a warning with a non-empty errorMessage).
            body["partialSuccess"] = {"rejectedSpans": rejected, "errorMessage": message}
        return Response(body)


MAX_REASONS = 20  # in one errorMessage; the counts cover the rest


def _partial_message(report: dict[str, Any], dropped: list[str]) -> str:
    """What was not taken, for OTLP's partialSuccess: rejected spans with their reasons, then
    every usage value dropped from an accepted span; "" when everything was taken."""
    reasons = [f"{r.get('id', '')}: {r.get('reason', '')}" for r in report["results"]
               if r["status"] == "rejected"]
    parts = []
    if reasons:
        parts.append(f"{len(reasons)} span(s) rejected: " + "; ".join(reasons[:MAX_REASONS]))
    if dropped:
        parts.append(f"{len(dropped)} value(s) dropped: " + "; ".join(dropped[:MAX_REASONS]))
    shown = min(len(reasons), MAX_REASONS) + min(len(dropped), MAX_REASONS)
    if shown < len(reasons) + len(dropped):
        parts.append(f"and {len(reasons) + len(dropped) - shown} more")
    return " | ".join(parts)


class DecisionRequestSerializer(Serializer):
    """The body of `POST /decisions`, parsed by runtime.decision_request (the one reader of a
    request's amount); the fields here describe it for the OpenAPI schema."""

    tool = serializers.CharField(required=False, max_length=128,
                                 help_text="the tool about to run")
    action = serializers.CharField(required=False, max_length=128,
                                   help_text="the governed action; the tool's name if omitted")
    arguments = serializers.DictField(required=False,
                                      help_text="the call's arguments as the model produced "
                                                "them (at most 16 KiB, 8 levels deep)")
    amount = serializers.CharField(required=False, help_text=(
        "a number, or a plain decimal string (\"800.50\"), 0 to 1e12"))
    resource = serializers.CharField(required=False, max_length=256)
    record = serializers.CharField(required=False, max_length=256)
    wait_seconds = serializers.FloatField(required=False, help_text=(
        "how long the agent waits for a human; a pending decision expires at the earlier of "
        "this and the server's timeout"))
    callback_url = serializers.URLField(required=False, max_length=500)

    def to_internal_value(self, data: Any) -> DecisionRequest:
        try:
            request = parse_request(data)
        except RequestError as error:
            raise Malformed(error.message, details=[{"pointer": error.pointer,
                                                     "message": error.message}]) from None
        url = request.callback_url
        try:
            if url:
                serializers.URLField(max_length=500).run_validation(url)
        except serializers.ValidationError as error:
            message = str(error.detail[0]) if error.detail else "not a URL"
            raise Malformed(message, details=[{"pointer": "/callback_url",
                                               "message": message}]) from None
        if url and not listed(url, settings.DECISION_WEBHOOK_HOSTS):
            message = ("http(s) to a host and port listed in DECISION_WEBHOOK_HOSTS only"
                       if settings.DECISION_WEBHOOK_HOSTS else
                       "webhooks are off here (DECISION_WEBHOOK_HOSTS is empty); poll the "
                       "decision")
            raise Malformed(message, details=[{"pointer": "/callback_url", "message": message}])
        return request


DecisionSerializer = inline_serializer("Decision", {
    "id": serializers.UUIDField(), "agent": serializers.CharField(),
    "request": serializers.DictField(), "outcome": serializers.CharField(),
    "status": serializers.CharField(), "rule": serializers.CharField(),
    "expires_at": serializers.DateTimeField(allow_null=True),
    "decided_by": serializers.CharField(allow_null=True),
    "decided_at": serializers.DateTimeField(allow_null=True),
    "comment": serializers.CharField(),
    "webhook": inline_serializer("DecisionWebhook", {
        "status": serializers.ChoiceField(choices=[
            "waiting_for_answer", *[c for c in WebhookStatus.values if c]]),
        "attempts": serializers.IntegerField(), "error": serializers.CharField()},
        required=False, help_text="GET, with a callback_url: where the POST of the answer "
        "stands (pending, delivered, refused, not_allowed, failed)")})


class DecisionRequestView(APIView):
    """`POST /api/v1/agents/{name}/decisions`: allow, deny, or pending a human."""

    @extend_schema(request=DecisionRequestSerializer, responses={201: DecisionSerializer})
    def post(self, request: Request, name: str) -> Response:
        agent = agent_for(request, name, people=(Role.ADMIN,))
        body = DecisionRequestSerializer(data=request.data)
        body.is_valid(raise_exception=True)
        decision = actions.request_decision(agent, body.validated_data, actor=request.user)
        return Response(decision.to_dict(), status=status.HTTP_201_CREATED)


class DecisionView(APIView):
    """`GET /api/v1/decisions/{id}`: the agent polls for a human's answer."""

    @extend_schema(responses=DecisionSerializer)
    def get(self, request: Request, decision_id: str) -> Response:
        decision = Decision.objects.select_related("agent", "decided_by").filter(
            pk=decision_id).first()
        own = acting_agent(request.user)
        if decision is None or (own is not None and decision.agent_id != own.pk):
            raise NotFound(f"No decision {decision_id}.")
        if own is None and not (has_role(request.user, Role.APPROVER, Role.COMPLIANCE)
                                or decision.agent.owner_id == request.user.pk):
            raise NotAllowed("You may not read this decision.")
        if actions.expire_decision(decision_id):  # past its time: deny now, not at the next tick
            decision.refresh_from_db()
        webhook = decision.webhook()
        return Response({**decision.to_dict(), **({"webhook": webhook} if webhook else {})})


class AgentEventSerializer(ModelSerializer):
    """One behaviour event as the agent (or its telemetry) sent it, with who sent it."""

    id = serializers.CharField(source="event_id")

    class Meta:
        model = BehaviourEvent
        fields = ["id", "ts", "kind", "tool", "resource", "record", "action", "amount",
                  "approved_by", "decision_id", "trace_id", "span_id", "source", "model",
                  "operation", "error", "input_tokens", "output_tokens", "cost", "attributes",
                  "received_at", "sender", "foreign"]


def _since(value: str | None) -> datetime | None:
    """`?since=` as an aware moment; a value that is not RFC 3339 with a zone is refused."""
    if value is None:
        return None
    try:
        return parse_timestamp(value)
    except ValueError:
        raise Malformed("since must be an RFC 3339 time with a zone",
                        details=[{"pointer": "/since", "message": "an RFC 3339 time with a zone"}]
                        ) from None


class AgentEventsView(APIView):
    """`GET /api/v1/agents/{name}/events`: what the agent did, newest first, a page at a time
    (`?kind=`, `?since=`): the agent itself, its owner, approvers and compliance."""

    @extend_schema(parameters=[
        OpenApiParameter("kind", str, enum=list(KINDS)),
        OpenApiParameter("since", OpenApiTypes.DATETIME, description="events at or after"),
        OpenApiParameter("page", int), OpenApiParameter("page_size", int)],
        responses=AgentEventSerializer(many=True))
    def get(self, request: Request, name: str) -> Response:
        agent = agent_for(request, name, people=(Role.APPROVER, Role.COMPLIANCE))
        events = BehaviourEvent.objects.filter(agent=agent).order_by("-ts", "-pk")
        kind = request.query_params.get("kind")
        if kind is not None:
            if kind not in KINDS:
                raise Malformed(f"kind must be one of {', '.join(KINDS)}",
                                details=[{"pointer": "/kind",
                                          "message": f"one of {', '.join(KINDS)}"}])
            events = events.filter(kind=kind)
        if (since := _since(request.query_params.get("since"))) is not None:
            events = events.filter(ts__gte=since)
        pages = Page()
        page = pages.paginate_queryset(events, request, view=self)
        return pages.get_paginated_response(AgentEventSerializer(page, many=True).data)


class UnregisteredSerializer(ModelSerializer):
    display_name = serializers.SerializerMethodField()
    assigned_owner = serializers.CharField(source="assigned_owner.username", default=None,
                                allow_null=True)

    class Meta:
        model = UnregisteredAgent
        fields = ["name", "display_name", "first_seen", "last_seen", "events",
                  "assigned_owner", "registered"]


    def get_display_name(self, shadow: UnregisteredAgent) -> str:
        """The name as the agent or its telemetry spelled it ("Math Tutor")."""
        return shadow.display_name or shadow.name


class UnregisteredView(APIView):
    """`GET /api/v1/unregistered`: shadow agents seen in events and reports."""

    permission_classes = [IsPerson, HasRole]
    required_roles = (Role.COMPLIANCE, Role.APPROVER)

    @extend_schema(responses=UnregisteredSerializer(many=True))
    def get(self, request: Request) -> Response:
        rows = UnregisteredAgent.objects.select_related("assigned_owner").filter(
            registered=False).order_by("-last_seen")[:500]
        return Response(UnregisteredSerializer(rows, many=True).data)


class AssignSerializer(Serializer):
    owner = serializers.CharField(max_length=150)


class AssignUnregisteredView(APIView):
    """`POST /api/v1/unregistered/{name}/assign`: compliance hands it to an owner."""

    permission_classes = [IsPerson, HasRole]  # decided before the body is read
    required_roles = (Role.COMPLIANCE,)

    @extend_schema(request=AssignSerializer, responses=UnregisteredSerializer)
    def post(self, request: Request, name: str) -> Response:
        body = AssignSerializer(data=request.data)
        body.is_valid(raise_exception=True)
        owner = User.objects.filter(username=body.validated_data["owner"],
                                    is_active=True).first()
        shadow = actions.assign_unregistered(name, actor=request.user, owner=owner)
        return Response(UnregisteredSerializer(shadow).data)


class BacktestView(APIView):
    """`GET /api/v1/proposals/{id}/backtest`: what the proposal would have allowed or flagged,
    per rule, over the agent's last 7 days of events, next to the active version."""

    permission_classes = [IsPerson]

    @extend_schema(responses=inline_serializer("Backtest", {
        "days": serializers.IntegerField(), "since": serializers.DateTimeField(),
        "events": serializers.IntegerField(help_text="events replayed"),
        "total": serializers.IntegerField(help_text="events in the period"),
        "capped": serializers.BooleanField(help_text="only the latest `cap` were replayed"),
        "cap": serializers.IntegerField(),
        "rules": serializers.ListField(child=serializers.DictField()),
        "changes": serializers.ListField(child=serializers.DictField()),
        "not_replayed": serializers.ListField(
            child=serializers.DictField(),
            help_text="owner, label and connector changes: past events cannot show them")}))
    def get(self, request: Request, pk: int) -> Response:
        version = DesiredStateVersion.objects.select_related(
            "agent__active_version").filter(pk=pk).first()
        if version is None:
            raise NotFound(f"No proposal {pk}.")
        if not sees_operations(request.user, version.agent):
            raise NotAllowed("The backtest replays the agent's events: its owner, approvers "
                             "and compliance read it.")
        return Response(run_backtest(version))
