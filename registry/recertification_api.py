"""The API of recertification and of the lifecycle's later steps: recertifying an agent, the
report of review dates, compliance's review intervals, withdrawing a waiver, rejecting a
retirement."""

from typing import Any

from django.http import HttpResponse
from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import OpenApiParameter, extend_schema
from rest_framework import serializers, status
from rest_framework.exceptions import ValidationError
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from config.errors import NotAllowed, NotFound
from config.parsers import SafeJSONParser
from config.permissions import IsPerson
from config.strict_input import Serializer
from registry import actions
from registry.actions.retirement import check_can_decide_retirement
from registry.actions.waivers import may_withdraw
from registry.api import OutcomeSerializer
from registry.choices import RiskLevel, Role, VersionSource
from registry.lifecycle_api import (
    RetirementOutSerializer,
    WaiverOutSerializer,
    agent_for_proposer,
)
from registry.models import Waiver
from registry.principals import AgentPrincipal
from registry.recertification import (
    REVIEW_EXPECTED,
    format_seconds,
    intervals,
    review_override,
    review_seconds,
)
from registry.recertification_report import STATES, report, to_csv
from registry.roles import has_role


class ReviewDateFields(Serializer):
    """A proposer's own review date instead of the default for the risk level."""

    review_after = serializers.CharField(
        required=False, allow_blank=True, max_length=16,
        help_text=f"review the approved state this long after approval: {REVIEW_EXPECTED}")
    review_by = serializers.CharField(
        required=False, allow_blank=True, max_length=40,
        help_text="review the approved state by this time (RFC 3339, in the future)")


class RecertifySerializer(ReviewDateFields):
    """`POST /agents/{name}/recertify`: why the approved state still holds."""

    comment = serializers.CharField(required=False, allow_blank=True, max_length=2000,
                                    default="")


class RecertifyView(APIView):
    """`POST /api/v1/agents/{name}/recertify`: the owner proposes the active spec again,
    unchanged; approved like any proposal, it resets the review date."""

    parser_classes = [SafeJSONParser]
    permission_classes = [IsPerson]

    @extend_schema(request=RecertifySerializer, responses={201: OutcomeSerializer})
    def post(self, request: Request, name: str) -> Response:
        if isinstance(request.user, AgentPrincipal):
            raise NotAllowed("An agent cannot recertify itself; its owner proposes it.")
        agent_for_proposer(name, request.user)  # before the body is read
        body = RecertifySerializer(data=request.data)
        body.is_valid(raise_exception=True)
        outcome = actions.propose_recertification(
            name, actor=request.user, comment=body.validated_data["comment"],
            review=review_override(body.validated_data), source=VersionSource.API)
        return Response(outcome.to_dict(), status=status.HTTP_201_CREATED)


class ReportRowSerializer(Serializer):
    """One agent's review date and where it stands."""

    agent = serializers.CharField()
    owner = serializers.CharField()
    generation = serializers.IntegerField()
    review_due_at = serializers.CharField()
    state = serializers.ChoiceField(choices=STATES)
    days_left = serializers.IntegerField()
    overdue_effect = serializers.CharField(allow_null=True)
    restricted_to = serializers.ListField(child=serializers.CharField(), allow_null=True)
    recertification_pending = serializers.BooleanField()
    lifecycle = serializers.CharField()


class RecertificationReportView(APIView):
    """`GET /api/v1/recertification[?state=overdue|due|scheduled][&format=csv]`: agents by
    review date (owners see their own)."""

    permission_classes = [IsPerson]

    @extend_schema(parameters=[OpenApiParameter("state", OpenApiTypes.STR, enum=STATES),
                               OpenApiParameter("format", OpenApiTypes.STR, enum=["json", "csv"])],
                   responses={200: ReportRowSerializer(many=True),
                              (200, "text/csv"): OpenApiTypes.STR})
    def get(self, request: Request) -> Any:
        state = request.query_params.get("state", "")
        fmt = request.query_params.get("format", "json")
        if state and state not in STATES:
            raise ValidationError({"state": f"expected one of {', '.join(STATES)}"})
        if fmt not in ("json", "csv"):
            raise ValidationError({"format": "expected json or csv"})
        rows = report(request.user, state=state)
        if fmt == "csv":
            response = HttpResponse(to_csv(rows), content_type="text/csv")
            response["Content-Disposition"] = 'attachment; filename="recertification.csv"'
            return response
        return Response(rows)


class IntervalSerializer(Serializer):
    """`PUT /review-intervals/{level}`: how often agents of this level are reviewed."""

    interval = serializers.CharField(max_length=16, help_text=REVIEW_EXPECTED)
    risk_from = serializers.IntegerField(
        required=False, min_value=1, max_value=10_000,
        help_text="the lowest whole-spec risk score of this level (not for low)")

    def validate_interval(self, value: str) -> int:
        try:
            return review_seconds(value)
        except ValueError as error:
            raise serializers.ValidationError(str(error)) from None


class IntervalOutSerializer(Serializer):
    """One risk level's review interval in force."""

    level = serializers.ChoiceField(choices=RiskLevel.choices)
    interval = serializers.CharField()
    risk_from = serializers.IntegerField()


def _intervals_body() -> list[dict[str, Any]]:
    table = intervals()
    return [{"level": level, "interval": format_seconds(table[level]["seconds"]),
             "risk_from": table[level]["risk_from"]} for level in RiskLevel.values]


class ReviewIntervalsView(APIView):
    """`GET /api/v1/review-intervals`: each risk level's review interval in force."""

    permission_classes = [IsPerson]

    @extend_schema(responses={200: IntervalOutSerializer(many=True)})
    def get(self, request: Request) -> Response:
        return Response(_intervals_body())


class ReviewIntervalView(APIView):
    """`PUT /api/v1/review-intervals/{level}`: compliance sets one level's interval."""

    parser_classes = [SafeJSONParser]
    permission_classes = [IsPerson]

    @extend_schema(request=IntervalSerializer, responses={200: IntervalOutSerializer(many=True)})
    def put(self, request: Request, level: str) -> Response:
        if level not in RiskLevel.values:
            raise ValidationError({"level": f"expected one of {', '.join(RiskLevel.values)}"})
        if not has_role(request.user, Role.COMPLIANCE):
            raise NotAllowed("Only compliance staff set review intervals.")
        body = IntervalSerializer(data=request.data)
        body.is_valid(raise_exception=True)
        current = intervals()[level]
        actions.set_review_interval(
            level, seconds=body.validated_data["interval"],
            risk_from=body.validated_data.get("risk_from", current["risk_from"]),
            actor=request.user)
        return Response(_intervals_body())


class WithdrawSerializer(Serializer):
    """`POST /waivers/{id}/withdraw`: why the waiver ends early."""

    reason = serializers.CharField(max_length=2000)


class WaiverWithdrawView(APIView):
    """`POST /api/v1/waivers/{id}/withdraw`: the agent's owner or compliance ends a waiver
    before its expiry, saying why."""

    parser_classes = [SafeJSONParser]
    permission_classes = [IsPerson]

    @extend_schema(request=WithdrawSerializer, responses={200: WaiverOutSerializer})
    def post(self, request: Request, pk: int) -> Response:
        waiver = Waiver.objects.select_related("agent").filter(pk=pk).first()
        if waiver is None:
            raise NotFound(f"No waiver {pk}.")
        if not may_withdraw(waiver.agent, request.user):  # before the body is read
            raise NotAllowed("Only the agent's owner or compliance staff withdraw a waiver.")
        body = WithdrawSerializer(data=request.data)
        body.is_valid(raise_exception=True)
        waiver = actions.withdraw_waiver(pk, actor=request.user,
                                         reason=body.validated_data["reason"])
        return Response(waiver.to_dict())


class RejectRetirementSerializer(Serializer):
    """`POST /retirements/{id}/reject`: why not."""

    comment = serializers.CharField(max_length=2000)


class RetirementRejectView(APIView):
    """`POST /api/v1/retirements/{id}/reject`: an approver (four eyes) refuses a retirement."""

    parser_classes = [SafeJSONParser]
    permission_classes = [IsPerson]

    @extend_schema(request=RejectRetirementSerializer, responses={200: RetirementOutSerializer})
    def post(self, request: Request, pk: int) -> Response:
        check_can_decide_retirement(pk, actor=request.user)  # before the body is read
        body = RejectRetirementSerializer(data=request.data)
        body.is_valid(raise_exception=True)
        retirement = actions.reject_retirement(pk, actor=request.user,
                                               comment=body.validated_data["comment"])
        return Response(retirement.to_dict())
