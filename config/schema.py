"""OpenAPI post-processing (every operation documents the error document it can answer with),
and the schema's view."""

from typing import Any

from django.core.signals import setting_changed
from django.dispatch import receiver
from django.utils import translation
from drf_spectacular.views import SpectacularAPIView
from rest_framework.response import Response

ERROR_STATUSES = {
    "400": "Malformed request", "401": "Not signed in or token refused",
    "403": "Not allowed for this principal", "404": "Not found",
    "409": "Conflict with the current state (e.g. a stale generation)",
    "411": "A chunked body the server could not size (send Content-Length)",
    "413": "Body over the size or count limit, as sent or while inflating",
    "415": "A Content-Encoding other than gzip, x-gzip, deflate or identity",
    "422": "Invalid content (spec, guardrail denial, expression)",
    "429": "Rate limited", "503": "A part the request needs is unavailable",
}
ERROR_SCHEMA = {
    "type": "object", "required": ["error"],
    "properties": {"error": {
        "type": "object", "required": ["code", "message", "details"],
        "properties": {
            "code": {"type": "string"}, "message": {"type": "string"},
            "details": {"type": "array", "items": {
                "type": "object", "required": ["pointer", "message"],
                "properties": {"pointer": {"type": "string"}, "message": {"type": "string"}},
                "additionalProperties": True}},
        }}},
}


def add_error_responses(result: dict[str, Any], generator: Any, request: Any,
                        public: bool) -> dict[str, Any]:
    """drf-spectacular postprocessing hook: the documented error shape on every operation."""
    result.setdefault("components", {}).setdefault("schemas", {})["Error"] = ERROR_SCHEMA
    reference = {"application/json": {"schema": {"$ref": "#/components/schemas/Error"}}}
    for path in result.get("paths", {}).values():
        for operation in path.values():
            if not isinstance(operation, dict) or "responses" not in operation:
                continue
            for status, description in ERROR_STATUSES.items():
                operation["responses"].setdefault(status, {"description": description,
                                                           "content": reference})
    return result


class SchemaView(SpectacularAPIView):
    """`GET /api/schema`, generated once per process and language: the schema is made of the
    code and the settings alone (SERVE_PUBLIC: the same for every caller), and generating it
    walks every view and serializer, over a second of CPU, which any caller could repeat
    (a changed setting, in tests, makes it again)."""

    def _get_schema_response(self, request: Any) -> Response:
        version = self.api_version or request.version or self._get_version_parameter(request)
        key = (version, translation.get_language())
        schema = _schemas.get(key)
        if schema is None:
            generator = self.generator_class(urlconf=self.urlconf, api_version=version,
                                             patterns=self.patterns)
            schema = _schemas[key] = generator.get_schema(request=request,
                                                          public=self.serve_public)
        return Response(data=schema, headers={
            "Content-Disposition": f'inline; filename="{self._get_filename(request, version)}"'})


_schemas: dict[tuple, dict[str, Any]] = {}


@receiver(setting_changed)
def _forget_schemas(**_: Any) -> None:
    _schemas.clear()
