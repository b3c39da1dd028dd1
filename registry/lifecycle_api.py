"""The API of an approval's lifecycle: rolling an agent back, waivers that expire."""

from drf_spectacular.utils import extend_schema
from rest_framework import serializers, status
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from config.errors import NotFound
from config.parsers import SafeJSONParser
from registry import actions
from registry.api import IsPerson, OutcomeSerializer
from registry.choices import VersionSource
from registry.models import Agent


class RollbackSerializer(serializers.Serializer):
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
        body = RollbackSerializer(data=request.data)
        body.is_valid(raise_exception=True)
        outcome = actions.propose_rollback(
            name, body.validated_data["generation"], actor=request.user,
            comment=body.validated_data["comment"], source=VersionSource.API)
        return Response(outcome.to_dict(), status=status.HTTP_201_CREATED)


class WaiverSerializer(serializers.Serializer):
    """`POST /agents/{name}/waivers`: what is allowed, why, under which ticket, for how long."""

    pointer = serializers.CharField(max_length=1000)
    reason = serializers.CharField(max_length=2000)
    ticket = serializers.CharField(max_length=100)
    duration = serializers.CharField(max_length=16, help_text="like 30m, 8h or 7d; at most 30d")


class WaiverOutSerializer(serializers.Serializer):
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


class WaiverView(APIView):
    """`GET/POST /api/v1/agents/{name}/waivers`: people read them; approvers and compliance
    (never the agent's owner) grant one."""

    parser_classes = [SafeJSONParser]
    permission_classes = [IsPerson]

    @extend_schema(responses={200: WaiverOutSerializer(many=True)})
    def get(self, request: Request, name: str) -> Response:
        agent = Agent.objects.filter(name=name).first()
        if agent is None:
            raise NotFound(f"No agent named {name!r}.")
        waivers = agent.waivers.select_related("agent", "granted_by").order_by("-created_at")
        return Response([w.to_dict() for w in waivers[:500]])

    @extend_schema(request=WaiverSerializer, responses={201: WaiverOutSerializer})
    def post(self, request: Request, name: str) -> Response:
        body = WaiverSerializer(data=request.data)
        body.is_valid(raise_exception=True)
        waiver = actions.grant_waiver(name, actor=request.user, **body.validated_data)
        return Response(waiver.to_dict(), status=status.HTTP_201_CREATED)


class RetireSerializer(serializers.Serializer):
    """`POST /agents/{name}/retirement`: why the agent should be retired."""

    reason = serializers.CharField(max_length=2000)


class RetirementOutSerializer(serializers.Serializer):
    """A retirement: pending until an approver approves it."""

    id = serializers.IntegerField()
    agent = serializers.CharField()
    reason = serializers.CharField()
    state = serializers.CharField()
    proposed_by = serializers.CharField()
    decided_by = serializers.CharField(allow_null=True)
    decision_comment = serializers.CharField(allow_blank=True)


class RetirementDecisionSerializer(serializers.Serializer):
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
        body = RetirementDecisionSerializer(data=request.data)
        body.is_valid(raise_exception=True)
        retirement = actions.approve_retirement(pk, actor=request.user,
                                                comment=body.validated_data["comment"],
                                                otp=body.validated_data["otp"])
        return Response(retirement.to_dict())
