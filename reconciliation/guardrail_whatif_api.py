"""`POST /api/v1/guardrails/what-if` and `GET /api/v1/guardrails/{name}/what-if`: what a
guardrail would have said over the last week of proposals and observed states (the what-if
reads the loop's observations, so it is served here rather than by the registry). Routed
before the registry's guardrail routes (config/urls.py): its detail route would take
"what-if" for a guardrail's name."""

from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import extend_schema
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from config.errors import NotFound
from config.permissions import IsPerson
from reconciliation.guardrail_whatif import guardrail_what_if
from registry.actions.guardrails import _validate
from registry.api import GuardrailSerializer
from registry.choices import Role
from registry.models import Guardrail
from registry.roles import HasRole


class GuardrailWhatIfView(APIView):
    """`POST /api/v1/guardrails/what-if`: an unsaved guardrail judging the last week's
    proposals and observed states."""

    permission_classes = [IsPerson, HasRole]
    required_roles = (Role.COMPLIANCE,)

    @extend_schema(request=GuardrailSerializer, responses={200: OpenApiTypes.OBJECT})
    def post(self, request: Request) -> Response:
        body = GuardrailSerializer(data={**(request.data if isinstance(request.data, dict)
                                            else {}), "name": "what-if"})
        body.is_valid(raise_exception=True)
        fields = dict(body.validated_data)
        fields.setdefault("required_approvals", 2)
        fields.setdefault("selector", {})
        _validate(fields)
        return Response(guardrail_what_if(Guardrail(**fields)))


class SavedGuardrailWhatIfView(APIView):
    """`GET /api/v1/guardrails/{name}/what-if`: a saved guardrail over the last week."""

    permission_classes = [IsPerson, HasRole]
    required_roles = (Role.COMPLIANCE,)

    @extend_schema(responses={200: OpenApiTypes.OBJECT})
    def get(self, request: Request, name: str) -> Response:
        guardrail = Guardrail.objects.filter(name=name).first()
        if guardrail is None:
            raise NotFound(f"No guardrail {name!r}.")
        return Response(guardrail_what_if(guardrail))
