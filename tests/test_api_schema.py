"""The OpenAPI schema is valid, complete for what is built, and served to anyone."""

import pytest
import yaml
from django.core.management import call_command

pytestmark = pytest.mark.django_db


def test_schema_validates_without_warnings(tmp_path):
    out = tmp_path / "schema.yaml"
    call_command("spectacular", "--validate", "--fail-on-warn", "--file", str(out))
    schema = yaml.safe_load(out.read_text())
    assert schema["openapi"].startswith("3.")
    documented = set(schema["paths"])
    assert documented >= {
        "/api/v1/manifests", "/api/v1/agents", "/api/v1/agents/{name}",
        "/api/v1/agents/{name}/proposals", "/api/v1/proposals/{id}/approve",
        "/api/v1/proposals/{id}/reject", "/api/v1/guardrails", "/api/v1/guardrails/{name}",
        "/api/v1/agents/{name}/desired-state", "/api/v1/agents/{name}/observed-state",
        "/api/v1/agents/{name}/reconcile", "/api/v1/findings",
        "/api/v1/escalations/{id}/resolve", "/api/v1/control", "/api/v1/audit",
        "/api/v1/audit/verify", "/api/v1/audit/export"}


def test_schema_and_docs_are_served_without_signing_in(client):
    assert client.get("/api/schema").status_code == 200
    docs = client.get("/api/docs")
    assert docs.status_code == 200
    assert b"cdn" not in docs.content.lower()  # served from the installed sidecar package


def test_unknown_api_paths_answer_with_the_json_error(client):
    response = client.get("/api/v1/nothing-here")
    assert response.status_code == 404
    assert response.json() == {"error": {"code": "not_found", "message": "Not found.",
                                         "details": []}}


def test_the_served_schema_is_made_once_a_process_and_is_the_generated_one(client, settings,
                                                                         monkeypatch):
    from drf_spectacular.generators import SchemaGenerator

    made = []
    generate = SchemaGenerator.get_schema
    monkeypatch.setattr(SchemaGenerator, "get_schema",
                        lambda self, *a, **kw: made.append(1) or generate(self, *a, **kw))
    settings.SPECTACULAR_SETTINGS = {**settings.SPECTACULAR_SETTINGS}  # starts from nothing kept
    first = client.get("/api/schema", HTTP_ACCEPT="application/vnd.oai.openapi+json")
    again = client.get("/api/schema", HTTP_ACCEPT="application/vnd.oai.openapi")
    assert first.status_code == again.status_code == 200 and len(made) == 1
    assert yaml.safe_load(again.content) == first.json()  # the same schema in both forms
    assert first.json() == SchemaGenerator().get_schema(request=None, public=True)
    # A changed setting (a test's override) makes it again.
    settings.SPECTACULAR_SETTINGS = {**settings.SPECTACULAR_SETTINGS, "VERSION": "1.0.1"}
    assert client.get("/api/schema").status_code == 200 and len(made) == 3


def test_the_served_schema_is_rendered_once_per_form(client, settings, monkeypatch):
    from drf_spectacular.renderers import OpenApiJsonRenderer, OpenApiYamlRenderer

    rendered = []
    for renderer in (OpenApiYamlRenderer, OpenApiJsonRenderer):
        monkeypatch.setattr(renderer, "render", lambda self, *a, _render=renderer.render, **kw:
                            rendered.append(type(self).__name__) or _render(self, *a, **kw))
    settings.SPECTACULAR_SETTINGS = {**settings.SPECTACULAR_SETTINGS}  # starts from nothing kept
    yaml_forms = [client.get("/api/schema") for _ in range(3)]
    json_forms = [client.get("/api/schema", HTTP_ACCEPT="application/vnd.oai.openapi+json")
                  for _ in range(3)]
    assert len({answer.content for answer in yaml_forms}) == 1
    assert len({answer.content for answer in json_forms}) == 1
    assert yaml.safe_load(yaml_forms[0].content) == json_forms[0].json()
    assert rendered == ["KeptOpenApiYamlRenderer", "KeptOpenApiJsonRenderer"]
    # A changed setting renders it again.
    settings.SPECTACULAR_SETTINGS = {**settings.SPECTACULAR_SETTINGS, "VERSION": "1.0.1"}
    assert client.get("/api/schema").status_code == 200 and len(rendered) == 3


@pytest.mark.parametrize("version", ["2", "x" * 500, "a\r\nX-Injected: yes"])
def test_a_version_the_api_does_not_have_is_refused_and_nothing_is_kept(client, settings,
                                                                        version):
    from config import schema

    settings.SPECTACULAR_SETTINGS = {**settings.SPECTACULAR_SETTINGS}  # starts from nothing kept
    assert client.get("/api/schema").status_code == 200
    answer = client.get("/api/schema", {"version": version})
    assert answer.status_code == 400 and "X-Injected" not in answer.headers
    assert answer.json()["error"]["details"][0]["pointer"] == "/version"
    assert len(schema._schemas) == 1  # the one schema there is, not one per name asked for


def test_media_type_parameters_are_rendered_each_time_not_kept(client, settings):
    from config import schema

    settings.SPECTACULAR_SETTINGS = {**settings.SPECTACULAR_SETTINGS}  # starts from nothing kept
    plain = client.get("/api/schema", HTTP_ACCEPT="application/json")
    chosen = [client.get("/api/schema", HTTP_ACCEPT=f"application/json; indent=2; n={n}")
              for n in range(5)]
    assert {answer.status_code for answer in [plain, *chosen]} == {200}
    assert all(answer.json() == plain.json() for answer in chosen)
    assert len(schema._rendered) == 1  # the plain form only, whatever a caller adds
