"""The API reference page (docs/api-reference.md), generated from the OpenAPI schema the server
serves at /api/schema: every path and method, what it does (the view's own docstring), its
request body's fields and its answers. `python manage.py api_reference > docs/api-reference.md`
regenerates it; tests/test_api_reference.py fails when the committed page differs, so the
reference cannot fall behind the API."""

from __future__ import annotations

from typing import Any

from drf_spectacular.generators import SchemaGenerator

METHODS = ("get", "put", "patch", "post", "delete")


def schema() -> dict[str, Any]:
    return SchemaGenerator().get_schema(request=None, public=True)


def _first_line(text: str) -> str:
    line = " ".join((text or "").strip().split("\n\n")[0].split())
    return line.replace("|", "\\|")


def _body_fields(operation: dict[str, Any], components: dict[str, Any]) -> str:
    content = (operation.get("requestBody") or {}).get("content") or {}
    for media in ("application/json", *content):
        ref = ((content.get(media) or {}).get("schema") or {}).get("$ref")
        if ref:
            properties = components.get(ref.rsplit("/", 1)[-1], {}).get("properties", {})
            return ", ".join(f"`{name}`" for name in properties) or "(none)"
    return ""


def render(spec: dict[str, Any]) -> str:
    components = spec.get("components", {}).get("schemas", {})
    out = [
        "# API reference",
        "",
        "Generated from the OpenAPI schema the server serves (`/api/schema`, browsable at",
        "`/api/docs`). Who may call each endpoint and the error bodies are in [the API",
        "guide](api.md); every error answers `{\"error\": {\"code\", \"message\", \"details\"}}`.",
        "",
        "| method | path | what it does | body fields | answers |",
        "| --- | --- | --- | --- | --- |",
    ]
    for path in sorted(spec.get("paths", {})):
        for method in METHODS:
            operation = spec["paths"][path].get(method)
            if operation is None:
                continue
            what = _first_line(operation.get("summary") or operation.get("description", ""))
            answers = ", ".join(sorted(operation.get("responses", {})))
            out.append(f"| {method.upper()} | `{path}` | {what} | "
                       f"{_body_fields(operation, components)} | {answers} |")
    return "\n".join(out) + "\n"

