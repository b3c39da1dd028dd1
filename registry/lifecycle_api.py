"""The API of an approval's lifecycle: rolling an agent back to an earlier generation."""

from drf_spectacular.utils import extend_schema
from rest_framework import serializers, status
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from config.parsers import SafeJSONParser
from registry import actions
from registry.api import IsPerson, OutcomeSerializer
from registry.choices import VersionSource


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
