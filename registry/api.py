"""The registry API: manifests, agents, proposals and their decisions, guardrails."""

from functools import partial
from typing import Any

from django.db.models import Count, OuterRef, QuerySet, Subquery
from django.db.models.functions import Coalesce
from django_filters.rest_framework import DjangoFilterBackend
from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import OpenApiParameter, extend_schema
from rest_framework import mixins, serializers, status, viewsets
from rest_framework.decorators import action
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from config.errors import NotAllowed, NotFound
from config.pagination import Page
from config.parsers import SafeJSONParser, TextParser
from config.permissions import IsPerson
from config.strict_input import ModelSerializer, Serializer
from config.write_parameters import flag
from registry import actions
from registry.choices import GuardrailEffect, OverdueEffect, Role, VersionSource, VersionState
from registry.filters import AgentFilterSet, ProposalFilterSet, agent_filterset
from registry.intake import read_manifests, read_spec
from registry.models import Agent, ApiToken, DesiredStateVersion, Guardrail
from registry.principals import acting_agent
from registry.recertification import review_override
from registry.roles import HasRole, has_role

# --- agents ------------------------------------------------------------------------------------


class AgentSerializer(ModelSerializer):
    """An agent with its active generation."""

    owner = serializers.CharField(source="owner.username")
    active_spec = serializers.JSONField(source="active_version.spec", default=None,
                                allow_null=True)
    spec_sha256 = serializers.CharField(source="active_version.spec_sha256", default=None,
                                allow_null=True)
    pending_proposals = serializers.IntegerField(read_only=True, default=0)
    conditions = serializers.SerializerMethodField()
    shadow = serializers.SerializerMethodField()

    class Meta:
        model = Agent
        fields = ["name", "owner", "labels", "description", "framework", "connector",
                  "lifecycle", "generation", "spec_sha256", "active_spec", "pending_proposals",
                  "conditions", "shadow", "review_due_at", "created_at", "updated_at"]

    def _status(self, agent: Agent) -> Any:
        return getattr(agent, "status", None)  # none until the first reconcile

    def get_conditions(self, agent: Agent) -> list[dict[str, Any]]:
        status = self._status(agent)
        return status.conditions_for(agent) if status else []

    def get_shadow(self, agent: Agent) -> bool:
        status = self._status(agent)
        return bool(status and status.shadow)


def agent_queryset() -> QuerySet[Agent]:
    # A correlated count per listed agent: a join + GROUP BY would aggregate every agent's
    # versions before the page's LIMIT (over a second at 100,000 agents).
    pending = (DesiredStateVersion.objects.filter(agent=OuterRef("pk"), state=VersionState.PENDING)
               .order_by().values("agent").annotate(n=Count("pk")).values("n")[:1])
    return Agent.objects.select_related("owner", "active_version", "status").annotate(
        pending_proposals=Coalesce(Subquery(pending), 0))


class AgentViewSet(viewsets.ReadOnlyModelViewSet):
    """Every person may list and read agents."""

    serializer_class = AgentSerializer
    permission_classes = [IsPerson]
    pagination_class = Page
    lookup_field = "name"
    filter_backends = [DjangoFilterBackend]

    @property
    def filterset_class(self) -> type[AgentFilterSet]:
        """The registry's filters and the loop's health and sync (registry/filters.py)."""
        return agent_filterset()

    def get_queryset(self) -> QuerySet[Agent]:
        return agent_queryset().order_by("name")


# --- manifests ---------------------------------------------------------------------------------


class OutcomeSerializer(Serializer):
    agent = serializers.CharField()
    action = serializers.ChoiceField(choices=["created", "proposed", "updated", "unchanged"])
    proposal = serializers.IntegerField(allow_null=True)
    state = serializers.CharField(allow_null=True)
    changes = serializers.ListField(child=serializers.DictField())
    diff = serializers.ListField(child=serializers.DictField())
    risk = serializers.IntegerField()
    guardrails = serializers.ListField(child=serializers.DictField())
    required_approvals = serializers.IntegerField()
    held = serializers.BooleanField()


class ApplyResultSerializer(Serializer):
    dry_run = serializers.BooleanField()
    results = OutcomeSerializer(many=True)


class ManifestView(APIView):
    """`POST /api/v1/manifests`: register agents and propose versions from YAML or JSON."""

    parser_classes = [TextParser]
    permission_classes = [IsPerson, HasRole]
    required_roles = (Role.OWNER,)
    write_parameters = ("dry_run",)  # config/write_parameters.py

    @extend_schema(
        request={"application/yaml": OpenApiTypes.STR, "application/json": OpenApiTypes.OBJECT},
        parameters=[OpenApiParameter("dry_run", OpenApiTypes.BOOL)],
        responses={200: ApplyResultSerializer, 201: ApplyResultSerializer},
    )
    def post(self, request: Request) -> Response:
        dry_run = flag(request, "dry_run")
        # DRF hands an empty body over as {} without calling the parser.
        manifests = read_manifests(
            request.data if isinstance(request.data, str) else "",
            authorise=partial(actions.check_can_apply, actor=request.user))
        outcomes = actions.apply_manifests(manifests, actor=request.user,
                                           source=VersionSource.API, dry_run=dry_run)
        changed = any(o.action != "unchanged" for o in outcomes)
        return Response(
            {"dry_run": dry_run, "results": [o.to_dict(dry_run=dry_run) for o in outcomes]},
            status=status.HTTP_201_CREATED if changed and not dry_run else status.HTTP_200_OK,
        )


# --- proposals ---------------------------------------------------------------------------------


class ProposalSerializer(ModelSerializer):
    """A proposal with its permission diff, guardrail results and approvals."""

    agent = serializers.CharField(source="agent.name")
    proposed_by = serializers.SerializerMethodField()
    decided_by = serializers.CharField(source="decided_by.username", default=None,
                                allow_null=True)
    agent_made = serializers.BooleanField(source="is_agent_made")
    token_holder = serializers.CharField(source="token_holder.username", default=None,
                                         allow_null=True)
    changes = serializers.JSONField(source="permission_changes")
    guardrails = serializers.JSONField(source="guardrail_results")
    approvals = serializers.SerializerMethodField()

    class Meta:
        model = DesiredStateVersion
        fields = ["id", "agent", "state", "source", "agent_made", "proposed_by", "token_holder",
                  "origin", "revision",
                  "base_generation", "generation", "spec_sha256", "spec", "metadata", "changes",
                  "risk", "guardrails", "required_approvals", "approvals", "held", "comment",
                  "decided_by", "decision_comment", "created_at", "updated_at", "decided_at",
                  "recertifies", "review_after_seconds", "review_by"]

    def get_proposed_by(self, version: DesiredStateVersion) -> str:
        return version.proposed_by.username if version.proposed_by_id else (
            f"agent:{version.agent.name}")

    def get_approvals(self, version: DesiredStateVersion) -> list[str]:
        return [a.approver.username for a in version.approvals.all()
                if a.revision == version.revision]


class ProposeSerializer(Serializer):
    """`POST /agents/{name}/proposals`: a spec, and optionally new metadata and the review
    date of the state once approved (`review_after` or `review_by`)."""

    spec = serializers.JSONField()
    labels = serializers.DictField(child=serializers.CharField(allow_blank=True),
                                   required=False)
    description = serializers.CharField(required=False, allow_blank=True, max_length=2000)
    base_generation = serializers.IntegerField(required=False, min_value=0)
    comment = serializers.CharField(required=False, allow_blank=True, max_length=2000)
    review_after = serializers.CharField(required=False, allow_blank=True, max_length=16)
    review_by = serializers.CharField(required=False, allow_blank=True, max_length=40)


class DecisionSerializer(Serializer):
    comment = serializers.CharField(required=False, allow_blank=True, max_length=2000,
                                    default="")
    expected_generation = serializers.IntegerField(required=False, min_value=0)


class ApproveSerializer(DecisionSerializer):
    otp = serializers.CharField(
        required=False, allow_blank=True, max_length=12, default="",
        help_text="A current TOTP code, when the proposal needs step-up (step_up_required).")


def inbox_order(queryset: QuerySet[DesiredStateVersion]) -> QuerySet[DesiredStateVersion]:
    """Riskiest first, then newest (the id breaks ties, so pages never overlap)."""
    return queryset.order_by("-risk", "-created_at", "-pk")


class ProposalViewSet(mixins.ListModelMixin, mixins.RetrieveModelMixin,
                      viewsets.GenericViewSet):
    """Proposals (people only); approvers approve or reject, proposers withdraw."""

    lookup_value_regex = r"[0-9]+"  # ids are numbers: anything else is 404, never a 500

    serializer_class = ProposalSerializer
    permission_classes = [IsPerson]
    pagination_class = Page

    filter_backends = [DjangoFilterBackend]
    filterset_class = ProposalFilterSet

    def get_queryset(self) -> QuerySet[DesiredStateVersion]:
        return inbox_order(DesiredStateVersion.objects.select_related(
            "agent", "proposed_by", "decided_by").prefetch_related("approvals__approver"))

    def _decided(self, version: DesiredStateVersion) -> Response:
        fresh = self.get_queryset().get(pk=version.pk)
        return Response(ProposalSerializer(fresh).data)

    @extend_schema(request=ApproveSerializer, responses=ProposalSerializer)
    @action(detail=True, methods=["post"])
    def approve(self, request: Request, pk: str) -> Response:
        actions.check_can_decide(int(pk), actor=request.user)
        body = ApproveSerializer(data=request.data)
        body.is_valid(raise_exception=True)
        version = actions.approve_proposal(
            int(pk), actor=request.user, comment=body.validated_data["comment"],
            expected_generation=body.validated_data.get("expected_generation"),
            otp=body.validated_data["otp"])
        return self._decided(version)

    @extend_schema(request=DecisionSerializer, responses=ProposalSerializer)
    @action(detail=True, methods=["post"])
    def reject(self, request: Request, pk: str) -> Response:
        actions.check_can_decide(int(pk), actor=request.user)
        body = DecisionSerializer(data=request.data)
        body.is_valid(raise_exception=True)
        version = actions.reject_proposal(int(pk), actor=request.user,
                                          comment=body.validated_data["comment"])
        return self._decided(version)

    @extend_schema(request=None, responses=ProposalSerializer)
    @action(detail=True, methods=["post"])
    def withdraw(self, request: Request, pk: str) -> Response:
        return self._decided(actions.withdraw_proposal(int(pk), actor=request.user))


class AgentProposalView(APIView):
    """`POST /api/v1/agents/{name}/proposals`: the owner, or the agent itself, proposes a spec."""

    parser_classes = [SafeJSONParser]

    @extend_schema(request=ProposeSerializer, responses={200: OutcomeSerializer,
                                                         201: OutcomeSerializer})
    def post(self, request: Request, name: str) -> Response:
        agent = Agent.objects.select_related("owner").filter(name=name).first()
        own_agent = acting_agent(request.user)
        if agent is None or (own_agent is not None and own_agent.pk != agent.pk):
            # An agent token never learns whether another agent exists.
            if own_agent is not None:
                raise NotAllowed("An agent's token may only propose for its own agent.")
            raise NotFound(f"No agent named {name!r}.")
        actions.check_can_propose(agent, request.user)  # before the body is judged
        body = ProposeSerializer(data=request.data)
        body.is_valid(raise_exception=True)
        data = body.validated_data
        spec = read_spec(data["spec"])
        review = review_override(data)
        active = agent.active_version.metadata if agent.active_version_id else {}
        metadata = {
            "owner": active.get("owner", agent.owner.username),
            "labels": data.get("labels", agent.labels),
            "description": data.get("description", agent.description),
        }
        outcome = actions.propose(agent, spec, metadata, actor=request.user,
                                  source=VersionSource.API,
                                  base_generation=data.get("base_generation"),
                                  comment=data.get("comment", ""), review=review)
        code = status.HTTP_200_OK if outcome.action == "unchanged" else status.HTTP_201_CREATED
        return Response(outcome.to_dict(), status=code)


# --- guardrails --------------------------------------------------------------------------------


class GuardrailSerializer(ModelSerializer):
    """An org-wide guardrail."""

    effect = serializers.ChoiceField(choices=GuardrailEffect.choices)
    selector = serializers.DictField(child=serializers.CharField(), required=False)
    created_by = serializers.CharField(source="created_by.username", read_only=True)
    overdue_effect = serializers.ChoiceField(
        choices=OverdueEffect.choices, required=False, allow_blank=True,
        help_text="What an agent it selects gets once its review date passed: warn, restrict "
                  "(to safe_tools) or suspend; blank: warn.")
    safe_tools = serializers.ListField(child=serializers.CharField(max_length=200),
                                       required=False, max_length=200)

    class Meta:
        model = Guardrail
        fields = ["name", "description", "expression", "selector", "effect",
                  "required_approvals", "message", "enabled", "overdue_effect", "safe_tools",
                  "created_by", "created_at", "updated_at"]
        read_only_fields = ["created_at", "updated_at"]


class GuardrailViewSet(viewsets.ModelViewSet):
    """Guardrails: every person reads them; compliance staff write them."""

    serializer_class = GuardrailSerializer
    permission_classes = [IsPerson]
    lookup_field = "name"
    queryset = Guardrail.objects.select_related("created_by").order_by("name")

    def _writer(self) -> None:
        if not has_role(self.request.user, Role.COMPLIANCE):
            raise NotAllowed("Only compliance staff manage guardrails.")

    def initial(self, request: Request, *args: Any, **kwargs: Any) -> None:
        super().initial(request, *args, **kwargs)
        if request.method not in ("GET", "HEAD", "OPTIONS"):
            self._writer()  # before the body is validated: others learn nothing from it

    def perform_create(self, serializer: GuardrailSerializer) -> None:
        self._writer()
        serializer.instance = actions.create_guardrail(actor=self.request.user,
                                                       **serializer.validated_data)

    def perform_update(self, serializer: GuardrailSerializer) -> None:
        self._writer()
        changes = dict(serializer.validated_data)
        changes.pop("name", None)  # the name is the guardrail's identity
        serializer.instance = actions.update_guardrail(serializer.instance,
                                                       actor=self.request.user, **changes)

    def perform_destroy(self, instance: Guardrail) -> None:
        self._writer()
        actions.delete_guardrail(instance, actor=self.request.user)


# --- tokens --------------------------------------------------------------------------------


class TokenSerializer(ModelSerializer):
    """A token as its holder, its agent's owner or an admin sees it (never its key)."""

    prefix = serializers.CharField(source="key_prefix")
    holder = serializers.CharField(source="user.username")
    agent = serializers.CharField(source="agent.name", default=None, allow_null=True)
    status = serializers.ChoiceField(choices=["active", "expired", "suspended", "revoked"])

    class Meta:
        model = ApiToken
        fields = ["id", "prefix", "name", "holder", "agent", "status", "created_at",
                  "expires_at", "last_used_at", "revoked_at", "suspended_at"]


class RevokeSerializer(Serializer):
    """`POST /tokens/{id}/revoke`: why, for the trail."""

    reason = serializers.CharField(max_length=500, required=False, allow_blank=True, default="")


class TokenViewSet(mixins.ListModelMixin, viewsets.GenericViewSet):
    """Your tokens and your agents' tokens (every token for admin): revoke one at once; keep a
    token your new agent's previous owner held."""

    serializer_class = TokenSerializer
    permission_classes = [IsPerson]
    pagination_class = Page
    lookup_value_regex = r"[0-9]{1,18}"

    def get_queryset(self) -> QuerySet[ApiToken]:
        return actions.visible_tokens(self.request.user)

    @extend_schema(request=RevokeSerializer, responses=TokenSerializer)
    @action(detail=True, methods=["post"])
    def revoke(self, request: Request, pk: str) -> Response:
        body = RevokeSerializer(data=request.data)
        body.is_valid(raise_exception=True)
        token = actions.revoke_api_token(int(pk), actor=request.user,
                                         reason=body.validated_data["reason"])
        return Response(TokenSerializer(token).data)

    @extend_schema(request=None, responses=TokenSerializer)
    @action(detail=True, methods=["post"])
    def keep(self, request: Request, pk: str) -> Response:
        return Response(TokenSerializer(actions.keep_agent_token(int(pk), actor=request.user)).data)
