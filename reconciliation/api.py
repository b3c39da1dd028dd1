"""The reconciliation API: observed and desired state for agents, manual reconcile, findings,
escalations and the control plane's switches."""

import re
from datetime import timedelta
from typing import Any

import redis
from django.db.models import Count, Max, Min, Q, QuerySet
from django.http import HttpResponse
from django.utils import timezone
from django_filters.rest_framework import DjangoFilterBackend
from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import OpenApiParameter, extend_schema, inline_serializer
from rest_framework import mixins, serializers, status, viewsets
from rest_framework.decorators import action
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from audit.actions import actor_label
from config.errors import DomainError, Invalid, NotAllowed, NotFound, Unavailable
from config.pagination import Page
from config.parsers import SafeJSONParser
from config.permissions import IsPerson
from config.strict_input import ModelSerializer, Serializer
from reconciliation import actions
from reconciliation.attribution import names_a_person, split_change
from reconciliation.choices import (
    OPEN_STATUSES,
    CorrectionResult,
    EscalationKind,
    Resolution,
    Trigger,
)
from reconciliation.controller.triggers import enqueue_reconcile
from reconciliation.dashboard import summary
from reconciliation.filters import EscalationFilterSet, FindingFilterSet
from reconciliation.mcp_holds import held_mcp
from reconciliation.models import BreakerTrip, ControlState, Correction, Escalation, Finding
from reconciliation.observed import ObservedStateError, validate_observed
from registry.choices import Role
from registry.desired_long_poll import parse_wait
from registry.models import Agent
from registry.principals import AgentPrincipal, acting_agent
from registry.roles import HasRole, has_role, sees_operations


def agent_for(request: Request, name: str, *, people: tuple[str, ...]) -> Agent:
    """The named agent, if the principal may act on it: its own agent token, its owner, or a
    person holding one of `people` roles. Agent tokens never learn about other agents."""
    own = acting_agent(request.user)
    if own is not None:
        if own.name != name:
            raise NotAllowed("An agent's token acts on its own agent only.")
        return Agent.objects.select_related("active_version", "owner").get(pk=own.pk)
    agent = Agent.objects.select_related("active_version", "owner").filter(name=name).first()
    if agent is None:
        raise NotFound(f"No agent named {name!r}.")
    user = request.user
    if not ((has_role(user, Role.OWNER) and agent.owner_id == user.pk)
            or has_role(user, *people)):
        raise NotAllowed(f"You may not act on {name}.")
    return agent


# Keys a reporter that sees only one side of an agent may replace alone (`?part=`).
OBSERVED_PARTS = ("mcp_servers",)


class ObservedStateView(APIView):
    """`PUT /api/v1/agents/{name}/observed-state`: the agent or its platform reports;
    `?part=mcp_servers` replaces that key of the latest report and keeps the rest."""

    write_parameters = ("part",)  # config/write_parameters.py

    @extend_schema(
        request=OpenApiTypes.OBJECT,
        parameters=[OpenApiParameter(
            "part", str, enum=list(OBSERVED_PARTS),
            description="replace only this key of the latest report (the MCP proxy)")],
        responses={202: inline_serializer(
            "ObservationAccepted", {"changed": serializers.BooleanField(),
                                    "sha256": serializers.CharField(),
                                    "observed_at": serializers.DateTimeField()})})
    def put(self, request: Request, name: str) -> Response:
        if acting_agent(request.user) is None and not Agent.objects.filter(name=name).exists():
            return self._unregistered(request, name)
        agent = agent_for(request, name, people=(Role.ADMIN,))
        # the platform's change log may name the change (drift attribution): reported, not
        # verified; an agent's own report is keyed under it and may not name a person
        own = acting_agent(request.user)
        report, change = (split_change(request.data, reported_by=actor_label(request.user),
                                       agent=own.name if own else "")
                          if isinstance(request.data, dict) else (request.data, None))
        if own is not None and change and names_a_person(change["actor"]):
            raise Invalid("An agent's report may not name a person as the author of a change.",
                          code="names_a_person", details=[{
                              "pointer": "/changed_by",
                              "message": "expected the name of a tool or pipeline, not a "
                                         "person's username or email (the report is not "
                                         "verified)"}])
        try:
            state = validate_observed(report)
        except ObservedStateError as error:
            raise Invalid(f"The observed state is not valid: {error.errors[0][0]}: "
                          f"{error.errors[0][1]}",
                          details=[{"pointer": p, "message": m} for p, m in error.errors]
                          ) from None
        source = "push" if isinstance(request.user, AgentPrincipal) else "platform"
        part = request.query_params.get("part")
        if part is not None:
            if part not in OBSERVED_PARTS or set(state) != {part}:
                raise Invalid(f"?part= names the one key the body holds: one of "
                              f"{', '.join(OBSERVED_PARTS)}.", details=[
                                  {"pointer": "/part", "message": "expected one of "
                                   f"{', '.join(OBSERVED_PARTS)}, matching the body's one key"}])
            row, changed = actions.record_observed_part(agent, part, state[part],
                                                        actor=request.user, source=source)
        else:
            row, changed = actions.record_observation(agent, state, actor=request.user,
                                                      source=source, change=change)
        return Response({"changed": changed, "sha256": row.state_sha256,
                         "observed_at": row.observed_at}, status=status.HTTP_202_ACCEPTED)


    def _unregistered(self, request: Request, name: str) -> Response:
        """A platform reports an agent the registry does not know: kept, listed as shadow."""
        if not has_role(request.user, Role.OWNER, Role.ADMIN):
            raise NotFound(f"No agent named {name!r}.")
        if not re.match(r"^[a-z0-9]([a-z0-9-]{0,61}[a-z0-9])?$", name):
            raise Invalid("An agent name is a slug.", details=[
                {"pointer": "/name", "message": "lowercase letters, digits and '-'"}])
        try:
            state = validate_observed(request.data)
        except ObservedStateError as error:
            raise Invalid("The observed state is not valid.",
                          details=[{"pointer": p, "message": m} for p, m in error.errors]
                          ) from None
        _, row, changed = actions.note_unregistered_observation(name, state, actor=request.user)
        return Response({"changed": changed, "sha256": row.state_sha256,
                         "observed_at": row.observed_at, "registered": False},
                        status=status.HTTP_202_ACCEPTED)


class DesiredStateView(APIView):
    """`GET /api/v1/agents/{name}/desired-state`: the effective desired spec now, with an
    ETag; If-None-Match answers 304 so polling costs nothing, and `?wait=N` is held until the
    answer changes (registry/desired_long_poll.py, in front of this view)."""

    @extend_schema(parameters=[OpenApiParameter(
        "wait", OpenApiTypes.NUMBER, description=(
            "Seconds (at most 60) to hold the request, with If-None-Match, until the agent's "
            "effective state changes (a long-poll, served by the ASGI server: "
            "registry/desired_long_poll.py); 304 when the wait ends unchanged."))],
        responses={200: inline_serializer(
        "DesiredState", {"agent": serializers.CharField(),
                         "generation": serializers.IntegerField(),
                         "spec": serializers.DictField(), "running": serializers.BooleanField(),
                         "corrections": serializers.ListField(child=serializers.CharField()),
                         "held": serializers.ListField(child=serializers.DictField(),
                                                       required=False),
                         "sha256": serializers.CharField()}), 304: None})
    def get(self, request: Request, name: str) -> Response | HttpResponse:
        wait = request.query_params.get("wait")
        if wait is not None and isinstance(problem := parse_wait(wait), str):
            # (under ASGI the long-poll refused it already; under WSGI it answers at once)
            raise DomainError(problem, details=[{"pointer": "/wait", "message": problem}])
        agent = agent_for(request, name, people=(Role.APPROVER, Role.COMPLIANCE, Role.OWNER))
        if agent.active_version is None:
            raise NotFound(f"{name} has no approved desired state yet.")
        effective = actions.desired_now(agent, timezone.now())
        running = effective.pop("running")
        # Corrections published to a push agent and not yet verified: listing them changes the
        # body (and its ETag), so a sidecar re-applies even though the spec did not change.
        pending = sorted(Correction.objects.filter(
            agent=agent, result=CorrectionResult.APPLIED).values_list("idempotency_key",
                                                                      flat=True))
        if acting_agent(request.user) is None and not sees_operations(request.user, agent):
            pending = []  # corrections are what was done to it: not another owner's to read
        body = {"agent": agent.name, "generation": agent.generation, "spec": effective,
                "running": running, "corrections": pending}
        if held := held_mcp(agent):  # only when something is held: other bodies keep their hash
            body["held"] = held
        digest = actions.state_hash(body)
        etag = f'"{digest}"'
        if etag in [t.strip() for t in request.headers.get("If-None-Match", "").split(",")]:
            response = HttpResponse(status=304)
            response["ETag"] = etag
            return response
        response = Response({**body, "sha256": digest})
        response["ETag"] = etag
        response["Cache-Control"] = "no-cache"
        return response


class ReconcileNowView(APIView):
    """`POST /api/v1/agents/{name}/reconcile`: owner or compliance asks for a pass now."""

    permission_classes = [IsPerson]

    @extend_schema(request=None, responses={202: inline_serializer(
        "ReconcileQueued", {"queued": serializers.BooleanField()})})
    def post(self, request: Request, name: str) -> Response:
        agent = agent_for(request, name, people=(Role.COMPLIANCE,))
        try:
            queued = enqueue_reconcile(agent.pk, Trigger.MANUAL)
        except redis.RedisError:
            raise Unavailable("The work queue is unavailable; the periodic resync will "
                              "reconcile the agent once it is back.") from None
        return Response({"queued": queued}, status=status.HTTP_202_ACCEPTED)


class FindingSerializer(ModelSerializer):
    agent = serializers.CharField(source="agent.name")
    acknowledged_by = serializers.CharField(source="acknowledged_by.username", default=None,
                                allow_null=True)

    class Meta:
        model = Finding
        fields = ["id", "agent", "kind", "pointer", "expected", "actual", "severity", "area",
                  "status", "generation", "occurrence", "attempts", "reason", "first_seen",
                  "detected_at", "last_seen", "corrected_at", "hold_until", "acknowledged_by",
                  "acknowledged_at", "cause_key", "cause"]


class ReasonSerializer(Serializer):
    reason = serializers.CharField(max_length=2000, allow_blank=True, default="")


class ReviewerOnly:
    permission_classes = [IsPerson, HasRole]
    required_roles = (Role.APPROVER, Role.COMPLIANCE)


class FindingViewSet(ReviewerOnly, viewsets.ReadOnlyModelViewSet):
    """Drift findings for review, newest first."""

    lookup_value_regex = r"[0-9]+"  # ids are numbers: anything else is 404, never a 500

    serializer_class = FindingSerializer
    pagination_class = Page
    filter_backends = [DjangoFilterBackend]
    filterset_class = FindingFilterSet

    def get_queryset(self) -> QuerySet[Finding]:
        return (Finding.objects.select_related("agent", "acknowledged_by")
                .order_by("-last_seen", "-pk"))

    @extend_schema(request=ReasonSerializer, responses=FindingSerializer)
    @action(detail=True, methods=["post"])
    def acknowledge(self, request: Request, pk: str) -> Response:
        actions.authorise_acknowledgement(int(pk), actor=request.user)
        body = ReasonSerializer(data=request.data)
        body.is_valid(raise_exception=True)
        actions.acknowledge_finding(int(pk), actor=request.user,
                                    reason=body.validated_data["reason"])
        return Response(FindingSerializer(self.get_queryset().get(pk=pk)).data)

    @extend_schema(responses=inline_serializer("FindingCauses", {
        "results": serializers.ListField(child=inline_serializer("FindingCause", {
            "key": serializers.CharField(), "cause": serializers.JSONField(),
            "findings": serializers.IntegerField(), "open": serializers.IntegerField(),
            "agents": serializers.IntegerField(),
            "first_detected": serializers.DateTimeField(),
            "last_detected": serializers.DateTimeField()}))}))
    @action(detail=False, methods=["get"])
    def causes(self, request: Request) -> Response:
        """The findings (as filtered) grouped by cause: one row per cause key with its
        kind, who made the change, how many findings and agents, and when, newest first."""
        queryset = self.filter_queryset(self.get_queryset()).order_by()
        rows = (queryset.values("cause_key").annotate(
            findings=Count("pk"), open=Count("pk", filter=Q(status__in=OPEN_STATUSES)),
            agents=Count("agent", distinct=True), first=Min("detected_at"),
            last=Max("detected_at"), sample=Max("pk")).order_by("-last")[:200])
        samples = dict(Finding.objects.filter(pk__in=[r["sample"] for r in rows])
                       .values_list("pk", "cause"))
        return Response({"results": [
            {"key": r["cause_key"], "cause": samples.get(r["sample"]) or {"key": r["cause_key"]},
             "findings": r["findings"], "open": r["open"], "agents": r["agents"],
             "first_detected": r["first"], "last_detected": r["last"]} for r in rows]})


class EscalationSerializer(ModelSerializer):
    agent = serializers.CharField(source="agent.name")
    finding = FindingSerializer(allow_null=True)
    decision = serializers.JSONField(source="decision.to_dict", default=None,
                                allow_null=True)
    resolved_by = serializers.CharField(source="resolved_by.username", default=None,
                                allow_null=True)
    assignee = serializers.CharField(source="assignee.username", default=None, allow_null=True)
    kind = serializers.ChoiceField(choices=EscalationKind.choices, read_only=True)
    resolutions = serializers.SerializerMethodField()

    class Meta:
        model = Escalation
        fields = ["id", "agent", "kind", "finding", "decision", "reason", "status",
                  "resolution", "resolutions", "comment", "opened_at", "assignee",
                  "acknowledged_at", "snoozed_until", "resolved_by", "resolved_at"]

    def get_resolutions(self, escalation: Escalation) -> list[str]:
        """What `resolve` accepts for this escalation."""
        return [str(option.value) for option in escalation.resolutions()]


class ResolveSerializer(Serializer):
    """revert, accept or suspend for drift; acknowledge, suspend or raise_limit for behaviour;
    allow or deny for a pending decision (an escalation lists its own `resolutions`)."""

    resolution = serializers.ChoiceField(choices=Resolution.choices)
    comment = serializers.CharField(max_length=2000, allow_blank=True, default="")


class TriageSerializer(Serializer):
    """Assign to me, acknowledge, and/or snooze for some minutes or until a time (at most 7
    days ahead); a snoozed escalation leaves the inbox until then and comes back by itself."""

    assign = serializers.BooleanField(default=False)
    acknowledge = serializers.BooleanField(default=False)
    snooze_minutes = serializers.IntegerField(required=False, min_value=1,
                                              max_value=7 * 24 * 60)
    snooze_until = serializers.DateTimeField(required=False)

    def validate(self, attrs: dict[str, Any]) -> dict[str, Any]:
        if "snooze_minutes" in attrs and "snooze_until" in attrs:
            raise serializers.ValidationError(
                {"snooze_until": "Give snooze_minutes or snooze_until, not both."})
        return attrs

    def action_arguments(self) -> dict[str, Any]:
        """Keyword arguments of triage_escalation."""
        data = dict(self.validated_data)
        minutes = data.pop("snooze_minutes", None)
        if minutes is not None:
            data["snooze_for"] = timedelta(minutes=minutes)
        return data


class EscalationViewSet(ReviewerOnly, mixins.ListModelMixin, mixins.RetrieveModelMixin,
                        viewsets.GenericViewSet):
    """Escalations, oldest open first; approvers resolve them."""

    lookup_value_regex = r"[0-9]+"  # ids are numbers: anything else is 404, never a 500

    serializer_class = EscalationSerializer
    pagination_class = Page
    filter_backends = [DjangoFilterBackend]
    filterset_class = EscalationFilterSet

    def get_queryset(self) -> QuerySet[Escalation]:
        queryset = Escalation.objects.select_related("agent", "finding__agent", "decision__agent",
                                                     "decision__decided_by",
                                                     "finding__acknowledged_by", "resolved_by",
                                                     "assignee")
        return queryset.order_by("status", "opened_at")

    @extend_schema(request=ResolveSerializer, responses=EscalationSerializer)
    @action(detail=True, methods=["post"])
    def resolve(self, request: Request, pk: str) -> Response:
        actions.authorise_escalation(int(pk), actor=request.user)
        body = ResolveSerializer(data=request.data)
        body.is_valid(raise_exception=True)
        actions.resolve_escalation(int(pk), actor=request.user, **body.validated_data)
        return Response(EscalationSerializer(self.get_queryset().get(pk=pk)).data)

    @extend_schema(request=TriageSerializer, responses=EscalationSerializer)
    @action(detail=True, methods=["post"])
    def triage(self, request: Request, pk: str) -> Response:
        actions.authorise_escalation(int(pk), actor=request.user, triage=True)
        body = TriageSerializer(data=request.data)
        body.is_valid(raise_exception=True)
        actions.triage_escalation(int(pk), actor=request.user, **body.action_arguments())
        return Response(EscalationSerializer(self.get_queryset().get(pk=pk)).data)


class SwitchSerializer(Serializer):
    enabled = serializers.BooleanField()


class AgentSwitchSerializer(SwitchSerializer):
    """One agent's shadow: on for how long (at most 30d) and why; off at any time."""

    duration = serializers.CharField(required=False, allow_blank=True, default="",
                                     max_length=16, help_text="like 30m, 8h or 7d; at most 30d")
    reason = serializers.CharField(required=False, allow_blank=True, default="",
                                   max_length=2000)


AgentShadowSerializer = inline_serializer("AgentShadow", {
    "shadow": serializers.BooleanField(),
    "shadow_until": serializers.CharField(allow_null=True),
    "pending": serializers.BooleanField(help_text="the owner's request waits for a second "
                                                  "person"),
    "requested_by": serializers.CharField(allow_null=True),
    "requested_duration": serializers.CharField(allow_null=True),
})


class AgentShadowView(APIView):
    """`POST /api/v1/agents/{name}/shadow`: shadow mode for one agent. Compliance switches
    it on for a time; the owner asks, and an approver approves at `.../shadow/approve`."""

    parser_classes = [SafeJSONParser]
    permission_classes = [IsPerson]

    @extend_schema(request=AgentSwitchSerializer, responses=AgentShadowSerializer)
    def post(self, request: Request, name: str) -> Response:
        agent = agent_for(request, name, people=(Role.COMPLIANCE,))
        if acting_agent(request.user) is not None:  # before the body is read
            raise NotAllowed("An agent cannot switch its own shadow mode.")
        body = AgentSwitchSerializer(data=request.data)
        body.is_valid(raise_exception=True)
        state = actions.set_shadow(actor=request.user, agent=agent, **body.validated_data)
        return Response(state, status=202 if state["pending"] else 200)


class AgentShadowApproveView(APIView):
    """`POST /api/v1/agents/{name}/shadow/approve`: a second person (an approver or compliance,
    not the owner) puts the owner's requested shadow in force."""

    permission_classes = [IsPerson]

    @extend_schema(request=None, responses=AgentShadowSerializer)
    def post(self, request: Request, name: str) -> Response:
        agent = agent_for(request, name, people=(Role.APPROVER, Role.COMPLIANCE))
        if acting_agent(request.user) is not None:
            raise NotAllowed("An agent cannot approve shadow mode.")
        return Response(actions.approve_shadow(agent, actor=request.user))


ControlSerializer = inline_serializer("Control", {
    "shadow": serializers.BooleanField(),
    "breaker_tripped_at": serializers.DateTimeField(allow_null=True),
    "breaker_reason": serializers.CharField(),
    "breakers": serializers.ListField(child=inline_serializer("ScopedBreaker", {
        "scope": serializers.CharField(), "tripped_at": serializers.DateTimeField(),
        "reason": serializers.CharField()}), help_text="tripped owner and team breakers"),
    "post_convergence_drift": serializers.IntegerField(),
})


def control_body() -> dict[str, Any]:
    control = ControlState.load()
    return {"shadow": control.shadow, "breaker_tripped_at": control.breaker_tripped_at,
            "breaker_reason": control.breaker_reason,
            "breakers": [trip.to_dict() for trip in BreakerTrip.objects.order_by("scope")],
            "post_convergence_drift": control.post_convergence_drift}


class BreakerResetSerializer(Serializer):
    reason = serializers.CharField(max_length=2000, allow_blank=True, default="")
    scope = serializers.RegexField(r"^(global|(owner|team):.{1,190})$", default="global",
                                   help_text="global, owner:NAME or team:NAME")


class ControlView(APIView):
    """`GET /api/v1/control`: global shadow mode, the breaker and the must-be-zero counter;
    `POST /api/v1/control/shadow` and `/control/breaker/reset` for compliance."""

    permission_classes = [IsPerson]

    @extend_schema(responses=ControlSerializer)
    def get(self, request: Request) -> Response:
        return Response(control_body())


class ControlShadowView(APIView):
    permission_classes = [IsPerson, HasRole]  # decided before the body is read
    required_roles = (Role.COMPLIANCE,)

    @extend_schema(request=SwitchSerializer, responses=ControlSerializer)
    def post(self, request: Request) -> Response:
        body = SwitchSerializer(data=request.data)
        body.is_valid(raise_exception=True)
        actions.set_shadow(actor=request.user, **body.validated_data)
        return Response(control_body())


class BreakerResetView(APIView):
    permission_classes = [IsPerson, HasRole]  # decided before the body is read
    required_roles = (Role.COMPLIANCE,)

    @extend_schema(request=BreakerResetSerializer, responses=ControlSerializer)
    def post(self, request: Request) -> Response:
        body = BreakerResetSerializer(data=request.data)
        body.is_valid(raise_exception=True)
        actions.reset_breaker(actor=request.user, **body.validated_data)
        return Response(control_body())


class DashboardView(APIView):
    """`GET /api/v1/dashboard`: counts by health and the overview's charts (plotly JSON)."""

    permission_classes = [IsPerson]

    @extend_schema(responses=OpenApiTypes.OBJECT)
    def get(self, request: Request) -> Response:
        return Response(summary())
