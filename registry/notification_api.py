"""`GET/POST /api/v1/notifications/preferences`, `DELETE .../{id}`: where a person (or, set
by an admin, a team) hears about inbox items."""

from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import extend_schema
from rest_framework import serializers
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from config.errors import NotFound
from config.permissions import IsPerson
from config.strict_input import Serializer
from registry.actions import notifications
from registry.choices import NotifyChannel, NotifyMode, Role
from registry.models import NotificationPreference
from registry.roles import has_role


class PreferenceSerializer(Serializer):
    channel = serializers.ChoiceField(choices=NotifyChannel.choices)
    target = serializers.CharField(max_length=500)
    mode = serializers.ChoiceField(choices=NotifyMode.choices, default=NotifyMode.IMMEDIATE)
    team = serializers.SlugField(max_length=63, required=False, default="")


def visible(user) -> list[NotificationPreference]:
    """One's own preferences; an admin sees every person's and team's."""
    rows = NotificationPreference.objects.select_related("user").order_by("pk")
    return list(rows if has_role(user, Role.ADMIN) else rows.filter(user=user))


class PreferencesView(APIView):
    permission_classes = [IsPerson]

    @extend_schema(responses=OpenApiTypes.OBJECT)
    def get(self, request: Request) -> Response:
        return Response({"preferences": [p.to_dict() for p in visible(request.user)]})

    @extend_schema(request=PreferenceSerializer, responses=OpenApiTypes.OBJECT)
    def post(self, request: Request) -> Response:
        body = PreferenceSerializer(data=request.data)
        body.is_valid(raise_exception=True)
        preference = notifications.set_preference(actor=request.user, **body.validated_data)
        return Response(preference.to_dict(), status=201)


class PreferenceView(APIView):
    permission_classes = [IsPerson]

    @extend_schema(responses={204: None})
    def delete(self, request: Request, pk: int) -> Response:
        notifications.delete_preference(pk, actor=request.user)
        return Response(status=204)


class VerifySerializer(Serializer):
    token = serializers.CharField(max_length=100, help_text="the token sent to the address")


class PreferenceVerifyView(APIView):
    """`POST /api/v1/notifications/preferences/{id}/verify`: confirm an address with the token
    that was sent to it; nothing else is sent there before."""

    permission_classes = [IsPerson]

    @extend_schema(request=VerifySerializer, responses=OpenApiTypes.OBJECT)
    def post(self, request: Request, pk: int) -> Response:
        preference = NotificationPreference.objects.filter(pk=pk).first()
        if preference is None or not notifications.may_verify(preference, request.user):
            raise NotFound(f"No notification preference {pk}.")  # before the body is read
        body = VerifySerializer(data=request.data)
        body.is_valid(raise_exception=True)
        preference = notifications.verify_preference(pk, actor=request.user,
                                                     token=body.validated_data["token"])
        return Response(preference.to_dict())
