"""OpenAPI post-processing (every operation documents the error document it can answer with),
and the schema's view."""

from typing import Any

from django.core.signals import setting_changed
from django.dispatch import receiver
from django.utils import translation
from drf_spectacular.generators import SchemaGenerator
from drf_spectacular.views import SpectacularAPIView
from rest_framework import exceptions
from rest_framework.renderers import BaseRenderer, JSONRenderer
from rest_framework.settings import api_settings

ERROR_STATUSES = {
    "400": "Malformed request", "401": "Not signed in or token refused",
    "403": "Not allowed for this principal", "404": "Not found",
    "409": "Conflict with the current state (e.g. a stale generation)",
    "411": "A chunked body the server could not size (send Content-Length)",
    "413": "Body over the size or count limit, as sent or while inflating",
    "415": "A Content-Encoding other than gzip, x-gzip, deflate or identity, or a form "
           "where JSON is read",
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


def close_request_bodies(result: dict[str, Any], generator: Any, request: Any,
                         public: bool) -> dict[str, Any]:
    """drf-spectacular postprocessing hook: a request body's object takes no field it does not
    declare (config/strict_input.py refuses one), which the schema says."""
    for name, component in result.get("components", {}).get("schemas", {}).items():
        if name.endswith("Request") and component.get("type") == "object":
            component["additionalProperties"] = False
    return result


class KeptSchemaGenerator(SchemaGenerator):
    """The schema, generated once per process, version, language and audience: it is made of
    the code and the settings alone (SERVE_PUBLIC: the same for every caller of
    `/api/schema`), and generating it walks every view and serializer, over a second of CPU,
    which any caller could repeat. A changed setting (a test's override) makes it again."""

    def get_schema(self, request: Any = None, public: bool = False) -> dict[str, Any]:
        key = (self.api_version, translation.get_language(), public)
        schema = _schemas.get(key)
        if schema is None:
            schema = _schemas[key] = super().get_schema(request=request, public=public)
        return schema


def _kept_rendering(renderer: type[BaseRenderer]) -> type[BaseRenderer]:
    """`renderer`, keeping what it made of a kept schema (YAML of the whole schema is ~0.2 s
    of CPU). Only the plain form is kept: media type parameters are the caller's to choose
    (`indent`, or any other), and keeping one per choice would let a caller fill the process;
    those, and anything else (an error), are rendered each time."""

    class Kept(renderer):  # type: ignore[valid-type, misc]
        def render(self, data: Any, accepted_media_type: str | None = None,
                   renderer_context: Any = None) -> bytes:
            if accepted_media_type != renderer.media_type or not any(
                    data is schema for schema in _schemas.values()):
                return super().render(data, accepted_media_type, renderer_context)
            key = (id(data), renderer)
            if key not in _rendered:
                _rendered[key] = super().render(data, accepted_media_type, renderer_context)
            return _rendered[key]

    Kept.__name__ = Kept.__qualname__ = f"Kept{renderer.__name__}"
    return Kept


class SchemaView(SpectacularAPIView):
    """`GET /api/schema`, from the kept schema, rendered once per form. A `version` the API
    does not have is refused: drf-spectacular takes any (the API has no versioning), and each
    new one was a schema generated and kept, and a caller's text in a response header."""

    generator_class = KeptSchemaGenerator
    renderer_classes = [_kept_rendering(r) for r in SpectacularAPIView.renderer_classes]

    def _get_version_parameter(self, request: Any) -> str | None:
        asked = request.GET.get("version")
        if asked is not None and asked not in (api_settings.ALLOWED_VERSIONS or ()):
            raise exceptions.ValidationError(
                {"version": ["This API has no version of that name: leave `version` out."]})
        return asked

    def handle_exception(self, exc: Exception) -> Any:
        # The error document is JSON whatever form of the schema was asked for.
        self.request.accepted_renderer = JSONRenderer()
        self.request.accepted_media_type = JSONRenderer.media_type
        return super().handle_exception(exc)


_schemas: dict[tuple, dict[str, Any]] = {}
_rendered: dict[tuple, bytes] = {}  # by (id of a kept schema, renderer)


@receiver(setting_changed)
def _forget_schemas(**_: Any) -> None:
    _schemas.clear()
    _rendered.clear()
