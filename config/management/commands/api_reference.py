"""`manage.py api_reference`: print docs/api-reference.md, generated from the OpenAPI schema."""

from typing import Any

from django.core.management.base import BaseCommand

from config.api_reference import render, schema


class Command(BaseCommand):
    help = "Print the API reference page (docs/api-reference.md) from the OpenAPI schema."

    def handle(self, *args: Any, **options: Any) -> None:
        self.stdout.write(render(schema()), ending="")
