"""The API of an approval's lifecycle: rolling an agent back, waivers that expire."""

from typing import Any

from drf_spectacular.utils import extend_schema
from rest_framework import serializers, status
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from config.errors import NotAllowed, NotFound
from config.parsers import SafeJSONParser
from config.permissions import IsPerson
from config.strict_input import Serializer
from registry import actions
from registry.actions.proposals import check_can_propose
from registry.actions.retirement import check_can_decide_retirement
from registry.actions.waivers import check_can_confirm, check_may_waive
from registry.api import OutcomeSerializer
from registry.choices import VersionSource
from registry.models import Agent
from registry.principals import AgentPrincipal, acting_agent
from registry.roles import sees_operations


def agent_for_proposer(name: str, actor: Any) -> Agent:
    """The named agent, once `actor` may propose for it (403), before a body is read: a
    stranger is told "not yours", never what is wrong with the body. An agent token never
    learns whether another agent exists."""
    agent = Agent.objects.select_related("owner").filter(name=name).first()
    own_agent = acting_agent(actor)
    if own_agent is not None and (agent is None or own_agent.pk != agent.pk):
        raise NotAllowed("An agent's token may only act on its own agent.")
    if agent is None:
        raise NotFound(f"No agent named {name!r}.")
    check_can_propose(agent, actor)
    return agent


class RollbackSerializer(Serializer):
    """`POST /agents/{name}/rollback`: the approved generation to propose again, and why."""

    generation = serializers.IntegerField(min_value=1, max_value=2**31 - 1)
    comment = serializers.CharField(required=False, allow_blank=True, max_length=2000,
                                    default="")


class RollbackView(APIView):
    """`POST /api/v1/agents/{name}/rollback`: the owner proposes an earlier generation again."""

    parser_classes = [SafeJSONParser]
    permission_classes = [IsPerson]

    @extend_schema(request=RollbackSerializer, responses={201: OutcomeSerializer})
    def post(self, request: Request, name: str) -> Response:
        agent_for_proposer(name, request.user)  # before the body is read
        body = RollbackSerializer(data=request.data)
        body.is_valid(raise_exception=True)
        outcome = actions.propose_rollback(
            name, body.validated_data["generation"], actor=request.user,
            comment=body.validated_data["comment"], source=VersionSource.API)
        return Response(outcome.to_dict(), status=status.HTTP_201_CREATED)


class WaiverSerializer(Serializer):
    """`POST /agents/{name}/waivers`: what is allowed, why, under which ticket, for how long."""

    pointer = serializers.CharField(max_length=1000)
    reason = serializers.CharField(max_length=2000)
    ticket = serializers.CharField(max_length=100)
    duration = serializers.CharField(max_length=16, help_text="like 30m, 8h or 7d; at most 30d")
    otp = serializers.CharField(
        required=False, allow_blank=True, max_length=12, default="",
        help_text="A current TOTP code, when the change the waiver stands for needs step-up.")


class WaiverOutSerializer(Serializer):
    """A waiver; `lapsed_at` is set once its end is recorded."""

    id = serializers.IntegerField()
    agent = serializers.CharField()
    pointer = serializers.CharField()
    reason = serializers.CharField()
    ticket = serializers.CharField()
    expires_at = serializers.CharField()
    granted_by = serializers.CharField()
    created_at = serializers.CharField()
    lapsed_at = serializers.CharField(allow_null=True)
    withdrawn_at = serializers.CharField(allow_null=True)
    withdrawn_by = serializers.CharField(allow_null=True)
    state = serializers.CharField()
    required_approvals = serializers.IntegerField()
    confirmed_by = serializers.CharField(allow_null=True)
    risk = serializers.IntegerField()
    guardrails = serializers.ListField(child=serializers.DictField())
    step_up = serializers.BooleanField()


class WaiverView(APIView):
    """`GET/POST /api/v1/agents/{name}/waivers`: its owner and the reviewers read them;
    approvers and compliance (never the agent's owner) grant one."""

    parser_classes = [SafeJSONParser]
    permission_classes = [IsPerson]

    @extend_schema(responses={200: WaiverOutSerializer(many=True)})
    def get(self, request: Request, name: str) -> Response:
        agent = Agent.objects.filter(name=name).first()
        if agent is None:
            raise NotFound(f"No agent named {name!r}.")
        if not sees_operations(request.user, agent):  # as its findings are
            raise NotAllowed("An agent's waivers are for its owner and the reviewers.")
        waivers = agent.waivers.select_related("agent", "granted_by").order_by("-created_at")
        return Response([w.to_dict() for w in waivers[:500]])

    @extend_schema(request=WaiverSerializer, responses={201: WaiverOutSerializer})
    def post(self, request: Request, name: str) -> Response:
        agent = Agent.objects.select_related("owner").filter(name=name).first()
        if agent is None:
            if isinstance(request.user, AgentPrincipal):
                raise NotAllowed("Only approvers and compliance staff grant waivers.")
            raise NotFound(f"No agent named {name!r}.")
        check_may_waive(agent, request.user)  # before the body is read
        body = WaiverSerializer(data=request.data)
        body.is_valid(raise_exception=True)
        waiver = actions.grant_waiver(name, actor=request.user, session=None,
                                      **body.validated_data)
        return Response(waiver.to_dict(), status=status.HTTP_201_CREATED)


class WaiverConfirmSerializer(Serializer):
    """`POST /waivers/{id}/approve`: the second approver's sign-off."""

    otp = serializers.CharField(
        required=False, allow_blank=True, max_length=12, default="",
        help_text="A current TOTP code, when the change the waiver stands for needs step-up.")


class WaiverConfirmView(APIView):
    """`POST /api/v1/waivers/{id}/approve`: a second approver (not its grantor, not the
    agent's owner) puts a waiver that needs two approvers in force."""

    parser_classes = [SafeJSONParser]
    permission_classes = [IsPerson]

    @extend_schema(request=WaiverConfirmSerializer, responses={200: WaiverOutSerializer})
    def post(self, request: Request, pk: int) -> Response:
        check_can_confirm(pk, actor=request.user)  # before the body is read
        body = WaiverConfirmSerializer(data=request.data)
        body.is_valid(raise_exception=True)
        waiver = actions.confirm_waiver(pk, actor=request.user, otp=body.validated_data["otp"])
        return Response(waiver.to_dict())


class RetireSerializer(Serializer):
    """`POST /agents/{name}/retirement`: why the agent should be retired."""

    reason = serializers.CharField(max_length=2000)


class RetirementOutSerializer(Serializer):
    """A retirement: pending until an approver approves it."""

    id = serializers.IntegerField()
    agent = serializers.CharField()
    reason = serializers.CharField()
    state = serializers.CharField()
    proposed_by = serializers.CharField()
    decided_by = serializers.CharField(allow_null=True)
    decision_comment = serializers.CharField(allow_blank=True)


class RetirementDecisionSerializer(Serializer):
    comment = serializers.CharField(required=False, allow_blank=True, max_length=2000,
                                    default="")
    otp = serializers.CharField(
        required=False, allow_blank=True, max_length=12, default="",
        help_text="A current TOTP code, when step-up is configured (step_up_required).")


class RetireView(APIView):
    """`POST /api/v1/agents/{name}/retirement`: the owner proposes retiring the agent."""

    parser_classes = [SafeJSONParser]
    permission_classes = [IsPerson]

    @extend_schema(request=RetireSerializer, responses={201: RetirementOutSerializer})
    def post(self, request: Request, name: str) -> Response:
        if isinstance(request.user, AgentPrincipal):
            raise NotAllowed("An agent cannot retire itself; its owner proposes it.")
        agent_for_proposer(name, request.user)  # before the body is read
        body = RetireSerializer(data=request.data)
        body.is_valid(raise_exception=True)
        retirement = actions.propose_retirement(name, actor=request.user,
                                                reason=body.validated_data["reason"])
        return Response(retirement.to_dict(), status=status.HTTP_201_CREATED)


class RetirementApproveView(APIView):
    """`POST /api/v1/retirements/{id}/approve`: an approver (four eyes) retires the agent."""

    parser_classes = [SafeJSONParser]
    permission_classes = [IsPerson]

    @extend_schema(request=RetirementDecisionSerializer,
                   responses={200: RetirementOutSerializer})
    def post(self, request: Request, pk: int) -> Response:
        check_can_decide_retirement(pk, actor=request.user)  # before the body is read
        body = RetirementDecisionSerializer(data=request.data)
        body.is_valid(raise_exception=True)
        retirement = actions.approve_retirement(pk, actor=request.user,
                                                comment=body.validated_data["comment"],
                                                otp=body.validated_data["otp"])
        return Response(retirement.to_dict())
