"""The API reference page is the one generated from the schema the server serves."""

from pathlib import Path

from config.api_reference import render, schema

ROOT = Path(__file__).resolve().parent.parent


def test_the_committed_reference_is_generated_from_the_served_schema():
    page = (ROOT / "docs" / "api-reference.md").read_text()
    assert page == render(schema()), ("docs/api-reference.md is stale: run "
                                     "`python manage.py api_reference > docs/api-reference.md`")


def test_every_served_operation_is_in_the_reference():
    spec = schema()
    page = render(spec)
    for path, operations in spec["paths"].items():
        for method in operations:
            if method in ("get", "put", "patch", "post", "delete"):
                assert f"| {method.upper()} | `{path}` |" in page
