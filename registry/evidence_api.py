"""`GET /api/v1/agents/{name}/evidence`: an agent's audit evidence for its owner or compliance.
The registry knows who owns an agent, so the view is the registry's; the bundle is audit's."""

import logging

from django.conf import settings
from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import OpenApiParameter, extend_schema
from rest_framework.exceptions import NotFound, PermissionDenied, ValidationError
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from audit import archiving
from audit.api import EvidencePeriod, SigningRefusedError, sign_for_export
from audit.chain import format_time
from audit.evidence import TooManyEntries, WitnessContradicts, bundle
from config.permissions import IsPerson
from config.roles import Role, has_role
from registry.models import Agent

log = logging.getLogger(__name__)


class AgentEvidenceView(APIView):
    """`GET /api/v1/agents/{name}/evidence?from=&to=`: the agent's entries in the period, each
    with an inclusion proof to one signed checkpoint, for `agentctl audit verify` offline.
    For the agent's owner, compliance and admin; fetching it is audited."""

    permission_classes = [IsPerson]

    @extend_schema(
        parameters=[OpenApiParameter("from", OpenApiTypes.DATETIME),
                    OpenApiParameter("to", OpenApiTypes.DATETIME)],
        responses={200: OpenApiTypes.OBJECT},
    )
    def get(self, request: Request, name: str) -> Response:
        agent = Agent.objects.filter(name=name).only("name", "owner_id").first()
        if agent is None:
            raise NotFound(f"No agent named {name!r}.")
        user = request.user
        if not ((has_role(user, Role.OWNER) and agent.owner_id == user.pk)
                or has_role(user, Role.COMPLIANCE)):
            raise PermissionDenied(f"You may not fetch the evidence of {name}.")
        # The page's empty date fields mean "no bound", as a missing parameter does.
        period = EvidencePeriod(data={k: v for k, v in request.query_params.items() if v})
        period.is_valid(raise_exception=True)
        start, end = period.validated_data.get("from"), period.validated_data.get("to")
        archived = archiving.holding(start)
        if archived is not None:
            raise ValidationError({"from": (
                f"entries up to {format_time(archived.last_at)} are archived in "
                f"{archived.file_name} (sha256 {archived.sha256}); ask the operator for that "
                f"file and verify it offline, or ask for a period after that time")})
        size = sign_for_export(
            actor=user, target=f"agent:{name}", agent=name,
            after={"format": "evidence", "from": format_time(start) if start else None,
                   "to": format_time(end) if end else None})
        try:
            document = bundle(name, start, end, size, settings.AUDIT_EVIDENCE_MAX_ENTRIES)
        except TooManyEntries as error:
            raise ValidationError({"to": str(error)}) from error
        except WitnessContradicts as error:  # never serve a head a witness contradicts
            log.critical("evidence for %s refused: %s", name, error)
            raise SigningRefusedError(str(error)) from error
        response = Response(document)
        response["Content-Disposition"] = f'attachment; filename="evidence-{name}.json"'
        return response
