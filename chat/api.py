"""`/api/v1/chat/link-codes` and `/api/v1/chat/accounts`: a person asks for a one-time code to
link their chat account, sees their links and removes them (admins see and remove any)."""

from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import extend_schema
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from chat import actions
from chat.models import ChatAccount
from config.errors import NotFound
from config.permissions import IsPerson
from registry.choices import Role
from registry.roles import has_role


class LinkCodesView(APIView):
    permission_classes = [IsPerson]

    @extend_schema(request=None, responses={201: OpenApiTypes.OBJECT})
    def post(self, request: Request) -> Response:
        code, row = actions.issue_link_code(actor=request.user)
        return Response({"code": code, "expires_at": row.expires_at.isoformat(),
                         "send": f"/agentgov link {code}"}, status=201)


def _visible(user) -> list[ChatAccount]:
    rows = ChatAccount.objects.select_related("user").order_by("pk")
    return list(rows if has_role(user, Role.ADMIN) else rows.filter(user=user))


class AccountsView(APIView):
    permission_classes = [IsPerson]

    @extend_schema(responses=OpenApiTypes.OBJECT)
    def get(self, request: Request) -> Response:
        return Response({"accounts": [a.to_dict() for a in _visible(request.user)]})


class AccountView(APIView):
    permission_classes = [IsPerson]

    @extend_schema(responses={204: None})
    def delete(self, request: Request, pk: int) -> Response:
        if pk not in {a.pk for a in _visible(request.user)}:
            raise NotFound(f"No chat account {pk}.")
        actions.unlink_account(pk, actor=request.user)
        return Response(status=204)
