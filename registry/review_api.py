"""`GET /api/v1/proposals/{id}/thread`: a proposal's review thread, oldest first;
`POST` the same path adds a comment or requested changes (`{"body": ..., "verdict":
"comment" | "request_changes"}`). For the people involved only."""

from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import extend_schema
from rest_framework import serializers
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from config.errors import NotAllowed, NotFound
from config.permissions import IsPerson
from config.strict_input import Serializer
from registry import actions
from registry.choices import ReviewVerdict
from registry.models import DesiredStateVersion
from registry.review_thread import may_read, thread


class ThreadEntrySerializer(Serializer):
    body = serializers.CharField(max_length=2000)
    verdict = serializers.ChoiceField(choices=ReviewVerdict.choices,
                                      default=ReviewVerdict.COMMENT)


class ThreadView(APIView):
    """A proposal's review thread: read it, or add to it."""

    permission_classes = [IsPerson]

    def _version(self, request: Request, pk: int) -> DesiredStateVersion:
        version = (DesiredStateVersion.objects.select_related("agent", "proposed_by",
                                                              "decided_by")
                   .filter(pk=pk).first())
        if version is None:
            raise NotFound(f"No proposal {pk}.")
        if not may_read(request.user, version):
            raise NotAllowed("The review thread is for the people involved in the proposal.")
        return version

    @extend_schema(responses=OpenApiTypes.OBJECT)
    def get(self, request: Request, pk: int) -> Response:
        version = self._version(request, pk)
        return Response({"proposal": version.pk, "state": version.state,
                         "entries": [e.to_dict() for e in thread(version)]})

    @extend_schema(request=ThreadEntrySerializer, responses={201: OpenApiTypes.OBJECT})
    def post(self, request: Request, pk: int) -> Response:
        self._version(request, pk)  # who may, before what was sent
        body = ThreadEntrySerializer(data=request.data)
        body.is_valid(raise_exception=True)
        actions.comment_on_proposal(pk, actor=request.user, **body.validated_data)
        version = self._version(request, pk)
        return Response({"proposal": version.pk, "state": version.state,
                         "entries": [e.to_dict() for e in thread(version)]}, status=201)
