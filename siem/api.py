"""`/api/v1/siem/sinks`: admins configure where the audit and alert stream goes; admins and
compliance read how far each sink has got."""

from typing import Any

from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import extend_schema
from rest_framework import serializers
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from config.errors import NotAllowed, NotFound
from config.permissions import IsPerson
from config.strict_input import Serializer
from registry.choices import Role
from registry.roles import has_role
from siem import actions
from siem.choices import SinkKind, StartAt
from siem.models import Sink, stream_heads


class SinkSerializer(Serializer):
    name = serializers.SlugField(max_length=63)
    kind = serializers.ChoiceField(choices=SinkKind.choices)
    url = serializers.CharField(max_length=500)
    ca_pem = serializers.CharField(max_length=20000, required=False, default="",
                                   allow_blank=True, trim_whitespace=False)
    token_env = serializers.CharField(max_length=100, required=False, default="",
                                      allow_blank=True)
    enabled = serializers.BooleanField(required=False, default=True)
    start = serializers.ChoiceField(choices=StartAt.choices, required=False, default=StartAt.NOW)


class SinkChangeSerializer(Serializer):
    url = serializers.CharField(max_length=500, required=False)
    ca_pem = serializers.CharField(max_length=20000, required=False, allow_blank=True,
                                   trim_whitespace=False)
    token_env = serializers.CharField(max_length=100, required=False, allow_blank=True)
    enabled = serializers.BooleanField(required=False)


def _reader(request: Request) -> None:
    if not has_role(request.user, Role.COMPLIANCE):
        raise NotAllowed("SIEM sinks are for admins and compliance.")


def _admin(request: Request) -> None:
    if not has_role(request.user, Role.ADMIN):
        raise NotAllowed("Only admins configure SIEM sinks.")


def _sink(pk: int) -> Sink:
    sink = Sink.objects.filter(pk=pk).first()
    if sink is None:
        raise NotFound(f"No SIEM sink {pk}.")
    return sink


class SinksView(APIView):
    permission_classes = [IsPerson]

    @extend_schema(responses=OpenApiTypes.OBJECT, operation_id="siem_sinks_list")
    def get(self, request: Request) -> Response:
        _reader(request)
        now = stream_heads()
        return Response({"heads": now, "sinks": [s.status(now) for s in Sink.objects.all()]})

    @extend_schema(request=SinkSerializer, responses={201: OpenApiTypes.OBJECT})
    def post(self, request: Request) -> Response:
        _admin(request)
        body = SinkSerializer(data=request.data)
        body.is_valid(raise_exception=True)
        sink = actions.create_sink(actor=request.user, **body.validated_data)
        return Response(sink.status(stream_heads()), status=201)


class SinkView(APIView):
    permission_classes = [IsPerson]

    @extend_schema(responses=OpenApiTypes.OBJECT, operation_id="siem_sink_retrieve")
    def get(self, request: Request, pk: int) -> Response:
        _reader(request)
        return Response(_sink(pk).status(stream_heads()))

    @extend_schema(request=SinkChangeSerializer, responses=OpenApiTypes.OBJECT)
    def patch(self, request: Request, pk: int) -> Response:
        _admin(request)
        _sink(pk)
        body = SinkChangeSerializer(data=request.data)
        body.is_valid(raise_exception=True)
        changes: dict[str, Any] = body.validated_data
        sink = actions.update_sink(pk, actor=request.user, **changes)
        return Response(sink.status(stream_heads()))

    @extend_schema(responses={204: None})
    def delete(self, request: Request, pk: int) -> Response:
        _admin(request)
        actions.delete_sink(pk, actor=request.user)
        return Response(status=204)
